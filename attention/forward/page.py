"""The forward pass's pages: the overview, the walkthrough of the eight steps, step 6's broadcast, step 8's one
query, the heads, and the article's variants (pages/ runs each at its URL; the inputs to edit: inputs_page.py)."""

from __future__ import annotations

import streamlit as st

from ..app import charts, editors, frame, live, pickers, tab, traces
from ..app.language import lang, t
from ..app.text import plain, prose
from ..base.case import MODERN
from ..base.i18n import render
from ..exercise import room as exercise_room
from ..exercise.state import hiding
from ..models import room as models_room
from ..show.heatmap import heatmap, labels
from ..show.tables import table
from . import compute, explain_room, figures, modern_room, room, script, steps, teach, variants_room
from .compute import Trace


def overview() -> None:
    """The landing page: what the app is, the eight steps, the article's result, questions and exercises."""
    trace = frame.trace()
    st.title(t("app.title"))
    st.write(t("overview.intro"))
    if (title := tab.current().origin.title()) is not None:  # a model's head, or a case edited from one
        st.info(t("real.case", title=render(lang(), title)), icon=":material/neurology:")
    left, right = st.columns([2, 3])
    with left:
        st.header(t("overview.steps"))  # h2 under the h1 title: headings go down one level at a time
        for step in trace.steps:  # a decoder's RoPE is part of step 3: listed under it as 3b
            number = f"{step.label}." if step.label.isdigit() else f"- {step.label}"
            st.markdown(f"{number} `{step.name}` · {t(f'step.{step.name}.title')}")
        st.page_link("pages/walkthrough.py", label=t("overview.walk"), icon=":material/stairs:")
        st.page_link("pages/inputs.py", label=t("overview.edit"), icon=":material/edit:")
        st.header(t("overview.questions"))
        room.links(trace)
        st.header(t("overview.exercises"))
        exercise_room.ready_made(tab.current(), trace)
    with right:
        st.header(t("overview.result"))
        charts.chart(charts.figure(figures.tensor_heatmap, trace, "outputs"), "chart_outputs", shows=("outputs", None))
        if trace.case.options.weights_override is not None:
            st.caption(t("overview.rounded"))
        if trace.case.cross and tab.current().origin.title() is None:  # a model's: its translation's, under it
            alignment(trace)
        models_room.next_tokens(tab.current())
    models_room.heads(tab.current())
    models_room.sink(tab.current(), trace)


def alignment(trace: Trace) -> None:
    """A cross case's weights, the first head's: which source token each target token looks at, and why."""
    st.subheader(t("overview.alignment"))
    head = 0 if trace.has_head("weights") else None
    title = "weights" if head is None else f"weights · {t('picker.head_n', head=1)}"
    figure = charts.figure(figures.tensor_heatmap, trace, "weights", head, title)
    charts.chart(figure, "chart_alignment", shows=("weights", head))
    st.caption(plain(" ".join(teach.cross_whys(trace, "softmax", lang()))))


def walkthrough() -> None:
    """The eight steps one at a time, each with its formula, code and tensors (a step change reruns it alone)."""
    frame.trace()  # (a page run outside the frame goes through it first)
    live.page(_walkthrough)


