// The end of a run (attention/app/grid.py's pace): the frame draws this last, so its drawing says that every element
// of the run is on screen; a dragged matrix editor (grid.js) then sends its next value.
export default function ({ data }) {
  window.dispatchEvent(new CustomEvent("attention:run-ended", { detail: data }));
}
