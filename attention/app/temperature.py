"""The temperature explorer (variants page): a fragment, so that only it reruns while its slider moves."""

from __future__ import annotations

import streamlit as st

from .. import figures, presets
from . import charts, compute, tab
from .language import lang, t
from .pickers import KEEP
from .text import prose


@st.fragment
def explorer() -> None:
    """Step 5's weights of the first head at a chosen temperature, from the session's trace. It reads the trace
    itself, since Streamlit keeps a fragment (and what it holds) until the next full run is over."""
    s = tab.current()
    trace = compute.current(s)
    st.subheader(t("variants.temperature"))
    st.latex(r"A_{ij} = \frac{e^{S_{ij}/T}}{\sum_k e^{S_{ik}/T}}")
    st.markdown(prose(t("why.temperature")))
    temperature = st.select_slider(
        t("variants.temperature_slider"), figures.TEMPERATURES, value=1.0, key="explore_temperature",
        persist_state=KEEP,
    )  # fmt: skip
    case = presets.with_options(trace.case, temperature=temperature, weights_override=None)
    weights = compute.variant_weights(s, trace, case)  # the first head, when there are several
    tokens = figures.labels(trace, "query", trace.case.n)
    title = t("variants.weights_at", temperature=temperature)
    charts.chart(figures.heatmap(weights, tokens, tokens, "query", "key", title, lang()), "chart_temperature")
