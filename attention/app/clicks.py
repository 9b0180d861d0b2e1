"""Heatmaps that answer a click: Plotly's own click event (plotly_click, which names the cell under the pixel, its
centre or its edge) on a chart, sent to Python by a small components v2 component beside it (web/click.js).
Streamlit's chart selections skip heatmaps, which is why the event is taken from Plotly itself."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from .grid import WEB

_click = st.components.v2.component("attention.click", js=(WEB / "click.js").read_text())


def _key(chart: str) -> str:
    return f"{chart}_click"


def hook(chart: str) -> tuple[int, int] | None:
    """The component that hears the clicks on the chart keyed `chart` (drawn in the same container just before it);
    the cell (row, column of the chart's z) a click picked in this run, or None."""
    result = _click(key=_key(chart), on_cell_change=_ignore)
    return cell(result.get("cell") if isinstance(result, Mapping) else None)


def clicked(chart: str) -> tuple[int, int] | None:
    """The cell a click on that chart picked in this run, read before anything is drawn (pickers set from it)."""
    state = st.session_state.get(_key(chart))
    return cell(state.get("cell") if isinstance(state, Mapping) else None)


def cell(value: object) -> tuple[int, int] | None:
    """(row, column) from what the browser sent, if it is two whole numbers from 0 (a forged client sends anything)."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(type(v) is int and v >= 0 for v in value):
        return value[0], value[1]
    return None


def _ignore() -> None:
    """A click is read where the chart is drawn (hook) or before (clicked): no callback."""
