"""Explain a number: pick any cell of any step (or click it) and see the arithmetic that made it, with its numbers."""

import streamlit as st

from attention import figures, ui
from attention.explain import explain, explainable
from attention.ui import lang, t

trace = ui.trace()
st.header(t("explain.header"))
st.write(t("explain.intro"))

names = explainable(trace)
name = st.selectbox(
    t("explain.tensor"), names, index=names.index("scores_raw"), key="explain_tensor", persist_state="session"
)
ui.apply_click(trace, name)
index = ui.cell_picker(trace, name)
explanation = explain(trace, name, index, lang())

figure = ui.explain_figure(trace, name, index)
ui.chart(figure, "explain_chart", on_select="rerun", selection_mode="points")

st.subheader(ui.plain(explanation.title), anchor=False)
st.code("\n".join(explanation.lines), language=None, wrap_lines=True)
st.caption(t("explain.outlined"))
parts = explanation.parts.items()
for column, (part, cells) in zip(st.columns(len(parts) or 1), parts, strict=False):
    figure = figures.highlight(ui.part_figure(trace, part, explanation.head), *figures.flat_cells(trace, part, cells))
    ui.chart(figure, f"explain_part_{part}", where=column)
