"""Charts: a Plotly figure drawn full width, saved from its toolbar as PNG or SVG, named for screen readers by its
summary, with its text version under it; and figures kept in the session's cache while their trace is the same."""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go
import streamlit as st

from ..forward.compute import Trace
from ..forward.figures import MASKED_ZEROS, masked_cells
from ..show import describe, tables
from . import clicks, tab
from .grid import WEB
from .language import lang, t
from .text import plain

# Cell numbers are fitted in the browser, where the drawn size is known (web/fit.js): a column's width, the window's
# and a phone's are the browser's alone (Streamlit tells the server none of them), and Plotly writes a heatmap's
# texts whatever its cells' size (and has no "hide what does not fit" for heatmaps, as it has for bars).
_fit = st.components.v2.component("attention.fit", js=(WEB / "fit.js").read_text())
FIT_KEY = "fit_numbers"  # its element, hidden by the frame's CSS (it draws nothing)


def figure(make: Callable[..., go.Figure], trace: Trace, *args, **kwargs) -> go.Figure:
    """make(trace, *args, **kwargs, lang=…), kept while the case and the language are the same: a rerun that
    changes no number draws without rebuilding (a trace among the arguments counts as its case). Not to be changed
    afterwards (figures.highlight makes its own)."""
    parts = tuple(a.case if isinstance(a, Trace) else a for a in args)
    hidden = trace.hidden  # an exercise's hidden cells (exercise.redacted): its figures are not the trace's
    key = ("figure", make.__name__, trace.case, trace.device, hidden, parts, tuple(sorted(kwargs.items())), lang())
    return tab.current().derived.get(key, lambda: make(trace, *args, **kwargs, lang=lang()))


def chart(
    fig: go.Figure, key: str, where=st, clickable: bool = False, shows: tuple[str, int | None] | None = None
) -> tuple[int, int] | None:
    """A Plotly chart (in `where`, a column say), full width, named for screen readers by its summary; under it,
    its text version, made only while it is open (closed, it costs one element a chart). A clickable one returns
    the cell (row, column of its z) a click picked in this run (clicks.py), or None. `shows`: the session's trace
    tensor (and head) it draws, which a drag redraws in the browser (web/preview.js) before the release's run."""
    if shows is not None and "tensor" not in (meta := fig.layout.meta or {}):  # (a kept figure is tagged once)
        fig.layout.meta = meta | {"tensor": shows[0], "head": shows[1]}
    config = {
        "toImageButtonOptions": {"format": tab.current().image_format, "filename": key.removeprefix("chart_")},
        "displaylogo": False,
    } | _plotly_locale()
    title, summary, _ = _described(fig, table=False)
    box = where.container(gap=None) if clickable else where  # the chart and the component that hears its clicks
    box.plotly_chart(fig, key=key, width="stretch", config=config, alt=summary)
    picked = None
    if clickable:
        with box:
            picked = clicks.hook(key)
    # In the current container, not in `where`: under a chart in a column it lands under the row of columns, since a
    # column is too narrow for the table, which would scroll sideways where the keyboard cannot reach it.
    version = st.expander(t("a11y.text_version", title=title), key=f"{key}_text", on_change="rerun")
    if version.open:
        version.text(summary)  # plain text: labels are typed by the user
        if (table := _described(fig, table=True)[2]) is not None:
            version.table(table, alt=t("a11y.table_alt", title=title, row_kind=table.index.name or ""))
    return picked


def fit_numbers() -> None:
    """Once a run, before the page: the browser's fitter of every heatmap's cell numbers to the drawn size (it
    installs itself once a document; every chart drawn afterwards is fitted after each drawing)."""
    _fit(key=FIT_KEY)


def table(trace: Trace, name: str, head: int | None = None):
    """tables.table of a recorded tensor, kept like a figure (a step shown again does not rebuild its tables)."""
    key = ("table", trace.case, trace.device, trace.hidden, name, head, lang())
    mask = lambda: masked_cells(trace) if name in MASKED_ZEROS else None  # noqa: E731 (made once, with the table)
    return tab.current().derived.get(key, lambda: tables.table(trace, name, head, lang=lang(), mask=mask()))


SIDE_MAX_COLUMNS = 3  # a table's columns that a side column (two fifths of a wide page) shows whole


def fits_beside(table) -> bool:
    """Whether a table of numbers fits a side column whole (a 10 × 10 table beside its chart showed three columns of
    ten, the rest scrolled out of sight)."""
    return table is None or len(table.columns) <= SIDE_MAX_COLUMNS


def beside(table, widths=(3, 2), where=st) -> tuple:
    """Where a chart and the table of its numbers go, in `where`: two columns of `widths`, the table beside its
    chart, while the table fits a side column; else one container for both, the table directly under its chart at
    the chart's width. Either way chart, caption and numbers stay together, on a wide screen and on a phone (a wide
    table put under the row of columns lay under every chart of the row, far from its own)."""
    if fits_beside(table):
        return tuple(where.columns(widths))
    box = where.container()
    return box, box


def numbers(table, key: str, where=st) -> None:
    """A table of tables.table (numbers written as text) with its numbers right-aligned, as a column of numbers is,
    in `where`: the place `beside` gave it (a side column, or its chart's container). A table wider than that still
    scrolls sideways in its own frame (its scroll bar, a drag, the arrow keys)."""
    right = {column: st.column_config.TextColumn(alignment="right") for column in table.columns}
    where.dataframe(table, key=key, column_config=right)


def _described(fig: go.Figure, table: bool) -> tuple:
    """describe.describe(fig) in the reader's language, kept on the figure: a kept figure is described once."""
    memo, key = fig.__dict__.setdefault("_described", {}), (lang(), table)
    if key not in memo:
        memo[key] = describe.describe(fig, lang(), label=table_label, table=table)
    return memo[key]


def table_label(label: str) -> str:
    """A row or column label for st.table, which renders Markdown: shown as typed (text.plain)."""
    return plain(label)


def _plotly_locale() -> dict:
    """Plotly's own texts (its toolbar's titles, its notices) in the reader's language: plotly.js takes a locale's
    dictionary in its config, so none is loaded from elsewhere. English is Plotly's own."""
    if lang() == "en":
        return {}
    words = {
        "Zoom": t("plotly.zoom"), "Pan": t("plotly.pan"), "Box Select": t("plotly.box_select"),
        "Lasso Select": t("plotly.lasso_select"), "Zoom in": t("plotly.zoom_in"), "Zoom out": t("plotly.zoom_out"),
        "Autoscale": t("plotly.autoscale"), "Reset axes": t("plotly.reset_axes"),
        "Download plot as a PNG": t("plotly.download_png"), "Download plot": t("plotly.download"),
        "Toggle Spike Lines": t("plotly.spikes"), "Show closest data on hover": t("plotly.closest"),
        "Compare data on hover": t("plotly.compare"), "Double-click to zoom back out": t("plotly.zoom_back"),
        "Taking snapshot - this may take a few seconds": t("plotly.snapshot"),
        "Snapshot succeeded": t("plotly.snapshot_done"),
    }  # fmt: skip
    return {"locale": lang(), "locales": {lang(): {"dictionary": words}}}
