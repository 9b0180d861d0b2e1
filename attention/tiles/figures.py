"""Pure builders for the Tiles page: the score matrix drawn as its tiles, a visit's table, the output converging."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from ..base.i18n import text
from ..base.numbers import approx
from ..forward.compute import Trace
from ..show.heatmap import HALO, HIGHLIGHT, heatmap, labels
from .compute import Tiled, Visit, estimates, step_7_heads

GRID = "rgba(255, 255, 255, 0.9)"  # the tiles' borders: white over Viridis/RdBu, under a dark line (below)
GRID_HALO = "rgba(0, 0, 0, 0.55)"
SKIPPED = "rgba(128, 128, 128, 0.55)"  # a skipped tile, greyed over its (masked) cells


def tile_scores(
    trace: Trace, blocks: tuple[int, int], skipped: tuple, head: int | None, tile: tuple[int, int], lang: str = "en"
) -> go.Figure:
    """The trace's score matrix (one head) in tiles of `blocks` (B_q, B_k): their borders, the `skipped` tiles
    greyed and `tile` (query tile, key tile) outlined. Plain values in, so that the page's cache keeps it. With
    cross-attention it is n × n_kv: the target's tokens down, the source's across, each by its own labels."""
    b_q, b_k = blocks
    scores = trace.view("scores", head)  # (n, n_kv)
    case = trace.case
    n, n_kv = case.n, case.n_kv
    title = text(lang, "tiles.scores_title_cross" if case.cross else "tiles.scores_title", b_q=b_q, b_k=b_k)
    fig = heatmap(scores, labels(trace, "query", n), list(case.key_tokens), "query", "key", title, lang)
    at = 0.5 if fig.layout.meta["image"] else -0.5  # an image's cells are at 1, 2, …; a heatmap's at 0, 1, …
    shapes = []
    for i, j in skipped:
        y0, x0 = i * b_q + at, j * b_k + at
        y1, x1 = min(y0 + b_q, n + at), min(x0 + b_k, n_kv + at)
        shapes.append(
            {"type": "rect", "x0": x0, "x1": x1, "y0": y0, "y1": y1, "fillcolor": SKIPPED, "line": {"width": 0}}
        )
    lines = [("x", k) for k in range(b_k, n_kv, b_k)] + [("y", q) for q in range(b_q, n, b_q)]
    for colour, width in ((GRID_HALO, 3), (GRID, 1)):
        for axis, at_line in lines:
            v = at_line + at
            line = (
                {"x0": v, "x1": v, "y0": at, "y1": n + at}
                if axis == "x"
                else {"x0": at, "x1": n_kv + at, "y0": v, "y1": v}
            )
            shapes.append({"type": "line", **line, "line": {"color": colour, "width": width}})
    i, j = tile
    y0, x0 = i * b_q + at, j * b_k + at
    box = {"type": "rect", "x0": x0, "x1": min(x0 + b_k, n_kv + at), "y0": y0, "y1": min(y0 + b_q, n + at)}
    shapes += [{**box, "line": {"color": HALO, "width": 6}}, {**box, "line": {"color": HIGHLIGHT, "width": 3}}]
    fig.layout.shapes = shapes
    return fig


def visit_table(trace: Trace, visit: Visit, head: int, lang: str = "en") -> pd.DataFrame:
    """One row per query of the tile: m before, the tile's largest score, m after, the rescaling, ℓ before and after."""
    t = {name: tensor[head] for name, tensor in visit.tensors.items()}
    tile_max = t["scores"].amax(dim=-1)
    columns = {
        text(lang, "tiles.col_m_before"): t["m_before"], text(lang, "tiles.col_tile_max"): tile_max,
        text(lang, "tiles.col_m"): t["m"], text(lang, "tiles.col_rescale"): t["rescale"],
        text(lang, "tiles.col_l_before"): t["l_before"], text(lang, "tiles.col_l"): t["l"],
    }  # fmt: skip
    index = pd.Index([trace.case.tokens[q] for q in visit.queries], name=text(lang, "tiles.col_query"))
    cells = {name: [approx(v) for v in values.tolist()] for name, values in columns.items()}
    return pd.DataFrame(cells, index=index, dtype=object)


def convergence(run: Tiled, trace: Trace, query: int, head: int, lang: str = "en") -> go.Figure:
    """Query's output so far (partial ÷ ℓ) after each key tile, one row each, and step 7's row under them."""
    so_far = estimates(run, query, head)  # (key tiles, d_v/h)
    reference = step_7_heads(trace)[head, query][None]  # (1, d_v/h)
    z = torch.cat([so_far, reference.to(so_far.dtype)]).numpy()
    rows = [text(lang, "tiles.after_tile", j=j + 1) for j in range(run.key_tiles)] + [text(lang, "tiles.step_7_row")]
    cols = labels(trace, "value dim", z.shape[1])
    title = text(lang, "tiles.converge_title", token=trace.case.tokens[query])
    return heatmap(np.asarray(z), rows, cols, "key_tile", "value dim", title, lang)
