"""A model for a session: from the process's one cache of loaded models (models.loaded: two at most, shared by every
session: parameters, not user data), with a progress bar of the tensors read while it loads the first time."""

from __future__ import annotations

import streamlit as st

from .. import models
from ..base.i18n import msg, render


def model(id: str, lang: str) -> models.Model:
    """The model; while it loads, "tensors read of total" under a progress bar in `lang`, gone once it is loaded."""
    bar = None

    def progress(read: int, total: int) -> None:
        nonlocal bar
        said = render(lang, msg("real.loading", model=models.title(id), read=read, total=total))
        if bar is None:
            bar = st.progress(0.0, text=said)
        bar.progress(read / max(total, 1), text=said)

    try:
        return models.loaded(id, progress)  # ModelMissing, CaseError: the caller says them
    finally:
        if bar is not None:
            bar.empty()
