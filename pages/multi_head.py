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
    shown = h if case.n <= 64 else min(h, 2)  # every head's map while they are small; past that, pick below
    for head, column in zip(range(shown), st.columns(min(shown, 4)) * ((shown + 3) // 4), strict=False):
        figure = figures.tensor_heatmap(trace, "weights", head, title=f"head {head + 1}: weights")
        ui.chart(figure, f"chart_weights_{head}", where=column)
    st.subheader("Scores per head")
    head = ui.head_picker(trace, "multi_head_head")
    ui.chart(figures.tensor_heatmap(trace, "scores", head), "chart_scores")
    st.subheader("The heads side by side: concat")
    ui.chart(figures.tensor_heatmap(trace, "concat"), "chart_concat")
st.subheader("outputs")
ui.chart(figures.tensor_heatmap(trace, "outputs"), "chart_outputs")
exact = ui.exact_trace(trace)
check = oracles.check(exact.case, exact.outputs)
if check.oracle != "nn.MultiheadAttention":
    st.caption(
        "nn.MultiheadAttention checks cases with several heads where it can express them: d_in = d_k = d_v, w_out "
        "square (or none), and no fully masked row. This one is checked with scaled_dot_product_attention (above)."
    )
elif check.agrees:
    st.success(
        f"nn.MultiheadAttention with these weights gives the same outputs: largest difference {check.difference:.2g}"
    )
else:
    st.error(f"nn.MultiheadAttention with these weights differs: largest difference {check.difference:.2g}")
