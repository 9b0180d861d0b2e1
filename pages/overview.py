"""Overview page (the landing page at /): what the app is, the eight steps, and the article's result at a glance."""

import streamlit as st

from attention import figures
from attention.app import charts, exercise_room, frame, model_room, questions, tab
from attention.app.language import lang, t
from attention.i18n import render

trace = frame.trace()
st.title(t("app.title"))
st.write(t("overview.intro"))
if (title := tab.current().origin.title()) is not None:  # a model's head, or a case edited from one
    st.info(t("real.case", title=render(lang(), title)), icon=":material/neurology:")
left, right = st.columns([2, 3])
with left:
    st.header(t("overview.steps"))  # h2 under the h1 title: headings go down one level at a time
    for step in trace.steps:  # a decoder's RoPE is part of step 3: listed under it as 3b
        number = f"{step.label}." if step.label.isdigit() else f"- {step.label}"
        st.markdown(f"{number} `{step.name}` · {t(f'step.{step.name}.title')}")
    st.page_link("pages/walkthrough.py", label=t("overview.walk"), icon=":material/stairs:")
    st.page_link("pages/inputs.py", label=t("overview.edit"), icon=":material/edit:")
    st.header(t("overview.questions"))
    questions.links(trace)
    st.header(t("overview.exercises"))
    exercise_room.ready_made()
with right:
    st.header(t("overview.result"))
    charts.chart(charts.figure(figures.tensor_heatmap, trace, "outputs"), "chart_outputs")
    if trace.case.options.weights_override is not None:
        st.caption(t("overview.rounded"))
    model_room.next_tokens(tab.current())
model_room.heads(tab.current())
