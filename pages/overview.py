"""Overview page (the landing page at /): what the app is, the eight steps, and the article's result at a glance."""

import streamlit as st

from attention import STEP_NAMES, figures
from attention.app import charts, frame, questions, real, session
from attention.app.language import t
from attention.core import ROPE, step_names

trace = frame.trace()
st.title(t("app.title"))
st.write(t("overview.intro"))
if (title := real.title(session.current())) is not None:  # a real model's head, or a case edited from one
    st.info(t("real.case", title=title), icon=":material/neurology:")
left, right = st.columns([2, 3])
with left:
    st.header(t("overview.steps"))  # h2 under the h1 title: headings go down one level at a time
    for number, name in enumerate(STEP_NAMES, start=1):
        st.markdown(f"{number}. `{name}` · {t(f'step.{name}.title')}")
        if name == "qkv" and ROPE in step_names(trace.case):  # a real decoder's RoPE: part of step 3
            st.markdown(f"- 3b `{ROPE}` · {t('step.rope.title')}")
    st.page_link("pages/walkthrough.py", label=t("overview.walk"), icon=":material/stairs:")
    st.page_link("pages/inputs.py", label=t("overview.edit"), icon=":material/edit:")
    st.header(t("overview.questions"))
    questions.links(trace)
with right:
    st.header(t("overview.result"))
    charts.chart(charts.figure(figures.tensor_heatmap, trace, "outputs"), "chart_outputs")
    if trace.case.options.weights_override is not None:
        st.caption(t("overview.rounded"))
    real.next_tokens(session.current())
real.heads(session.current())
