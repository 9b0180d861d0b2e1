"""Explain a number, the widgets: a picker per axis of the chosen tensor, and clicks on its heatmap that set them."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from .. import figures
from ..core import Trace
from .language import lang, t
from .pickers import KEEP

CHART = "explain_chart"  # the clickable heatmap's key: its selection is the click


def _picker_key(name: str, axis: int) -> str:
    return f"explain_{name}_{axis}"


def pick(name: str, index: tuple[int, ...]) -> None:
    """Explain this number of this tensor when the page is drawn next (a question's link, a click)."""
    st.session_state["explain_tensor"] = name
    for axis, i in enumerate(index):
        st.session_state[_picker_key(name, axis)] = i


def cell_picker(trace: Trace, name: str) -> tuple[int, ...]:
    """One picker per axis of the tensor (the head first when it has one): the index of the number explained."""
    index = []
    axes, shape = trace.axes(name), trace[name].shape
    for a, (kind, size, column) in enumerate(zip(axes, shape, st.columns(len(axes)), strict=True)):
        if kind == "head":
            names = [t("picker.head_n", head=i + 1) for i in range(size)]
        else:
            names = figures.labels(trace, kind, size)
        default = min(1, size - 1) if kind in figures.TOKEN_KINDS else 0  # Input 2: the article's Input 1 is all 0
        picked = column.selectbox(
            figures.axis(lang(), kind), range(size), index=default, format_func=names.__getitem__,
            key=_picker_key(name, a), persist_state=KEEP, placeholder=t("widget.placeholder"),
        )  # fmt: skip
        index.append(picked if picked is not None and picked < size else default)
    return tuple(index)


def split_head(trace: Trace, name: str, index: tuple[int, ...]) -> tuple[int | None, tuple[int, ...]]:
    """(the head, the rest of the index): the head is the index's first number when the tensor has a head axis."""
    return (index[0], index[1:]) if trace.axes(name)[0] == "head" else (None, index)


def view(trace: Trace, name: str, head: int | None) -> go.Figure:
    """The tensor's 2-D view (one head's), as the pages draw it: step 6's rows are (key, query) pairs."""
    if name == "weighted":
        return figures.weighted_heatmap(trace, head, lang())
    return figures.tensor_heatmap(trace, name, head, lang=lang())


def explained_figure(trace: Trace, name: str, index: tuple[int, ...]) -> go.Figure:
    """The tensor's 2-D view, clickable, with the picked cell outlined."""
    head, cell = split_head(trace, name, index)
    rows, cols = figures.flat_cells(trace, name, tuple((i,) for i in cell))
    return figures.highlight(figures.clickable(view(trace, name, head)), rows, cols)


def apply_click(trace: Trace, name: str) -> None:
    """A click on the heatmap picks its cell: the pickers are set before they are drawn (each click once)."""
    s = st.session_state
    chart = s.get(CHART) or {}
    points = [p for p in chart.get("selection", {}).get("points", []) if p.get("curve_number") == 1]
    if not points or points[0] == s.get("explain_click"):
        return
    s.explain_click = points[0]
    axes = trace.axes(name)
    row, col = divmod(points[0]["point_index"], trace[name].shape[-1])
    cell = figures.cell_at(trace, name, row, col)
    head = (s.get(_picker_key(name, 0), 0),) if axes[0] == "head" else ()
    for a, value in enumerate((*head, *cell)):
        s[_picker_key(name, a)] = value


def part_figure(trace: Trace, part: str, head: int | None, cells: tuple) -> go.Figure:
    """A tensor that took part in the explained number, as the same 2-D view (the same head), its cells outlined."""
    head = head if trace.axes(part)[0] == "head" else None
    return figures.highlight(view(trace, part, head), *figures.flat_cells(trace, part, cells))
