"""Pure figure and table builders: trace tensors in, Plotly figures and pandas tables out (no Streamlit here)."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from .core import AXES, Trace
from .files import to_lists
from .i18n import render, text

TEXT_MAX_SIDE = 16  # numbers are drawn in the cells up to 16×16: past that they cost seconds per edit in the browser
TABLE_MAX_CELLS = 4096  # tables beyond this are not readable anyway; the heatmap stays
SEQUENTIAL = "Viridis"  # both scales read for colour-blind viewers (viridis; red-blue diverging)
DIVERGING = "RdBu"

TOKEN_KINDS = {"token", "query", "key"}


def labels(trace: Trace, kind: str, size: int) -> list[str]:
    """Axis labels, as typed: the tokens for token axes, 1..size otherwise (heatmap() escapes them for Plotly)."""
    return list(trace.case.tokens) if kind in TOKEN_KINDS else [str(i + 1) for i in range(size)]


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
) -> go.Figure:
    """One matrix as a heatmap: rows top to bottom as printed, hover naming both axes, numbers in small ones."""
    z = np.asarray(z)
    z = z if z.dtype in (np.float32, np.float64) else z.astype(np.float64)  # float32 stays: half the bytes sent
    z = np.where(np.isneginf(z), np.nan, z)  # a masked score (-inf) shows as an empty cell
    finite = z[np.isfinite(z)]
    signed = finite.size and finite.min() < 0 < finite.max()
    small = max(z.shape) <= TEXT_MAX_SIDE
    trace = go.Heatmap(
        z=z,
        x=[html.escape(c, quote=False) for c in cols],  # Plotly renders some HTML in labels; quotes show as typed
        y=[html.escape(r, quote=False) for r in rows],
        colorscale=DIVERGING if signed else SEQUENTIAL,
        reversescale=bool(signed),  # red negative, blue positive
        zmid=0 if signed else None,
        texttemplate="%{z:.4~g}" if small else None,
        hovertemplate=_hover(lang, "hover.cell", row=axis(lang, row_kind), col=axis(lang, col_kind)),
        hoverongaps=False,
        xgap=1 if small else 0,
        ygap=1 if small else 0,
        colorbar={"thickness": 12},
    )
    height = 90 + 28 * min(len(rows), 20) if small else 420
    return go.Figure(
        trace,
        layout={
            "title": {"text": title, "font": {"size": 14}, "x": 0, "y": 0.99, "yref": "container", "yanchor": "top"},
            "height": height + 30,
            "margin": {"l": 10, "r": 10, "t": 90, "b": 10},
            "xaxis": {"type": "category", "side": "top", "title": {"text": axis(lang, col_kind)}},
            "yaxis": {"type": "category", "autorange": "reversed", "title": {"text": axis(lang, row_kind)}},
        },
    )


def _hover(lang: str, key: str, **words: str) -> str:
    """A hover template from the catalogue: {y}, {x} and {z} become Plotly's cell placeholders."""
    return text(lang, key, y="%{y}", x="%{x}", z="%{z:.7~g}", **words) + "<extra></extra>"


CLICKABLE_MAX_CELLS = 4096  # one invisible marker per cell: past this, cells are picked with the pickers only


def clickable(fig: go.Figure) -> go.Figure:
    """An invisible marker on every cell, since Plotly's selections skip heatmaps: point i is cell divmod(i, cols)."""
    heat = fig.data[0]
    rows, cols = list(heat.y), list(heat.x)
    if len(rows) * len(cols) > CLICKABLE_MAX_CELLS:
        return fig
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
    n_rows, n_cols = len(fig.data[0].y), len(fig.data[0].x)
    row_spans = [(-0.5, n_rows - 0.5)] if rows is None else [(i - 0.5, i + 0.5) for i in rows]
    col_spans = [(-0.5, n_cols - 0.5)] if cols is None else [(j - 0.5, j + 0.5) for j in cols]
    for y0, y1 in row_spans:
        for x0, x1 in col_spans:
            fig.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, line={"color": "#ff7f0e", "width": 3})
    return fig


