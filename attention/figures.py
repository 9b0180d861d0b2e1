"""Pure figure and table builders: trace tensors in, Plotly figures and pandas tables out (no Streamlit here)."""

from __future__ import annotations

import base64
import functools
import html
import math
import struct
import zlib

import numpy as np
import pandas as pd
import plotly.colors
import plotly.graph_objects as go
import torch

from . import numbers
from .core import AXES, STEP_NAMES, Step, Trace
from .explain import Cells
from .i18n import text
from .measured import Measured

TEXT_MAX_SIDE = 16  # numbers are drawn in the cells up to 16×16: past that they cost seconds per edit in the browser
TABLE_MAX_CELLS = 4096  # tables beyond this are not readable anyway; the heatmap stays
# Colour scales, chosen to read for colour-blind viewers (and in greyscale) on the light and the dark theme:
# - one-signed data: Viridis, perceptually uniform with lightness rising monotonically, so deuteranopes,
#   protanopes and tritanopes all see the order (cividis would do too; Viridis has more contrast per step).
# - signed data: RdBu reversed (blue negative, red positive), centred on zero with zmid=0. Its two arms differ in
#   hue AND lightness and red-blue is the pair the common red-green deficiencies keep (ColorBrewer marks RdBu
#   colour-blind safe); PuOr is as safe but its orange arm is harder to tell from Viridis' yellow on one page.
#   Its near-white middle means "about zero" in both themes, and every cell up to 16×16 also shows its number.
# tests/test_a11y.py checks that every builder's heatmaps use exactly these, and signed ones zmid=0.
SEQUENTIAL = "Viridis"  # both scales read for colour-blind viewers (viridis; red-blue diverging)
DIVERGING = "RdBu"

TOKEN_KINDS = {"token", "query", "key"}


def labels(trace: Trace, kind: str, size: int, lang: str = "en") -> list[str]:
    """Axis labels, as typed: the first `size` tokens for token axes, 1..size otherwise (heatmap() escapes them);
    a bias feature (x's last column of ones, the weights' last row: a real encoder's biases) says so."""
    if kind in TOKEN_KINDS:
        return list(trace.case.tokens[:size])
    out = [str(i + 1) for i in range(size)]
    if kind == "feature" and size == trace.case.d_in and trace.case.options.bias:  # the case says so: no guess
        out[-1] = text(lang, "axis.bias")
    return out


def axis(lang: str, kind: str) -> str:
    """An axis kind ("query dim", "key · query", …) in words of `lang`."""
    return text(lang, f"axis.{kind.replace(' · ', '_').replace(' ', '_')}")


def heatmap(
    z: torch.Tensor | np.ndarray,
    rows: list[str],
    cols: list[str],
    row_kind: str,
    col_kind: str,
    title: str = "",
    lang: str = "en",
    span: tuple[float, float] | None = None,
) -> go.Figure:
    """One matrix as a heatmap: rows top to bottom as printed, hover naming both axes, numbers in small ones;
    a big one (past IMAGE_MIN_CELLS) as a PNG image with a colour bar, which the browser draws at once. `span`,
    the smallest and largest number of several matrices shown side by side, gives them one colour scale."""
    z = np.asarray(z)
    image = z.size > IMAGE_MIN_CELLS
    # float32 stays (half the bytes sent); an image (255 colours, 4-digit summaries) is made in float32 too: at the
    # limits a float64 matrix and its temporaries are 8 MiB each
    z = z.astype(np.float32 if image or z.dtype == np.float32 else np.float64)  # a copy: the trace's stays as it is
    masked = np.isneginf(z)
    hidden = np.isnan(z)  # an exercise's hidden number (exercise.py): an empty cell that says "?"
    z[masked] = np.nan  # a masked score (-inf) is an empty cell that says −∞ (below)
    finite = z[np.isfinite(z)] if span is None else np.asarray(span, dtype=z.dtype)  # what the colours span
    signed, colours = _colours(finite, span)
    small = max(z.shape) <= TEXT_MAX_SIDE
    words = {"row": axis(lang, row_kind), "col": axis(lang, col_kind)}
    if image:
        data, axes = _image(z, finite, signed, colours, rows, cols, _hover(lang, "hover.cell_image", **words))
    else:
        data, axes = _cells(z, masked, hidden, rows, cols, signed, colours, small, lang, words)
    height = 90 + 28 * min(max(len(rows), 3), 20) if small else 420  # one or two rows: room for the colour bar
    return go.Figure(
        data,
        layout={
            "title": {"text": title, "font": {"size": 14}, "x": 0, "y": 0.99, "yref": "container", "yanchor": "top"},
            "height": height + 30,
            "margin": {"l": 10, "r": 10, "t": 90, "b": 10},
            "xaxis": {**axes[0], "side": "top", "automargin": True, "title": {"text": words["col"]}},
            "yaxis": {**axes[1], "autorange": "reversed", "automargin": True, "title": {"text": words["row"]}},
            # Streamlit draws a chart in its own theme, over any template: Plotly's default one (7 KB of the 7.6 KB of a
            # 3 × 3 heatmap) was copied and written out for every chart of every run (bench/profile.md)
            "template": "none",
            "meta": {"rows": len(rows), "cols": len(cols), "image": image, "hidden": int(hidden.sum())}
            | ({"stats": _stats(z, _unique(rows), _unique(cols))} if image else {}),  # for describe()
        },
    )


