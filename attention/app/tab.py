"""This browser tab's session model, under one key of st.session_state (never shared between visitors)."""

from __future__ import annotations

import streamlit as st

from .session import Session

KEY = "session"


def current() -> Session | None:
    """The session model, or None before the frame's first run in this tab."""
    return st.session_state.get(KEY)
