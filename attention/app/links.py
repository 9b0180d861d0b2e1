"""The link to a view: a tab's first run opens what its URL names (the case, the step, the language, and each
capability's view, from the registry), and every run keeps the URL a link to what is shown."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from ..base import files, i18n
from ..base.i18n import language_for
from . import loaded, origins, tab
from .origins.make import open_origin
from .registry import CAPABILITIES
from .session import Session

PARAMS = (*origins.PARAMS, *(name for c in CAPABILITIES for name in c.params), "lang")  # in a shared link


def link_token(session: Session) -> str | None:
    """The case as a link token; None when it is longer than a link may be (it is then shared as a file)."""
    case = session.case
    return session.derived.get(("link", case), lambda: files.case_to_link(case, files.MAX_LINK_CHARS))


def started() -> Session:
    """The session model, made on the tab's first run from the article, the browser's language and the link."""
    if tab.KEY not in st.session_state:
        session = Session.start(language_for(st.context.locale))
        session.loader = lambda name: loaded.model(name, session.lang)  # shared by the server's sessions
        open_link(session, {k: st.query_params.get(k) for k in PARAMS})
        st.session_state[tab.KEY] = session
    return st.session_state[tab.KEY]


def open_link(session: Session, params: Mapping[str, str | None]) -> None:
    """A shared link: its case and language, then each capability's view (the walkthrough's step, a tile)."""
    open_origin(session, params)
    for capability in CAPABILITIES:
        capability.opens(session, params)


def follow(session: Session) -> None:
    """A link made inside the app (a question's, a ready-made exercise's), set up once in the run it opens."""
    for capability in CAPABILITIES:
        capability.follows(session, st.query_params)


def keep(session: Session) -> None:
    """Keep the URL a link to this view: the case by what its origin names it with (a model's head by its model,
    sentence, layer and head; the article by nothing), else by its numbers (unless too long); each capability's view
    (the walkthrough's step, a tile); the language."""
    params, named = st.query_params, session.origin.link()
    token = link_token(session) if named is None else None
    values = {name: token if name == "case" else (named or {}).get(name) for name in origins.PARAMS}
    for capability in CAPABILITIES:  # after the case's: a trained case is named by the one it started from
        values |= capability.link(session)
    browser = language_for(st.context.locale)
    values["lang"] = session.lang if (session.lang, browser) != (i18n.DEFAULT,) * 2 else None
    for name, value in values.items():
        if value is None:
            params.pop(name, None)
        elif params.get(name) != value:
            params[name] = value
