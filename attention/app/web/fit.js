// Numbers in heatmap cells, by the size the chart is drawn (attention/app/charts.py's fit_numbers): after every drawing of a
// chart (its first, a resize, a new figure), each cell's number is written in as many significant digits as fit
// its cell (4 at most, as the figure asks), or not at all (the cell is colour only; its hover and the text version
// keep the number). Only the browser knows the drawn size: a column's width, the window's, a phone's. Installed
// once per document; every chart on the page is watched.
const DIGITS = 4; // the most significant digits a cell shows (heatmap.py's texttemplate, %{z:.4~g})
const PAD = 2; // px kept free on each side of a cell's text

export default function () {
  if (window.__attentionFit) return undefined;
  window.__attentionFit = true;
  const hooked = new WeakSet();
  // A chart drawn hidden (under a box not displayed) is not fitted then (its texts measure 0 wide): it is fitted
  // when it gets a size, which showing it gives it (a change of style, which the mutations watched do not see).
  const shown = new ResizeObserver((entries) => {
    for (const { target } of entries) if (target.dataset.fitted !== "1") fitSafely(target);
  });
  let pending = false;
  const hook = () => {
    pending = false;
    for (const chart of document.querySelectorAll(".js-plotly-plot")) {
      if (typeof chart.on !== "function") continue;
      if (!hooked.has(chart)) {
        hooked.add(chart);
        chart.on("plotly_afterplot", () => fitSafely(chart));
        shown.observe(chart);
      }
      if (chart.dataset.fitted !== "1") fitSafely(chart); // drawn before it was seen
    }
  };
  const watch = new MutationObserver(() => {
    if (!pending) pending = true, requestAnimationFrame(hook);
  });
  watch.observe(document.body, { childList: true, subtree: true });
  hook();
  return undefined;
}

// One chart's fitting, whatever it meets: a chart that fails is said in the console and left unfitted (it is
// tried again at its next drawing), and the next charts are fitted all the same.
function fitSafely(chart) {
  try {
    fit(chart);
  } catch (error) {
    console.error("attention fit.js: a chart's numbers were not fitted", error);
  }
}

// Every cell text of every heatmap of `chart`, fitted to its cell; the chart then says so (data-fitted, which the
// browser test waits for), only when every text was measured: a hidden chart's texts measure 0 wide and are left as
// they are, to be fitted when the chart is shown. A failure midway leaves the chart unfitted, never marked.
function fit(chart) {
  delete chart.dataset.fitted; // a drawing while hidden is not fitted: the next fitting, once shown, does it
  const layout = chart._fullLayout;
  if (!layout || !chart.getClientRects().length) return; // not drawn yet, or hidden: nothing can be measured
  let done = false;
  try {
    let measured = true;
    for (const group of chart.querySelectorAll("g.hm")) {
      const trace = group.__data__?.[0]?.trace;
      if (!trace) continue;
      const xa = layout[axisName("x", trace.xaxis)], ya = layout[axisName("y", trace.yaxis)];
      if (!xa?.l2p || !ya?.l2p) continue;
      const width = Math.abs(xa.l2p(1) - xa.l2p(0)) - (trace.xgap || 0) - 2 * PAD;
      const height = Math.abs(ya.l2p(1) - ya.l2p(0)) - (trace.ygap || 0);
      for (const text of group.querySelectorAll("g.heatmap-label text")) {
        if (!fitText(text, width, height)) measured = false;
      }
    }
    done = measured;
  } finally {
    if (done) chart.dataset.fitted = "1";
  }
}

function axisName(letter, id) {
  return `${letter}axis${(id ?? letter).slice(1)}`; // "x" → xaxis, "x2" → xaxis2
}

// One cell's text: the number in DIGITS, DIGITS - 1, … significant digits, the first that fits; a word (−∞, ?) as
// it is; hidden when nothing fits or the text is taller than the cell. False, and the text left as it was, when it
// is not drawn (it measures 0 wide: its chart is hidden); true once fitted.
function fitText(text, width, height) {
  const datum = text.__data__ ?? {};
  // the figure's own text: kept across refits of the same drawing, taken anew where Plotly wrote the node again
  const ours = text.dataset.shown === text.textContent && text.dataset.written !== undefined;
  const written = ours ? text.dataset.written : text.textContent;
  const before = { shown: text.textContent, display: text.style.display };
  text.textContent = written;
  text.style.display = "";
  if (written.trim() && text.getComputedTextLength() === 0) {
    text.textContent = before.shown; // not drawn: nothing measured, nothing changed
    text.style.display = before.display;
    return false;
  }
  text.dataset.written = written;
  const minus = written.includes("\u2212");
  const value = typeof datum.z === "number" && Number.isFinite(datum.z) ? datum.z : null;
  const tries = value === null ? [written] : [...Array(DIGITS).keys()].map((i) => short(value, DIGITS - i, minus));
  let fits = false;
  try {
    if (text.getBBox().height <= height) {
      for (const shown of tries) {
        text.textContent = shown;
        if (text.getComputedTextLength() <= width) {
          fits = true;
          break;
        }
      }
    }
  } finally {
    // whatever happened: the text shown whole or hidden, and said so (never a try left half-written)
    if (!fits) {
      text.textContent = written;
      text.style.display = "none";
    }
    text.dataset.shown = text.textContent;
    text.dataset.fit = fits ? "shown" : "hidden";
  }
  return true;
}

// A number in `digits` significant digits, as Plotly's %{z:.4~g} writes it (trailing zeros dropped).
function short(value, digits, minus) {
  let s = value.toPrecision(digits);
  if (s.includes("e")) {
    let [mantissa, exponent] = s.split("e");
    if (mantissa.includes(".")) mantissa = mantissa.replace(/0+$/, "").replace(/\.$/, "");
    s = `${mantissa}e${exponent}`;
  } else if (s.includes(".")) {
    s = s.replace(/0+$/, "").replace(/\.$/, "");
  }
  return minus ? s.replace("-", "\u2212") : s;
}
