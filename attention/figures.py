"""Pure figure and table builders: trace tensors in, Plotly figures and pandas tables out (no Streamlit here)."""

from __future__ import annotations

import base64
import functools
import html
import struct
import zlib

import numpy as np
import pandas as pd
import plotly.colors
import plotly.graph_objects as go
import torch

from .core import AXES, Trace
from .files import to_lists

TEXT_MAX_SIDE = 16  # numbers are drawn in the cells up to 16×16: past that they cost seconds per edit in the browser
TABLE_MAX_CELLS = 4096  # tables beyond this are not readable anyway; the heatmap stays
SEQUENTIAL = "Viridis"  # both scales read for colour-blind viewers (viridis; red-blue diverging)
DIVERGING = "RdBu"

TOKEN_KINDS = {"token", "query", "key"}


def labels(trace: Trace, kind: str, size: int) -> list[str]:
    """Axis labels, as typed: the first `size` tokens for token axes, 1..size otherwise (heatmap() escapes them)."""
    return list(trace.case.tokens[:size]) if kind in TOKEN_KINDS else [str(i + 1) for i in range(size)]


def heatmap(
    z: torch.Tensor | np.ndarray, rows: list[str], cols: list[str], row_kind: str, col_kind: str, title: str = ""
) -> go.Figure:
    """One matrix as a heatmap: rows top to bottom as printed, hover naming both axes, numbers in small ones;
    a big one (past IMAGE_MIN_CELLS) as a PNG image with a colour bar, which the browser draws at once."""
    z = np.asarray(z)
    z = z if z.dtype in (np.float32, np.float64) else z.astype(np.float64)  # float32 stays: half the bytes sent
    z = np.where(np.isneginf(z), np.nan, z)  # a masked score (-inf) shows as an empty cell
    finite = z[np.isfinite(z)]
    signed = bool(finite.size and finite.min() < 0 < finite.max())
    colours = {"colorscale": DIVERGING if signed else SEQUENTIAL, "reversescale": signed}  # red negative, blue positive
    small = max(z.shape) <= TEXT_MAX_SIDE
    if z.size > IMAGE_MIN_CELLS:
        data, axes = _image(z, finite, signed, colours, rows, cols, f"{row_kind} %{{y}} · {col_kind} %{{x}}")
    else:
        data = go.Heatmap(
            z=z,
            x=[html.escape(c, quote=False) for c in cols],  # Plotly renders some HTML in labels; quotes show as typed
            y=[html.escape(r, quote=False) for r in rows],
            zmid=0 if signed else None,
            texttemplate="%{z:.4~g}" if small else None,
            hovertemplate=f"{row_kind} %{{y}} · {col_kind} %{{x}} = %{{z:.7~g}}<extra></extra>",
            hoverongaps=False,
            xgap=1 if small else 0,
            ygap=1 if small else 0,
            colorbar={"thickness": 12},
            **colours,
        )
        axes = {"type": "category"}, {"type": "category"}
    height = 90 + 28 * min(len(rows), 20) if small else 420
    return go.Figure(
        data,
        layout={
            "title": {"text": title, "font": {"size": 14}, "x": 0, "y": 0.99, "yref": "container", "yanchor": "top"},
            "height": height + 30,
            "margin": {"l": 10, "r": 10, "t": 90, "b": 10},
            "xaxis": {**axes[0], "side": "top", "title": {"text": col_kind}},
            "yaxis": {**axes[1], "autorange": "reversed", "title": {"text": row_kind}},
            "meta": {"rows": len(rows), "cols": len(cols), "image": z.size > IMAGE_MIN_CELLS},
        },
    )


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
    scaled = (z - low) / ((high - low) or 1.0) * (PALETTE_COLOURS - 1)
    indices = np.where(np.isnan(z), PALETTE_COLOURS, np.rint(np.nan_to_num(scaled))).astype(np.uint8)
    image = go.Image(
        source=_png(indices, _palette(colours["colorscale"], colours["reversescale"])),
        x0=1, dx=1, y0=1, dy=1, hovertemplate=f"{hover}<extra></extra>",
    )  # fmt: skip
    bar = go.Heatmap(
        z=[[low, high]], x=[1, 2], y=[1], opacity=0, hoverinfo="skip", colorbar={"thickness": 12}, **colours
    )
    return [image, bar], (_ticks(cols), _ticks(rows))


