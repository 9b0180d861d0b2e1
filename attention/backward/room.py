"""The Backward page's rooms: the loss chooser, the backward step picker and player, a gradient beside its forward
twin, the sensitivity maps, the tokens' sensitivity, a gradient's arithmetic on the Explain page, and the script."""

from __future__ import annotations

import time

import streamlit as st
import torch

from ..app import charts, pickers, tab
from ..app.language import lang, t
from ..app.session import Session
from ..app.text import plain
from ..base import i18n
from ..base.explain import explain
from ..exercise.state import hiding
from ..forward.compute import Trace
from ..show.heatmap import heatmap
from . import figures, state
from .compute import Backward, token_dependence
from .loss import Loss
from .script import code, to_backward_script

KEEP = "session"
STEP_KEY, AT_KEY, PLAY_KEY = "backward_step", "backward_at", "backward_playing"
TOKEN_SENSITIVITY_MAX_N = 64  # one backward pass per token: past this, the map is not made
SENSITIVE_TOP = 3  # the numbers named that move the picked output most


def loss_chooser(trace: Trace) -> Loss:
    """The loss: a target for the outputs (one cell edited at a time, with the editor's messages) or one output
    number; one pair of pickers (output, number) for both, which the sensitivity map follows too; returns the
    session's loss for this trace."""
    s = tab.current()
    n, d = trace.outputs.shape
    kinds = ("target", "cell")
    st.session_state.backward_loss_kind = "cell" if s.view(state.Learned).loss_cell is not None else "target"
    language = lang()  # the widget keeps its format_func: the language it was drawn in

    st.radio(
        t("backward.loss"), kinds, key="backward_loss_kind", horizontal=True,
        on_change=lambda: state.choose_kind(s, trace, st.session_state.backward_loss_kind == "cell"),
        format_func=lambda k: i18n.text(language, f"backward.loss_{k}"),
    )  # fmt: skip
    tokens = trace.case.tokens
    cell = s.view(state.Learned).loss_cell is not None
    if not cell:
        st.caption(t("backward.target_help"))
    left, middle, right = st.columns(3)
    st.session_state.bw_row, st.session_state.bw_col = i, j = state.picked(s, trace)

    def picked() -> None:
        state.pick(s, (st.session_state.bw_row or 0, st.session_state.bw_col or 0))

    left.selectbox(t("backward.output_row"), range(n), format_func=tokens.__getitem__, key="bw_row", on_change=picked)
    middle.selectbox(t("backward.output_column"), range(d), format_func=lambda c: str(c + 1), key="bw_col",
                     on_change=picked)  # fmt: skip
    if cell:
        right.metric(t("backward.output_value"), f"{float(trace.outputs[i, j]):.6g}")
    else:
        chosen = state.loss(s, trace)
        target = torch.tensor(chosen.target, dtype=torch.float64)
        rows, cols = list(tokens), [str(c + 1) for c in range(d)]
        key = f"bw_target_value_{i}_{j}_{s.generation}"
        if key not in st.session_state:
            st.session_state[key] = repr(float(target[i, j]))
        right.text_input(
            t("backward.target_value"), key=key,
            on_change=lambda: state.edit_target(s, trace, i, j, st.session_state[key]),
        )  # fmt: skip
        if s.view(state.Learned).target_error is not None:
            st.error(
                t("error.last_valid", error=plain(i18n.render(lang(), s.view(state.Learned).target_error.message))),
                icon="⚠️",
            )
        fig = heatmap(target, rows, cols, "query", "output dim", t("backward.target_title"), lang())
        charts.chart(fig, "chart_target")
    return state.loss(s, trace)


def status(result: Backward) -> None:
    """One line: the loss's value, and whether the gradients agree with autograd's (the largest difference)."""
    checked = state.gradient_check(tab.current(), result)
    said = {"value": result.value, "difference": checked.difference, "oracle": checked.oracle}
    if checked.agrees:
        st.success(t("backward.agrees", **said), icon=":material/verified:")
    else:
        st.error(t("backward.differs", **said))


def step_picker(result: Backward) -> str:
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


