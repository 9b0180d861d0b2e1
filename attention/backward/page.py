"""The Backward page's body: the loss's gradient through the eight steps in reverse, each beside its forward twin;
training live, the sensitivity map and the tokens' sensitivity."""

from __future__ import annotations

import streamlit as st

from ..app import frame, tab
from ..app.language import t
from . import room, state, training_room


def backward() -> None:
    trace = frame.trace()
    s = tab.current()
    st.header(t("backward.header"))
    st.write(t("backward.intro"))
    if state.too_big(trace):  # the backward pass's n × n gradients beside the forward trace's: past the session's bound
        st.info(t("backward.too_big", cells=state.MAX_CELLS))
    else:
        training_room.lr_control()
        loss = room.loss_chooser(trace)
        result = state.backward_of(s, trace, loss)
        room.status(result)

        learn, steps, sensitive, tokens = st.tabs(
            [t("backward.tab_train"), t("backward.tab_steps"), t("backward.tab_sensitivity"), t("backward.tab_tokens")]
        )
        with learn:
            st.write(t("backward.train_intro"))
            training_room.training(trace)
        with steps:
            room.step_view(result, room.step_picker(result))
        with sensitive:
            st.write(t("backward.sensitivity_intro"))
            room.sensitivity(trace)
        with tokens:
            st.write(t("backward.tokens_intro"))
            room.token_sensitivity(trace)