def _colours(finite: np.ndarray, span: tuple[float, float] | None) -> tuple[bool, dict]:
    """Whether the numbers are signed, and the colour scale for them: Viridis, or RdBu centred on zero (blue negative,
    red positive); with a shared `span`, its range, centred on zero when signed (as zmid=0 centres one matrix's)."""
    signed = bool(finite.size and finite.min() < 0 < finite.max())
    colours = {"colorscale": DIVERGING if signed else SEQUENTIAL, "reversescale": signed}
    if span is not None:
        top = float(np.abs(finite).max())
        colours |= {"zmin": -top, "zmax": top} if signed else {"zmin": span[0], "zmax": span[1]}
    return signed, colours


def _cells(z, masked, hidden, rows, cols, signed, colours, small, lang, words) -> tuple[go.Heatmap, tuple[dict, dict]]:
    """A matrix as Plotly heatmap cells, its numbers written in them while it is small."""
    # Plotly writes an empty cell's value as nothing (or "-Infinity"): with masked or hidden cells, the numbers are
    # written here, −∞ where a score is masked and ? where an exercise hides it, for the cells and their hover
    empty = masked.any() or hidden.any()
    said = {"text": _written(z, masked, hidden, 4), "customdata": _written(z, masked, hidden, 7)} if empty else {}
    cells = go.Heatmap(
        z=z,
        x=[html.escape(c, quote=False) for c in cols],  # Plotly renders some HTML in labels; quotes show as typed
        y=[html.escape(r, quote=False) for r in rows],
        zmid=0 if signed else None,
        texttemplate=("%{text}" if said else "%{z:.4~g}") if small else None,
        hovertemplate=_hover(lang, "hover.cell", z="%{customdata}" if said else None, **words),
        hoverongaps=bool(said),
        xgap=1 if small else 0,
        ygap=1 if small else 0,
        colorbar={"thickness": 12},
        **colours,
        **said,
    )
    return cells, ({"type": "category"}, {"type": "category"})


HIDDEN = "?"  # an exercise's hidden number, wherever it would be written
IMAGE_MIN_CELLS = 1 << 14  # past 128 × 128 cells: a PNG of one byte per cell (vs 4-8 bytes and a slow draw)
IMAGE_TICKS = 8  # tick labels along each axis of an image: more would overlap


