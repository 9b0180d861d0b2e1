"""The models' parameters, loaded once per server process and shared by every session: parameters, not user data
(a sentence's run and its cases stay in the session)."""

from __future__ import annotations

import streamlit as st

from .. import models
from ..base.i18n import msg, render


@st.cache_resource(show_spinner=False, max_entries=2)
def _model(name: str) -> models.Model:
    return models.loaded(name)  # raises ModelMissing (not cached) when its package is not installed


def model(name: str, lang: str) -> models.Model:
    """The model, with a spinner in `lang` while it loads the first time (SmolLM2 dequantizes its 4-bit
    parameters: ~10 s)."""
    if models.install_message(name) is not None:  # says how to install it, at once
        return models.load(name)
    spec = models.SPECS[name]
    with st.spinner(render(lang, msg("real.loading", model=spec.title)), show_time=True):
        return _model(name)
