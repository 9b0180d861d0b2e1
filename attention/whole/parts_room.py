"""The model view of an encoder-decoder (BART, Marian, T5): its three attentions apart, each a grid of every head
(the encoder's self-attention over the source, the decoder's causal self-attention over the target, its
cross-attention of the target over the source), a click that opens a head of that part; one cross-attention map with
both sentences' tokens; and what the one-stack tools cannot do here yet, said."""

from __future__ import annotations

import streamlit as st

from ..app import charts
from ..app.language import t
from ..app.origins.model import layers
from ..app.session import Session
from ..models.model import Model
from ..models.seq2seq import PARTS
from ..show.heatmap import heatmap
from . import figures, room
from .compute import Whole


def draw(session: Session, last, model: Model) -> None:
    """The three grids, each under its name and what its rows and columns are; the cross-attention map with both
    sentences' tokens; the text version; then the tools that need a one-stack model, said, and the first token
    taken away from the encoder's head shown."""
    found, pair, c = room.parts(session, last, model), last.pair, last.choice
    source, target = len(pair.source.ids), len(pair.target.ids)
    st.caption(t("whole.parts_what", model=model.spec.title, source=source, target=target))
    left, right = st.columns(2)
    with left:
        view = room.picks(session)
    with right:
        most = layers(model.spec, c.part)  # the open part's: a layer picked in a deeper part is this one's last
        if st.session_state.get("whole_open_layer_at", 0) > most:
            st.session_state["whole_open_layer_at"] = most
        room.open_layer(session, last, most)
        st.caption(t("whole.parts_open_layer", part=t(f"real.part_short.{c.part}")))
    for part in PARTS:
        every = found[part]
        count, heads, m, n = every.weights.shape
        st.subheader(t(f"whole.part.{part}"))
        st.caption(t(f"whole.part_what.{part}", layers=count, heads=heads, m=m, n=n))
        room.legend(session, every, how=False)  # (how kinds are measured: said once, under the encoder's)
        if part == "encoder":
            st.caption(t("whole.parts_kinds"))
        room.grid(session, last, every, view, part)
    cross_map(session, last, found["cross"])
    text_version(session, found)
    st.info(t("whole.parts_tools"), icon=":material/info:")
    if c.part == "encoder":  # the first token taken away runs the encoder alone, as a one-stack model
        room.first_token(session, last, model)


def cross_map(session: Session, last, cross: Whole) -> None:
    """One layer's cross-attention with both sentences' tokens, target tokens down and source tokens across: the
    head shown (a cross-attention head), else the heads' mean of its layer."""
    c, pair = last.choice, last.pair
    layer = min(c.layer, cross.weights.shape[0])  # an encoder's layer past the decoder's: its last
    one = c.part == "cross" and c.head > 0
    z = cross.weights[layer - 1, c.head - 1] if one else cross.weights[layer - 1].mean(0)
    title = t("whole.cross_head", layer=layer, head=c.head) if one else t("whole.cross_mean", layer=layer)
    fig = heatmap(z, list(pair.target.tokens), list(pair.source.tokens), "target token", "source token", title,
                  session.lang)  # fmt: skip
    charts.chart(fig, "chart_whole_cross_map")
    st.caption(t("whole.cross_help"))


def text_version(session: Session, found: dict[str, Whole]) -> None:
    """Each part's heads as a table, for screen readers (made only while its expander is open)."""
    version = st.expander(t("a11y.text_version", title=t("whole.title")), key="whole_text", on_change="rerun")
    if not version.open:
        return
    for part, every in found.items():
        version.markdown(f"**{t(f'whole.part.{part}')}**")
        version.text(figures.summary(every, session.lang))
        table = figures.table(every, session.lang)
        version.dataframe(table, hide_index=True, key=f"whole_table_{part}",
                          column_config={c: st.column_config.NumberColumn(format="%.2f")
                                         for c in table.columns[3:]})  # fmt: skip