def _image(z, finite, signed, colours, rows, cols, hover) -> tuple[list, tuple[dict, dict]]:
    """A big matrix as a palette PNG at one pixel per cell (x and y count cells from 1), plus an invisible 1 × 2
    heatmap that carries the colour bar. Hover names the cell; its number is on the Explain page."""
    if not finite.size:
        low, high = 0.0, 1.0
    elif signed:  # centred on zero, as zmid=0 does for a heatmap
        high = float(np.abs(finite).max())
        low = -high
    else:
        low, high = float(finite.min()), float(finite.max())
    top = PALETTE_COLOURS - 1
    if high > low:  # one temporary, changed in place
        scaled = z - low
        scaled /= high - low
        scaled *= top
    else:  # a constant: mid-scale
        scaled = np.full(z.shape, top / 2, np.float32)
    np.nan_to_num(scaled, copy=False)
    np.clip(np.rint(scaled, out=scaled), 0, top, out=scaled)
    indices = scaled.astype(np.uint8)
    indices[np.isnan(z)] = PALETTE_COLOURS
    image = go.Image(
        source=_png(indices, _palette(colours["colorscale"], colours["reversescale"])),
        x0=1, dx=1, y0=1, dy=1, hovertemplate=hover,
    )  # fmt: skip
    bar = go.Heatmap(
        z=[[low, high]], x=[1, 2], y=[1], zmid=0 if signed else None, opacity=0, hoverinfo="skip",
        colorbar={"thickness": 12}, showscale=bool(finite.size), **colours,
    )  # fmt: skip
    return [image, bar], (_ticks(cols), _ticks(rows))


def _ticks(labels: list[str]) -> dict:
    at = np.linspace(0, len(labels) - 1, min(IMAGE_TICKS, len(labels))).round().astype(int)
    return {"tickvals": (at + 1).tolist(), "ticktext": [html.escape(labels[i], quote=False) for i in at]}


PALETTE_COLOURS = 255  # the colour scale in 255 steps; index 255 is transparent (a masked cell)


@functools.cache
def _palette(scale: str, reverse: bool) -> bytes:
    """The PNG palette: the Plotly colour scale sampled at PALETTE_COLOURS points, then one transparent entry."""
    colours = plotly.colors.sample_colorscale(scale, np.linspace(0, 1, PALETTE_COLOURS).tolist(), colortype="tuple")
    return bytes([round(c * 255) for colour in (colours[::-1] if reverse else colours) for c in colour] + [0, 0, 0])


def _png(indices: np.ndarray, palette: bytes) -> str:
    """An 8-bit palette PNG (each row filtered with type 0), as a data URI."""
    height, width = indices.shape
    rows = np.hstack([np.zeros((height, 1), np.uint8), indices]).tobytes()
    # Compressed where it pays: a softmax's near-zero weights shrink 8× in 4 ms at n = 1024, but noisy scores only
    # by 15 % in 22 ms. A sixteenth of the rows tells which this is.
    sample = rows[: len(rows) // 16 + 1]
    level = 1 if len(zlib.compress(sample, 1)) < 0.75 * len(sample) else 0

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)),
            chunk(b"PLTE", palette),
            chunk(b"tRNS", bytes([255] * PALETTE_COLOURS + [0])),
            chunk(b"IDAT", zlib.compress(rows, level)),
            chunk(b"IEND", b""),
        )
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


HIGHLIGHT, HALO = "#ff7f0e", "#1a1a1a"  # the outline of the cells that took part in a number, and its halo


def _hover(lang: str, key: str, z: str | None = None, **words: str) -> str:
    """A hover template from the catalogue: {y}, {x} and {z} become Plotly's cell placeholders."""
    return text(lang, key, y="%{y}", x="%{x}", z=z or "%{z:.7~g}", **words) + "<extra></extra>"


def _written(z: np.ndarray, masked: np.ndarray, hidden: np.ndarray, digits: int) -> np.ndarray:
    """Each cell's value to `digits` significant digits as Plotly writes them (a true minus sign), −∞ if masked,
    ? if hidden."""
    said = np.array([[f"{v:.{digits}g}".replace("-", "−") for v in row] for row in z.tolist()], dtype=object)
    said[masked], said[hidden & ~masked] = "−∞", HIDDEN
    return said


