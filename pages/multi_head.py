"""Multi-head page: Q, K and V split into heads, a score and weight map per head, the concatenation and w_out; a
live page (an edit of w_out reruns it alone)."""

import streamlit as st

from attention import figures
from attention.app import charts, compute, editors, frame, live, pickers, tab
from attention.app.language import t
from attention.app.text import prose
from attention.core import Trace


def multi_head(trace: Trace) -> None:
    case, h = trace.case, trace.case.options.heads
    st.header(t("multi_head.header"))
    st.write(t("multi_head.intro"))
    st.markdown(prose(t("why.heads")))
    editors.w_out_switch(tab.current())
    if h == 1:
        st.info(t("multi_head.one_head"))
    g, d_key = case.options.kv_heads or h, len(case.w_key[0])  # grouped-query attention: g key/value heads
    keys = f"({case.n}, {d_key}) | ({g}, {case.n}, {d_key // g})"
    qk = f"| `queries`, `keys` | ({case.n}, {case.d_k}) | ({h}, {case.n}, {case.d_head}) |"
    if g != h:
        qk = f"| `queries` | ({case.n}, {case.d_k}) | ({h}, {case.n}, {case.d_head}) |\n| `keys` | {keys} |"
    st.markdown(
        f"""
| {t("multi_head.tensor")} | {t("multi_head.shape")} | {t("multi_head.per_head")} |
|---|---|---|
{qk}
| `values` | ({case.n}, {case.d_v}) | ({g}, {case.n}, {case.d_v // g}) |
| `concat` | ({case.n}, {h * (case.d_v // g)}) | {t("multi_head.side_by_side")} |
| `outputs` | {tuple(trace.outputs.shape)} | {t("multi_head.projected")} |
"""
    )
    if h > 1:
        shown = h if case.n <= 64 else min(h, 2)  # every head's map while they are small; past that, pick below
        for head, column in zip(range(shown), st.columns(min(shown, 4)) * ((shown + 3) // 4), strict=False):
            title = t("multi_head.head_weights", head=head + 1)
            charts.chart(charts.figure(figures.tensor_heatmap, trace, "weights", head, title), f"chart_weights_{head}",
                         where=column)  # fmt: skip
        st.subheader(t("multi_head.scores"))
        head = pickers.head_picker(trace, "multi_head_head")
        charts.chart(charts.figure(figures.tensor_heatmap, trace, "scores", head), "chart_scores")
        st.subheader(t("multi_head.concat"))
        charts.chart(charts.figure(figures.tensor_heatmap, trace, "concat"), "chart_concat")
    st.subheader("outputs")
    charts.chart(charts.figure(figures.tensor_heatmap, trace, "outputs"), "chart_outputs")
    check = compute.check(tab.current(), trace)  # with the exact softmax: the rounding is not attention
    if check.oracle != "nn.MultiheadAttention":
        st.caption(t("multi_head.no_oracle"))
    elif check.agrees:
        st.success(t("multi_head.agrees", difference=check.difference))
    else:
        st.error(t("multi_head.differs", difference=check.difference))


frame.trace()  # (a page run outside the frame goes through it first)
live.page(multi_head)
