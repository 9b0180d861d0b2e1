"""The matrix editors: every grid a person edits by hand (x with its token labels, cross-attention's x_kv with its own,
w_query, w_key, w_value, w_out, a custom mask, the rounded weights, T5's table, a latent's W_DKV and norm weights) in
grid.py's component, whose edits go to the session; a grid past EDITOR_MAX_CELLS is shown as an image instead, with
one picked cell editable."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from ..forward.steps import AXES
from ..show.heatmap import heatmap, highlight
from . import charts, clicks, grid
from .choices import GRIDS
from .language import lang, t
from .origins import make
from .session import Session

# Past this many cells (32 × 64) a grid is an image with one picked cell to edit: typing thousands of numbers by
# hand makes no sense, and drawing thousands of inputs costs every rerun (bench/browser.md: the editor's draw).
EDITOR_MAX_CELLS = 2048
KINDS = AXES | {"w_out": ("value dim", "output dim"), "mask": ("query", "key"), "rounded": ("query", "key"),
                "relative_bias": ("head", "bucket"), "x_kv": ("token", "feature")}  # fmt: skip


def editor_key(session: Session, name: str) -> str:
    """The editor's key: new whenever the matrices are replaced whole (a preset, a link, a resize), so that edits
    made to the old grid never apply to the new one."""
    return f"editor_{name}_{session.generation}"


def read(session: Session) -> None:
    """Hand every editor's edits to the session, before anything is drawn in this run.

    An editor's state holds all its edits since it was drawn for this grid, as typed: applying them again changes
    nothing, so this runs at the start of every run, on any page (a test sets the same state without a browser).
    """
    for name in GRIDS:
        value = st.session_state.get(editor_key(session, name))
        if isinstance(value, Mapping) and getattr(session.inputs, name) is not None:
            apply(session, name, value.get("edits"))


def apply(session: Session, name: str, value: object) -> None:
    """One editor's state: its cells (then checked once) and, for x and x_kv, their token labels."""
    cells, labels = grid.edits(value)
    session.edit_cells(name, cells)
    for row, label in labels.items() if name in grid.LABELLED else ():
        session.relabel(row, label, grid.LABELLED[name])


def is_big(session: Session, name: str) -> bool:
    matrix = getattr(session.inputs, name)
    return len(matrix) * len(matrix[0]) > EDITOR_MAX_CELLS


def matrix_editor(session: Session, name: str, title: str = "", hint: bool = False, previewed: bool = False) -> None:
    """A grid of the session's inputs to edit cell by cell, under its title (`hint`: with the line that says how;
    `previewed`: a drag redraws the charts in view in the browser); a big one as an image with a picked
    cell."""
    if is_big(session, name):
        _big(session, name, title)
    else:
        grid.draw(session, name, editor_key(session, name), title=title, hint=hint, previewed=previewed)


def _big(session: Session, name: str, title: str) -> None:
    """The grid as an image (hover names a cell); a click on it, or the row and column pickers, choose the cell
    that the editor below shows."""
    key, matrix = editor_key(session, name), getattr(session.inputs, name)
    if title:
        st.subheader(title)
    st.caption(t("editor.big", name=grid.shown_name(name), cells=len(matrix) * len(matrix[0]), limit=EDITOR_MAX_CELLS))
    chart = f"chart_{key}"
    if (picked := clicks.clicked(chart)) is not None and picked[0] < len(matrix) and picked[1] < len(matrix[0]):
        st.session_state[f"{key}_row"], st.session_state[f"{key}_column"] = picked[0] + 1, picked[1] + 1
    left, right = st.columns(2)
    row = left.number_input(t("editor.row"), 1, len(matrix), step=1, key=f"{key}_row")
    column = right.number_input(t("editor.column"), 1, len(matrix[0]), step=1, key=f"{key}_column")
    grid.draw(session, name, key, window=(row - 1, column - 1, row, column))
    fig = highlight(go.Figure(_figure(session, name)), (row - 1,), (column - 1,))  # a copy: it is kept
    charts.chart(fig, chart, clickable=True)


def _figure(session: Session, name: str) -> go.Figure:
    """The grid as typed, as a heatmap (an image, at this size): text cells are empty; kept while the grid is."""
    matrix, (rows, columns) = getattr(session.inputs, name), grid.axis_tokens(session, name)

    def make() -> go.Figure:
        numbers = np.array([[v if grid.is_number(v) else np.nan for v in row] for row in matrix], dtype=np.float32)
        row_kind, col_kind = KINDS[name]
        if name in ("w_key", "w_value") and session.inputs.w_latent is not None:  # W_UK, W_UV: the latent's rows
            row_kind = "latent dim"
        labels = [[str(tokens[i]) if tokens else str(i + 1) for i in range(size)]
                  for tokens, size in ((rows, len(matrix)), (columns, len(matrix[0])))]  # fmt: skip
        return heatmap(numbers, *labels, row_kind, col_kind, grid.shown_name(name), lang())

    return session.derived.get(("typed figure", name, matrix, rows, columns, lang()), make)


def uploader(session: Session) -> None:
    """A case file, for the numbers no one types by hand (the same as the share panel's)."""
    st.file_uploader(t("editor.upload"), type=["json"], key="inputs_upload", on_change=lambda: _import(session))


def _import(session: Session) -> None:
    upload = st.session_state.get("inputs_upload")
    if upload is not None:
        make.import_file(session, upload.name, upload.getvalue())


def w_out_switch(session: Session) -> None:
    """Add or remove the output projection w_out (d_v × d_v, the identity to start with), and edit it."""
    # the inputs decide (a link or a file may bring one); the default too, should the browser draw it afresh
    on = st.session_state.use_w_out = session.inputs.w_out is not None
    st.toggle(
        t("multi_head.w_out"), on, key="use_w_out", on_change=lambda: session.use_w_out(st.session_state.use_w_out)
    )
    if session.inputs.w_out is not None:
        matrix_editor(session, "w_out")


def pace(session: Session, live: bool = False) -> None:
    """The run's last element (or a live page's fragment's), by which a dragged editor paces itself (grid.pace)."""
    grid.pace(session, "run_end_live" if live else "run_end")
