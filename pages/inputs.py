"""Inputs page (steps 1-2): edit x, its token labels and the three weight matrices cell by cell."""

import streamlit as st

from attention import figures
from attention.app import charts, editors, frame, session
from attention.app.language import lang, t

trace = frame.trace()
st.header(t("inputs.header"))
st.write(t("inputs.intro"))
st.subheader(t("inputs.x"))
editors.matrix_editor(session.current(), "x")
for column, name in zip(st.columns(3), ("w_query", "w_key", "w_value"), strict=True):
    with column:
        st.subheader(t("inputs.weight", name=name))
        editors.matrix_editor(session.current(), name)

st.subheader(t("inputs.outputs"))
chart, table = st.columns([3, 2])
charts.chart(charts.figure(figures.tensor_heatmap, trace, "outputs"), "chart_outputs", where=chart)
if (numbers := figures.table(trace, "outputs", lang=lang())) is not None:
    table.dataframe(numbers, key="table_outputs")
