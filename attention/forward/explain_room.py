"""Explain a number, the widgets: a picker per axis of the chosen tensor, and clicks on a heatmap that set them (on
this page, or on the walkthrough's, which then lead here)."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from ..app import charts, clicks, tab, traces
from ..app.language import lang, t
from ..app.pickers import KEEP
from ..base.explain import explainable
from ..exercise import state as exercise
from ..show.heatmap import TOKEN_KINDS, axis, highlight, labels
from . import figures
from .compute import Trace
from .state import Explained

CHART = "explain_chart"  # the clickable heatmap's key


def _picker_key(name: str, axis: int) -> str:
    return f"explain_{name}_{axis}"


def pick(name: str, index: tuple[int, ...], tensor: bool = True) -> None:
    """Explain this number of this tensor when the page is drawn next (a question's link, a click); `tensor` False:
    the tensor's picker, already drawn in this run, shows it."""
    tab.current().keep(Explained())  # a link's number, not yet drawn, must not override this later choice
    if tensor:
        st.session_state["explain_tensor"] = name
    for number, i in enumerate(index):
        st.session_state[_picker_key(name, number)] = i


def tensor_picker(names: tuple[str, ...]) -> str:
    """The tensor whose number is explained: scores_raw first. Its value, when not set yet (or no longer a tensor
    of this case), is set through its key rather than given as a default: a widget given both (a link's or a
    click's value, and a default) makes Streamlit warn in the server's log."""
    key = "explain_tensor"
    if st.session_state.get(key) not in names:
        st.session_state[key] = "scores_raw" if "scores_raw" in names else names[0]
    return st.selectbox(
        t("explain.tensor"), names, key=key, persist_state=KEEP, placeholder=t("widget.placeholder")
    )  # fmt: skip


def cell_picker(trace: Trace, name: str) -> tuple[int, ...]:
    """One picker per axis of the tensor (the head first when it has one): the index of the number explained."""
    index = []
    axes, shape = trace.axes(name), trace[name].shape
    for a, (kind, size, column) in enumerate(zip(axes, shape, st.columns(len(axes)), strict=True)):
        if kind == "head":
            names = [t("picker.head_n", head=i + 1) for i in range(size)]
        else:
            names = labels(trace, kind, size)
        default = min(1, size - 1) if kind in TOKEN_KINDS else 0  # Input 2: the article's Input 1 is all 0
        key = _picker_key(name, a)
        if not isinstance(value := st.session_state.get(key), int) or not 0 <= value < size:
            st.session_state[key] = default  # set, not given as a default: see tensor_picker
        picked = column.selectbox(
            axis(lang(), kind), range(size), format_func=names.__getitem__, key=key, persist_state=KEEP,
            placeholder=t("widget.placeholder"),
        )  # fmt: skip
        index.append(picked if picked is not None and picked < size else default)
    return tuple(index)


def split_head(trace: Trace, name: str, index: tuple[int, ...]) -> tuple[int | None, tuple[int, ...]]:
    """(the head, the rest of the index): the head is the index's first number when the tensor has a head axis."""
    return (index[0], index[1:]) if trace.has_head(name) else (None, index)


def view(trace: Trace, name: str, head: int | None) -> go.Figure:
    """The tensor's 2-D view (one head's), as the pages draw it: step 6's rows are (key, query) pairs. A copy of the
    figure kept for the trace (at n = 1024 a new one was most of a rerun), for its cells to be outlined."""
    if name == "weighted":
        return go.Figure(charts.figure(figures.weighted_heatmap, trace, head))
    return go.Figure(charts.figure(figures.tensor_heatmap, trace, name, head))


def explained_figure(trace: Trace, name: str, index: tuple[int, ...]) -> go.Figure:
    """The tensor's 2-D view with the picked cell outlined."""
    head, cell = split_head(trace, name, index)
    rows, cols = figures.flat_cells(trace, name, tuple((i,) for i in cell))
    return highlight(view(trace, name, head), rows, cols)


def apply_click(trace: Trace, name: str) -> None:
    """A click on this page's heatmap picks its cell: the pickers are set before they are drawn (a click is a
    trigger: it counts in one run only)."""
    if (clicked := clicks.clicked(CHART)) is not None:
        head = st.session_state.get(_picker_key(name, 0), 0) if trace.has_head(name) else None
        pick_clicked(trace, name, head, clicked, tensor=False)


def pick_clicked(trace: Trace, name: str, head: int | None, clicked: tuple[int, int], tensor: bool = True) -> bool:
    """Explain a clicked cell of the tensor's 2-D view (of that head) next; a cell it does not have is left."""
    cell = figures.cell_at(trace, name, *clicked)
    shape = trace[name].shape[1:] if trace.has_head(name) else trace[name].shape
    if not all(i < size for i, size in zip(cell, shape, strict=True)):
        return False
    pick(name, (*(() if head is None else (head,)), *cell), tensor)
    return True


def go_explain(trace: Trace, name: str, head: int | None, clicked: tuple[int, int]) -> None:
    """From another page's heatmap: its clicked cell, explained on the Explain page; while an exercise is being
    made, hidden in it (or shown again) instead."""
    session = tab.current()
    if exercise.making(session):
        cell = figures.cell_at(trace, name, *clicked)
        exercise.toggle(session, traces.current(session), name, (*(() if head is None else (head,)), *cell))
        st.rerun()
    if name in explainable(trace) and pick_clicked(trace, name, head, clicked):
        st.switch_page("pages/explain.py")


def part_figure(trace: Trace, part: str, head: int | None, cells: tuple) -> go.Figure:
    """A tensor that took part in the explained number, as the same 2-D view (the same head), its cells outlined."""
    head = head if trace.has_head(part) else None
    return highlight(view(trace, part, head), *figures.flat_cells(trace, part, cells))
