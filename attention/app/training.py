"""The Backward page's Train it live room (issue 21): the learning rate in the sidebar, one gradient step a click
(or a second), Reset, the loss over the steps and what the last step did to W_Q."""

from __future__ import annotations

import time

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from .. import backward as bw
from .. import figures
from ..core import AXES, Trace
from . import charts, compute, learning, origins, tab
from .backward_room import span
from .language import lang, t

PLAY_SECONDS = 1.0  # a training step a second while Keep training is on
TRAINED_AT = "bw_trained_at"  # the player's clock (time.monotonic of its last step)


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
        st.fragment(lambda: _train_on(link), run_every=PLAY_SECONDS)()
    else:
        st.session_state.pop(TRAINED_AT, None)
    if len(s.learned.losses) > 1:
        losses = s.learned.losses
        said = {"first": losses[0], "last": losses[-1], "steps": len(losses) - 1}
        title = t("backward.loss_title")
        line = go.Figure(  # a Plotly line, as cheap to build as the heatmaps (an Altair chart costs ~50 ms a run)
            go.Scatter(x=list(range(len(losses))), y=losses, mode="lines+markers"),
            layout={"title": {"text": title}, "height": 260, "margin": {"t": 40, "b": 40},
                    "xaxis": {"title": {"text": t("backward.steps_axis")}, "dtick": 1 if len(losses) < 20 else None},
                    "yaxis": {"title": {"text": t("backward.loss_axis")}}},
        )  # fmt: skip
        st.plotly_chart(line, key="chart_losses", width="stretch", config={"displaylogo": False},
                        alt=t("backward.loss_text", **said))  # fmt: skip
        version = st.expander(t("a11y.text_version", title=title), key="chart_losses_text")
        version.text(t("backward.loss_text", **said))
        table = pd.DataFrame({t("backward.loss_axis"): [f"{v:.6g}" for v in losses]})
        table.index.name = t("backward.steps_axis")
        version.table(table)
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
    """A step a second while playing: the fragment also runs with every run of the page, so its own clock decides
    (a step on every run would train as fast as the page redraws)."""
    last, now = st.session_state.get(TRAINED_AT), time.monotonic()
    if last is None or now - last < PLAY_SECONDS * 0.95:
        st.session_state[TRAINED_AT] = last or now
        return
    st.session_state[TRAINED_AT] = now
    s = tab.current()
    if not learning.train(s, compute.current(s), link):
        st.session_state.bw_keep_training = False  # refused: the player stops, and the notice says why
    st.rerun(scope="app")
