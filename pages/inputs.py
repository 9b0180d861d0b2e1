"""Inputs page (steps 1-2): edit x, its token labels and the three weight matrices cell by cell."""

import streamlit as st

from attention import figures, ui

trace = ui.trace()
st.header("Inputs and weights")
st.write(
    "Every cell is editable: select it, type a number, press Enter, and all eight steps follow. "
    "Sizes, presets and options are in the sidebar."
)
st.subheader("x · one row per token (step 1)")
ui.matrix_editor("x")
for column, name in zip(st.columns(3), ("w_query", "w_key", "w_value"), strict=True):
    with column:
        st.subheader(f"{name} (step 2)")
        ui.matrix_editor(name)

st.subheader("Outputs (step 7)")
chart, table = st.columns([3, 2])
ui.chart(figures.tensor_heatmap(trace, "outputs"), "chart_outputs", where=chart)
if (frame := figures.table(trace, "outputs")) is not None:
    table.dataframe(frame, key="table_outputs")
