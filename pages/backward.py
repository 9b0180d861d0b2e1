"""Backward page: the loss's gradient through the eight steps in reverse, each beside its forward twin; the
sensitivity map, training live and the tokens' sensitivity."""

import streamlit as st

from attention.app import backward_room as room
from attention.app import frame, learning, tab, training
from attention.app.language import t

trace = frame.trace()
s = tab.current()
st.header(t("backward.header"))
st.write(t("backward.intro"))
if room.too_big(trace):  # the backward pass's n × n gradients beside the forward trace's: past the session's bound
    st.info(t("backward.too_big", cells=room.MAX_CELLS))
else:
    training.lr_control()
    loss = room.loss_chooser(trace)
    result = learning.backward_of(s, trace, loss)
    room.status(result)

    learn, steps, sensitive, tokens = st.tabs(
        [t("backward.tab_train"), t("backward.tab_steps"), t("backward.tab_sensitivity"), t("backward.tab_tokens")]
    )
    with learn:
        st.write(t("backward.train_intro"))
        training.training(trace)
    with steps:
        room.step_view(result, room.step_picker(result))
    with sensitive:
        st.write(t("backward.sensitivity_intro"))
        room.sensitivity(trace)
    with tokens:
        st.write(t("backward.tokens_intro"))
        room.token_sensitivity(trace)
