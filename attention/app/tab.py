"""This browser tab's session model, under one key of st.session_state (never shared between visitors)."""

from __future__ import annotations

import streamlit as st

from .. import tiles
from ..i18n import language_for
from . import compute, decoding_room, learning, loaded, origins
from .session import Session

KEY = "session"


def current() -> Session | None:
    """The session model, or None before the frame's first run in this tab."""
    return st.session_state.get(KEY)


def started() -> Session:
    """The session model, made on the tab's first run from the article, the browser's language and the link."""
    if KEY not in st.session_state:
        session = Session.start(language_for(st.context.locale))
        session.loader = lambda name: loaded.model(name, session.lang)  # shared by the server's sessions
        params = ("step", "lang", *origins.PARAMS, *tiles.PARAMS, *decoding_room.PARAMS)
        session.open_link({k: st.query_params.get(k) for k in params})
        linked = {k: st.query_params.get(k) for k in (*origins.PARAMS, *learning.PARAMS)}  # the backward's (issue 21)
        learning.open_link(session, linked, lambda case: compute.trace_of(session, case))
        st.session_state[KEY] = session
    return st.session_state[KEY]
