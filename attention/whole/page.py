"""The model view's page: every head of the model on the sentence at once, sorted and coloured by kind, a click
that opens one (an encoder-decoder's three attentions apart); then, in a causal model, what switching heads off or
patching them does to the next token."""

from __future__ import annotations

import streamlit as st

from ..app import frame, tab
from ..app.language import t
from . import ablation_room, parts_room, room


def whole() -> None:
    """The grid of every head, how its kinds were measured, its text version; the first token taken away; heads
    switched off and patched."""
    frame.trace()
    s = tab.current()
    st.header(t("whole.title"))
    st.write(t("whole.intro"))
    if (found := room.shown(s)) is None:
        room.no_model(s)
        return
    last, model = found
    if last.pair is not None:  # an encoder-decoder: its three attentions apart
        parts_room.draw(s, last, model)
        return
    every = room.whole(s, last, model)
    layers, heads, n, _ = every.weights.shape
    st.caption(t("whole.what", model=model.spec.title, layers=layers, heads=heads, all=layers * heads, n=n))
    left, right = st.columns([2, 3])  # the choices and the kinds' colours beside the maps (on a phone, above them)
    with left:
        view = room.picks(s)
        room.legend(s, every)
        room.open_layer(s, last, layers)
    with right:
        room.grid(s, last, every, view)
    room.text_version(s, every)
    room.first_token(s, last, model)
    if not model.spec.causal:
        st.info(t("whole.encoder"))
        return
    ablation_room.switch_off(s, last, model)
    ablation_room.ranking(s, last, model)
    ablation_room.patching(s, model, last)
