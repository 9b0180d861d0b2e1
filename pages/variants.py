"""Variants page: the article's two departures from textbook attention, side by side on the current numbers."""

import streamlit as st

from attention import figures, presets
from attention.app import charts, compute, frame, tab, temperature
from attention.app.language import lang, t
from attention.app.text import plain, prose
from attention.i18n import render

trace = frame.trace()
st.header(t("variants.header"))
st.write(t("variants.intro"))
st.markdown(prose(t("why.sqrt_dk", **compute.sqrt_dk_effect(tab.current(), trace))))
# Only the variants' outputs, made from this trace's queries, keys and values head by head: at the limits a whole
# trace for each of five variants would not fit a session's memory.
cases = presets.variants(trace.case)
outputs = {v: compute.variant_outputs(tab.current(), trace, case) for v, case in cases.items()}
names = {v: render(lang(), presets.variant_name(v, trace.case)) for v in outputs}
st.dataframe(figures.variant_table(outputs, names, presets.EXACT, lang()), key="table_variants")
span = min(float(o.min()) for o in outputs.values()), max(float(o.max()) for o in outputs.values())  # one scale
queries = figures.labels(trace, "query", trace.case.n)
for pair in range(0, len(outputs), 2):  # two to a row: numbers large enough to read
    for column, (v, o) in zip(st.columns(2), list(outputs.items())[pair : pair + 2], strict=False):
        dims = figures.labels(trace, "output dim", o.shape[1])
        figure = figures.heatmap(o, queries, dims, "query", "output dim", names[v], lang(), span=span)
        charts.chart(figure, f"chart_variant_{v}", where=column)
        off = (o - outputs[presets.EXACT]).abs()
        i, c = divmod(int(off.argmax()), off.shape[1])
        if v == presets.EXACT:
            column.caption(t("variants.reference"))
        elif off.max() == 0:
            column.caption(t("variants.same"))
        else:
            reading = t("variants.reading", difference=float(off.max()), token=queries[i], column=c + 1)
            column.caption(plain(reading))

temperature.explorer()
