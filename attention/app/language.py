"""The session's language, and the catalogue's text in it."""

from __future__ import annotations

import streamlit as st

from ..base import i18n
from . import tab


def lang() -> str:
    """The session's language; before its first run has made one, the browser's."""
    current = tab.current()
    return current.lang if current is not None else i18n.language_for(st.context.locale)


def t(key: str, /, **params) -> str:
    """The catalogue's text for `key` in the session's language."""
    return i18n.text(lang(), key, **params)
