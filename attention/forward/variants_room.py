"""The variants page's rooms around today's models' (modern_room.py): the article's departures, and the temperature
explorer."""

from __future__ import annotations

import streamlit as st

from ..app import charts, pickers, tab, traces
from ..app.language import lang, t
from ..app.text import plain, prose
from ..base.case import with_options
from ..base.i18n import render
from ..show.heatmap import heatmap, labels
from . import figures, teach
from .compute import Trace
from .figures import TEMPERATURES

# The article's departures


def departures(trace: Trace) -> None:
    """The article's two departures from textbook attention (and the case's temperature and a causal mask), their
    outputs made from this trace's queries, keys and values head by head: at the limits a whole trace for each of
    five variants would not fit a session's memory."""
    st.subheader(t("variants.departures"))
    st.markdown(prose(t("why.sqrt_dk", **traces.sqrt_dk_effect(tab.current(), trace))))
    cases = teach.variants(trace.case)
    outputs = {v: traces.variant_outputs(tab.current(), trace, case) for v, case in cases.items()}
    names = {v: render(lang(), teach.variant_name(v, trace.case)) for v in outputs}
    table, each = st.tabs([t("variants.each_table"), t("variants.each_output")])  # the page goes on to today's
    table.dataframe(figures.variant_table(outputs, names, teach.EXACT, lang()), key="table_variants")
    span = min(float(o.min()) for o in outputs.values()), max(float(o.max()) for o in outputs.values())  # one scale
    queries = labels(trace, "query", trace.case.n)
    for pair in range(0, len(outputs), 2):  # two to a row: numbers large enough to read
        with each:  # a chart's text version goes under its row, in the tab
            row = st.columns(2)
        for column, (v, o) in zip(row, list(outputs.items())[pair : pair + 2], strict=False):
            dims = labels(trace, "output dim", o.shape[1])
            figure = heatmap(o, queries, dims, "query", "output dim", names[v], lang(), span=span)
            with each:
                charts.chart(figure, f"chart_variant_{v}", where=column)
            off = (o - outputs[teach.EXACT]).abs()
            i, c = divmod(int(off.argmax()), off.shape[1])
            if v == teach.EXACT:
                column.caption(t("variants.reference"))
            elif off.max() == 0:
                column.caption(t("variants.same"))
            else:
                reading = t("variants.reading", difference=float(off.max()), token=queries[i], column=c + 1)
                column.caption(plain(reading))


# The temperature explorer: a fragment, so that only it reruns while its slider moves


@st.fragment
def explorer() -> None:
    """Step 5's weights of the first head at a chosen temperature, from the session's trace. It reads the trace
    itself, since Streamlit keeps a fragment (and what it holds) until the next full run is over."""
    s = tab.current()
    trace = traces.current(s)
    st.subheader(t("variants.temperature"))
    st.latex(r"A_{ij} = \frac{e^{S_{ij}/T}}{\sum_k e^{S_{ik}/T}}")
    st.markdown(prose(t("why.temperature")))
    temperature = st.select_slider(
        t("variants.temperature_slider"), TEMPERATURES, value=1.0, key="explore_temperature",
        persist_state=pickers.KEEP,
    )  # fmt: skip
    case = with_options(trace.case, temperature=temperature, weights_override=None)
    weights = traces.variant_weights(s, trace, case)  # the first head, when there are several
    queries, keys = labels(trace, "query", trace.case.n), labels(trace, "key", trace.case.n_kv)  # (cross: x_kv's)
    title = t("variants.weights_at", temperature=temperature)
    charts.chart(heatmap(weights, queries, keys, "query", "key", title, lang()), "chart_temperature")
