"""The temperature's slider under its number box, a Streamlit components v2 component (web/slider.js, inline): while
it is dragged the browser computes the case at each temperature and redraws the charts in view (web/preview.js);
the value it is released at reaches Python as a one-run trigger, read with the sidebar's widgets."""

from __future__ import annotations

import json
from collections.abc import Mapping

import streamlit as st

from ..base.case import MAX_TEMPERATURE, MIN_TEMPERATURE
from .grid import PREVIEW_JS, WEB, preview_case
from .language import t
from .session import Session

KEY = "temperature_slider"
_slider = st.components.v2.component(
    "attention.slider", css=(WEB / "slider.css").read_text(), js=PREVIEW_JS + (WEB / "slider.js").read_text()
)


def released() -> object:
    """The value the slider was released at in this run, or None: a number as a float (JSON writes 2.0 as 2, which
    the number box, a float's, would refuse), anything else as the browser sent it (the sidebar refuses it)."""
    state = st.session_state.get(KEY)
    value = state.get("value") if isinstance(state, Mapping) else None
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def draw(session: Session) -> None:
    """The slider at the session's temperature, with the case a drag previews (none past the browser's sizes)."""
    shown = {"value": session.controls.temperature, "min": MIN_TEMPERATURE, "max": MAX_TEMPERATURE}
    shown |= {"label": t("sidebar.temperature_slider"), "preview": preview_case(session)}
    _slider(key=KEY, data=json.dumps(shown), on_value_change=_ignore, width="stretch")


def _ignore() -> None:
    """The value is read with the sidebar's widgets (released), before anything is drawn."""
