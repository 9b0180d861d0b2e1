"""Pickers shared by pages: a head, a token."""

from __future__ import annotations

import streamlit as st

from ..base import i18n
from ..forward.compute import Trace
from . import tab
from .language import t

KEEP = "session"  # page-local pickers keep their choice while another page is shown


def head_picker(trace: Trace, key: str, chosen: tuple[int, object] | None = None) -> int | None:
    """Which head to show, when there are several; a head chosen elsewhere (a model's head whose case is its layer's:
    (head, the choice it was made in), the origin's unless given) shown first each time it is chosen anew, the
    person's own pick kept between (an edit, another page)."""
    h, session = trace.case.options.heads, tab.current()
    if h == 1:
        return None
    chosen = session.origin.head(trace.case) if chosen is None else chosen
    if chosen is not None and chosen[0] < h and st.session_state.get(f"{key}_chosen") != chosen[1]:
        st.session_state[key] = chosen[0]
        st.session_state[f"{key}_chosen"] = chosen[1]
    language = session.lang
    head = st.radio(
        t("picker.head"), range(h), format_func=lambda i: i18n.text(language, "picker.head_n", head=i + 1), key=key,
        horizontal=True, persist_state=KEEP,
    )  # fmt: skip
    return head if head is not None and head < h else 0


def token_picker(trace: Trace, label: str, key: str, keys: bool = False) -> int:
    """Pick a token by its label (`keys`: a key's, of cross-attention's x_kv); Input 2 first when there is one (the
    article's Input 1 has weight 0 everywhere)."""
    tokens = trace.case.key_tokens if keys else trace.case.tokens  # the widget keeps its format_func: it must not
    # keep the trace (192 MiB at the limits)
    n, index = len(tokens), min(1, len(tokens) - 1)
    picked = st.selectbox(
        label, range(n), index=index, format_func=tokens.__getitem__, key=key, persist_state=KEEP,
        placeholder=t("widget.placeholder"),  # shown when its choice went away (fewer tokens): in the reader's words
    )  # fmt: skip
    return picked if picked is not None and picked < n else index
