"""The Backward page's rooms (issue 21): the loss chooser, the backward step picker and player, a gradient beside its
forward twin on one colour scale, the sensitivity map, training live and the tokens' sensitivity."""

from __future__ import annotations

import time

import streamlit as st
import torch

from .. import backward as bw
from .. import figures, i18n
from ..backward_script import code
from ..core import AXES, Trace
from . import charts, exercises, learning, pickers, tab
from .language import lang, t
from .text import plain

KEEP = "session"
STEP_KEY, AT_KEY, PLAY_KEY = "backward_step", "backward_at", "backward_playing"
# A gradient's axes: its forward twin's, and the few tensors with no twin of their own
GRAD_AXES = {"d_w_out": ("value dim", "output dim"), "d_concat": ("query", "value dim")}
TOKEN_SENSITIVITY_MAX_N = 64  # one backward pass per token: past this, the map is not made
SENSITIVE_TOP = 3  # the numbers named that move the picked output most
MAX_CELLS, too_big = learning.MAX_CELLS, learning.too_big


def loss_chooser(trace: Trace) -> bw.Loss:
    """The loss: a target for the outputs (one cell edited at a time, with the editor's messages) or one output
    number; returns the session's loss for this trace."""
    s = tab.current()
    n, d = trace.outputs.shape
    kinds = ("target", "cell")
    first = (min(2, n - 1), min(1, d - 1))  # output 3's second number first
    st.session_state.backward_loss_kind = "cell" if s.learned.loss_cell is not None else "target"
    language = lang()  # the widget keeps its format_func: the language it was drawn in

    def kind_changed() -> None:
        cell = st.session_state.backward_loss_kind == "cell"
        learning.choose_cell(s, first if cell else None)

    st.radio(
        t("backward.loss"), kinds, key="backward_loss_kind", horizontal=True, on_change=kind_changed,
        format_func=lambda k: i18n.text(language, f"backward.loss_{k}"),
    )  # fmt: skip
    tokens = trace.case.tokens
    if s.learned.loss_cell is not None:
        at = s.learned.loss_cell
        st.session_state.bw_cell_row, st.session_state.bw_cell_col = min(at[0], n - 1), min(at[1], d - 1)

        def cell_changed() -> None:
            learning.choose_cell(s, (st.session_state.bw_cell_row or 0, st.session_state.bw_cell_col or 0))

        left, right = st.columns(2)
        left.selectbox(t("backward.output_row"), range(n), format_func=tokens.__getitem__, key="bw_cell_row",
                       on_change=cell_changed)  # fmt: skip
        right.selectbox(t("backward.output_column"), range(d), format_func=lambda j: str(j + 1), key="bw_cell_col",
                        on_change=cell_changed)  # fmt: skip
    else:
        chosen = learning.loss(s, trace)
        target = torch.tensor(chosen.target, dtype=torch.float64)
        rows, cols = list(tokens), [str(j + 1) for j in range(d)]
        st.caption(t("backward.target_help"))
        left, middle, right = st.columns(3)
        i = left.selectbox(t("backward.output_row"), range(n), format_func=tokens.__getitem__, key="bw_target_row",
                           index=min(2, n - 1))  # fmt: skip
        j = middle.selectbox(t("backward.output_column"), range(d), format_func=lambda c: str(c + 1),
                             key="bw_target_col", index=min(1, d - 1))  # fmt: skip
        i, j = i or 0, j or 0
        key = f"bw_target_value_{i}_{j}_{s.generation}"
        if key not in st.session_state:
            st.session_state[key] = repr(float(target[i, j]))
        right.text_input(
            t("backward.target_value"), key=key,
            on_change=lambda: learning.edit_target(s, trace, i, j, st.session_state[key]),
        )  # fmt: skip
        if s.learned.target_error is not None:
            st.error(t("error.last_valid", error=plain(i18n.render(lang(), s.learned.target_error.message))), icon="⚠️")
        fig = figures.heatmap(target, rows, cols, "query", "output dim", t("backward.target_title"), lang())
        charts.chart(fig, "chart_target")
    return learning.loss(s, trace)


def status(result: bw.Backward) -> None:
    """One line: the loss's value, and whether the gradients agree with autograd's (the largest difference)."""
    checked = learning.check(tab.current(), result)
    said = {"value": result.value, "difference": checked.difference, "oracle": checked.oracle}
    if checked.agrees:
        st.success(t("backward.agrees", **said), icon=":material/verified:")
    else:
        st.error(t("backward.differs", **said))


