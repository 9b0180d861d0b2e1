"""The model view's figure: every head's weights as one palette image (a tile a head, a layer a row, each tile under
a strip in its kind's colour), an invisible grid of a cell a head over it that names the head on hover and answers a
click; its text version a table of the heads. Pure: numpy, pandas, plotly."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.colors
import plotly.graph_objects as go

from ..base.i18n import text
from ..models.kinds import KINDS
from ..show.heatmap import SEQUENTIAL
from ..show.image import _png
from .compute import Whole

GAP = 1  # transparent pixels between tiles
SHADES = 240  # palette entries for the weights 0 … 1; then one per kind, then transparent (index 255)
OUTLINE = "#D62728"  # the head shown: red, apart from Viridis and the kinds' colours
TILE_PX = 44  # a layer's row, drawn (the maps of a 30-layer model in about 1,300 px)
# Okabe and Ito's colours (told apart by colour-blind viewers), none of them Viridis' own
KIND_COLOURS = {"induction": "#D55E00", "first": "#E69F00", "previous": "#56B4E9", "itself": "#009E73",
                "broad": "#999999", "mixed": "#CC79A7"}  # fmt: skip


def strip(n: int) -> int:
    """The kind strip's height above a tile of n rows, in pixels."""
    return max(1, n // 6)


def origin(n: int, layer: int, column: int, across: int | None = None) -> tuple[int, int]:
    """The pixel (row, column) of a tile's first weight, a tile n rows high and `across` wide (None: n, a sentence
    over itself; a cross-attention's: the source's tokens)."""
    return layer * (strip(n) + n + GAP) + strip(n), column * ((n if across is None else across) + GAP)


def grid(whole: Whole, ordered: list[list[int]]) -> np.ndarray:
    """Every head's weights (float32) in its tile, layer by layer, heads in the order given; NaN in the gaps and the
    strips, and where a causal mask hides a key."""
    layers, heads, m, n = whole.weights.shape
    top = origin(m, layers, 0)[0] - strip(m)
    out = np.full((top - GAP, heads * (n + GAP) - GAP), np.nan, np.float32)
    weights = whole.weights.numpy().astype(np.float32, copy=True)
    if whole.causal:
        weights[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = np.nan
    for layer in range(layers):
        for column, head in enumerate(ordered[layer]):
            row, col = origin(m, layer, column, n)
            out[row : row + m, col : col + n] = weights[layer, head]
    return out


def head_at(ordered: list[list[int]], cell: tuple[int, int]) -> tuple[int, int] | None:
    """The head (layer, head, from 0) of the overlay's cell (layer, column) a click picked; None off the grid."""
    layer, column = cell
    if layer < len(ordered) and column < len(ordered[layer]):
        return layer, ordered[layer][column]
    return None


def _palette() -> bytes:
    shades = plotly.colors.sample_colorscale(SEQUENTIAL, np.linspace(0, 1, SHADES).tolist(), colortype="tuple")
    colours = [tuple(round(c * 255) for c in colour) for colour in shades]
    colours += [tuple(int(KIND_COLOURS[k][i : i + 2], 16) for i in (1, 3, 5)) for k in KINDS]
    colours += [(0, 0, 0)] * (255 - len(colours)) + [(0, 0, 0)]  # unused, then transparent
    return bytes(c for colour in colours for c in colour)


def indices(whole: Whole, ordered: list[list[int]]) -> np.ndarray:
    """The image's palette indices: a weight's shade, a kind's colour in each tile's strip, 255 where nothing is."""
    z = grid(whole, ordered)
    out = np.full(z.shape, 255, np.uint8)
    seen = ~np.isnan(z)
    out[seen] = np.rint(np.clip(z[seen], 0, 1) * (SHADES - 1)).astype(np.uint8)
    m, n = whole.weights.shape[-2:]
    if whole.kinds is not None:
        for layer, found in enumerate(whole.kinds):
            for column, head in enumerate(ordered[layer]):
                row, col = origin(m, layer, column, n)
                out[row - strip(m) : row, col : col + n] = SHADES + KINDS.index(found[head].name)
    return out


def label(lang: str, whole: Whole, layer: int, head: int) -> str:
    """A head named for its hover and its text: layer, head (from 1) and, where measured, its kind."""
    name = text(lang, "whole.head", layer=layer + 1, head=head + 1)
    if whole.kinds is None:
        return name
    kind = whole.kinds[layer][head]
    return name + " · " + text(lang, f"real.kind.{kind.name}", share=f"{kind.share:.2f}")


def view(whole: Whole, ordered: list[list[int]], by: str, lang: str = "en", shown: tuple[int, int] | None = None):
    """Every head's map at once, layers down and heads across (by kind: each layer's heads grouped by kind); the
    head shown (layer, head, from 0) outlined."""
    layers, heads, m, n = whole.weights.shape
    band, width = strip(m) + m + GAP, n + GAP
    image = go.Image(
        source=_png(indices(whole, ordered), _palette()), x0=0.5 / width - 0.5, dx=1 / width,
        y0=0.5 / band - 0.5, dy=1 / band, hoverinfo="skip",
    )  # fmt: skip
    names = [[html.escape(label(lang, whole, layer, head)) for head in ordered[layer]] for layer in range(layers)]
    # over the image, a cell a head: its hover names it, a click on it opens it (clicks.py reads the first trace)
    overlay = go.Heatmap(
        z=np.zeros((layers, heads)), x=np.arange(heads), y=np.arange(layers), text=names, opacity=0,
        hovertemplate="%{text}<extra></extra>", showscale=False, colorscale=[[0, "#000"], [1, "#000"]],
    )  # fmt: skip
    columns = (
        {"tickvals": list(range(heads)), "ticktext": [str(h + 1) for h in range(heads)]}
        if by == "head"
        else {"showticklabels": False}
    )
    rows = {"tickvals": list(range(layers)), "ticktext": [str(layer + 1) for layer in range(layers)]}
    return go.Figure(
        data=[overlay, image],
        layout={
            "height": max(220, layers * TILE_PX + 70), "margin": {"l": 50, "r": 10, "t": 40, "b": 10},
            "xaxis": {"title": {"text": text(lang, "whole.heads_axis" if by == "head" else "whole.kind_axis")},
                      "side": "top", "showgrid": False, "zeroline": False, "range": [-0.5, heads - 0.5], **columns},
            "yaxis": {"title": {"text": text(lang, "whole.layers_axis")}, "autorange": "reversed", "showgrid": False,
                      "zeroline": False, "scaleanchor": "x", "scaleratio": band / width, **rows},
            "plot_bgcolor": "rgba(0,0,0,0)", "dragmode": False, "shapes": _outline(ordered, shown, band, width),
        },
    )  # fmt: skip


def _outline(ordered: list[list[int]], shown: tuple[int, int] | None, band: int, width: int) -> list[dict]:
    """A frame around the shown head's tile (its strip included), in the overlay's units (a cell a head)."""
    if shown is None or shown[0] >= len(ordered) or shown[1] not in ordered[shown[0]]:
        return []
    layer, column = shown[0], ordered[shown[0]].index(shown[1])
    return [{"type": "rect", "x0": column - 0.5, "x1": column + 0.5 - GAP / width, "y0": layer - 0.5,
             "y1": layer + 0.5 - GAP / band, "line": {"color": OUTLINE, "width": 2},
             "fillcolor": "rgba(0,0,0,0)"}]  # fmt: skip


def legend(lang: str, whole: Whole) -> list[tuple[str, str, int]]:
    """Each kind's colour, name and how many heads are of it."""
    if whole.kinds is None:
        return []
    counts = {k: sum(found.name == k for layer in whole.kinds for found in layer) for k in KINDS}
    return [(KIND_COLOURS[k], text(lang, f"whole.kind.{k}"), counts[k]) for k in KINDS if counts[k]]


def table(whole: Whole, lang: str = "en") -> pd.DataFrame:
    """The text version: a row a head, its kind and its measures (an induction score where measured)."""
    layers, heads = whole.weights.shape[:2]
    rows = []
    for layer in range(layers):
        for head in range(heads):
            row = {text(lang, "whole.col_layer"): layer + 1, text(lang, "whole.col_head"): head + 1}
            if whole.kinds is not None:
                k = whole.kinds[layer][head]
                row |= {text(lang, "whole.col_kind"): text(lang, f"whole.kind.{k.name}"),
                        text(lang, "whole.col_first"): k.first, text(lang, "whole.col_previous"): k.previous,
                        text(lang, "whole.col_itself"): k.itself, text(lang, "whole.col_broad"): k.broad}  # fmt: skip
                if k.induction is not None:
                    row[text(lang, "whole.col_induction")] = k.induction
            rows.append(row)
    return pd.DataFrame(rows)


def summary(whole: Whole, lang: str = "en") -> str:
    """The figure in one sentence for screen readers: its size and how many heads are of each kind."""
    layers, heads, m, n = whole.weights.shape
    said = text(lang, "whole.summary", layers=layers, heads=heads, n=n) if m == n else text(
        lang, "whole.summary_cross", layers=layers, heads=heads, m=m, n=n)  # fmt: skip
    kinds = ", ".join(f"{name}: {count}" for _, name, count in legend(lang, whole))
    return f"{said} {kinds}" if kinds else said
