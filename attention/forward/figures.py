"""Pure builders for the forward pass's pages: a recorded tensor as a heatmap, step 6's broadcast and step 7's sum,
the variants' table, and where a part of an explanation lies in the 2-D view a figure draws (no st.* here)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from ..base.explain import Cells
from ..base.i18n import text
from ..show.heatmap import axis, heatmap, hover, labels
from .compute import Trace, option_tensors

MASKED_ZEROS = ("weights_exact", "weights")  # a masked score's weight is exactly 0: the mask's doing, said so


def masked_cells(trace: Trace) -> np.ndarray | None:
    """The (query, key) cells the case's mask or sliding window takes out (True), None without either: where an exact
    0 is the mask's (a weight, a score's gradient), which the heatmap writes "0 (masked)"."""
    if trace.case.options.mask is None and trace.case.options.window is None:
        return None
    allowed = option_tensors(trace.case, torch.device("cpu"))[0]  # (n, n) bool
    return None if allowed is None else (~allowed).numpy()


def tensor(trace: Trace, name: str, head: int | None = None) -> torch.Tensor:
    """A recorded tensor, or one head of it."""
    return trace[name] if head is None else trace[name][head]


def tensor_heatmap(
    trace: Trace, name: str, head: int | None = None, title: str | None = None, lang: str = "en"
) -> go.Figure:
    """A recorded 2-D tensor (or one head of it) with its rows and columns named after the tokens and dims."""
    matrix = tensor(trace, name, head)
    row_kind, col_kind = trace.axes(name)[-2:]  # a cross case's keys and values: x_kv's tokens
    return heatmap(
        matrix,
        labels(trace, row_kind, matrix.shape[0], lang),
        labels(trace, col_kind, matrix.shape[1], lang),
        row_kind,
        col_kind,
        name if title is None else title,
        lang,
        mask=masked_cells(trace) if name in MASKED_ZEROS else None,
    )


def difference_heatmap(trace: Trace, other: Trace, name: str, title: str, lang: str = "en") -> go.Figure:
    """A recorded tensor of one trace less the same tensor of another (the article's rounding against the exact)."""
    row_kind, col_kind = trace.axes(name)[-2:]
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
    k_tokens, q_tokens = labels(trace, "key", n_k), labels(trace, "query", n_q)  # cross-attention: x_kv's, x's
    rows = [f"k {k_tokens[j]} · q {q_tokens[i]}" for j, i in (_key_query(n_q, row) for row in range(keys * n_q))]
    title = "weighted" if keys == n_k else text(lang, "chart.weighted_first", keys=keys, n=n_k)
    dims = labels(trace, "value dim", d_v)
    z = w[:keys].reshape(keys * n_q, d_v)  # key-major: row _flat_row(n_q, j, i) is weighted[j, i]
    fig = heatmap(z, rows, dims, "key · query", "value dim", title, lang)
    if fig.layout.meta["image"]:  # an image's %{y} is a pixel row: heatmap()'s hover counts rows and columns
        return fig
    return fig.update_traces(hovertemplate=hover(lang, "hover.weighted", col=axis(lang, "value dim")))


def broadcast_panels(trace: Trace, key: int, head: int | None = None, lang: str = "en") -> dict[str, go.Figure]:
    """Step 6 for one key j: value row j (1, d_v) times weight column j (n_q, 1) gives the slice (n_q, d_v). The
    titles count j from 1, as the tokens' names do, and give the shapes with the case's sizes."""
    values, weights, weighted = (tensor(trace, n, head) for n in ("values", "weights", "weighted"))
    n_q, d_v = weights.shape[0], values.shape[-1]
    queries = labels(trace, "query", n_q)
    dims = labels(trace, "value dim", d_v)
    k, j = labels(trace, "key", trace.case.n_kv)[key], key + 1  # cross-attention: x_kv's token
    return {
        "value": heatmap(values[key : key + 1], [k], dims, "key", "value dim", f"values[j={j}] · (1, {d_v})", lang),
        "weight": heatmap(
            weights[:, key : key + 1], queries, [k], "query", "key", f"weights.T[j={j}] · ({n_q}, 1)", lang
        ),
        "product": heatmap(
            weighted[key], queries, dims, "query", "value dim", f"weighted[j={j}] · ({n_q}, {d_v})", lang
        ),
    }


def query_sum(trace: Trace, query: int, head: int | None = None, lang: str = "en") -> go.Figure:
    """Step 7 for one query i: the rows weighted[:, i] (one per key) that sum to output row i (i counted from 1)."""
    weighted = tensor(trace, "weighted", head)
    n_k, d_v = weighted.shape[0], weighted.shape[-1]
    keys = labels(trace, "key", n_k)  # cross-attention: x_kv's tokens
    dims = labels(trace, "value dim", d_v)
    title = f"weighted[:, i={query + 1}] · ({n_k}, {d_v})"
    return heatmap(weighted[:, query], keys, dims, "key", "value dim", title, lang)


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


# Today's models' variants beside plain attention (the variants page)

CURVE_MAX_POINTS = 4096  # a head's scores drawn as dots on the softcap's curve: n = 64's all, a bigger case's first


def variant_pair(plain: Trace, variant: Trace, name: str, head: int | None, titles: tuple[str, str], lang: str = "en"):
    """A recorded tensor of plain attention and of the variant (one head of it), as two heatmaps on one colour
    scale: the smallest and largest finite number of both (a masked score is −∞, an empty cell)."""
    pair = [tensor(trace, name, head if trace.has_head(name) else None) for trace in (plain, variant)]
    both = torch.cat([m.flatten() for m in pair]).double()
    finite = both[torch.isfinite(both)]
    span = (finite.min().item(), finite.max().item()) if finite.numel() else None
    row_kind, col_kind = plain.axes(name)[-2:]
    figures = []
    for trace, matrix, title in zip((plain, variant), pair, titles, strict=True):
        rows, cols = labels(trace, row_kind, matrix.shape[0], lang), labels(trace, col_kind, matrix.shape[1], lang)
        mask = masked_cells(trace) if name in MASKED_ZEROS else None
        figures.append(heatmap(matrix, rows, cols, row_kind, col_kind, title, lang, span=span, mask=mask))
    return tuple(figures)


def softcap_curve(cap: float, scores: torch.Tensor, lang: str = "en") -> go.Figure:
    """Gemma 2's cap: cap · tanh(s / cap) against the score s, beside s itself (no cap) and the lines ±cap it never
    crosses, with a head's own scores as dots on the curve."""
    s = scores[torch.isfinite(scores)].flatten()[:CURVE_MAX_POINTS].double().numpy()
    reach = 1.1 * max(2 * cap, float(np.abs(s).max()) if s.size else 0.0)
    grid = np.linspace(-reach, reach, 201)
    line = {"dash": "dot", "width": 1}
    data = [
        go.Scatter(x=grid, y=grid, mode="lines", name=text(lang, "variants.curve_none"), line=line),
        go.Scatter(x=grid, y=cap * np.tanh(grid / cap), mode="lines", name=f"{cap:g} · tanh(s / {cap:g})"),
        go.Scatter(x=s, y=cap * np.tanh(s / cap), mode="markers", name=text(lang, "variants.curve_scores"),
                   marker={"size": 7}),
    ]  # fmt: skip
    bounds = [{"type": "line", "x0": 0, "x1": 1, "xref": "paper", "y0": y, "y1": y, "line": line} for y in (-cap, cap)]
    return go.Figure(
        data,
        layout={
            "title": {"text": text(lang, "variants.curve_title", cap=cap)}, "height": 320, "template": "none",
            "margin": {"t": 40, "b": 40, "l": 50, "r": 10}, "shapes": bounds,
            "xaxis": {"title": {"text": text(lang, "variants.curve_before")}, "zeroline": True},
            "yaxis": {"title": {"text": text(lang, "variants.curve_after")}, "range": [-reach, reach]},
            "legend": {"orientation": "h", "y": -0.25},
        },
    )  # fmt: skip
