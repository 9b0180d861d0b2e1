"""Explain a number: pick any cell of any step (or click it) and see the arithmetic that made it, with its numbers."""

import streamlit as st

from attention import figures, ui
from attention.explain import explain, explainable

trace = ui.trace()
st.header("Explain a number")
st.write(
    "Pick a tensor and a cell, or click a cell in the heatmap: its arithmetic appears below, with the real numbers."
)

names = explainable(trace)
name = st.selectbox("Tensor", names, index=names.index("scores_raw"), key="explain_tensor", persist_state="session")
ui.apply_click(trace, name)
index = ui.cell_picker(trace, name)
explanation = explain(trace, name, index)

figure = ui.explain_figure(trace, name, index)
ui.chart(figure, "explain_chart", on_select="rerun", selection_mode="points")

st.subheader(ui.plain(explanation.title), anchor=False)
st.code("\n".join(explanation.lines), language=None, wrap_lines=True)
st.caption("Outlined: the cells that took part.")
parts = explanation.parts.items()
for column, (part, (rows, cols)) in zip(st.columns(len(parts) or 1), parts, strict=False):
    figure = figures.highlight(ui.part_figure(trace, part, explanation.head), rows, cols)
    ui.chart(figure, f"explain_part_{part}", where=column)