def _walkthrough(trace: Trace) -> None:
    step = trace.step(room.step_picker(trace))  # RoPE's too, for a case with it (3b)

    st.header(t("walkthrough.header", number=step.label, title=t(f"step.{step.name}.title")))
    st.write(t(f"step.{step.name}.explanation"))
    st.latex(steps.lines(steps.formula(step.name, trace.case, lang())))  # its words in the reader's language
    for number, why in enumerate(traces.whys(tab.current(), trace, step.name, lang())):  # the step's, its options'
        st.markdown(f"**{t('why.label')}** · {prose(why)}" if number == 0 else prose(why))
    st.code(script.shown(trace.case, step.name), language="python", wrap_lines=True)  # the reader's code
    if step.name in ("scores", "softmax") and any(getattr(trace.case.options, o) is not None for o in MODERN):
        with st.expander(t("walkthrough.flex")):  # today's models' way, which the app's check runs too
            st.code("\n".join(script.flex_lines(trace.case)), language="python", wrap_lines=True)
    for note in step.notes:
        if getattr(note, "key", None) != "note.override":  # the why above says it: the article rounds for readability
            st.info(plain(render(lang(), note)))
    st.caption(t("editor.click_hint"))  # a click on a cell leads to its arithmetic on the Explain page

    has_head = any(trace.has_head(name) for name in step.tensors)
    head = pickers.head_picker(trace, "walkthrough_head") if has_head else None
    for name, tensor in step.tensors.items():
        h = head if trace.has_head(name) else None
        shape = " × ".join(map(str, tensor.shape))
        dtype = str(tensor.dtype).removeprefix("torch.")
        st.subheader(t("walkthrough.tensor", name=name, shape=shape, dtype=dtype, device=step.device))
        if name == "weighted":
            st.caption(t("walkthrough.weighted_rows"))
            if cell := charts.chart(charts.figure(figures.weighted_heatmap, trace, h), f"chart_{name}", clickable=True):
                explain_room.go_explain(trace, name, h, cell)  # a click on a cell: its explanation
            continue
        numbers = charts.table(trace, name, h)
        chart, table = charts.beside(numbers)  # a wide table under its chart, not beside it
        figure = charts.figure(figures.tensor_heatmap, trace, name, h)
        if cell := charts.chart(figure, f"chart_{name}", where=chart, clickable=True, shows=(name, h)):
            explain_room.go_explain(trace, name, h, cell)
        if numbers is not None:
            charts.numbers(numbers, f"table_{name}", where=table)

    rounded = trace.case.options.weights_override is not None  # (the exact twin would show an exercise's numbers)
    if step.name in ("softmax", "outputs") and rounded and not hiding(tab.current(), trace):
        exact = traces.exact(tab.current(), trace)
        name = "weights" if step.name == "softmax" else "outputs"
        st.subheader(t("walkthrough.rounding"))
        left, right = st.columns(2)
        if step.name == "outputs":  # step 5 shows weights_exact above already: its difference alone, not it again
            exact_title = t("walkthrough.exact_title", name=name)
            exact_chart = charts.figure(figures.tensor_heatmap, exact, name, title=exact_title)
            charts.chart(exact_chart, "chart_exact", where=left)
        difference_title = t("walkthrough.difference_title", name=name)
        difference = charts.figure(figures.difference_heatmap, trace, exact, name, title=difference_title)
        charts.chart(difference, "chart_difference", where=right if step.name == "outputs" else left)
    if step.name == "outputs" and trace.case.options.mask == "causal" and not hiding(tab.current(), trace):
        room.mask_effect(trace)  # the mask's doing alone: the outputs before and after it, all else equal


def broadcasting() -> None:
    """Step 6 in depth: (n_k, 1, d_v) × (n_k, n_q, 1) → (n_k, n_q, d_v), then the sum over the keys."""
    trace = frame.trace()
    n, n_kv, d_v = trace.case.n, trace.case.n_kv, trace["values"].shape[-1]  # n_kv: the keys (cross-attention's x_kv)

    st.header(t("broadcasting.header_6"))
    st.code(script.shown(trace.case, "weighted"), language="python", wrap_lines=True)
    st.markdown(
        f"""
    | {t("broadcasting.operand")} | {t("broadcasting.shape")} | {t("broadcasting.axis", axis=0)} | {t("broadcasting.axis", axis=1)} | {t("broadcasting.axis", axis=2)} |
    |---|---|---|---|---|
    | `values[:, None]` | ({n_kv}, **1**, {d_v}) | {t("broadcasting.key_j")} | {t("broadcasting.over_queries")} | {t("axis.value_dim")} |
    | `weights.T[:, :, None]` | ({n_kv}, {n}, **1**) | {t("broadcasting.key_j")} | {t("broadcasting.query_i")} | {t("broadcasting.over_dims")} |
    | `weighted` | ({n_kv}, {n}, {d_v}) | {t("broadcasting.key_j")} | {t("broadcasting.query_i")} | {t("axis.value_dim")} |

    {t("broadcasting.element")}
    """  # noqa: E501 (one table row per line)
    )
    head = pickers.head_picker(trace, "broadcast_head")
    key = pickers.token_picker(trace, t("broadcasting.key_picker"), "broadcast_key", keys=True)
    panels = figures.broadcast_panels(trace, key, head, lang())
    for column, name in zip(st.columns([2, 1, 2]), ("value", "weight", "product"), strict=True):
        charts.chart(panels[name], f"chart_{name}", where=column)

    st.header(t("broadcasting.header_7"))
    query = pickers.token_picker(trace, t("picker.query_i"), "broadcast_query")
    st.latex(r"\text{outputs}[i] = \sum_j \text{weighted}[j, i]")
    summed = table(trace, figures.key_sum(trace), head, rows=[query], lang=lang())
    left, right = charts.beside(summed, (2, 1))  # a wide row under its chart, not beside it
    charts.chart(figures.query_sum(trace, query, head, lang()), "chart_sum", where=left)
    right.text(t("broadcasting.sum_row"))
    charts.numbers(summed, "table_sum", where=right)


