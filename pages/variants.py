"""Variants page: the article's two departures from textbook attention, side by side on the current numbers."""

import streamlit as st

from attention import figures, presets
from attention.app import charts, compute, frame, session, temperature
from attention.app.language import lang, t
from attention.i18n import render

trace = frame.trace()
st.header(t("variants.header"))
st.write(t("variants.intro"))
# Only the variants' outputs, made from this trace's queries, keys and values head by head: at the limits a whole
# trace for each of five variants would not fit a session's memory.
cases = presets.variants(trace.case)
outputs = {v: compute.variant_outputs(session.current(), trace, case) for v, case in cases.items()}
names = {v: render(lang(), presets.variant_name(v, trace.case)) for v in outputs}
st.dataframe(figures.variant_table(outputs, names, presets.EXACT, lang()), key="table_variants")
queries = figures.labels(trace, "query", trace.case.n)
for column, (v, o) in zip(st.columns(len(outputs)), outputs.items(), strict=True):
    dims = figures.labels(trace, "output dim", o.shape[1])
    figure = figures.heatmap(o, queries, dims, "query", "output dim", names[v], lang())
    charts.chart(figure, f"chart_variant_{v}", where=column)


temperature.explorer()