def step_picker(result: bw.Backward) -> str:
    """The backward steps in the order they run, as radio buttons, with ◀ / ▶ and a player."""
    names = tuple(step.name for step in result.steps)
    labels = {step.name: step.label for step in result.steps}
    at = st.session_state.get(AT_KEY, names[0])
    st.session_state[STEP_KEY] = at if at in names else names[0]
    language = lang()

    def moved(by: int = 0, wrap: bool = False) -> None:
        here = names.index(st.session_state.get(AT_KEY, names[0])) if st.session_state.get(AT_KEY) in names else 0
        there = (here + by) % len(names) if wrap else min(len(names) - 1, max(0, here + by))
        st.session_state[AT_KEY] = names[there]

    st.radio(
        t("backward.step"), names, key=STEP_KEY, horizontal=True, label_visibility="collapsed",
        format_func=lambda name: f"{labels[name]}← {i18n.text(language, f'backward.{name}.short')}",
        on_change=lambda: st.session_state.__setitem__(AT_KEY, st.session_state[STEP_KEY]),
    )  # fmt: skip
    here = st.session_state[STEP_KEY]
    row = st.container(horizontal=True, vertical_alignment="center")
    row.button("◀", key="bw_previous", on_click=moved, args=(-1,), disabled=here == names[0])
    row.button("▶", key="bw_next", on_click=moved, args=(1,), disabled=here == names[-1])
    row.toggle(t("walkthrough.play"), key=PLAY_KEY, persist_state=KEEP, help=t("backward.play_help"))
    if st.session_state.get(PLAY_KEY):
        st.fragment(lambda: _advance(moved), run_every=2.0)()
    st.session_state[AT_KEY] = here
    return here


def _advance(moved) -> None:
    last = st.session_state.get("bw_played_at")
    if last is None:
        st.session_state.bw_played_at = time.monotonic()
    elif time.monotonic() - last >= 1.9:
        st.session_state.bw_played_at = time.monotonic()
        moved(1, wrap=True)
        st.rerun(scope="app")


def step_view(result: bw.Backward, name: str) -> None:
    """One backward step: title, why, formula, the code, its notes, and each gradient beside its forward twin."""
    trace, step = result.forward, result.step(name)
    st.subheader(t(f"backward.{name}.title"))
    st.write(t(f"backward.{name}.explanation"))
    st.latex(step.formula)
    st.code(code(trace.case, result.loss, name), language="python", wrap_lines=True)
    for note in step.notes:
        st.info(plain(i18n.render(lang(), note)))
    has_head = any(trace.has_head(twin) for g in step.tensors if (twin := result.twin(g)))
    head = pickers.head_picker(trace, "backward_head") if has_head else None
    for grad, tensor in step.tensors.items():
        twin = result.twin(grad)
        shape = " × ".join(map(str, tensor.shape))
        of = grad.removeprefix("d_")
        said = {"of": of, "grad": grad, "shape": shape, "twin": twin}
        st.markdown(t("backward.tensor_twin", **said) if twin else t("backward.tensor", **said))
        if grad == "d_weighted":
            _weighted(result, head)
            continue
        g = tensor[head] if head is not None and tensor.dim() == 3 else tensor
        f = None
        if twin is not None:
            f = trace[twin]
            f = f[head] if head is not None and trace.has_head(twin) else f
        kinds = AXES.get(twin or "", GRAD_AXES.get(grad, ("query", "value dim")))
        rows = figures.labels(trace, kinds[0], g.shape[0], lang())
        cols = figures.labels(trace, kinds[1], g.shape[1], lang())
        shared = span(g, f)  # one colour scale for the gradient and its twin
        left, right = st.columns(2)
        fig = figures.heatmap(g, rows, cols, *kinds, t("backward.grad", of=of), lang(), shared)
        charts.chart(fig, f"chart_{grad}", where=left)
        if f is not None:
            charts.chart(figures.heatmap(f, rows, cols, *kinds, twin, lang(), shared), f"chart_f_{grad}", where=right)


def span(*matrices) -> tuple[float, float]:
    """One colour scale for a gradient and its twin, centred on 0: ± the largest magnitude of the two (masked −∞
    scores left out)."""
    top = 0.0
    for m in matrices:
        if m is None:
            continue
        values = m[torch.isfinite(m)]
        top = max(top, values.abs().max().item() if values.numel() else 0.0)
    return (-top or -1.0, top or 1.0)


