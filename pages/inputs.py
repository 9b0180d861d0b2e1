"""Inputs page (steps 1-2): edit x, its token labels and the three weight matrices cell by cell."""

import streamlit as st

from attention import figures, ui
from attention.ui import lang, t

trace = ui.trace()
st.header(t("inputs.header"))
st.write(t("inputs.intro"))
st.subheader(t("inputs.x"))
ui.matrix_editor("x")
for column, name in zip(st.columns(3), ("w_query", "w_key", "w_value"), strict=True):
    with column:
        st.subheader(t("inputs.weight", name=name))
        ui.matrix_editor(name)

st.subheader(t("inputs.outputs"))
chart, table = st.columns([3, 2])
ui.chart(ui.figure(figures.tensor_heatmap, trace, "outputs"), "chart_outputs", where=chart)
if (frame := figures.table(trace, "outputs", lang=lang())) is not None:
    table.dataframe(frame, key="table_outputs")