def highlight(fig: go.Figure, rows: tuple[int, ...] | None, cols: tuple[int, ...] | None) -> go.Figure:
    """Outline the rows and columns that took part in a number (None: all of them, one outline across); those the
    figure does not draw (step 6's keys past the first, at big n) are left out."""
    n_rows, n_cols, image = (fig.layout.meta[k] for k in ("rows", "cols", "image"))
    at = 0.5 if image else -0.5  # an image's cells are at 1, 2, …; a heatmap's categories at 0, 1, …
    row_spans = [(at, n_rows + at)] if rows is None else [(i + at, i + at + 1) for i in rows if i < n_rows]
    col_spans = [(at, n_cols + at)] if cols is None else [(j + at, j + at + 1) for j in cols if j < n_cols]
    for y0, y1 in row_spans:
        for x0, x1 in col_spans:
            # Orange on a near-black halo: no one colour has 3:1 contrast against every Viridis/RdBu cell and both
            # themes' backgrounds (orange on teal is 1.5:1), but one of the pair always does.
            fig.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, line={"color": HALO, "width": 6})
            fig.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, line={"color": HIGHLIGHT, "width": 3})
    return fig


def tensor(trace: Trace, name: str, head: int | None = None) -> torch.Tensor:
    """A recorded tensor, or one head of it."""
    return trace[name] if head is None else trace[name][head]


def tensor_heatmap(
    trace: Trace, name: str, head: int | None = None, title: str | None = None, lang: str = "en"
) -> go.Figure:
    """A recorded 2-D tensor (or one head of it) with its rows and columns named after the tokens and dims."""
    matrix = tensor(trace, name, head)
    row_kind, col_kind = AXES[name]
    return heatmap(
        matrix,
        labels(trace, row_kind, matrix.shape[0], lang),
        labels(trace, col_kind, matrix.shape[1], lang),
        row_kind,
        col_kind,
        name if title is None else title,
        lang,
    )


def difference_heatmap(trace: Trace, other: Trace, name: str, title: str, lang: str = "en") -> go.Figure:
    """A recorded tensor of one trace less the same tensor of another (the article's rounding against the exact)."""
    row_kind, col_kind = AXES[name]
    rows, cols = trace[name].shape
    difference = trace[name] - other[name]
    return heatmap(
        difference, labels(trace, row_kind, rows), labels(trace, col_kind, cols), row_kind, col_kind, title, lang
    )


WEIGHTED_MAX_ROWS = 1024  # (key, query) rows drawn at once: past that, the first keys only


def flat_cells(trace: Trace, name: str, cells: tuple[Cells, ...]) -> tuple[Cells, Cells]:
    """A part's cells in its tensor's own coordinates (one entry per axis but the head, as explain's parts give
    them) as the (rows, cols) of the 2-D view the figures draw: step 6's "weighted" (key j, query i, value dim c)
    as rows j·n_q + i, the way weighted_heatmap draws it; every 2-D tensor as it is. None stays "all"."""
    shape = _own_shape(trace, name)
    if len(cells) != len(shape):
        raise ValueError(f"{name} has {len(shape)} axes besides the head, not {len(cells)}: {cells!r}")
    if name != "weighted":
        rows, cols = cells
        return rows, cols
    keys, queries, cols = cells
    if keys is None and queries is None:
        return None, cols
    n_k, n_q, _ = shape
    keys, queries = range(n_k) if keys is None else keys, range(n_q) if queries is None else queries
    return tuple(_flat_row(n_q, j, i) for j in keys for i in queries), cols


def cell_at(trace: Trace, name: str, row: int, col: int) -> tuple[int, ...]:
    """The inverse of flat_cells for one cell: a clicked (row, col) of the 2-D view as the tensor's own index,
    without the head: (key, query, value dim) for "weighted", (row, col) for every 2-D tensor."""
    if name != "weighted":
        return row, col
    return (*_key_query(_own_shape(trace, name)[1], row), col)


def _flat_row(n_q: int, key: int, query: int) -> int:
    """Step 6's 2-D view: row j·n_q + i is (key j, query i), key-major as reshape(n_k * n_q, d_v) lays it out."""
    return key * n_q + query


def _key_query(n_q: int, row: int) -> tuple[int, int]:
    """_flat_row's inverse: the (key, query) of a row of step 6's 2-D view."""
    return divmod(row, n_q)


