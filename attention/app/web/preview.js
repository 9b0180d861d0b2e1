// A drag's preview, shared by the matrix editor (grid.js) and the temperature's slider (slider.js), given after
// attention/forward/web/steps.js in the same module: the dragged case through steps.js's attend, into every chart
// on the page that shows one of the trace's tensors (charts.py tags its figure: layout.meta.tensor and .head), at
// most once an animation frame. A preview of the run the release starts (the same numbers within float32's rounding:
// tests/e2e/test_scrub.py), never kept.

// A drag's preview writes the cells' numbers into a chart this small; a bigger one is previewed in colour alone, its
// numbers back on release: Plotly redraws each cell's text (a 16 × 16 heatmap restyled: ~200 ms with its texts,
// ~20 ms without, measured in headless Chromium on two busy cores), which would make the preview a few frames a second
const PREVIEW_TEXT_CELLS = 32;

class Preview {
  // `make`: the dragged case now ({x, w_query, w_key, w_value, options}), or null when a cell holds no number
  constructor(make) {
    this.make = make;
    // A preview draws at once, then no more until the next animation frame (requestAnimationFrame, its id here),
    // which draws the moves that came in between: one drawing a frame however fast the pointer moves, and none a
    // frame late (a drawing deferred to the next frame would miss every other one where moves come each frame)
    this.frame = 0;
    this.late = false; // a move came after this frame's drawing
    this.faded = false; // the tables faded (fade)
  }

  // The charts a preview redraws: those tagged with a tensor, showing no hidden number (an exercise's "?")
  static charts() {
    const found = [];
    for (const chart of document.querySelectorAll(".js-plotly-plot")) {
      const meta = chart.layout?.meta;
      if (meta?.tensor && !meta.hidden && chart.data?.length) found.push([chart, meta]);
    }
    return found;
  }

  // Whether a drag can be drawn here: Plotly (which Streamlit's chart puts on window) and a chart to redraw
  static ready() {
    return Boolean(window.Plotly?.restyle) && Preview.charts().length > 0;
  }

  // The tables of numbers beside the charts stay the last run's until the release: faded while a drag is drawn
  static fade(on) {
    for (const table of document.querySelectorAll("[data-testid=stDataFrame]")) table.style.opacity = on ? "0.3" : "";
  }

  // A new value dragged: drawn now, or at the next frame when this one has been drawn already
  ask() {
    if (this.frame) this.late = true;
    else this.draw();
  }

  // `final`: the drag's last value, drawn on release with the cells' numbers a big chart's preview left out
  draw(final = false) {
    cancelAnimationFrame(this.frame);
    this.late = false;
    this.frame = final ? 0 : requestAnimationFrame(() => {
      this.frame = 0;
      if (this.late) this.draw();
    });
    if (this.faded === final) Preview.fade((this.faded = !final));
    try {
      const kase = this.make();
      const tensors = kase ? attend(kase) : null; // a cell that holds no number: Python says why, on release
      for (const [chart, meta] of Preview.charts()) {
        const update = {};
        const z = tensors ? rowsOf(tensors[meta.tensor], meta.head) : null;
        if (z && !sameAs(chart, z)) { // a tensor the drag does not change (x, for a new temperature): not redrawn
          update.z = [z];
          // A chart's own texts (−∞, "0 (masked)") would stay the old numbers: colour alone, as for a big chart
          const own = chart.data[0].texttemplate === "%{text}";
          if (!final && (own || z.length * z[0].length > PREVIEW_TEXT_CELLS) && chart.data[0].texttemplate) {
            chart.__texts = chart.data[0].texttemplate;
            update.texttemplate = "";
          }
        }
        if (final && chart.__texts !== undefined) {
          update.texttemplate = chart.__texts;
          delete chart.__texts;
        }
        if (Object.keys(update).length) window.Plotly.restyle(chart, update, [0]);
      }
    } catch (error) {
      console.error("attention preview.js: a drag's preview was not drawn", error); // the release's run draws it
    }
  }
}

// A tensor's matrix (one head's, where it has a head axis) as rows for Plotly, a masked score (−∞) as an empty
// cell as the server draws it; null where it is not a matrix the chart could show
function rowsOf(t, head) {
  if (!t?.shape) return null;
  let data = t.data;
  let shape = t.shape;
  if (shape.length === 3 && head !== null && head !== undefined) {
    const size = shape[1] * shape[2];
    data = data.subarray(head * size, (head + 1) * size);
    shape = shape.slice(1);
  }
  if (shape.length !== 2) return null;
  const [rows, columns] = shape;
  return Array.from({ length: rows }, (_, i) =>
    Array.from(data.subarray(i * columns, (i + 1) * columns), (v) => (Number.isFinite(v) ? v : null)),
  );
}

// Whether a chart already shows these numbers (an empty cell, masked or hidden, as an empty one)
function sameAs(chart, z) {
  const shown = chart._fullData?.[0]?.z;
  if (!shown || shown.length !== z.length) return false;
  const empty = (v) => v === null || v === undefined || Number.isNaN(v);
  const same = (v, w) => v === w || (empty(v) && empty(w));
  return z.every((row, i) => row.length === shown[i].length && row.every((v, j) => same(v, shown[i][j])));
}
