"""Variants page: the article's two departures from textbook attention, side by side on the current numbers."""

import streamlit as st

from attention import figures, presets, ui

trace = ui.trace()
st.header("The article and textbook attention, side by side")
st.write(
    "The article scores without dividing by √d_k and rounds the softmax for readability. Here are the outputs of "
    "the same inputs under each choice, and how far each is from the exact, unscaled softmax."
)
variants = {name: ui.variant_trace(name, case) for name, case in presets.variants(trace.case).items()}
reference = variants[presets.EXACT].outputs
st.dataframe(figures.variant_table(variants, reference), key="table_variants")
for column, (name, t) in zip(st.columns(len(variants)), variants.items(), strict=True):
    column.plotly_chart(figures.tensor_heatmap(t, "outputs", title=name), key=f"chart_{name}", width="stretch")


@st.fragment
def temperature_explorer() -> None:
    """A local slider: only this part reruns while it moves."""
    st.subheader("Temperature: the softmax sharpens and flattens")
    st.latex(r"A_{ij} = \frac{e^{S_{ij}/T}}{\sum_k e^{S_{ik}/T}}")
    temperature = st.select_slider("Temperature T", figures.TEMPERATURES, value=1.0, key="explore_temperature")
    case = presets.with_options(trace.case, temperature=temperature, weights_override=None)
    t = ui.variant_trace("temperature explorer", case)
    head = 0 if case.options.heads > 1 else None  # the first head, when there are several
    figure = figures.tensor_heatmap(t, "weights", head, title=f"weights at T = {temperature:g}")
    st.plotly_chart(figure, key="chart_temperature", width="stretch")


temperature_explorer()
