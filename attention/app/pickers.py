"""Pickers shared by pages: the walkthrough's step (buttons, picker, player), a head, a token."""

from __future__ import annotations

import time

import streamlit as st

from .. import i18n
from ..core import ROPE, Trace, step_names
from . import session
from .language import t

PACES = (0.5, 1.0, 2.0, 3.0, 5.0)  # seconds per step
PACE_PX = 220  # the pace slider beside the player's switch
KEEP = "session"  # page-local pickers keep their choice while another page is shown


def step_picker() -> int:
    """The steps to pick from, then one row with previous / next and the player (a row that stays a row on a
    phone, where columns would stack ◀ above the picker and ▶ below it). The step is the session's, so it survives
    a visit to another page and travels in a link."""
    s = session.current()
    names = step_names(s.case)  # with RoPE, its step after step 3 (numbered 3b here)
    last, language = len(names), s.lang
    s.go_to(s.step)  # a step past this case's last (a case without RoPE after one with it): its last
    st.session_state.step_picker = s.step
    st.radio(
        t("walkthrough.step"),
        range(1, last + 1),
        format_func=lambda i: f"{step_number(names, i)} {i18n.text(language, f'step.{names[i - 1]}.short')}",
        key="step_picker",
        horizontal=True,
        label_visibility="collapsed",
        on_change=lambda: s.go_to(st.session_state.step_picker),
    )
    row = st.container(horizontal=True, vertical_alignment="center")
    row.button("◀", key="previous", on_click=lambda: s.go_to(s.step - 1), disabled=s.step == 1, shortcut="Left")
    row.button("▶", key="next", on_click=lambda: s.go_to(s.step + 1), disabled=s.step == last, shortcut="Right")
    _player(row, s)
    return s.step


def step_number(names: tuple[str, ...], i: int) -> str:
    """A step's number as the article counts them: RoPE is part of step 3 (3b), the steps after it keep theirs."""
    rope = names.index(ROPE) + 1 if ROPE in names else None
    return f"{i - 1}b" if i == rope else str(i - 1 if rope is not None and i > rope else i)


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
    s = session.current()
    if s.next_step_at is None:
        s.next_step_at = time.monotonic() + seconds
    if time.monotonic() >= s.next_step_at:
        s.next_step_at = time.monotonic() + seconds
        s.go_to(s.step % len(step_names(s.case)) + 1)  # after the last step, the first again
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
    picked = st.selectbox(
        label, range(n), index=index, format_func=tokens.__getitem__, key=key, persist_state=KEEP,
        placeholder=t("widget.placeholder"),  # shown when its choice went away (fewer tokens): in the reader's words
    )  # fmt: skip
    return picked if picked is not None and picked < n else index