def _own_shape(trace: Trace, name: str) -> tuple[int, ...]:
    """A recorded tensor's shape without its head axis (see Trace.axes)."""
    shape = tuple(trace[name].shape)
    return shape[1:] if trace.has_head(name) else shape


def weighted_heatmap(trace: Trace, head: int | None = None, lang: str = "en") -> go.Figure:
    """Step 6's (n_k, n_q, d_v) tensor flattened to rows (key j, query i) as flat_cells and cell_at number them:
    each block of rows is one key."""
    w = tensor(trace, "weighted", head)
    n_k, n_q, d_v = w.shape
    keys = max(1, min(n_k, WEIGHTED_MAX_ROWS // n_q))
    tokens = labels(trace, "token", n_k)
    rows = [f"k {tokens[j]} · q {tokens[i]}" for j, i in (_key_query(n_q, row) for row in range(keys * n_q))]
    title = "weighted" if keys == n_k else text(lang, "chart.weighted_first", keys=keys, n=n_k)
    dims = labels(trace, "value dim", d_v)
    z = w[:keys].reshape(keys * n_q, d_v)  # key-major: row _flat_row(n_q, j, i) is weighted[j, i]
    fig = heatmap(z, rows, dims, "key · query", "value dim", title, lang)
    if fig.layout.meta["image"]:  # an image's %{y} is a pixel row: heatmap()'s hover counts rows and columns
        return fig
    return fig.update_traces(hovertemplate=_hover(lang, "hover.weighted", col=axis(lang, "value dim")))


def table(
    trace: Trace, name: str, head: int | None = None, rows: list[int] | None = None, lang: str = "en"
) -> pd.DataFrame | None:
    """A recorded 2-D tensor (or some of its rows) as a table with the same labels, each number written as short as
    it reads back (its own float32 or float64 value) and a masked score as −∞; None when it is too big to read.
    The cells are the written numbers (text): a Styler's formatting of each cell cost more than all the rest of a
    rerun at n = 64 (bench/profile.md)."""
    matrix = tensor(trace, name, head)
    row_kind, col_kind = AXES[name]
    index = labels(trace, row_kind, matrix.shape[0], lang)
    if rows is not None:
        matrix, index = matrix[rows], [index[i] for i in rows]
    if matrix.numel() > TABLE_MAX_CELLS:
        return None
    columns = labels(trace, col_kind, matrix.shape[1], lang)
    index = pd.Index(index, name=axis(lang, row_kind))  # the row labels' header: a screen reader names the column
    cells = [[_table_number(v) for v in row] for row in matrix.numpy()]
    return pd.DataFrame(cells, index=index, columns=columns, dtype=object)


def _table_number(v: np.floating) -> str:
    """A table's number as short as it reads back as its own float32 or float64 (numpy's str of it is that
    shortest decimal: numbers.short_float32's, made in C), written by hand with the keyboard's minus; −∞ masked."""
    if math.isnan(v):
        return HIDDEN
    return "−∞" if v == -math.inf else numbers.written(float(str(v))).replace("−", "-")


def broadcast_panels(trace: Trace, key: int, head: int | None = None, lang: str = "en") -> dict[str, go.Figure]:
    """Step 6 for one key j: value row j (1, d_v) times weight column j (n_q, 1) gives the slice (n_q, d_v). The
    titles count j from 1, as the tokens' names do, and give the shapes with the case's sizes."""
    values, weights, weighted = (tensor(trace, n, head) for n in ("values", "weights", "weighted"))
    n_q, d_v = weights.shape[0], values.shape[-1]
    tokens = labels(trace, "token", trace.case.n)
    dims = labels(trace, "value dim", d_v)
    k, j = tokens[key], key + 1
    return {
        "value": heatmap(values[key : key + 1], [k], dims, "key", "value dim", f"values[j={j}] · (1, {d_v})", lang),
        "weight": heatmap(
            weights[:, key : key + 1], tokens, [k], "query", "key", f"weights.T[j={j}] · ({n_q}, 1)", lang
        ),
        "product": heatmap(
            weighted[key], tokens, dims, "query", "value dim", f"weighted[j={j}] · ({n_q}, {d_v})", lang
        ),
    }


def query_sum(trace: Trace, query: int, head: int | None = None, lang: str = "en") -> go.Figure:
    """Step 7 for one query i: the rows weighted[:, i] (one per key) that sum to output row i (i counted from 1)."""
    weighted = tensor(trace, "weighted", head)
    n_k, d_v = weighted.shape[0], weighted.shape[-1]
    tokens = labels(trace, "token", trace.case.n)
    dims = labels(trace, "value dim", d_v)
    title = f"weighted[:, i={query + 1}] · ({n_k}, {d_v})"
    return heatmap(weighted[:, query], tokens, dims, "key", "value dim", title, lang)


TEMPERATURES = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0)


def variant_table(outputs: dict[str, torch.Tensor], names: dict[str, str], reference: str, lang: str = "en"):
    """Each variant's distance from the reference variant's outputs, one row per variant id, named by `names`."""
    rows = {v: (o - outputs[reference]).abs() for v, o in outputs.items()}
    return pd.DataFrame(
        {
            text(lang, "table.largest_difference"): [float(d.max()) for d in rows.values()],
            text(lang, "table.mean_difference"): [float(d.mean()) for d in rows.values()],
        },
        index=[names[v] for v in rows],
    )


def key_sum(trace: Trace) -> str:
    """The name of step 7's sum over keys: per head, or (one head, w_out given) before the projection, or outputs."""
    return next(name for name in ("head_outputs", "concat", "outputs") if name in trace.step("outputs").tensors)


def step_times(steps: tuple[Step, ...], seconds: dict[str, tuple[float, ...]], lang: str = "en") -> pd.DataFrame:
    """Milliseconds per step on each device (its seconds by device name, in the steps' order), side by side."""
    return pd.DataFrame(
        {device: [s * 1e3 for s in times] for device, times in seconds.items()},
        index=[f"{s.label} {text(lang, f'step.{s.name}.title')}" for s in steps],
    )


def measured_times(measured: Measured, lang: str = "en") -> pd.DataFrame:
    """A benchmark file's milliseconds (measured.py), a row per size n: each step, the whole trace, fused attention."""
    steps = [f"{i} {text(lang, f'step.{name}.title')}" for i, name in enumerate(STEP_NAMES, start=1)]
    return pd.DataFrame(
        {
            **{step: [ms[i] for ms in measured.step_ms.values()] for i, step in enumerate(steps)},
            text(lang, "devices.trace_ms"): [measured.trace_ms.get(n) for n in measured.step_ms],
            text(lang, "devices.fused_ms"): [measured.fused_ms.get(n) for n in measured.step_ms],
        },
        index=pd.Index(list(measured.step_ms), name="n"),
    )


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
        rows = _unique([html.unescape(str(r)) for r in heat.y])
        cols = _unique([html.unescape(str(c)) for c in heat.x])
        stats = _stats(z, rows, cols)
    if stats["high"] is not None:
        low, high, (row, col) = numbers.cell(stats["low"]), numbers.cell(stats["high"]), stats["at"]
        summary.append(text(lang, "a11y.range", low=low, high=high, row=row, col=col, **words))
    masked, hidden = text(lang, "a11y.masked"), meta.get("hidden", 0)  # NaN in z: masked, or hidden ("?" its text)
    if stats["masked"] > hidden:
        summary.append(text(lang, "a11y.masked_count", count=stats["masked"] - hidden, masked=masked))
    if hidden:
        summary.append(text(lang, "a11y.hidden_count", count=hidden))
    if z is not None and z.size <= DESCRIBE_MAX_CELLS:
        if not table:
            return title, " ".join(summary), None
        said = np.asarray(heat.text if heat.text is not None else np.full(z.shape, ""), dtype=object)
        empty = np.where(said == HIDDEN, HIDDEN, masked)  # NaN: a hidden number, or a masked score
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


def _stats(z: np.ndarray, rows: list[str], cols: list[str]) -> dict:
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


def _unique(names: list[str]) -> list[str]:
    """Labels made unique for a table's header (typed tokens may repeat): the 2nd "a" becomes "a (2)"."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out
