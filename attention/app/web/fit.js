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
  let pending = false;
  const hook = () => {
    pending = false;
    for (const chart of document.querySelectorAll(".js-plotly-plot")) {
      if (typeof chart.on !== "function") continue;
      if (!hooked.has(chart)) {
        hooked.add(chart);
        chart.on("plotly_afterplot", () => fit(chart));
      }
      if (chart.dataset.fitted !== "1") fit(chart); // drawn before it was seen
    }
  };
  const watch = new MutationObserver(() => {
    if (!pending) pending = true, requestAnimationFrame(hook);
  });
  watch.observe(document.body, { childList: true, subtree: true });
  hook();
  return undefined;
}

// Every cell text of every heatmap of `chart`, fitted to its cell; the chart then says so (data-fitted, which the
// browser test waits for).
function fit(chart) {
  const layout = chart._fullLayout;
  if (!layout) return;
  for (const group of chart.querySelectorAll("g.hm")) {
    const trace = group.__data__?.[0]?.trace;
    if (!trace) continue;
    const xa = layout[axisName("x", trace.xaxis)], ya = layout[axisName("y", trace.yaxis)];
    if (!xa?.l2p || !ya?.l2p) continue;
    const width = Math.abs(xa.l2p(1) - xa.l2p(0)) - (trace.xgap || 0) - 2 * PAD;
    const height = Math.abs(ya.l2p(1) - ya.l2p(0)) - (trace.ygap || 0);
    for (const text of group.querySelectorAll("g.heatmap-label text")) fitText(text, width, height);
  }
  chart.dataset.fitted = "1";
}

function axisName(letter, id) {
  return `${letter}axis${(id ?? letter).slice(1)}`; // "x" → xaxis, "x2" → xaxis2
}

// One cell's text: the number in DIGITS, DIGITS - 1, … significant digits, the first that fits; a word (−∞, ?) as
// it is; hidden when nothing fits or the text is taller than the cell.
function fitText(text, width, height) {
  const datum = text.__data__ ?? {};
  // the figure's own text: kept across refits of the same drawing, taken anew where Plotly wrote the node again
  const ours = text.dataset.shown === text.textContent && text.dataset.written !== undefined;
  const written = ours ? text.dataset.written : text.textContent;
  text.dataset.written = written;
  text.style.display = "";
  const minus = written.includes("\u2212");
  const value = typeof datum.z === "number" && Number.isFinite(datum.z) ? datum.z : null;
  const tries = value === null ? [written] : [...Array(DIGITS).keys()].map((i) => short(value, DIGITS - i, minus));
  let fits = false;
  if (text.getBBox().height <= height) {
    for (const shown of tries) {
      text.textContent = shown;
      if (text.getComputedTextLength() <= width) {
        fits = true;
        break;
      }
    }
  }
  if (!fits) {
    text.textContent = written;
    text.style.display = "none";
  }
  text.dataset.shown = text.textContent;
  text.dataset.fit = fits ? "shown" : "hidden";
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