def step_view(result: Backward, name: str) -> None:
    """One backward step: title, why, formula, the code, its notes, and each gradient beside its forward twin."""
    trace, step = result.forward, result.step(name)
    st.subheader(t(f"backward.{name}.title"))
    st.write(t(f"backward.{name}.explanation"))
    st.latex(step.formula)
    st.code(code(trace.case, result.loss, name), language="python", wrap_lines=True)
    for note in step.notes:
        st.info(plain(i18n.render(lang(), note)))
    head = pickers.head_picker(trace, "backward_head") if any(result.has_head(g) for g in step.tensors) else None
    for grad, tensor in step.tensors.items():
        twin, shape = result.twin(grad), " × ".join(map(str, tensor.shape))
        said = {"of": grad.removeprefix("d_"), "grad": grad, "shape": shape, "twin": twin}
        st.markdown(t("backward.tensor_twin", **said) if twin else t("backward.tensor", **said))
        if grad == "d_weighted":
            charts.chart(figures.weighted_gradient(result, head, lang()), "chart_d_weighted")
            continue
        for where, fig, key in zip(st.columns(2), figures.gradient_pair(result, grad, head, lang()),
                                   (f"chart_{grad}", f"chart_f_{grad}"), strict=False):  # fmt: skip
            charts.chart(fig, key, where=where)


def explanation(session: Session, trace: Trace, name: str, index: tuple[int, ...]) -> None:
    """On the Explain page: the picked number's gradient with the Backward page's loss, as arithmetic."""
    if state.too_big(trace) or hiding(session, trace):  # an open exercise's numbers: its gradients would tell them
        return
    result = state.result(session, trace)
    if f"d_{name}" not in result:
        return
    made = explain(result, f"d_{name}", index, lang())
    st.subheader(t("backward.explain.header"), anchor=False)
    st.caption(t("backward.explain.loss", loss=t(f"backward.loss_{result.loss.kind}")))
    st.markdown(f"**{plain(made.title)}**")
    st.latex(made.formula)
    if made.lines:
        st.code("\n".join(made.lines), language=None, wrap_lines=True)


# The sensitivity map ----------------------------------------------------------------------------------------------


def sensitivity(trace: Trace) -> None:
    """The output number picked above (the loss's pickers, one choice for the page): how much each number of x and
    of each weight matrix moves it (one backward pass with that number as the loss), and the numbers that move it
    most."""
    s = tab.current()
    tokens = trace.case.tokens
    row, col = state.picked(s, trace)
    result = state.backward_of(s, trace, Loss(cell=(row, col)))
    grads = result.gradients
    found = []  # each matrix's largest few, then the largest of those: (|g|, name, row, column, g)
    for name, g in grads.items():
        top = g.flatten().abs().topk(min(SENSITIVE_TOP, g.numel())).indices
        found += [(abs(g.flatten()[k].item()), name, *divmod(int(k), g.shape[1]), g.flatten()[k].item()) for k in top]
    found = sorted(found, reverse=True)[:SENSITIVE_TOP]
    top = ", ".join(f"{name.removeprefix('d_')}[{i + 1}, {j + 1}] ({v:+.4g})" for _, name, i, j, v in found)
    st.write(t("backward.sensitive", token=tokens[row], column=col + 1, top=top))
    columns = [column for _ in range(0, len(grads), 2) for column in st.columns(2)]  # two maps a row
    for where, (name, fig) in zip(columns, figures.sensitivity(result, lang()).items(), strict=False):
        charts.chart(fig, f"chart_sens_{name}", where=where)


def token_sensitivity(trace: Trace) -> None:
    """Which tokens' inputs each token's output depends on (compute.token_dependence), the tokens on both axes (a
    model's head: its own tokens); in cross-attention the keys' sentence's tokens across."""
    n, cross = trace.case.n, trace.case.cross
    if n > TOKEN_SENSITIVITY_MAX_N:
        st.caption(t("backward.tokens_too_many", n=n, limit=TOKEN_SENSITIVITY_MAX_N))
        return
    z = tab.current().derived.get(("token sensitivity", trace.case), lambda: token_dependence(trace))
    if cross:
        st.caption(t("backward.tokens_cross"))
    tokens, keys = list(trace.case.tokens), list(trace.case.key_tokens)
    fig = heatmap(z, tokens, keys, "query", "key token" if cross else "token", t("backward.tokens_title"), lang())
    charts.chart(fig, "chart_token_sensitivity")


def script_button(session: Session, trace: Trace) -> None:
    """In the share panel: the backward pass's script with the session's loss, made on a click (the steps by hand,
    then autograd's check)."""
    case, loss = trace.case, state.loss(session, trace)
    st.download_button(t("backward.script"), lambda: to_backward_script(case, loss), "attention_backward.py",
                       "text/x-python", on_click="ignore", key="get_backward_script")  # fmt: skip
