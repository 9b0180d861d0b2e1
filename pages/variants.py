"""Variants page: the article's two departures from textbook attention, side by side on the current numbers."""

import streamlit as st

from attention import figures, presets, ui
from attention.i18n import render
from attention.ui import lang, t

trace = ui.trace()
st.header(t("variants.header"))
st.write(t("variants.intro"))
# Only the outputs are kept: at the largest sizes five whole traces would not fit a session's memory.
outputs = {v: ui.variant_outputs(v, case) for v, case in presets.variants(trace.case).items()}
names = {v: render(lang(), presets.variant_name(v, trace.case)) for v in outputs}
st.dataframe(figures.variant_table(outputs, names, presets.EXACT, lang()), key="table_variants")
queries = figures.labels(trace, "query", trace.case.n)
for column, (v, o) in zip(st.columns(len(outputs)), outputs.items(), strict=True):
    dims = figures.labels(trace, "output dim", o.shape[1])
    figure = figures.heatmap(o, queries, dims, "query", "output dim", names[v], lang())
    ui.chart(figure, f"chart_variant_{v}", where=column)


@st.fragment
def temperature_explorer() -> None:
    """A local slider: only this part reruns while it moves."""
    st.subheader(t("variants.temperature"))
    st.latex(r"A_{ij} = \frac{e^{S_{ij}/T}}{\sum_k e^{S_{ik}/T}}")
    temperature = st.select_slider(
        t("variants.temperature_slider"),
        figures.TEMPERATURES,
        value=1.0,
        key="explore_temperature",
        persist_state="session",
    )
    case = presets.with_options(trace.case, temperature=temperature, weights_override=None)
    explored = ui.variant_trace("temperature explorer", case)
    head = 0 if case.options.heads > 1 else None  # the first head, when there are several
    title = t("variants.weights_at", temperature=temperature)
    figure = figures.tensor_heatmap(explored, "weights", head, title, lang())
    ui.chart(figure, "chart_temperature")


temperature_explorer()
