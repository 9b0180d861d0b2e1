"""The Inputs page: x with its token labels (and cross-attention's x_kv with its own), the weights (a latent's W_DKV,
W_UK, W_UV and norm), a custom mask, the rounded weights and T5's table, edited cell by cell beside the outputs."""

from __future__ import annotations

import streamlit as st

from ..app import charts, editors, frame, live, tab
from ..app.language import t
from ..app.session import Session
from ..show.heatmap import TEXT_MAX_SIDE
from . import explain_room, figures
from .compute import Trace


def inputs() -> None:
    """The page: every number edited cell by cell beside the outputs (an edit reruns it alone)."""
    frame.trace()  # (a page run outside the frame goes through it first)
    live.page(_inputs)


def _inputs(trace: Trace) -> None:
    s = tab.current()
    st.header(t("inputs.header"))
    st.write(t("inputs.intro"))
    if s.inputs.x_kv is not None:  # cross-attention: two sentences, and which makes what
        st.caption(t("inputs.cross_on", n=len(s.inputs.x), n_kv=len(s.inputs.x_kv)))
    left, right = st.columns([3, 2])  # x and the outputs side by side: a drag on x is seen where it lands
    with left:  # each editor draws its title (a cheaper rerun)
        _sentences(s)
    right.subheader(t("inputs.outputs"))
    outputs = charts.figure(figures.tensor_heatmap, trace, "outputs")
    if cell := charts.chart(outputs, "chart_outputs", where=right, clickable=True, shows=("outputs", None)):
        explain_room.go_explain(trace, "outputs", None, cell)  # a click on a cell: its explanation
    # Up to 16 × 16 the numbers are in the heatmap's cells (and its text version): a table only past that
    numbers = charts.table(trace, "outputs") if max(trace.outputs.shape) > TEXT_MAX_SIDE else None
    if numbers is not None:
        charts.numbers(numbers, "table_outputs", where=right)
    up = {} if s.inputs.w_latent is None else {"w_key": "W_UK", "w_value": "W_UV"}  # they read the latent, not x
    if up:  # multi-head latent attention
        _latent_editors(s)
    for column, name in zip(st.columns(3), ("w_query", "w_key", "w_value"), strict=True):
        with column:
            title = t("inputs.up", symbol=up[name], name=name) if name in up else t("inputs.weight", name=name)
            editors.matrix_editor(s, name, title, previewed=True)
    if s.controls.mask == "custom":
        editors.matrix_editor(s, "mask", t("editor.mask_title"), previewed=True)
    keys = len(s.inputs.x_kv if s.inputs.x_kv is not None else s.inputs.x)
    if s.inputs.rounded is not None and len(s.inputs.rounded[0]) == keys:  # (the article's n × n: not n × n_kv)
        if not s.controls.use_rounded:
            st.caption(t("editor.rounded_off"))
        editors.matrix_editor(s, "rounded", t("editor.rounded_title"), previewed=True)
    if s.controls.relative and s.inputs.relative_bias is not None:
        editors.matrix_editor(s, "relative_bias", t("editor.relative_title"), previewed=True)
    if any(editors.is_big(s, name) for name in ("x", "x_kv", "w_query", "w_key", "w_value") if _has(s, name)):
        editors.uploader(s)


def _sentences(s: Session) -> None:
    """x, and in cross-attention the source sentence x_kv under it: each with its token labels, each titled with
    what is made from it."""
    if s.inputs.x_kv is None:
        editors.matrix_editor(s, "x", t("inputs.x"), hint=True, previewed=True)
        return
    editors.matrix_editor(s, "x", t("inputs.x_target"), hint=True, previewed=True)
    editors.matrix_editor(s, "x_kv", t("inputs.x_kv"), previewed=True)
    if all(v == 0 for row in s.inputs.x_kv for v in row):  # as turned on with New cells: zeros
        st.caption(t("inputs.x_kv_zeros"))


def _has(s: Session, name: str) -> bool:
    return getattr(s.inputs, name) is not None


def _latent_editors(s: Session) -> None:
    """Multi-head latent attention's W_DKV, and beside it what it changes and its norm's weights (a loaded case's)."""
    left, right = st.columns([1, 2])
    with left:
        editors.matrix_editor(s, "w_latent", t("inputs.latent"), previewed=True)
    right.caption(t("inputs.latent_on", d_c=len(s.inputs.w_latent[0])))
    if s.inputs.latent_norm is not None:
        with right:
            title = t("inputs.latent_norm", count=len(s.inputs.latent_norm[0]))
            editors.matrix_editor(s, "latent_norm", title, previewed=True)
