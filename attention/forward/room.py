"""The forward pass's rooms: the walkthrough's step (buttons, picker, player), the overview's questions (each a link
to its answer, with the case's own numbers), and step 7's outputs before and after the mask."""

from __future__ import annotations

import time
from collections.abc import MutableMapping

import pandas as pd
import streamlit as st

from ..app import tab, traces
from ..app.language import lang, t
from ..app.pickers import KEEP
from ..app.session import Session
from ..app.text import plain
from ..base import i18n
from ..base.case import with_options
from . import explain_room, teach
from .compute import Trace

# The walkthrough's step


PACES = (0.5, 1.0, 2.0, 3.0, 5.0)  # seconds per step


PACE_PX = 220  # the pace slider beside the player's switch


def step_picker(trace: Trace) -> str:
    """The steps to pick from, then one row with previous / next and the player (a row that stays a row on a
    phone, where columns would stack ◀ above the picker and ▶ below it). The step is the session's, by its name, so
    it survives a visit to another page and travels in a link."""
    s = tab.current()
    names, language = tuple(step.name for step in trace.steps), s.lang  # with RoPE, its step after step 3 (3b)
    labels = {step.name: step.label for step in trace.steps}
    s.go_to(s.step)  # a step this case lacks (RoPE, after a case with it): the step it is part of
    st.session_state.step_picker = s.step
    st.radio(
        t("walkthrough.step"),
        names,
        names.index(s.step),  # the session's step, should the browser draw it afresh (app/sidebar.py, _at)
        format_func=lambda name: f"{labels[name]} {i18n.text(language, f'step.{name}.short')}",
        key="step_picker",
        horizontal=True,
        label_visibility="collapsed",
        on_change=lambda: s.go_to(st.session_state.step_picker),
    )
    row = st.container(horizontal=True, vertical_alignment="center")
    row.button(
        "◀", key="previous", on_click=lambda: s.go_to(s.step, by=-1), disabled=s.step == names[0], shortcut="Left"
    )
    row.button("▶", key="next", on_click=lambda: s.go_to(s.step, by=1), disabled=s.step == names[-1], shortcut="Right")
    _player(row, s)
    return s.step


def _player(row, s) -> None:
    """Play / pause through the steps at a chosen pace (a timed fragment moves to the next step and reruns)."""
    language = s.lang
    row.toggle(t("walkthrough.play"), key="playing", persist_state=KEEP, help=t("walkthrough.play_help"))
    seconds = row.select_slider(
        t("walkthrough.pace"), PACES, value=2.0,
        format_func=lambda v: i18n.text(language, "walkthrough.pace_option", seconds=v), key="pace",
        label_visibility="collapsed", persist_state=KEEP, width=PACE_PX,
    )  # fmt: skip
    if st.session_state.playing:
        st.fragment(lambda: _advance(seconds), run_every=seconds)()
    else:
        s.next_step_at = None


def _advance(seconds: float) -> None:
    s = tab.current()
    if s.next_step_at is None:
        s.next_step_at = time.monotonic() + seconds
    if time.monotonic() >= s.next_step_at:
        s.next_step_at = time.monotonic() + seconds
        s.go_to(s.step, by=1, wrap=True)  # after the last step, the first again
        st.rerun(scope="app")


# The overview's questions


ASK = "ask"  # the link's parameter: which question, answered once when its page opens
PAGE = {
    "score": "explain", "look": "explain", "rope": "walkthrough", "output": "explain", "causal": "walkthrough",
    "sqrt_dk": "variants", "window": "variants",
}  # fmt: skip


def links(trace: Trace) -> None:
    """The questions as links, written with this case's own numbers (teach.questions says which the case has)."""
    for ask, question in teach.questions(trace).items():
        label = plain(i18n.render(lang(), question))
        st.page_link(f"pages/{PAGE[ask]}.py", label=label, icon=":material/help:", query_params={ASK: ask})


def answer(session: Session, params: MutableMapping[str, str]) -> None:
    """Set up the view a question's link asks for, once (its parameter taken out of the URL): the number to explain,
    or the step, or the mask alone (the walkthrough's step 7 then shows the outputs before and after it)."""
    ask = params.get(ASK)
    if ask not in PAGE:
        return
    params.pop(ASK)
    trace, o = traces.current(session), session.case.options
    head = (0,) if o.heads > 1 else ()  # a number's index starts with its head when there are several: the first
    if ask == "score":
        explain_room.pick("scores_raw", head + teach.seen_cell(trace))
    elif ask == "look":
        explain_room.pick("weights", head + teach.most_looked_at(trace))
    elif ask == "rope":
        session.go_to("rope" if o.rope_base is not None else "scores")
    elif ask == "output":
        d_out = len(o.w_out[0]) if o.w_out else session.case.d_v
        explain_room.pick("outputs", (_output_row(session.case.n), min(1, d_out - 1)))  # the article's output 3: 7.8
    elif ask == "window":
        session.choose(window=teach.QUESTION_WINDOW)  # the Variants page shows what it does, token by token
    elif ask == "causal":
        session.choose(mask="causal")  # one change: the softmax in use stays what the sidebar says
        session.go_to("outputs")  # step 7 by its name: on a RoPE case too, where it is the 8th of nine


def _output_row(n: int) -> int:
    return min(2, n - 1)  # output 3


def mask_effect(trace: Trace) -> None:
    """Step 7 under a causal mask: each output before and after the mask, everything else equal (the same softmax,
    scale and temperature as in use), so that what moves is the mask's doing alone."""
    s = tab.current()
    before = traces.variant_outputs(s, trace, with_options(trace.case, mask=None))
    after = traces.variant_outputs(s, trace, trace.case)  # the same path as before's: only the mask differs
    n = min(trace.case.n, 16)  # a real sentence's first rows: the mask's effect is largest there
    rows = {
        t("mask_effect.before"): [_row(before[i]) for i in range(n)],
        t("mask_effect.after"): [_row(after[i]) for i in range(n)],
        t("mask_effect.moved"): [t("mask_effect.yes") if (before[i] - after[i]).abs().max() > 0 else "" for i in
                                 range(n)],
    }  # fmt: skip
    st.subheader(t("mask_effect.header"))
    st.caption(t("mask_effect.same", softmax=t("softmax.rounded" if trace.case.options.weights_override is not None
                                                  else "softmax.exact")))  # fmt: skip
    st.dataframe(pd.DataFrame(rows, index=list(trace.case.tokens[:n])))


def _row(v) -> str:
    values = v.tolist()
    shown = ", ".join(f"{x:.4g}" for x in values[: teach.BY_HAND])
    return f"[{shown}{', …' if len(values) > teach.BY_HAND else ''}]"
