"""One query at a time (step 8): steps 4-7 for the chosen query alone, and its match with that row of the outputs."""

import streamlit as st

from attention import figures, script
from attention.app import charts, frame, pickers
from attention.app.language import lang, t
from attention.app.text import plain
from attention.core import PER_HEAD, one_query
from attention.i18n import render

trace = frame.trace()
st.header(t("one_query.header"))
st.write(t("one_query.intro"))
st.code(script.shown(trace.case, "repeat"), language="python", wrap_lines=True)
query = pickers.token_picker(trace, t("picker.query_i"), "one_query")
head = pickers.head_picker(trace, "one_query_head")
alone = one_query(trace, query)  # every tensor of steps 4-7 for this query: one row where the matrix form has n


def one(name: str):
    """This query's tensor, of the chosen head when there are several."""
    return alone[name][head] if head is not None and name in PER_HEAD else alone[name]


keys = figures.labels(trace, "key", trace.case.n)
me = figures.labels(trace, "query", trace.case.n)[query : query + 1]
for number, name in ((4, "scores"), (5, "weights")):
    st.subheader(t("one_query.step_alone", number=number, name=name))
    st.caption(t(f"one_query.caption_{name}"))
    charts.chart(figures.heatmap(one(name), me, keys, "query", "key", lang=lang()), f"chart_{name}")

st.subheader(t("one_query.step_6"))
weighted = one("weighted")[:, 0]  # (n_k, d_v): the query axis has one entry
dims = figures.labels(trace, "value dim", weighted.shape[-1])
charts.chart(figures.heatmap(weighted, keys, dims, "key", "value dim", lang=lang()), "chart_weighted")

st.subheader(t("one_query.step_7"))
outputs = figures.labels(trace, "output dim", trace.outputs.shape[-1])
left, right = st.columns(2)
alone_i = figures.heatmap(alone["outputs"], me, outputs, "query", "output dim", t("one_query.alone"), lang())
charts.chart(alone_i, "chart_alone", where=left)
row_i = figures.heatmap(
    trace.outputs[query : query + 1], me, outputs, "query", "output dim", t("one_query.row_i"), lang()
)
charts.chart(row_i, "chart_matrix", where=right)
st.info(plain(render(lang(), trace.step("repeat").notes[-1])))
