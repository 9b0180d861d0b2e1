"""The Backward page's Train it live room (issue 21): the learning rate in the sidebar, one gradient step a click
(or a second), Reset, the loss over the steps and what the last step did to W_Q."""

from __future__ import annotations

import pandas as pd
import streamlit as st
import torch

from .. import backward as bw
from .. import figures
from ..core import AXES, Trace
from . import charts, learning, origins, tab
from .backward_room import span
from .language import lang, t


def lr_control() -> None:
    """The learning rate, in the sidebar, bounded."""
    s = tab.current()
    st.session_state.backward_lr = s.learned.lr
    st.sidebar.number_input(
        t("backward.lr"), min_value=learning.MIN_LR, max_value=bw.MAX_LR, key="backward_lr", format="%.4g",
        step=0.01, help=t("backward.lr_help", high=bw.MAX_LR),
        on_change=lambda: learning.choose_lr(s, st.session_state.backward_lr),
    )  # fmt: skip


def training(trace: Trace) -> None:
    """One gradient step on W_Q, W_K and W_V a click (or a second, playing), the loss over the steps, Reset, and
    what the last step did to W_Q."""
    s = tab.current()
    learning.record_loss(s, trace)
    link = {k: st.query_params.get(k) for k in origins.PARAMS}  # what names the case before the first step
    row = st.container(horizontal=True, vertical_alignment="center")
    row.button(t("backward.train"), key="bw_train", icon=":material/trending_down:",
               on_click=lambda: learning.train(s, trace, link), type="primary")  # fmt: skip
    row.button(t("backward.reset"), key="bw_reset", on_click=lambda: learning.reset(s), disabled=not s.learned.trained)
    row.toggle(t("backward.keep_training"), key="bw_keep_training", help=t("backward.keep_training_help"))
    st.caption(t("backward.trained", steps=s.learned.trained, lr=s.learned.lr))
    if st.session_state.get("bw_keep_training"):
        st.fragment(lambda: _train_on(link), run_every=1.0)()
    if len(s.learned.losses) > 1:
        chart = pd.DataFrame({t("backward.loss_axis"): s.learned.losses}, index=range(len(s.learned.losses)))
        chart.index.name = t("backward.steps_axis")
        st.line_chart(chart, x_label=t("backward.steps_axis"), y_label=t("backward.loss_axis"), height=220)
        said = {"first": s.learned.losses[0], "last": s.learned.losses[-1], "steps": len(s.learned.losses) - 1}
        st.caption(t("backward.loss_text", **said))  # the chart's text version
    if s.learned.last_step is not None:
        before = torch.tensor(s.learned.last_step["w_query"], dtype=torch.float64)
        after = trace["w_query"].double()
        kinds = AXES["w_query"]
        rows = figures.labels(trace, kinds[0], before.shape[0], lang())
        cols = figures.labels(trace, kinds[1], before.shape[1], lang())
        change = after - before
        fig = figures.heatmap(change, rows, cols, *kinds, t("backward.w_query_change"), lang(), span(change))
        charts.chart(fig, "chart_w_query_change")


def _train_on(link: dict) -> None:
    s = tab.current()
    from . import compute

    trace = compute.current(s)
    if learning.train(s, trace, link):
        st.rerun(scope="app")
    else:
        st.session_state.bw_keep_training = False
        st.rerun(scope="app")
