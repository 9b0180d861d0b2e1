"""The matrix editor, a Streamlit components v2 component (web/grid.js and web/grid.css, inline: no build, no CDN):
a native text input per cell, whose edits reach Python as typed, at once; and what Python sends it and reads back."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path

import streamlit as st

from ..base.case import MAX_ABS, case_to_dict
from ..base.i18n import render
from ..base.presets import ARTICLE_ROUNDED_WEIGHTS
from ..forward.compute import ROUNDED_WITHIN
from . import typed
from .language import lang, t
from .session import OPTION_GRIDS, Session, place

WEB = Path(__file__).with_name("web")
STEPS_JS = Path(__file__).parents[1] / "forward" / "web" / "steps.js"  # the eight steps in the browser
# What a component that previews a drag starts with, inline: the steps, then the preview that draws their tensors
PREVIEW_JS = STEPS_JS.read_text() + (WEB / "preview.js").read_text()
_editor = st.components.v2.component(
    "attention.matrix", css=(WEB / "grid.css").read_text(), js=PREVIEW_JS + (WEB / "grid.js").read_text()
)
_pace = st.components.v2.component("attention.pace", js=(WEB / "pace.js").read_text())
OPTION_NAMES = {v: k.removeprefix("where.") for k, v in OPTION_GRIDS.items()}  # rounded: weights_override
TOKEN_ROWS = ("x", "x_kv", "mask", "rounded")  # grids whose rows are tokens (x_kv's: the source sentence's)
LABELLED = {"x": "tokens", "x_kv": "tokens_kv"}  # grids whose token labels are edited beside their rows
KINDS = {"mask": "zero_one", "rounded": "nonnegative"}  # how far a drag may take a cell; others: any number
CELL = re.compile(r"(\d{1,5}),(\d{1,5})")  # an edit's cell, "row,column" from 0 (a forged client sends anything)
Window = tuple[int, int, int, int]  # the rows and columns an editor shows: top, left, bottom, right (not included)
# A case this small is computed in the browser while a number is dragged (steps.js: 0.6 ms at 16 × 16, every option;
# tests/e2e/test_scrub.py), and the server is asked on release; a bigger one drags as before, a run a step
PREVIEW_MAX = 16
PREVIEWED = {
    "x": "x",
    "x_kv": "x_kv",  # cross-attention's source sentence: steps.js makes keys and values from it
    "w_query": "w_query",
    "w_key": "w_key",
    "w_value": "w_value",
    "mask": "mask",
    "rounded": "weights_override",
    "relative_bias": "relative_bias",
    "w_latent": "w_latent",  # (steps.js computes the latent; its norm's one row is left to the server)
}  # an editor's grid: where in the case


def shown_name(name: str) -> str:
    """A grid's name as messages and accessible names give it, in the session's language: x, w_query, Mask."""
    return t(f"where.{OPTION_NAMES[name]}") if name in OPTION_NAMES else name


def draw(
    session: Session,
    name: str,
    key: str,
    window: Window | None = None,
    title: str = "",
    hint: bool = False,
    previewed: bool = False,
):
    """The editor for a grid of the session's inputs, or for a window of it (top, left, bottom, right), under its
    title (drawn by the editor: a heading element of the page's costs a live page's every rerun in the browser);
    `hint` adds the line that says how to use it (once a page); `previewed`: a drag redraws the charts in view in the
    browser (preview)."""
    # As JSON text: a dict is scanned key by key for dataframes to send apart (~3 ms an editor, every run)
    shown = data(session, name, window, hint) | {"title": title}
    if previewed and window is None:
        shown["preview"] = preview(session, name)
    payload = json.dumps(shown)
    _editor(key=key, data=payload, on_edits_change=_ignore, width="stretch")


def _ignore() -> None:
    """Edits are read by editors.read before anything is drawn (every way of sending them works alike)."""


def data(session: Session, name: str, window: Window | None = None, hint: bool = False) -> dict:
    """What the editor draws: the window's cells as text, its rows' and columns' names, the cells to outline, the
    session's message when it is about this grid, and the texts, from the catalogue, that it shows or reads out."""
    grid, (tokens, keys) = getattr(session.inputs, name), axis_tokens(session, name)
    top, left, bottom, right = window or (0, 0, len(grid), len(grid[0]))
    rows, cols = range(top, bottom), range(left, right)
    square = name in ("mask", "rounded")  # query rows, key columns: both named after tokens
    table = name == "relative_bias"  # T5's: a row per head, a column per bucket
    row_tokens = [typed.shown(tokens[i]) for i in rows] if tokens else None
    column_tokens = [typed.shown(keys[j]) for j in cols] if keys else None
    found = place(session.error)
    mine = found is not None and found[0] in (name, LABELLED.get(name, name))
    return {
        "name": shown_name(name),
        "shape": [len(grid), len(grid[0])],  # the whole grid's, for a pasted block
        "top": top,
        "left": left,
        "cells": [[typed.shown(grid[i][j]) for j in cols] for i in rows],
        "labels": row_tokens if name in LABELLED else None,  # x's and x_kv's token labels: beside their rows
        "row_names": row_tokens if square else [t("picker.head_n", head=i + 1) if table else str(i + 1) for i in rows],
        "column_names": column_tokens or [str(j if table else j + 1) for j in cols],  # T5's buckets count from 0
        "row_tokens": row_tokens,
        "column_tokens": column_tokens,
        "invalid": [[i, j] for i in rows for j in cols if not is_number(grid[i][j])],
        "error_at": [found[1], -1 if found[2] is None else found[2]] if mine else None,
        "message": render(lang(), session.error.message) if mine else "",
        "kind": KINDS.get(name, "real"),
        "limit": MAX_ABS,
        "text": _texts(name, hint, len(grid), len(grid[0])),
    }


