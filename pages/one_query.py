"""One query at a time (step 8): steps 4-7 for the chosen query alone, and its match with that row of the outputs."""

import streamlit as st

from attention import figures, ui
from attention.core import one_query

trace = ui.trace()
st.header("Step 8 · one query at a time")
st.write(
    "The article repeats steps 4-7 for Input 2 and Input 3. Pick a query: steps 4-7 run again for it alone, "
    "and its output equals its row of the matrix form."
)
st.code(trace.step("repeat").code, language="python")
query = ui.token_picker(trace, "Query i =", "one_query")
head = ui.head_picker(trace, "one_query_head")
alone = one_query(trace, query)  # every tensor of steps 4-7 for this query: one row where the matrix form has n


def one(name: str):
    """This query's tensor, of the chosen head when there are several."""
    return alone[name][head] if head is not None and name in ui.PER_HEAD else alone[name]


keys = figures.labels(trace, "key", trace.case.n)
me = figures.labels(trace, "query", trace.case.n)[query : query + 1]
for number, name, caption in (
    (4, "scores", "q_i · k_j for every key j (× scale ÷ temperature, masked)"),
    (5, "weights", "the softmax of that row (or the override's row)"),
):
    st.subheader(f"Step {number} · `{name}` for this query alone")
    st.caption(caption)
    ui.chart(figures.heatmap(one(name), me, keys, "query", "key"), f"chart_{name}")

st.subheader("Step 6 · `weighted`: each value row times this query's weight on it")
weighted = one("weighted")[:, 0]  # (n_k, d_v): the query axis has one entry
dims = figures.labels(trace, "value dim", weighted.shape[-1])
ui.chart(figures.heatmap(weighted, keys, dims, "key", "value dim"), "chart_weighted")

st.subheader("Step 7 · the output row, alone and in the matrix form")
outputs = figures.labels(trace, "output dim", trace.outputs.shape[-1])
left, right = st.columns(2)
ui.chart(figures.heatmap(alone["outputs"], me, outputs, "query", "output dim", "alone"), "chart_alone", where=left)
row_i = figures.heatmap(trace.outputs[query : query + 1], me, outputs, "query", "output dim", "row i of the outputs")
ui.chart(row_i, "chart_matrix", where=right)
st.info(ui.plain(trace.step("repeat").notes[-1]))