def _weighted(result: bw.Backward, head: int | None) -> None:
    """d weighted: every key's block is the same d outputs (its first keys, as rows key · query)."""
    trace = result.forward
    d = result["d_weighted"]
    d = d[head] if head is not None else d
    n_k, n_q, d_v = d.shape
    keys = max(1, min(n_k, 64 // max(1, n_q)))
    tokens = figures.labels(trace, "token", n_k)
    rows = [f"k {tokens[j]} · q {tokens[i]}" for j in range(keys) for i in range(n_q)]
    z = d[:keys].reshape(keys * n_q, d_v)
    dims = figures.labels(trace, "value dim", d_v)
    fig = figures.heatmap(z, rows, dims, "key · query", "value dim", t("backward.grad", of="weighted"), lang())
    charts.chart(fig, "chart_d_weighted")


def explain_gradient(trace: Trace, name: str, index: tuple[int, ...]) -> None:
    """On the Explain page: the picked number's gradient with the Backward page's loss, as arithmetic."""
    s = tab.current()
    if too_big(trace) or exercises.hiding(s, trace):  # an open exercise's numbers: its gradients would tell them
        return
    result = learning.result(s, trace)
    made = bw.explain_gradient(result, name, index)
    if made is None:
        return
    title, lines, formula = made
    st.subheader(t("backward.explain.header"), anchor=False)
    loss = t(f"backward.loss_{result.loss.kind}")
    st.caption(t("backward.explain.loss", loss=loss))
    st.markdown(f"**{plain(i18n.render(lang(), title))}**")
    st.latex(formula)
    if lines:
        st.code("\n".join(str(i18n.render(lang(), line)) for line in lines), language=None, wrap_lines=True)


# The sensitivity map ----------------------------------------------------------------------------------------------


def sensitivity(trace: Trace) -> None:
    """Pick an output number: how much each number of x and of each weight matrix moves it (one backward pass with
    that number as the loss), and the numbers that move it most."""
    s = tab.current()
    n, d = trace.outputs.shape
    tokens = trace.case.tokens
    left, right = st.columns(2)
    row = left.selectbox(t("backward.output_row"), range(n), format_func=tokens.__getitem__, key="bw_sens_row",
                         index=min(2, n - 1), persist_state=KEEP)  # fmt: skip
    col = right.selectbox(t("backward.output_column"), range(d), format_func=lambda j: str(j + 1), key="bw_sens_col",
                          persist_state=KEEP)  # fmt: skip
    row, col = min(row or 0, n - 1), min(col or 0, d - 1)
    result = learning.backward_of(s, trace, bw.Loss(cell=(row, col)))
    grads = result.gradients
    found = []  # each matrix's largest few, then the largest of those: (|g|, name, row, column, g)
    for name, g in grads.items():
        top = g.flatten().abs().topk(min(SENSITIVE_TOP, g.numel())).indices
        found += [(abs(g.flatten()[k].item()), name, *divmod(int(k), g.shape[1]), g.flatten()[k].item()) for k in top]
    found = sorted(found, reverse=True)[:SENSITIVE_TOP]
    top = ", ".join(f"{name.removeprefix('d_')}[{i + 1}, {j + 1}] ({v:+.4g})" for _, name, i, j, v in found)
    st.write(t("backward.sensitive", token=tokens[row], column=col + 1, top=top))
    columns = [column for _ in range(0, len(grads), 2) for column in st.columns(2)]  # two maps a row
    for where, (name, g) in zip(columns, grads.items(), strict=False):
        twin = name.removeprefix("d_")
        kinds = AXES.get(twin, GRAD_AXES.get(name, ("value dim", "output dim")))
        rows = figures.labels(trace, kinds[0], g.shape[0], lang())
        cols = figures.labels(trace, kinds[1], g.shape[1], lang())
        fig = figures.heatmap(g, rows, cols, *kinds, t("backward.sensitivity_of", of=twin), lang(), span(g))
        charts.chart(fig, f"chart_sens_{name}", where=where)


def token_sensitivity(trace: Trace) -> None:
    """Which tokens' inputs each token's output depends on: for output row i, the size ‖∂(Σ_c o_ic)/∂x_j‖ of every
    input row j's gradient, the tokens on both axes (a model's head: its own tokens)."""
    n = trace.case.n
    if n > TOKEN_SENSITIVITY_MAX_N:
        st.caption(t("backward.tokens_too_many", n=n, limit=TOKEN_SENSITIVITY_MAX_N))
        return
    s = tab.current()

    def make() -> torch.Tensor:
        rows = []
        for i in range(n):
            d = trace.outputs.shape[1]
            grad = sum(bw.backward(trace, bw.Loss(cell=(i, c)))["d_x"] for c in range(min(d, 8)))
            rows.append(grad.norm(dim=-1))  # (n,): how much output i moves with input row j
        return torch.stack(rows)

    z = s.derived.get(("token sensitivity", trace.case), make)
    tokens = list(trace.case.tokens)
    fig = figures.heatmap(z, tokens, tokens, "query", "token", t("backward.tokens_title"), lang())
    charts.chart(fig, "chart_token_sensitivity")