def _ticks(labels: list[str]) -> dict:
    at = np.linspace(0, len(labels) - 1, min(IMAGE_TICKS, len(labels))).round().astype(int)
    return {"tickvals": (at + 1).tolist(), "ticktext": [html.escape(labels[i], quote=False) for i in at]}


PALETTE_COLOURS = 255  # the colour scale in 255 steps; index 255 is transparent (a masked cell)


@functools.cache
def _palette(scale: str, reverse: bool) -> bytes:
    """The PNG palette: the Plotly colour scale sampled at PALETTE_COLOURS points, then one transparent entry."""
    colours = plotly.colors.sample_colorscale(scale, np.linspace(0, 1, PALETTE_COLOURS).tolist())
    rgb = [int(c) for colour in (colours[::-1] if reverse else colours) for c in colour[4:-1].split(",")]
    return bytes([*rgb, 0, 0, 0])


def _png(indices: np.ndarray, palette: bytes) -> str:
    """An 8-bit palette PNG (each row filtered with type 0), as a data URI."""
    height, width = indices.shape
    rows = np.hstack([np.zeros((height, 1), np.uint8), indices]).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)),
            chunk(b"PLTE", palette),
            chunk(b"tRNS", bytes([255] * PALETTE_COLOURS + [0])),
            chunk(b"IDAT", zlib.compress(rows, 1)),  # level 1: most of the size for a fraction of the time
            chunk(b"IEND", b""),
        )
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


CLICKABLE_MAX_CELLS = 4096  # one invisible marker per cell: past this, cells are picked with the pickers only


def clickable(fig: go.Figure) -> go.Figure:
    """An invisible marker on every cell, since Plotly's selections skip heatmaps: point i is cell divmod(i, cols)."""
    if fig.layout.meta["rows"] * fig.layout.meta["cols"] > CLICKABLE_MAX_CELLS:
        return fig
    rows, cols = list(fig.data[0].y), list(fig.data[0].x)
    fig.add_trace(
        go.Scatter(
            x=[c for _ in rows for c in cols],
            y=[r for r in rows for _ in cols],
            mode="markers",
            marker={"size": 18, "opacity": 0},
            hoverinfo="skip",
            showlegend=False,
        )
    )
    return fig


def highlight(fig: go.Figure, rows: tuple[int, ...] | None, cols: tuple[int, ...] | None) -> go.Figure:
    """Outline the rows and columns that took part in a number (None: all of them, one outline across)."""
    n_rows, n_cols, image = (fig.layout.meta[k] for k in ("rows", "cols", "image"))
    at = 0.5 if image else -0.5  # an image's cells are at 1, 2, …; a heatmap's categories at 0, 1, …
    row_spans = [(at, n_rows + at)] if rows is None else [(i + at, i + at + 1) for i in rows]
    col_spans = [(at, n_cols + at)] if cols is None else [(j + at, j + at + 1) for j in cols]
    for y0, y1 in row_spans:
        for x0, x1 in col_spans:
            fig.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, line={"color": "#ff7f0e", "width": 3})
    return fig


def tensor(trace: Trace, name: str, head: int | None = None) -> torch.Tensor:
    """A recorded tensor, or one head of it."""
    return trace[name] if head is None else trace[name][head]


def tensor_heatmap(trace: Trace, name: str, head: int | None = None, title: str | None = None) -> go.Figure:
    """A recorded 2-D tensor (or one head of it) with its rows and columns named after the tokens and dims."""
    t = tensor(trace, name, head)
    row_kind, col_kind = AXES[name]
    return heatmap(
        t,
        labels(trace, row_kind, t.shape[0]),
        labels(trace, col_kind, t.shape[1]),
        row_kind,
        col_kind,
        name if title is None else title,
    )


WEIGHTED_MAX_ROWS = 1024  # (key, query) rows drawn at once: past that, the first keys only


