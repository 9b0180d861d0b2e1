"""The matrix editors (st.data_editor): each shows one of the session's matrices, and its edits go to the session."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from ..case import MAX_ABS, MAX_TOKEN_CHARS
from ..i18n import msg
from .choices import NUMBERS
from .language import t
from .state import Session

EDITABLE = (*NUMBERS, "w_out")  # the matrices a page edits cell by cell


def editor_key(session: Session, name: str) -> str:
    """The editor's widget key: new whenever the matrices are replaced whole (a preset, a link, a resize), so that
    edits made to the old grid never apply to the new one."""
    return f"editor_{name}_{session.generation}"


def read(session: Session) -> None:
    """Hand every editor's edits to the session, before anything is drawn in this run.

    An editor's state holds all its edits relative to the grid it was given, which already has the earlier ones:
    applying them again changes nothing, so this runs at the start of every run, on any page.
    """
    for name in EDITABLE:
        delta = st.session_state.get(editor_key(session, name))
        if delta is not None and getattr(session.inputs, name) is not None:
            _apply(session, name, delta)


def _apply(session: Session, name: str, delta: dict) -> None:
    """One editor's cell edits; keys a real grid never sends (a forged client might) are left out."""
    grid = getattr(session.inputs, name)
    columns = {str(j + 1): j for j in range(len(grid[0]))}
    for row, changes in delta.get("edited_rows", {}).items():
        i = int(row) if str(row).isdecimal() and int(row) < len(grid) else None
        for column, value in changes.items() if i is not None else ():
            if column == "token" and name == "x":
                session.relabel(i, value)
            elif str(column) in columns:
                session.edit(name, i, columns[str(column)], value)
    if delta.get("added_rows") or delta.get("deleted_rows"):
        session.notices.append(msg("notice.rows_fixed", name=name))


def matrix_editor(session: Session, name: str) -> None:
    """An editable matrix, cell by cell (x with its token labels); every edit recomputes all steps."""
    frame = _frame(session, name)
    columns = [c for c in frame.columns if c != "token"]
    config = {c: st.column_config.NumberColumn(c, min_value=-MAX_ABS, max_value=MAX_ABS) for c in columns}
    if name == "x":
        config["token"] = st.column_config.TextColumn(t("editor.token"), required=True, max_chars=MAX_TOKEN_CHARS)
    try:
        st.data_editor(frame, key=editor_key(session, name), num_rows="fixed", column_config=config)
    except (KeyError, IndexError, TypeError, ValueError):  # an edit Streamlit itself cannot apply (a forged client)
        session.generation += 1  # a fresh editor; the edits that named real cells are already in the inputs
        st.warning(t("warning.bad_edit", name=name))
        st.data_editor(frame, key=editor_key(session, name), num_rows="fixed", column_config=config)


def _frame(session: Session, name: str) -> pd.DataFrame:
    """The editor's table of a matrix, kept while the matrix is the same (x has 65,536 cells at the limits);
    data_editor copies it, so one frame serves every rerun."""
    grid, tokens = getattr(session.inputs, name), session.inputs.tokens if name == "x" else None

    def make() -> pd.DataFrame:
        columns = [str(j + 1) for j in range(len(grid[0]))]
        frame = pd.DataFrame([[_shown(v) for v in row] for row in grid], columns=columns, dtype="float64")
        frame.index = [str(i + 1) for i in range(len(grid))]
        if tokens is not None:
            frame.insert(0, "token", list(tokens))
        return frame

    return session.derived.get(("editor table", name, grid, tokens), make)


def _shown(value: object) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def w_out_switch(session: Session) -> None:
    """Add or remove the output projection w_out (d_v × d_v, the identity to start with), and edit it."""
    st.session_state.use_w_out = session.inputs.w_out is not None  # the inputs decide: a link or a file may bring one
    st.toggle(t("multi_head.w_out"), key="use_w_out", on_change=lambda: session.use_w_out(st.session_state.use_w_out))
    if session.inputs.w_out is not None:
        matrix_editor(session, "w_out")
