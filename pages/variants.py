"""Variants page: the article's two departures from textbook attention, side by side on the current numbers."""

import streamlit as st

from attention import figures, presets, ui

trace = ui.trace()
st.header("The article and textbook attention, side by side")
st.write(
    "The article scores without dividing by √d_k and rounds the softmax for readability. Here are the outputs of "
    "the same inputs under each choice, and how far each is from the exact, unscaled softmax."
)
# Only the outputs are kept: at the largest sizes five whole traces would not fit a session's memory.
outputs = {name: ui.variant_outputs(name, case) for name, case in presets.variants(trace.case).items()}
st.dataframe(figures.variant_table(outputs, outputs[presets.EXACT]), key="table_variants")
queries = figures.labels(trace, "query", trace.case.n)
for column, (name, o) in zip(st.columns(len(outputs)), outputs.items(), strict=True):
    figure = figures.heatmap(o, queries, figures.labels(trace, "output dim", o.shape[1]), "query", "output dim", name)
    ui.chart(figure, f"chart_{name}", where=column)


@st.fragment
def temperature_explorer() -> None:
    """A local slider: only this part reruns while it moves."""
    st.subheader("Temperature: the softmax sharpens and flattens")
    st.latex(r"A_{ij} = \frac{e^{S_{ij}/T}}{\sum_k e^{S_{ik}/T}}")
    temperature = st.select_slider(
        "Temperature T", figures.TEMPERATURES, value=1.0, key="explore_temperature", persist_state="session"
    )
    case = presets.with_options(trace.case, temperature=temperature, weights_override=None)
    t = ui.variant_trace("temperature explorer", case)
    head = 0 if case.options.heads > 1 else None  # the first head, when there are several
    figure = figures.tensor_heatmap(t, "weights", head, title=f"weights at T = {temperature:g}")
    ui.chart(figure, "chart_temperature")


temperature_explorer()
