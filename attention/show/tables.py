"""A recorded matrix as a table of its numbers, each written as short as it reads back (pure: pandas in, no st.*)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..base import numbers
from ..base.record import Record
from .describe import HIDDEN
from .heatmap import axis, labels

TABLE_MAX_CELLS = 4096  # tables beyond this are not readable anyway; the heatmap stays


def table(
    record: Record, name: str, head: int | None = None, rows: list[int] | None = None, lang: str = "en"
) -> pd.DataFrame | None:
    """A recorded 2-D tensor (or some of its rows) as a table with the same labels, each number written as short as
    it reads back (its own float32 or float64 value) and a masked score as −∞; None when it is too big to read.
    The cells are the written numbers (text): a Styler's formatting of each cell cost more than all the rest of a
    rerun at n = 64 (bench/profile.md)."""
    matrix = record.view(name, head)
    row_kind, col_kind = record.AXES[name]
    index = labels(record, row_kind, matrix.shape[0], lang)
    if rows is not None:
        matrix, index = matrix[rows], [index[i] for i in rows]
    if matrix.numel() > TABLE_MAX_CELLS:
        return None
    columns = labels(record, col_kind, matrix.shape[1], lang)
    index = pd.Index(index, name=axis(lang, row_kind))  # the row labels' header: a screen reader names the column
    cells = [[_table_number(v) for v in row] for row in matrix.numpy()]
    return pd.DataFrame(cells, index=index, columns=columns, dtype=object)


def _table_number(v: np.floating) -> str:
    """A table's number as short as it reads back as its own float32 or float64 (numpy's str of it is that
    shortest decimal: numbers.short_float32's, made in C), written by hand with the keyboard's minus; −∞ masked."""
    if math.isnan(v):
        return HIDDEN
    return "−∞" if v == -math.inf else numbers.written(float(str(v))).replace("−", "-")
