"""One query at a time (step 8): steps 4-7 for the chosen query alone, and its match with that row of the outputs."""

import streamlit as st

from attention import figures, ui

trace = ui.trace()
st.header("Step 8 · one query at a time")
st.write(
    "The article repeats steps 4-7 for Input 2 and Input 3. Pick a query: its score row, weight row, weighted values "
    "and output, computed for it alone, equal its row of the matrix form."
)
st.code(trace.step("repeat").code, language="python")
query = ui.token_picker(trace, "Query i =", "one_query")
head = ui.head_picker(trace, "one_query_head")


def row(name: str):
    return trace[name][head] if head is not None and name in ui.HEADED else trace[name]


for number, name, caption in (
    (4, "scores", "its scores: q_i · k_j for every key j"),
    (5, "weights", "its weights: the softmax of that row"),
):
    t = row(name)[query : query + 1]
    tokens = figures.labels(trace, "key", trace.case.n)
    fig = figures.heatmap(t, figures.labels(trace, "query", trace.case.n)[query : query + 1], tokens, "query", "key")
    st.subheader(f"Step {number} · `{name}[i]`")
    st.caption(caption)
    st.plotly_chart(fig, key=f"chart_{name}", width="stretch")

st.subheader("Step 6 · `weighted[:, i]`: each value row times its weight")
st.plotly_chart(figures.query_sum(trace, query, head), key="chart_weighted", width="stretch")

st.subheader("Step 7 · the output row, alone and in the matrix form")
alone = trace["outputs_by_query"][query : query + 1]
matrix = trace.outputs[query : query + 1]
left, right = st.columns(2)
left.caption("query i alone (step 8)")
left.dataframe(figures.table(trace, "outputs_by_query").iloc[[query]], key="table_alone")
right.caption("row i of the outputs (step 7)")
right.dataframe(figures.table(trace, "outputs").iloc[[query]], key="table_matrix")
difference = (alone - matrix).abs().max().item()
(st.success if difference <= 1e-5 * (1 + matrix.abs().max().item()) else st.error)(
    f"Largest difference between the two: {difference:.3g}"
)
