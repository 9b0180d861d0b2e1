"""An encoder-decoder's translation on the overview: the model's greedy translation of the source, a token at a time
(seq2seq.translate), and its alignment: each new token's cross-attention row, target tokens down and source tokens
across, of one head or the heads' mean; a button opens that cross-attention head on the translation."""

from __future__ import annotations

import streamlit as st
import torch

from .. import models
from ..app import charts
from ..app.language import t
from ..app.origins import make
from ..app.origins.model import ModelHead
from ..app.session import Session
from ..app.text import plain
from ..base.case import CaseError
from ..base.i18n import render
from ..show.heatmap import heatmap
from .seq2seq import Translation

CHART = "chart_alignment"
LEAVE = "align_leave"  # the cross-attention head was opened: to the walkthrough


def rows(made: Translation, layer: int, head: int | None) -> torch.Tensor:
    """The alignment of a decoder layer (from 0): one head's rows (new tokens, source tokens), or (head None) the
    mean of every head's."""
    every = made.alignment[layer]  # (heads, new tokens, n_src)
    return every.mean(0) if head is None else every[head]


def translation(session: Session, last: ModelHead) -> None:
    """The translation of the source, its alignment of the chosen layer and head, and the head opened."""
    c = last.choice
    spec = models.spec(c.model)
    st.subheader(t("real.translation"))
    try:
        made = make.translated(session, session.loader(c.model), c.sentence)
    except CaseError as e:  # (the source was read once already: a model changed on disk since, say)
        st.error(plain(render(session.lang, e.message)))
        return
    st.markdown(f"**{plain(c.sentence)}** → {plain(made.text) or '∅'}")
    per_token = 1000 * sum(made.seconds) / len(made.seconds)
    st.caption(t("real.translation_help", count=len(made.new_ids), ms=per_token, kib=made.cache_bytes / 1024))
    cross = c.part == "cross"  # the alignment starts at the cross-attention head shown, else the last layer's mean
    for key, most in (("align_layer", spec.decoder_layers), ("align_head", spec.heads)):
        if st.session_state.get(key, 0) > most:  # picked on a model with more: this one's last
            st.session_state[key] = most
    left, right = st.columns(2)
    layer = left.number_input(t("real.layer"), 1, spec.decoder_layers, c.layer if cross else spec.decoder_layers,
                              key="align_layer", help=t("real.align_layer_help"))  # fmt: skip
    head = right.number_input(t("real.head"), 0, spec.heads, c.head if cross else 0, key="align_head",
                              help=t("real.align_head_help"))  # fmt: skip
    title = t("real.alignment", layer=layer) if head == 0 else t("real.alignment_head", layer=layer, head=head)
    new, source = list(made.pair.target.tokens[1:]), list(made.pair.source.tokens)  # after the start token
    z = rows(made, layer - 1, head - 1 if head else None)
    charts.chart(heatmap(z, new, source, "target token", "source token", title, session.lang), CHART)
    st.caption(t("real.alignment_help"))
    if c.target is not None:  # the person's own target: the model's translation as the target instead
        st.button(t("real.translate"), key="align_use", icon=":material/translate:",
                  on_click=lambda: make.choose_model(session, session.loader, target=None))  # fmt: skip
    opened = (c.part, c.target, c.layer, c.head) == ("cross", None, layer, head) and session.origin is last

    def open_head() -> None:  # a callback, before the run (a rerun for the URL would lose a button's True)
        make.choose_model(session, session.loader, part="cross", target=None, layer=int(layer), head=int(head))
        session.go_to("softmax")  # the weights: a row a target token, where it looks in the source
        st.session_state[LEAVE] = True

    st.button(t("real.align_open", layer=layer, head=head) if head else t("real.align_open_layer", layer=layer),
              key="align_open", icon=":material/open_in_new:", disabled=opened, on_click=open_head)  # fmt: skip
    if st.session_state.pop(LEAVE, False):  # to the walkthrough, once
        st.switch_page("pages/walkthrough.py")
