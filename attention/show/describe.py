"""A heatmap in words for screen readers: its title, a summary (shape, axes, range, masked cells, zeros a mask made,
hidden cells), and its values (or each row's range) as a table; what every chart's text version says."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..base import numbers
from ..base.i18n import text

HIDDEN = "?"  # an exercise's hidden number, wherever it would be written

DESCRIBE_MAX_CELLS = 256  # a text version lists every value up to this many cells; past it, a summary per row


def describe(fig: go.Figure, lang: str = "en", label=str, table: bool = True) -> tuple[str, str, pd.DataFrame | None]:
    """A heatmap in words for screen readers: its title; a summary (shape, axes, range, masked cells); its values as
    a table, or past DESCRIBE_MAX_CELLS each row's range (None past DESCRIBE_MAX_CELLS rows too, or without `table`:
    the summary names the chart on every run, the table is made only when its text version is opened).

    `label` writes a row or column label (typed by the user) into the table. A big matrix drawn as an image carries
    its numbers' summary in layout.meta, since its numbers are not in the figure.
    """
    meta = fig.layout.meta
    row_kind, col_kind = fig.layout.yaxis.title.text or "", fig.layout.xaxis.title.text or ""
    title = fig.layout.title.text or f"{row_kind} × {col_kind}"
    words = {"title": title, "rows": meta["rows"], "cols": meta["cols"], "row_kind": row_kind, "col_kind": col_kind}
    summary = [text(lang, "a11y.shape", **words)]
    if meta["image"]:
        z, rows, cols, stats = None, None, None, meta["stats"]
    else:
        heat = fig.data[0]
        z = np.asarray(heat.z, dtype=np.float64)  # (rows, cols); NaN is a masked cell
        rows = unique([html.unescape(str(r)) for r in heat.y])
        cols = unique([html.unescape(str(c)) for c in heat.x])
        stats = stats_of(z, rows, cols)
    if stats["high"] is not None:
        low, high, (row, col) = numbers.cell(stats["low"]), numbers.cell(stats["high"]), stats["at"]
        summary.append(text(lang, "a11y.range", low=low, high=high, row=row, col=col, **words))
    masked, hidden = text(lang, "a11y.masked"), meta.get("hidden", 0)  # NaN in z: masked, or hidden ("?" its text)
    zeros = meta.get("masked_zero", 0)  # NaN in z too: a 0 a mask made ("0 (masked)" its text)
    if stats["masked"] > hidden + zeros:
        summary.append(text(lang, "a11y.masked_count", count=stats["masked"] - hidden - zeros, masked=masked))
    if zeros:
        summary.append(text(lang, "a11y.masked_zero_count", count=zeros, zero=text(lang, "a11y.masked_zero")))
    if hidden:
        summary.append(text(lang, "a11y.hidden_count", count=hidden))
    if z is not None and z.size <= DESCRIBE_MAX_CELLS:
        if not table:
            return title, " ".join(summary), None
        said = np.asarray(heat.text if heat.text is not None else np.full(z.shape, ""), dtype=object)
        zero = text(lang, "a11y.masked_zero")  # NaN: a hidden number, a masked 0, or a masked score
        empty = np.where(said == HIDDEN, HIDDEN, np.where(said == zero, zero, masked))
        cells = [
            [empty[i, j] if np.isnan(v) else numbers.cell(v) for j, v in enumerate(row)] for i, row in enumerate(z)
        ]
        table = pd.DataFrame(cells, index=pd.Index(map(label, rows), name=row_kind), columns=list(map(label, cols)))
        return title, " ".join(summary), table
    cells = meta["rows"] * meta["cols"]
    if "row_low" not in stats:  # even one line per row is too long to read
        summary.append(text(lang, "a11y.summary_only", cells=cells))
        return title, " ".join(summary), None
    summary.append(text(lang, "a11y.per_row", cells=cells))
    if not table:
        return title, " ".join(summary), None
    per_row = {
        text(lang, "a11y.row_min"): [masked if v is None else numbers.cell(v) for v in stats["row_low"]],
        text(lang, "a11y.row_max"): [masked if v is None else numbers.cell(v) for v in stats["row_high"]],
        text(lang, "a11y.row_argmax", col_kind=col_kind): [masked if c is None else label(c) for c in stats["row_at"]],
    }
    return title, " ".join(summary), pd.DataFrame(per_row, index=pd.Index(map(label, stats["rows"]), name=row_kind))


def stats_of(z: np.ndarray, rows: list[str], cols: list[str]) -> dict:
    """What a text version says of a matrix (NaN: masked): its range, where its largest number is, how many cells
    are masked, and (up to DESCRIBE_MAX_CELLS rows) each row's range and where its largest is; None: no number."""
    finite = np.isfinite(z)
    masked = int(z.size - np.count_nonzero(finite))
    highs, lows = (z, z) if not masked else (np.where(finite, z, -np.inf), np.where(finite, z, np.inf))
    stats = {"low": None, "high": None, "at": None, "masked": masked}
    if masked < z.size:
        i, j = np.unravel_index(highs.argmax(), z.shape)
        stats |= {"low": float(lows.min()), "high": float(z[i, j]), "at": [rows[i], cols[j]]}
    if len(rows) <= DESCRIBE_MAX_CELLS:
        some = finite.any(axis=1)
        lows, tops, where = lows.min(axis=1), highs.max(axis=1), highs.argmax(axis=1)
        stats |= {
            "rows": rows,
            "row_low": [float(v) if k else None for v, k in zip(lows, some, strict=True)],
            "row_high": [float(v) if k else None for v, k in zip(tops, some, strict=True)],
            "row_at": [cols[j] if k else None for j, k in zip(where, some, strict=True)],
        }
    return stats


def unique(names: list[str]) -> list[str]:
    """Labels made unique for a table's header (typed tokens may repeat): the 2nd "a" becomes "a (2)"."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out
