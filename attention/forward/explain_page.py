"""The Explain page's body: pick any number of any step (or click it) and see the arithmetic that made it, with its
numbers, the numbers that took part outlined, and what other capabilities add (the backward pass: its gradient)."""

from __future__ import annotations

import streamlit as st

from ..app import charts, frame, links, tab, traces
from ..app.language import lang, t
from ..app.registry import CAPABILITIES
from ..app.text import plain
from ..base.explain import explain, explainable
from ..exercise.state import uses_hidden
from . import explain_room
from .state import Explained


def explain_page() -> None:
    trace = frame.trace()
    st.header(t("explain.header"))
    st.write(t("explain.intro"))

    session, names = tab.current(), explainable(trace)
    if (view := session.view(Explained)).pending:  # a link's number: its pickers set before they are drawn
        explain_room.pick(view.tensor, view.index)
    name = explain_room.tensor_picker(names)
    explain_room.apply_click(trace, name)
    index = explain_room.cell_picker(trace, name)
    session.keep(Explained(name, index))
    links.keep(session)  # the URL names the number explained now (the frame kept it before the page chose)
    explanation = explain(traces.current(tab.current()), name, index, lang())  # the trace's own numbers (not "?")
    charts.chart(explain_room.explained_figure(trace, name, index), explain_room.CHART, clickable=True)

    st.subheader(plain(explanation.title), anchor=False)
    if hidden := uses_hidden(tab.current(), trace, explanation):  # what an open exercise hides is not written
        st.info(t("exercise.explain_hidden", numbers=", ".join(hidden)), icon=":material/school:")
    else:
        st.code("\n".join(explanation.lines), language=None, wrap_lines=True)
    st.caption(t("explain.outlined"))
    parts = explanation.parts.items()
    for column, (part, cells) in zip(st.columns(len(parts) or 1), parts, strict=False):
        charts.chart(
            explain_room.part_figure(trace, part, explanation.head, cells), f"explain_part_{part}", where=column
        )

    for capability in CAPABILITIES:  # what the others add to a number's arithmetic: the backward pass, its gradient
        capability.explains(tab.current(), trace, name, index)
