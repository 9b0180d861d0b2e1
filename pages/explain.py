"""Explain a number: pick any cell of any step (or click it) and see the arithmetic that made it, with its numbers."""

import streamlit as st

from attention.app import backward_room, charts, compute, exercises, frame, picked, tab
from attention.app.language import lang, t
from attention.app.text import plain
from attention.explain import explain, explainable

trace = frame.trace()
st.header(t("explain.header"))
st.write(t("explain.intro"))

names = explainable(trace)
name = st.selectbox(
    t("explain.tensor"), names, index=names.index("scores_raw"), key="explain_tensor", persist_state="session",
    placeholder=t("widget.placeholder"),
)  # fmt: skip
picked.apply_click(trace, name)
index = picked.cell_picker(trace, name)
explanation = explain(compute.current(tab.current()), name, index, lang())  # the trace's own numbers (not "?")
charts.chart(picked.explained_figure(trace, name, index), picked.CHART, clickable=True)

st.subheader(plain(explanation.title), anchor=False)
if hidden := exercises.uses_hidden(tab.current(), trace, explanation):  # what an open exercise hides is not written
    st.info(t("exercise.explain_hidden", numbers=", ".join(hidden)), icon=":material/school:")
else:
    st.code("\n".join(explanation.lines), language=None, wrap_lines=True)
st.caption(t("explain.outlined"))
parts = explanation.parts.items()
for column, (part, cells) in zip(st.columns(len(parts) or 1), parts, strict=False):
    charts.chart(picked.part_figure(trace, part, explanation.head, cells), f"explain_part_{part}", where=column)

backward_room.explain_gradient(trace, name, index)  # the backward pass (issue 21): its gradient, as arithmetic