def tensor(trace: Trace, name: str, head: int | None = None) -> torch.Tensor:
    """A recorded tensor, or one head of it."""
    return trace[name] if head is None else trace[name][head]


def tensor_heatmap(
    trace: Trace, name: str, head: int | None = None, title: str | None = None, lang: str = "en"
) -> go.Figure:
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
        lang,
    )


WEIGHTED_MAX_ROWS = 1024  # (key, query) rows drawn at once: past that, the first keys only


def weighted_heatmap(trace: Trace, head: int | None = None, lang: str = "en") -> go.Figure:
    """Step 6's (n_k, n_q, d_v) tensor flattened to rows (key j, query i): each block of rows is one key."""
    w = tensor(trace, "weighted", head)
    n_k, n_q, d_v = w.shape
    keys = max(1, min(n_k, WEIGHTED_MAX_ROWS // n_q))
    tokens = labels(trace, "token", n_k)
    rows = [f"k {tokens[j]} · q {tokens[i]}" for j in range(keys) for i in range(n_q)]
    title = "" if keys == n_k else text(lang, "chart.weighted_first", keys=keys, n=n_k)
    dims = labels(trace, "value dim", d_v)
    fig = heatmap(w[:keys].reshape(keys * n_q, d_v), rows, dims, "key · query", "value dim", title, lang)
    return fig.update_traces(hovertemplate=_hover(lang, "hover.weighted", col=axis(lang, "value dim")))


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


def broadcast_panels(trace: Trace, key: int, head: int | None = None, lang: str = "en") -> dict[str, go.Figure]:
    """Step 6 for one key j: value row j (1, d_v) times weight column j (n_q, 1) gives the slice (n_q, d_v)."""
    values, weights, weighted = (tensor(trace, n, head) for n in ("values", "weights", "weighted"))
    tokens = labels(trace, "token", trace.case.n)
    dims = labels(trace, "value dim", values.shape[-1])
    k = tokens[key]
    return {
        "value": heatmap(values[key : key + 1], [k], dims, "key", "value dim", f"values[{key}, None] · (1, d_v)", lang),
        "weight": heatmap(
            weights[:, key : key + 1], tokens, [k], "query", "key", f"weights.T[{key}, :, None] · (n_q, 1)", lang
        ),
        "product": heatmap(weighted[key], tokens, dims, "query", "value dim", f"weighted[{key}] · (n_q, d_v)", lang),
    }


def query_sum(trace: Trace, query: int, head: int | None = None, lang: str = "en") -> go.Figure:
    """Step 7 for one query i: the rows weighted[:, i] (one per key) that sum to output row i."""
    weighted = tensor(trace, "weighted", head)
    tokens = labels(trace, "token", trace.case.n)
    dims = labels(trace, "value dim", weighted.shape[-1])
    return heatmap(weighted[:, query], tokens, dims, "key", "value dim", f"weighted[:, {query}] · (n_k, d_v)", lang)


TEMPERATURES = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0)


def variant_table(outputs: dict[str, torch.Tensor], reference: torch.Tensor, lang: str = "en") -> pd.DataFrame:
    """Each variant's distance from the reference outputs."""
    rows = {name: (o - reference).abs() for name, o in outputs.items()}
    return pd.DataFrame(
        {
            text(lang, "table.largest_difference"): [float(d.max()) for d in rows.values()],
            text(lang, "table.mean_difference"): [float(d.mean()) for d in rows.values()],
        },
        index=[render(lang, name) for name in rows],  # the variants' names are catalogue Messages
    )


def key_sum(trace: Trace) -> str:
    """The name of step 7's sum over keys: per head, or (one head, w_out given) before the projection, or outputs."""
    return next(name for name in ("head_outputs", "concat", "outputs") if name in trace.step("outputs").tensors)


def step_times(traces: dict[str, Trace], lang: str = "en") -> pd.DataFrame:
    """Milliseconds per step on each device, side by side."""
    return pd.DataFrame(
        {device: [s.seconds * 1e3 for s in t.steps] for device, t in traces.items()},
        index=[f"{s.number} {text(lang, f'step.{s.name}.title')}" for s in next(iter(traces.values())).steps],
    )