def weighted_heatmap(trace: Trace, head: int | None = None) -> go.Figure:
    """Step 6's (n_k, n_q, d_v) tensor flattened to rows (key j, query i): each block of rows is one key."""
    w = tensor(trace, "weighted", head)
    n_k, n_q, d_v = w.shape
    keys = max(1, min(n_k, WEIGHTED_MAX_ROWS // n_q))
    tokens = labels(trace, "token", n_k)
    rows = [f"k {tokens[j]} · q {tokens[i]}" for j in range(keys) for i in range(n_q)]
    title = "" if keys == n_k else f"keys 1-{keys} of {n_k}: the Broadcasting page shows any key"
    fig = heatmap(
        w[:keys].reshape(keys * n_q, d_v), rows, labels(trace, "value dim", d_v), "key · query", "value dim", title
    )
    return fig.update_traces(hovertemplate="%{y} · value dim %{x} = %{z:.7~g}<extra></extra>")


def table(trace: Trace, name: str, head: int | None = None, rows: list[int] | None = None) -> pd.DataFrame | None:
    """A recorded 2-D tensor (or some of its rows) as a table with the same labels, numbers as short as they
    round-trip; None when it is too big to read."""
    t = tensor(trace, name, head)
    row_kind, col_kind = AXES[name]
    index = labels(trace, row_kind, t.shape[0])
    if rows is not None:
        t, index = t[rows], [index[i] for i in rows]
    if t.numel() > TABLE_MAX_CELLS:
        return None
    columns = labels(trace, col_kind, t.shape[1])
    return pd.DataFrame(to_lists(t), index=pd.Index(index), columns=columns, dtype="float64")


def broadcast_panels(trace: Trace, key: int, head: int | None = None) -> dict[str, go.Figure]:
    """Step 6 for one key j: value row j (1, d_v) times weight column j (n_q, 1) gives the slice (n_q, d_v)."""
    values, weights, weighted = (tensor(trace, n, head) for n in ("values", "weights", "weighted"))
    tokens = labels(trace, "token", trace.case.n)
    dims = labels(trace, "value dim", values.shape[-1])
    k = tokens[key]
    return {
        "value": heatmap(values[key : key + 1], [k], dims, "key", "value dim", f"values[{key}, None] · (1, d_v)"),
        "weight": heatmap(
            weights[:, key : key + 1], tokens, [k], "query", "key", f"weights.T[{key}, :, None] · (n_q, 1)"
        ),
        "product": heatmap(weighted[key], tokens, dims, "query", "value dim", f"weighted[{key}] · (n_q, d_v)"),
    }


def query_sum(trace: Trace, query: int, head: int | None = None) -> go.Figure:
    """Step 7 for one query i: the rows weighted[:, i] (one per key) that sum to output row i."""
    weighted = tensor(trace, "weighted", head)
    tokens = labels(trace, "token", trace.case.n)
    dims = labels(trace, "value dim", weighted.shape[-1])
    return heatmap(weighted[:, query], tokens, dims, "key", "value dim", f"weighted[:, {query}] · (n_k, d_v)")


TEMPERATURES = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0)


def variant_table(outputs: dict[str, torch.Tensor], reference: torch.Tensor) -> pd.DataFrame:
    """Each variant's distance from the reference outputs."""
    rows = {name: (o - reference).abs() for name, o in outputs.items()}
    return pd.DataFrame(
        {
            "largest |Δ outputs|": [float(d.max()) for d in rows.values()],
            "mean |Δ outputs|": [float(d.mean()) for d in rows.values()],
        },
        index=list(rows),
    )


def key_sum(trace: Trace) -> str:
    """The name of step 7's sum over keys: per head, or (one head, w_out given) before the projection, or outputs."""
    return next(name for name in ("head_outputs", "concat", "outputs") if name in trace.step("outputs").tensors)


def step_times(traces: dict[str, Trace]) -> pd.DataFrame:
    """Milliseconds per step on each device, side by side."""
    return pd.DataFrame(
        {device: [s.seconds * 1e3 for s in t.steps] for device, t in traces.items()},
        index=[f"{s.number} {s.name}" for s in next(iter(traces.values())).steps],
    )
