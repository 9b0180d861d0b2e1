"""A recorded matrix as a table of its numbers, each written as short as it reads back (pure: pandas in, no st.*)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..base import numbers
from ..base.i18n import text
from ..base.record import Record
from .describe import HIDDEN
from .heatmap import axis, labels

TABLE_MAX_CELLS = 4096  # tables beyond this are not readable anyway; the heatmap stays


def table(
    record: Record,
    name: str,
    head: int | None = None,
    rows: list[int] | None = None,
    lang: str = "en",
    mask: np.ndarray | None = None,
) -> pd.DataFrame | None:
    """A recorded 2-D tensor (or some of its rows) as a table with the same labels, each number written as short as
    it reads back (its own float32 or float64 value), a masked score as −∞ and an exact 0 in a cell the mask took
    out (True in `mask`, as the heatmap's) as "0 (masked)"; None when it is too big to read.
    The cells are the written numbers (text): a Styler's formatting of each cell cost more than all the rest of a
    rerun at n = 64 (bench/profile.md)."""
    matrix = record.view(name, head)
    row_kind, col_kind = record.axes(name)[-2:]  # (a cross case's keys: x_kv's tokens)
    index = labels(record, row_kind, matrix.shape[0], lang)
    if rows is not None:
        matrix, index = matrix[rows], [index[i] for i in rows]
    if matrix.numel() > TABLE_MAX_CELLS:
        return None
    columns = labels(record, col_kind, matrix.shape[1], lang)
    index = pd.Index(index, name=axis(lang, row_kind))  # the row labels' header: a screen reader names the column
    cells = [[_table_number(v) for v in row] for row in matrix.numpy()]
    if mask is not None:  # a masked weight's 0 is the mask's doing, never like any other 0
        for i, row in enumerate(range(matrix.shape[0]) if rows is None else rows):
            for j, v in enumerate(matrix[i].tolist()):
                if mask[row, j] and v == 0:
                    cells[i][j] = text(lang, "a11y.masked_zero")
    return pd.DataFrame(cells, index=index, columns=columns, dtype=object)


def _table_number(v: np.floating) -> str:
    """A table's number as short as it reads back as its own float32 or float64 (numpy's str of it is that
    shortest decimal: numbers.short_float32's, made in C), written by hand with the keyboard's minus; −∞ masked."""
    if math.isnan(v):
        return HIDDEN
    return "−∞" if v == -math.inf else numbers.written(float(str(v))).replace("−", "-")