def axis_tokens(session: Session, name: str) -> tuple[tuple | None, tuple | None]:
    """The token labels of a grid's rows and of its columns (None: numbered): x's rows are the tokens, x_kv's the
    source sentence's; a mask's and the rounded weights' columns are the keys (x_kv's tokens in cross-attention)."""
    i = session.inputs
    keys = i.tokens_kv if i.x_kv is not None else i.tokens
    rows = (i.tokens_kv if name == "x_kv" else i.tokens) if name in TOKEN_ROWS else None
    return rows, keys if name in ("mask", "rounded") else None


def preview_case(session: Session) -> dict | None:
    """The session's case as a drag's preview computes it in the browser (steps.js's attend): its numbers, with the
    article's rounded softmax and the distance past which it stops applying while it is chosen; None where the
    browser leaves a drag to the server (an error shown, a case past PREVIEW_MAX)."""
    case, inputs = session.case, session.inputs
    if session.error is not None or max(case.n, case.n_kv, case.d_in, case.d_k, case.d_v) > PREVIEW_MAX:
        return None
    numbers = case_to_dict(case)
    chosen = session.controls.use_rounded and case.options.heads == 1 and inputs.rounded == ARTICLE_ROUNDED_WEIGHTS
    if chosen:  # the article's rounded softmax, while it is within ROUNDED_WITHIN (session.py)
        numbers["options"] |= {
            "weights_override": [list(row) for row in inputs.rounded],
            "rounded_within": ROUNDED_WITHIN,
        }
    return numbers


def preview(session: Session, name: str) -> dict | None:
    """What a drag on this grid computes in the browser: the case (preview_case) and where the grid lies in it; None
    where the browser leaves it to the server (as preview_case, or a grid that does not reach the outputs now)."""
    case = session.case
    if name not in PREVIEWED or (numbers := preview_case(session)) is None:
        return None
    if name == "mask" and not isinstance(case.options.mask, tuple):
        return None
    if name == "rounded" and case.options.weights_override is None:
        return None  # the rounded softmax is not used: a drag of it changes no output
    return {"case": numbers, "grid": PREVIEWED[name]}


def is_number(value: object) -> bool:
    """Whether a cell holds a number (a finite one: a forged client can send NaN) rather than text."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _texts(name: str, hint: bool, n_rows: int, n_cols: int) -> dict[str, str]:
    """The editor's words in the session's language; {fields} in them are filled in by the editor (grid.js)."""
    shown = shown_name(name)
    fields = {"row": "{row}", "column": "{column}", "token": "{token}", "key": "{key}"}
    if name in LABELLED:  # the row's token label
        cell = t("editor.cell_token", name=shown, **fields)
    elif name in ("mask", "rounded"):  # the row's and the column's: a query and a key
        cell = t("editor.cell_tokens", name=shown, **fields)
    else:
        cell = t("editor.cell", name=shown, **fields)
    paste = {k: f"{{{k}}}" for k in ("row", "column", "height", "width", "rows", "columns")}
    return {
        "group": t("editor.group", name=shown, rows=n_rows, columns=n_cols),
        "cell": cell,
        "label": t("editor.label", name=shown, row="{row}"),
        "token": t("editor.token"),
        "paste": t("editor.paste_too_big", name=shown, **paste),
        "hint": t("editor.hint") if hint else "",
    }


def edits(value: object) -> tuple[dict[tuple[int, int], object], dict[int, object]]:
    """The cells and token labels an editor's state holds ({"cells": {"row,column": text}, "labels": {"row": text}}),
    all the edits made since it was drawn for this grid; anything a real editor never sends is left out."""
    if not isinstance(value, Mapping):
        return {}, {}
    cells, labels = value.get("cells"), value.get("labels")
    found = {}
    for where, text in cells.items() if isinstance(cells, Mapping) else ():
        if isinstance(where, str) and (m := CELL.fullmatch(where)):
            found[int(m[1]), int(m[2])] = text
    rows = labels.items() if isinstance(labels, Mapping) else ()
    return found, {int(row): text for row, text in rows if isinstance(row, str) and re.fullmatch(r"\d{1,5}", row)}


def pace(session: Session, key: str = "run_end") -> None:
    """The run's last element: when the browser draws it, every element before it is on screen, and an editor that
    is being dragged sends its next value (so each step is a whole run, never one interrupted by the next)."""
    session.runs += 1
    _pace(key=key, data={"run": session.runs})  # (not "pace": the player's)
