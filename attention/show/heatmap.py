"""A matrix as a heatmap, one way everywhere: its labels, its colour scales (read by colour-blind viewers), its
numbers in the cells while they are readable, a big one as an image, and the outline of the cells that took part."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
import torch

from ..base.i18n import text
from ..base.record import Record
from . import describe
from .image import IMAGE_MIN_CELLS, png_image

TEXT_MAX_SIDE = 16  # numbers are drawn in the cells up to 16×16: past that they cost seconds per edit in the browser
# A cell's number is written at one size, and shown only where it fits its cell at the size the chart is drawn, in as
# many significant digits as fit (4 at most): the browser decides, since only it knows the drawn size
# (attention/app/web/fit.js; docs/layout.md). Plotly's own "auto" size shrinks the text to the cells' height alone:
# 5 px in a 10 × 10 chart in a third of a page, numbers over each other in one row of 13.
TEXT_PX = 12
LABEL_MAX = 14  # characters of a tick label: a longer one (a token, step 6's "k … · q …") is cut with "…"
MIN_PLOT_PX = 16  # the plot area automargin may shrink to (Plotly's 64 px drops the margins of a narrow column's
# chart, and its axis title then lies over its tick labels)


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


TOKEN_KINDS = {"token", "query", "key", "key token"}
KEY_KINDS = {"key", "key token"}  # axes that count the keys: cross-attention's x_kv's tokens, else x's


def labels(record: Record, kind: str, size: int, lang: str = "en") -> list[str]:
    """Axis labels, as typed: the first `size` tokens for token axes (a key axis: the keys' sentence's, x_kv's in
    cross-attention), 1..size otherwise (heatmap() escapes them); a bias feature (x's last column of ones, the
    weights' last row: a real encoder's biases) says so."""
    if kind in TOKEN_KINDS:
        return list((record.case.key_tokens if kind in KEY_KINDS else record.case.tokens)[:size])
    if kind == "sink":  # gpt-oss's sink: the one column of the weight a row gave it
        return [text(lang, "axis.sink")] * size
    out = [str(i + 1) for i in range(size)]
    if kind == "feature" and size == record.case.d_in and record.case.options.bias:  # the case says so: no guess
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
    mask: np.ndarray | None = None,
) -> go.Figure:
    """One matrix as a heatmap: rows top to bottom as printed, hover naming both axes, numbers in small ones;
    a big one (past IMAGE_MIN_CELLS) as a PNG image with a colour bar, which the browser draws at once. `span`,
    the smallest and largest number of several matrices shown side by side, gives them one colour scale. `mask`: the
    cells a mask took out (True); an exact 0 there (a masked weight, a masked score's gradient) is an empty cell
    written "0 (masked)", never like any other 0."""
    z = np.asarray(z)
    image = z.size > IMAGE_MIN_CELLS
    # float32 stays (half the bytes sent); an image (255 colours, 4-digit summaries) is made in float32 too: at the
    # limits a float64 matrix and its temporaries are 8 MiB each
    z = z.astype(np.float32 if image or z.dtype == np.float32 else np.float64)  # a copy: the trace's stays as it is
    masked = np.isneginf(z)
    hidden = np.isnan(z)  # an exercise's hidden number (exercise.py): an empty cell that says "?"
    cut = np.zeros(z.shape, bool) if mask is None else np.asarray(mask, bool) & (z == 0)  # a masked exact 0
    z[masked | cut] = np.nan  # a masked score (-inf) is an empty cell that says −∞ (below); a masked 0 says so
    finite = z[np.isfinite(z)] if span is None else np.asarray(span, dtype=z.dtype)  # what the colours span
    signed, colours = _colours(finite, span)
    small = max(z.shape) <= TEXT_MAX_SIDE
    words = {"row": axis(lang, row_kind), "col": axis(lang, col_kind)}
    if image:
        data, axes = png_image(z, finite, signed, colours, rows, cols, hover(lang, "hover.cell_image", **words))
    else:
        data, axes = _cells(z, masked, hidden, rows, cols, signed, colours, small, lang, words, cut)
    height = 90 + 28 * min(max(len(rows), 3), 20) if small else 420  # one or two rows: room for the colour bar
    return go.Figure(
        data,
        layout={
            "title": {"text": title, "font": {"size": 14}, "x": 0, "y": 0.99, "yref": "container", "yanchor": "top"}
            | {"automargin": True},  # the top axis's title and labels kept clear of the chart's title
            "height": height + 30 + (top := _top(cols, image)) - 90,
            "margin": {"l": 10, "r": 10, "t": top, "b": 10},
            "xaxis": {
                **axes[0],
                **_ticks(cols, image),
                "side": "top",
                "automargin": True,
                "title": {"text": words["col"]},
            },
            "yaxis": {**axes[1], **_ticks(rows, image), "autorange": "reversed", "automargin": True}
            | {"title": {"text": words["row"]}},
            "minreducedwidth": MIN_PLOT_PX,
            "minreducedheight": MIN_PLOT_PX,
            # Streamlit draws a chart in its own theme, over any template: Plotly's default one (7 KB of the 7.6 KB of a
            # 3 × 3 heatmap) was copied and written out for every chart of every run (bench/profile.md)
            "template": "none",
            "meta": {"rows": len(rows), "cols": len(cols), "image": image, "hidden": int(hidden.sum())}
            | {"masked_zero": int(cut.sum())}
            | ({"stats": describe.stats_of(z, describe.unique(rows), describe.unique(cols))} if image else {}),
        },
    )


def _ticks(names: list[str], image: bool) -> dict:
    """Tick labels cut to LABEL_MAX characters with "…" (the hover names the cell whole), by Plotly's labelalias: the
    ticks stay Plotly's own, thinned where they would overlap. An image's axes are numbered (png_image)."""
    long = [] if image else [n for n in dict.fromkeys(names) if len(n) > LABEL_MAX]
    if not long:
        return {}
    return {
        "labelalias": {html.escape(n, quote=False): html.escape(n[: LABEL_MAX - 1] + "…", quote=False) for n in long}
    }


def _top(cols: list[str], image: bool) -> int:
    """The top margin: the chart's title, and under it the column axis' title and labels, turned upright where they
    do not fit side by side (at a size only the browser knows). Plotly's automargin makes room for the axis alone,
    from the top edge, where the chart's title lies: so room for upright labels is kept wherever they may turn
    (Plotly turns them when they are wider than their columns: more than 160 px in all may not fit a column)."""
    longest = max((_text_px(c[:LABEL_MAX]) for c in cols), default=0)
    upright = not image and len(cols) * (longest + 6) > 160
    return max(90, 24 + 26 + longest + 12) if upright else 90


def _text_px(label: str) -> int:
    """A label's width at Plotly's 12 px tick font, wide enough: 7 px a Latin character, 12 a wide one (CJK)."""
    return sum(12 if ord(ch) > 0x2E80 else 7 for ch in label)


def _colours(finite: np.ndarray, span: tuple[float, float] | None) -> tuple[bool, dict]:
    """Whether the numbers are signed, and the colour scale for them: Viridis, or RdBu centred on zero (blue negative,
    red positive); with a shared `span`, its range, centred on zero when signed (as zmid=0 centres one matrix's)."""
    signed = bool(finite.size and finite.min() < 0 < finite.max())
    colours = {"colorscale": DIVERGING if signed else SEQUENTIAL, "reversescale": signed}
    if span is not None:
        top = float(np.abs(finite).max())
        colours |= {"zmin": -top, "zmax": top} if signed else {"zmin": span[0], "zmax": span[1]}
    return signed, colours


def _cells(
    z, masked, hidden, rows, cols, signed, colours, small, lang, words, cut
) -> tuple[go.Heatmap, tuple[dict, dict]]:
    """A matrix as Plotly heatmap cells, its numbers written in them while it is small."""
    # Plotly writes an empty cell's value as nothing (or "-Infinity"): with masked or hidden cells, the numbers are
    # written here, −∞ where a score is masked, ? where an exercise hides it, "0 (masked)" where a mask made the 0
    empty = masked.any() or hidden.any() or cut.any()
    written = [_written(z, masked, hidden, digits, cut, lang) for digits in (4, 7)] if empty else []
    said = {"text": written[0], "customdata": written[1]} if empty else {}
    cells = go.Heatmap(
        z=z,
        x=[html.escape(c, quote=False) for c in cols],  # Plotly renders some HTML in labels; quotes show as typed
        y=[html.escape(r, quote=False) for r in rows],
        zmid=0 if signed else None,
        texttemplate=("%{text}" if said else "%{z:.4~g}") if small else None,
        textfont={"size": TEXT_PX},
        hovertemplate=hover(lang, "hover.cell", z="%{customdata}" if said else None, **words),
        hoverongaps=bool(said),
        xgap=1 if small else 0,
        ygap=1 if small else 0,
        colorbar={"thickness": 12},
        **colours,
        **said,
    )
    return cells, ({"type": "category"}, {"type": "category"})


HIGHLIGHT, HALO = "#ff7f0e", "#1a1a1a"  # the outline of the cells that took part in a number, and its halo


def hover(lang: str, key: str, z: str | None = None, **words: str) -> str:
    """A hover template from the catalogue: {y}, {x} and {z} become Plotly's cell placeholders."""
    return text(lang, key, y="%{y}", x="%{x}", z=z or "%{z:.7~g}", **words) + "<extra></extra>"


def _written(z: np.ndarray, masked: np.ndarray, hidden: np.ndarray, digits: int, cut=None, lang="en") -> np.ndarray:
    """Each cell's value to `digits` significant digits as Plotly writes them (a true minus sign), −∞ if masked,
    ? if hidden, "0 (masked)" where a mask made it 0 (`cut`)."""
    said = np.array([[f"{v:.{digits}g}".replace("-", "−") for v in row] for row in z.tolist()], dtype=object)
    said[masked], said[hidden & ~masked] = "−∞", describe.HIDDEN
    if cut is not None:
        said[cut] = text(lang, "a11y.masked_zero")
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
