"""Pickers shared by pages: the walkthrough's step (buttons, picker, player), a head, a token."""

from __future__ import annotations

import time

import streamlit as st

from .. import i18n
from ..core import STEP_NAMES, Trace
from . import session
from .language import t

PACES = (0.5, 1.0, 2.0, 3.0, 5.0)  # seconds per step
KEEP = "session"  # page-local pickers keep their choice while another page is shown


def step_picker() -> int:
    """Previous / next buttons and a picker over the steps; the step is the session's, so it survives a visit to
    another page and travels in a link."""
    s, last = session.current(), len(STEP_NAMES)
    language = s.lang
    st.session_state.step_picker = s.step
    previous, picker, following = st.columns([1, 8, 1], vertical_alignment="center")
    previous.button("◀", key="previous", on_click=lambda: s.go_to(s.step - 1), disabled=s.step == 1, shortcut="Left")
    following.button("▶", key="next", on_click=lambda: s.go_to(s.step + 1), disabled=s.step == last, shortcut="Right")
    picker.radio(
        t("walkthrough.step"),
        range(1, last + 1),
        format_func=lambda i: f"{i} {i18n.text(language, f'step.{STEP_NAMES[i - 1]}.short')}",
        key="step_picker",
        horizontal=True,
        label_visibility="collapsed",
        on_change=lambda: s.go_to(st.session_state.step_picker),
    )
    return s.step


def player() -> None:
    """Play / pause through the steps at a chosen pace (a timed fragment moves to the next step and reruns)."""
    s = session.current()
    language = s.lang
    play, pace = st.columns([1, 3], vertical_alignment="center")
    play.toggle(t("walkthrough.play"), key="playing", persist_state=KEEP, help=t("walkthrough.play_help"))
    seconds = pace.select_slider(
        t("walkthrough.pace"),
        PACES,
        value=2.0,
        format_func=lambda v: i18n.text(language, "walkthrough.pace_option", seconds=v),
        key="pace",
        label_visibility="collapsed",
        persist_state=KEEP,
    )
    if st.session_state.playing:
        st.fragment(lambda: _advance(seconds), run_every=seconds)()
    else:
        s.next_step_at = None


def _advance(seconds: float) -> None:
    s = session.current()
    if s.next_step_at is None:
        s.next_step_at = time.monotonic() + seconds
    if time.monotonic() >= s.next_step_at:
        s.next_step_at = time.monotonic() + seconds
        s.go_to(s.step % len(STEP_NAMES) + 1)  # after the last step, the first again
        st.rerun(scope="app")


def head_picker(trace: Trace, key: str) -> int | None:
    """Which head to show, when there are several."""
    h, language = trace.case.options.heads, session.current().lang
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
    picked = st.selectbox(label, range(n), index=index, format_func=tokens.__getitem__, key=key, persist_state=KEEP)
    return picked if picked is not None and picked < n else index
