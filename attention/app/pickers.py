"""Pickers shared by pages: the walkthrough's step (buttons, picker, player), a head, a token."""

from __future__ import annotations

import time

import streamlit as st

from ..base import i18n
from ..forward.compute import Trace
from . import tab
from .language import t

PACES = (0.5, 1.0, 2.0, 3.0, 5.0)  # seconds per step
PACE_PX = 220  # the pace slider beside the player's switch
KEEP = "session"  # page-local pickers keep their choice while another page is shown


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


def head_picker(trace: Trace, key: str) -> int | None:
    """Which head to show, when there are several."""
    h, language = trace.case.options.heads, tab.current().lang
    if h == 1:
        return None
    head = st.radio(
        t("picker.head"),
        range(h),
        format_func=lambda i: i18n.text(language, "picker.head_n", head=i + 1),
        key=key,
        horizontal=True,
        persist_state=KEEP,
    )
    return head if head is not None and head < h else 0


def token_picker(trace: Trace, label: str, key: str) -> int:
    """Pick a token by its label; Input 2 first when there is one (the article's Input 1 has weight 0 everywhere)."""
    n, index = trace.case.n, min(1, trace.case.n - 1)
    tokens = trace.case.tokens  # the widget keeps its format_func: it must not keep the trace (192 MiB at the limits)
    picked = st.selectbox(
        label, range(n), index=index, format_func=tokens.__getitem__, key=key, persist_state=KEEP,
        placeholder=t("widget.placeholder"),  # shown when its choice went away (fewer tokens): in the reader's words
    )  # fmt: skip
    return picked if picked is not None and picked < n else index
