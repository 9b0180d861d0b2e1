"""The Backward page's Train it live room (issue 21): the learning rate in the sidebar, one gradient step a click
(or a second), Reset, the loss over the steps and what the last step did to W_Q."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st
import torch

from ..app import charts, origins, tab, traces
from ..app.language import lang, t
from ..forward.compute import Trace
from . import figures, state
from .training import MAX_LR

PLAY_SECONDS = 1.0  # a training step a second while Keep training is on
TRAINED_AT = "bw_trained_at"  # the player's clock (time.monotonic of its last step)


def lr_control() -> None:
    """The learning rate, in the sidebar, bounded."""
    s = tab.current()
    st.session_state.backward_lr = s.view(state.Learned).lr
    st.sidebar.number_input(
        t("backward.lr"), min_value=state.MIN_LR, max_value=MAX_LR, key="backward_lr", format="%.4g",
        step=0.01, help=t("backward.lr_help", high=MAX_LR),
        on_change=lambda: state.choose_lr(s, st.session_state.backward_lr),
    )  # fmt: skip


def training(trace: Trace) -> None:
    """One gradient step on W_Q, W_K and W_V a click (or a second, playing), the loss over the steps, Reset, and
    what the last step did to W_Q."""
    s = tab.current()
    state.record_loss(s, trace)
    link = {k: st.query_params.get(k) for k in origins.PARAMS}  # what names the case before the first step
    row = st.container(horizontal=True, vertical_alignment="center")
    row.button(t("backward.train"), key="bw_train", icon=":material/trending_down:",
               on_click=lambda: state.train(s, trace, link), type="primary")  # fmt: skip
    row.button(
        t("backward.reset"), key="bw_reset", on_click=lambda: state.reset(s), disabled=not s.view(state.Learned).trained
    )
    row.toggle(t("backward.keep_training"), key="bw_keep_training", help=t("backward.keep_training_help"))
    st.caption(t("backward.trained", steps=s.view(state.Learned).trained, lr=s.view(state.Learned).lr))
    if st.session_state.get("bw_keep_training"):
        st.fragment(lambda: _train_on(link), run_every=PLAY_SECONDS)()
    else:
        st.session_state.pop(TRAINED_AT, None)
    if len(s.view(state.Learned).losses) > 1:
        losses = s.view(state.Learned).losses
        said = {"first": losses[0], "last": losses[-1], "steps": len(losses) - 1}
        title, line = t("backward.loss_title"), figures.loss_line(losses, lang())
        st.plotly_chart(line, key="chart_losses", width="stretch", config={"displaylogo": False},
                        alt=t("backward.loss_text", **said))  # fmt: skip
        version = st.expander(t("a11y.text_version", title=title), key="chart_losses_text")
        version.text(t("backward.loss_text", **said))
        table = pd.DataFrame({t("backward.loss_axis"): [f"{v:.6g}" for v in losses]})
        table.index.name = t("backward.steps_axis")
        version.table(table)
    if s.view(state.Learned).last_step is not None:
        before = torch.tensor(s.view(state.Learned).last_step["w_query"], dtype=torch.float64)
        charts.chart(
            figures.change(trace, "w_query", before, t("backward.w_query_change"), lang()), "chart_w_query_change"
        )


def _train_on(link: dict) -> None:
    """A step a second while playing: the fragment also runs with every run of the page, so its own clock decides
    (a step on every run would train as fast as the page redraws)."""
    last, now = st.session_state.get(TRAINED_AT), time.monotonic()
    if last is None or now - last < PLAY_SECONDS * 0.95:
        st.session_state[TRAINED_AT] = last or now
        return
    st.session_state[TRAINED_AT] = now
    s = tab.current()
    if not state.train(s, traces.current(s), link):
        st.session_state.bw_keep_training = False  # refused: the player stops, and the notice says why
    st.rerun(scope="app")
