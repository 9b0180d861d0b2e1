"""Inputs page (steps 1-2, and the grids of steps 4-5): edit x, its token labels, the three weight matrices, a custom
mask and the article's rounded weights cell by cell; a live page (an edit reruns it alone)."""

import streamlit as st

from attention import figures
from attention.app import charts, editors, frame, live, tab
from attention.app.language import t
from attention.app.picked import go_explain
from attention.core import Trace


def inputs(trace: Trace) -> None:
    s = tab.current()
    st.header(t("inputs.header"))
    st.write(t("inputs.intro"))
    left, right = st.columns([3, 2])  # x and the outputs side by side: a drag on x is seen where it lands
    with left:
        editors.matrix_editor(s, "x", t("inputs.x"), hint=True)  # each editor draws its title (a cheaper rerun)
    right.subheader(t("inputs.outputs"))
    outputs = charts.figure(figures.tensor_heatmap, trace, "outputs")
    if cell := charts.chart(outputs, "chart_outputs", where=right, clickable=True):
        go_explain(trace, "outputs", None, cell)  # a click on a cell: its explanation
    # Up to 16 × 16 the numbers are in the heatmap's cells (and its text version): a table only past that
    numbers = charts.table(trace, "outputs") if max(trace.outputs.shape) > figures.TEXT_MAX_SIDE else None
    if numbers is not None:
        charts.numbers(numbers, "table_outputs", where=right)
    for column, name in zip(st.columns(3), ("w_query", "w_key", "w_value"), strict=True):
        with column:
            editors.matrix_editor(s, name, t("inputs.weight", name=name))
    if s.controls.mask == "custom":
        editors.matrix_editor(s, "mask", t("editor.mask_title"))
    if s.inputs.rounded is not None:
        if not s.controls.use_rounded:
            st.caption(t("editor.rounded_off"))
        editors.matrix_editor(s, "rounded", t("editor.rounded_title"))
    if any(editors.is_big(s, name) for name in ("x", "w_query", "w_key", "w_value")):
        editors.uploader(s)


frame.trace()  # (a page run outside the frame goes through it first)
live.page(inputs)
