"""Overview page (the landing page at /): what the app is, the eight steps, and the article's result at a glance."""

import streamlit as st

from attention import STEP_NAMES, figures, ui
from attention.core import TITLES

trace = ui.trace()
st.title("Attention, step by step")
st.write(
    "The eight steps of self-attention from the article, computed by PyTorch on your numbers. Edit any input and "
    "every step follows; each page shows one part in depth."
)
left, right = st.columns([2, 3])
with left:
    st.header("The eight steps")  # h2 under the h1 title: headings go down one level at a time
    for number, name in enumerate(STEP_NAMES, start=1):
        st.markdown(f"{number}. `{name}` · {TITLES[name]}")
    st.page_link("pages/walkthrough.py", label="Walk through them", icon=":material/stairs:")
    st.page_link("pages/inputs.py", label="Edit the inputs", icon=":material/edit:")
with right:
    st.header("The result: outputs")
    ui.chart(figures.tensor_heatmap(trace, "outputs"), "chart_outputs")
    if trace.case.options.weights_override is not None:
        st.caption(
            "With the article's rounded softmax. Turn it off in the sidebar for the exact softmax; "
            "the walkthrough's steps 5 and 7 show the difference."
        )
