// Heatmaps that answer a click (attention/app/clicks.py): Plotly's own click event on the chart drawn beside this
// component, whose cell (row, column of its z, as the pixel falls) goes to Python as a one-run trigger.
export default function ({ parentElement, setTriggerValue }) {
  const host = parentElement.host ?? parentElement;
  const box = host.closest("[data-testid=stVerticalBlock]"); // the chart's container, made for the two of them
  if (!box) return undefined;
  const hooked = new WeakSet();
  const hook = () => {
    for (const chart of box.querySelectorAll(".js-plotly-plot")) {
      if (hooked.has(chart) || typeof chart.on !== "function") continue;
      hooked.add(chart);
      chart.on("plotly_click", (event) => {
        const point = event.points.find((p) => p.curveNumber === 0) ?? event.points[0];
        const cell = cellOf(point);
        if (cell) setTriggerValue("cell", cell);
      });
    }
  };
  hook();
  const watch = new MutationObserver(hook); // a chart drawn anew (a new figure) is hooked again
  watch.observe(box, { childList: true, subtree: true });
  return () => watch.disconnect();
}

function cellOf(point) {
  if (!point) return null;
  if (Array.isArray(point.pointNumber)) return point.pointNumber; // a heatmap: [row, column] of its z
  if (point.data?.type === "image") return [Math.round(point.y) - 1, Math.round(point.x) - 1]; // cells at 1, 2, …
  return null;
}
