"""Broadcasting page (step 6 in depth): (n_k, 1, d_v) × (n_k, n_q, 1) → (n_k, n_q, d_v), then the sum over keys."""

import streamlit as st

from attention import figures, script
from attention.app import charts, frame, pickers
from attention.app.language import lang, t

trace = frame.trace()
values, weights, weighted = trace["values"], trace["weights"], trace["weighted"]
n, d_v = trace.case.n, values.shape[-1]

st.header(t("broadcasting.header_6"))
st.code(script.shown(trace.case, "weighted"), language="python", wrap_lines=True)
st.markdown(
    f"""
| {t("broadcasting.operand")} | {t("broadcasting.shape")} | {t("broadcasting.axis", axis=0)} | {t("broadcasting.axis", axis=1)} | {t("broadcasting.axis", axis=2)} |
|---|---|---|---|---|
| `values[:, None]` | ({n}, **1**, {d_v}) | {t("broadcasting.key_j")} | {t("broadcasting.over_queries")} | {t("axis.value_dim")} |
| `weights.T[:, :, None]` | ({n}, {n}, **1**) | {t("broadcasting.key_j")} | {t("broadcasting.query_i")} | {t("broadcasting.over_dims")} |
| `weighted` | ({n}, {n}, {d_v}) | {t("broadcasting.key_j")} | {t("broadcasting.query_i")} | {t("axis.value_dim")} |

{t("broadcasting.element")}
"""  # noqa: E501 (one table row per line)
)
head = pickers.head_picker(trace, "broadcast_head")
key = pickers.token_picker(trace, t("broadcasting.key_picker"), "broadcast_key")
panels = figures.broadcast_panels(trace, key, head, lang())
for column, name in zip(st.columns([2, 1, 2]), ("value", "weight", "product"), strict=True):
    charts.chart(panels[name], f"chart_{name}", where=column)

st.header(t("broadcasting.header_7"))
query = pickers.token_picker(trace, t("picker.query_i"), "broadcast_query")
st.latex(r"\text{outputs}[i] = \sum_j \text{weighted}[j, i]")
left, right = st.columns([2, 1])
charts.chart(figures.query_sum(trace, query, head, lang()), "chart_sum", where=left)
summed = figures.key_sum(trace)
right.text(t("broadcasting.sum_row"))
charts.numbers(figures.table(trace, summed, head, rows=[query], lang=lang()), "table_sum", where=right)
