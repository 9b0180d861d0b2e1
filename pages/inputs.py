"""Inputs page (steps 1-2, and the grids of steps 4-5): edit x, its token labels, the three weight matrices, a custom
mask and the article's rounded weights cell by cell."""

import streamlit as st

from attention import figures
from attention.app import charts, editors, frame, session
from attention.app.explain import go_explain
from attention.app.language import lang, t

trace = frame.trace()
s = session.current()
st.header(t("inputs.header"))
st.write(t("inputs.intro"))
st.subheader(t("inputs.x"))
editors.matrix_editor(s, "x", hint=True)
for column, name in zip(st.columns(3), ("w_query", "w_key", "w_value"), strict=True):
    with column:
        st.subheader(t("inputs.weight", name=name))
        editors.matrix_editor(s, name)
if s.controls.mask == "custom":
    st.subheader(t("editor.mask_title"))
    editors.matrix_editor(s, "mask")
if s.inputs.rounded is not None:
    st.subheader(t("editor.rounded_title"))
    if not s.controls.use_rounded:
        st.caption(t("editor.rounded_off"))
    editors.matrix_editor(s, "rounded")
if any(editors.is_big(s, name) for name in ("x", "w_query", "w_key", "w_value")):
    editors.uploader(s)

st.subheader(t("inputs.outputs"))
chart, table = st.columns([3, 2])
outputs = charts.figure(figures.tensor_heatmap, trace, "outputs")
if cell := charts.chart(outputs, "chart_outputs", where=chart, clickable=True):
    go_explain(trace, "outputs", None, cell)  # a click on a cell: its explanation
if (numbers := figures.table(trace, "outputs", lang=lang())) is not None:
    table.dataframe(numbers, key="table_outputs")
