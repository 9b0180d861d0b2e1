"""Walkthrough page: the eight steps one at a time, each with its formula, its code and its tensors; a live page
(a step change or a click reruns it alone, not the sidebar)."""

import streamlit as st

from attention import figures, script
from attention.app import charts, compute, exercises, frame, live, pickers, tab
from attention.app.language import lang, t
from attention.app.picked import go_explain
from attention.app.text import plain, prose
from attention.core import Trace, formula
from attention.i18n import render


def walkthrough(trace: Trace) -> None:
    step = trace.step(pickers.step_picker(trace))  # RoPE's too, for a case with it (3b)

    st.header(t("walkthrough.header", number=step.label, title=t(f"step.{step.name}.title")))
    st.write(t(f"step.{step.name}.explanation"))
    st.latex(formula(step.name, trace.case, lang()))  # its words in the reader's language
    for number, why in enumerate(compute.whys(tab.current(), trace, step.name, lang())):  # the step's, its options'
        st.markdown(f"**{t('why.label')}** · {prose(why)}" if number == 0 else prose(why))
    st.code(script.shown(trace.case, step.name), language="python", wrap_lines=True)  # the reader's code
    for note in step.notes:
        if getattr(note, "key", None) != "note.override":  # the why above says it: the article rounds for readability
            st.info(plain(render(lang(), note)))
    st.caption(t("editor.click_hint"))  # a click on a cell leads to its arithmetic on the Explain page

    has_head = any(trace.has_head(name) for name in step.tensors)
    head = pickers.head_picker(trace, "walkthrough_head") if has_head else None
    for name, tensor in step.tensors.items():
        h = head if trace.has_head(name) else None
        shape = " × ".join(map(str, tensor.shape))
        dtype = str(tensor.dtype).removeprefix("torch.")
        st.subheader(t("walkthrough.tensor", name=name, shape=shape, dtype=dtype, device=step.device))
        if name == "weighted":
            st.caption(t("walkthrough.weighted_rows"))
            if cell := charts.chart(charts.figure(figures.weighted_heatmap, trace, h), f"chart_{name}", clickable=True):
                go_explain(trace, name, h, cell)  # a click on a cell: its explanation
            continue
        chart, table = st.columns([3, 2])
        figure = charts.figure(figures.tensor_heatmap, trace, name, h)
        if cell := charts.chart(figure, f"chart_{name}", where=chart, clickable=True):
            go_explain(trace, name, h, cell)
        if (numbers := charts.table(trace, name, h)) is not None:
            charts.numbers(numbers, f"table_{name}", where=table)

    rounded = trace.case.options.weights_override is not None  # (the exact twin would show an exercise's numbers)
    if step.name in ("softmax", "outputs") and rounded and not exercises.hiding(tab.current(), trace):
        exact = compute.exact(tab.current(), trace)
        name = "weights" if step.name == "softmax" else "outputs"
        st.subheader(t("walkthrough.rounding"))
        left, right = st.columns(2)
        if step.name == "outputs":  # step 5 shows weights_exact above already: its difference alone, not it again
            exact_title = t("walkthrough.exact_title", name=name)
            exact_chart = charts.figure(figures.tensor_heatmap, exact, name, title=exact_title)
            charts.chart(exact_chart, "chart_exact", where=left)
        difference_title = t("walkthrough.difference_title", name=name)
        difference = charts.figure(figures.difference_heatmap, trace, exact, name, title=difference_title)
        charts.chart(difference, "chart_difference", where=right if step.name == "outputs" else left)


frame.trace()  # (a page run outside the frame goes through it first)
live.page(walkthrough)
