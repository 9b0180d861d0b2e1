"""Broadcasting page (step 6 in depth): (n_k, 1, d_v) × (n_k, n_q, 1) → (n_k, n_q, d_v), then the sum over keys."""

import streamlit as st

from attention import figures, ui

trace = ui.trace()
values, weights, weighted = trace["values"], trace["weights"], trace["weighted"]
n, d_v = trace.case.n, values.shape[-1]

st.header("Step 6 · the broadcast")
st.code("weighted = values[..., :, None, :] * weights.mT[..., :, :, None]", language="python")
st.markdown(
    f"""
| operand | shape | axis 0 | axis 1 | axis 2 |
|---|---|---|---|---|
| `values[:, None]` | ({n}, **1**, {d_v}) | key j | *stretched* over queries | value dim |
| `weights.T[:, :, None]` | ({n}, {n}, **1**) | key j | query i | *stretched* over value dims |
| `weighted` | ({n}, {n}, {d_v}) | key j | query i | value dim |

Element `weighted[j, i]` is **query i's weight on key j** times **value row j**. The size-1 axes are stretched
(broadcast), so no loop is written.
"""
)
head = ui.head_picker(trace, "broadcast_head")
key = ui.token_picker(trace, "Slice along the key axis: key j =", "broadcast_key")
panels = figures.broadcast_panels(trace, key, head)
for column, name in zip(st.columns([2, 1, 2]), ("value", "weight", "product"), strict=True):
    ui.chart(panels[name], f"chart_{name}", where=column)

st.header("Step 7 · the sum over keys")
query = ui.token_picker(trace, "Query i =", "broadcast_query")
st.latex(r"\text{outputs}[i] = \sum_j \text{weighted}[j, i]")
left, right = st.columns([2, 1])
ui.chart(figures.query_sum(trace, query, head), "chart_sum", where=left)
summed = figures.key_sum(trace)
right.text("Σ over keys = this output row:")
right.dataframe(figures.table(trace, summed, head, rows=[query]), key="table_sum")
