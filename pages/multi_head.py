"""Multi-head page: Q, K and V split into heads, a score and weight map per head, the concatenation and w_out."""

import streamlit as st

from attention import figures, oracles, ui

trace = ui.trace()
case, h = trace.case, trace.case.options.heads
st.header("Multi-head attention")
st.write(
    "Head i takes the i-th block of columns of Q, K and V (as `torch.nn.MultiheadAttention` does), runs steps 4-7 "
    "on its own, and the heads' outputs are put side by side and multiplied by w_out."
)
ui.w_out_switch()
if h == 1:
    st.info("One head now: set Heads in the sidebar (d_k and d_v must divide by it) to split the attention.")
st.markdown(
    f"""
| tensor | shape | per head |
|---|---|---|
| `queries`, `keys` | ({case.n}, {case.d_k}) | ({h}, {case.n}, {case.d_k // h}) |
| `values` | ({case.n}, {case.d_v}) | ({h}, {case.n}, {case.d_v // h}) |
| `concat` | ({case.n}, {case.d_v}) | the heads side by side |
| `outputs` | {tuple(trace.outputs.shape)} | concat @ w_out, when given |
"""
)
if h > 1:
    for head, column in enumerate(st.columns(min(h, 4)) * ((h + 3) // 4)):
        if head < h:
            column.plotly_chart(
                figures.tensor_heatmap(trace, "weights", head, title=f"head {head + 1}: weights"),
                key=f"chart_weights_{head}",
                width="stretch",
            )
    st.subheader("Scores per head")
    head = ui.head_picker(trace, "multi_head_head")
    st.plotly_chart(figures.tensor_heatmap(trace, "scores", head), key="chart_scores", width="stretch")
    st.subheader("The heads side by side: concat")
    st.plotly_chart(figures.tensor_heatmap(trace, "concat"), key="chart_concat", width="stretch")
st.subheader("outputs")
st.plotly_chart(figures.tensor_heatmap(trace, "outputs"), key="chart_outputs", width="stretch")
reference = oracles.mha_outputs(ui.exact_trace(trace).case)
if reference is None:
    st.caption(
        "nn.MultiheadAttention can check this case only when d_in = d_k = d_v, w_out is square (or absent), the scale "
        "is 1/√d_k, the temperature 1 and the mask none or causal; the check above uses scaled_dot_product_attention."
    )
else:
    difference = (ui.exact_trace(trace).outputs - reference).abs().max().item()
    st.success(f"nn.MultiheadAttention with these weights gives the same outputs: largest difference {difference:.2g}")