def one_query() -> None:
    """Step 8: steps 4-7 for the chosen query alone, and its match with that row of the outputs."""
    trace = frame.trace()
    st.header(t("one_query.header"))
    st.write(t("one_query.intro"))
    st.code(script.shown(trace.case, "repeat"), language="python", wrap_lines=True)
    query = pickers.token_picker(trace, t("picker.query_i"), "one_query")
    head = pickers.head_picker(trace, "one_query_head")
    alone = compute.one_query(
        trace, query
    )  # every tensor of steps 4-7 for this query: one row where the matrix form has n

    def one(name: str):
        """This query's tensor, of the chosen head when there are several."""
        return alone[name][head] if head is not None and name in steps.PER_HEAD else alone[name]

    keys = labels(trace, "key", trace.case.n_kv)  # cross-attention: x_kv's tokens
    me = labels(trace, "query", trace.case.n)[query : query + 1]
    for number, name in ((4, "scores"), (5, "weights")):
        st.subheader(t("one_query.step_alone", number=number, name=name))
        st.caption(t(f"one_query.caption_{name}"))
        charts.chart(heatmap(one(name), me, keys, "query", "key", lang=lang()), f"chart_{name}")

    st.subheader(t("one_query.step_6"))
    weighted = one("weighted")[:, 0]  # (n_k, d_v): the query axis has one entry
    dims = labels(trace, "value dim", weighted.shape[-1])
    charts.chart(heatmap(weighted, keys, dims, "key", "value dim", lang=lang()), "chart_weighted")

    st.subheader(t("one_query.step_7"))
    outputs = labels(trace, "output dim", trace.outputs.shape[-1])
    left, right = st.columns(2)
    alone_i = heatmap(alone["outputs"], me, outputs, "query", "output dim", t("one_query.alone"), lang())
    charts.chart(alone_i, "chart_alone", where=left)
    row_i = heatmap(trace.outputs[query : query + 1], me, outputs, "query", "output dim", t("one_query.row_i"), lang())
    charts.chart(row_i, "chart_matrix", where=right)
    st.info(plain(render(lang(), trace.step("repeat").notes[-1])))


def multi_head() -> None:
    """Q, K and V split into heads, a map per head, the concatenation and w_out (an edit of w_out reruns it alone)."""
    frame.trace()  # (a page run outside the frame goes through it first)
    live.page(_multi_head)


def _multi_head(trace: Trace) -> None:
    case, h = trace.case, trace.case.options.heads
    st.header(t("multi_head.header"))
    st.write(t("multi_head.intro"))
    st.markdown(prose(t("why.heads")))
    editors.w_out_switch(tab.current())
    if h == 1:
        st.info(t("multi_head.one_head"))
    g, d_key = case.options.kv_heads or h, len(case.w_key[0])  # grouped-query attention: g key/value heads
    n_kv = case.n_kv  # the keys and values: cross-attention's x_kv rows
    keys = f"({n_kv}, {d_key}) | ({g}, {n_kv}, {d_key // g})"
    qk = f"| `queries`, `keys` | ({case.n}, {case.d_k}) | ({h}, {case.n}, {case.d_head}) |"
    if g != h or case.cross:
        qk = f"| `queries` | ({case.n}, {case.d_k}) | ({h}, {case.n}, {case.d_head}) |\n| `keys` | {keys} |"
    st.markdown(
        f"""
| {t("multi_head.tensor")} | {t("multi_head.shape")} | {t("multi_head.per_head")} |
|---|---|---|
{qk}
| `values` | ({n_kv}, {case.d_v}) | ({g}, {n_kv}, {case.d_v // g}) |
| `concat` | ({case.n}, {h * (case.d_v // g)}) | {t("multi_head.side_by_side")} |
| `outputs` | {tuple(trace.outputs.shape)} | {t("multi_head.projected")} |
"""
    )
    if h > 1:
        shown = h if case.n <= 64 else min(h, 2)  # every head's map while they are small; past that, pick below
        for head, column in zip(range(shown), st.columns(min(shown, 4)) * ((shown + 3) // 4), strict=False):
            title = t("multi_head.head_weights", head=head + 1)
            charts.chart(charts.figure(figures.tensor_heatmap, trace, "weights", head, title), f"chart_weights_{head}",
                         where=column, shows=("weights", head))  # fmt: skip
        st.subheader(t("multi_head.scores"))
        head = pickers.head_picker(trace, "multi_head_head")
        charts.chart(
            charts.figure(figures.tensor_heatmap, trace, "scores", head), "chart_scores", shows=("scores", head)
        )
        st.subheader(t("multi_head.concat"))
        charts.chart(charts.figure(figures.tensor_heatmap, trace, "concat"), "chart_concat", shows=("concat", None))
    st.subheader("outputs")
    charts.chart(charts.figure(figures.tensor_heatmap, trace, "outputs"), "chart_outputs", shows=("outputs", None))
    check = traces.check(tab.current(), trace)  # with the exact softmax: the rounding is not attention
    if check.oracle != "nn.MultiheadAttention":
        st.caption(t("multi_head.no_oracle"))
    elif check.agrees:
        st.success(t("multi_head.agrees", difference=check.difference))
    else:
        st.error(t("multi_head.differs", difference=check.difference))


def variants() -> None:
    """Attention's variants on the current numbers: the article's departures from textbook attention, today's
    models' variants beside plain attention, and the temperature."""
    trace = frame.trace()
    st.header(t("variants.header"))
    st.write(t("variants.intro"))
    variants_room.departures(trace)
    modern_room.modern(tab.current(), trace)
    variants_room.explorer()
