"""What a head does for the next token, on the model view's page (a causal model's): heads switched off, a layer's
heads ranked by how much each moves the top token, a head patched from another sentence."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..app.language import t
from ..app.session import Session
from ..app.text import plain
from ..base.case import CaseError
from ..base.i18n import render, text
from ..models.model import Model
from . import compute
from .compute import Ablation
from .room import radio, token
from .state import Looking


def _heads_label(layer: int, head: int) -> str:
    return t("whole.head", layer=layer, head=head)


def switch_off(session: Session, last, model: Model) -> None:
    """Heads switched off (picked by hand, or a layer's), zeroed or made their mean; the next tokens before and
    after, and the top one's move."""
    view, s = session.view(Looking), model.spec
    st.header(t("whole.switch_header"))
    st.write(t("whole.switch_intro"))
    if not view.switched and last.choice.head > 0:  # the open head, to start with
        view.switched = ((last.choice.layer, last.choice.head),)
    every = [(layer, head) for layer in range(1, s.layers + 1) for head in range(1, s.heads + 1)]
    # the widgets keep their format_func (AppTest calls it outside the run): each holds its language; a key per
    # language, since a widget keeps its options' labels
    picked = f"whole_switched_{session.lang}"
    st.session_state[picked] = list(view.switched)
    lang = session.lang
    st.multiselect(t("whole.switched"), every, key=picked,
                   format_func=lambda p, lang=lang: text(lang, "whole.head", layer=p[0], head=p[1]),
                   on_change=lambda: setattr(view, "switched", tuple(st.session_state[picked])))  # fmt: skip
    left, right = st.columns(2, vertical_alignment="bottom")
    radio(left, session, view, "how", compute.HOWS)
    layer = last.choice.layer
    every_head = tuple((layer, h) for h in range(1, s.heads + 1))
    right.button(t("whole.switch_layer", layer=layer, heads=s.heads), key="whole_switch_layer",
                 on_click=lambda: setattr(view, "switched", every_head))  # fmt: skip
    if not view.switched:
        st.caption(t("whole.switch_none"))
        return
    if not view.ablating:  # a run of the model on demand: the page's first draw stays the maps'
        st.button(t("whole.run_again"), key="whole_run_again", type="primary", icon=":material/play_arrow:",
                  on_click=lambda: setattr(view, "ablating", True))  # fmt: skip
        return
    heads = frozenset((layer - 1, head - 1) for layer, head in view.switched)
    key = ("ablate", last.choice.model, last.run.sentence, heads, view.how)
    result = session.derived.get(key, lambda: compute.ablate(model, last.run.ids, heads, view.how))
    _before_after(model, result)


def _before_after(model: Model, result: Ablation) -> None:
    top = token(model, result.before.first)
    before = result.before.probabilities[result.before.first].item()
    after = result.after.probabilities[result.before.first].item()
    st.metric(t("whole.top_moved", token=top), f"{after:.1%}", f"{(after - before) * 100:+.1f} pp",
              delta_color="normal")  # fmt: skip
    names = (t("whole.before"), t("whole.after"))
    shown = zip(names, (result.before, result.after), strict=True)
    rows = {name: [f"{token(model, i)}  {q:.1%}" for i, q in p.top] for name, p in shown}
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="whole_before_after")


def ranking(session: Session, last, model: Model) -> None:
    """A layer's heads, each switched off alone, by how much the top token's probability moves."""
    view, s = session.view(Looking), model.spec
    st.subheader(t("whole.rank_header"))
    left, right = st.columns([1, 2], vertical_alignment="bottom")
    layer = left.number_input(t("whole.layer"), 1, s.layers, view.ranked_layer or last.choice.layer,
                              key="whole_rank_at")  # fmt: skip
    right.button(t("whole.rank", layer=layer, heads=s.heads), key="whole_rank",
                 on_click=lambda: setattr(view, "ranked_layer", int(st.session_state["whole_rank_at"])))  # fmt: skip
    if view.ranked_layer is None:
        st.caption(t("whole.rank_cost", heads=s.heads))
        return
    at = view.ranked_layer
    key = ("rank", last.choice.model, last.run.sentence, at, view.how)
    ranked = session.derived.get(key, lambda: compute.rank(model, last.run.ids, at - 1, view.how))
    top = token(model, ranked[0][1].before.first)
    rows = [(_heads_label(at, h + 1), a.before.probabilities[a.before.first].item(),
             a.after.probabilities[a.before.first].item(), a.change * 100, token(model, a.after.first))
            for h, a in ranked]  # fmt: skip
    names = [t("whole.col_head"), t("whole.col_before", token=top), t("whole.col_after", token=top),
             t("whole.col_change"), t("whole.col_new_top")]  # fmt: skip
    percent = {n: st.column_config.NumberColumn(format="percent") for n in names[1:3]}
    percent[names[3]] = st.column_config.NumberColumn(format="%+.2f pp")
    st.dataframe(pd.DataFrame(rows, columns=names), hide_index=True, key="whole_ranked", column_config=percent)
    head, most = ranked[0]
    st.caption(t("whole.rank_read", head=head + 1, layer=at, token=top, change=f"{most.change * 100:+.1f}"))


def _patch(view: Looking) -> None:
    """The two sentences as typed, and the layer, patched (a button's callback: before the run)."""
    state = st.session_state
    view.clean, view.corrupt, view.patched_layer = state["whole_clean"], state["whole_corrupt"], state["whole_patch_at"]


def patching(session: Session, model: Model, last) -> None:
    """One head's output from the clean sentence put into the corrupt one's pass, each head of a layer in turn."""
    view, s = session.view(Looking), model.spec
    st.subheader(t("whole.patch_header"))
    st.write(t("whole.patch_intro"))
    left, right = st.columns(2)
    left.text_input(t("whole.clean"), view.clean, key="whole_clean", max_chars=200)
    right.text_input(t("whole.corrupt"), view.corrupt, key="whole_corrupt", max_chars=200)
    left, right = st.columns([1, 2], vertical_alignment="bottom")
    layer = left.number_input(t("whole.layer"), 1, s.layers, view.patched_layer or last.choice.layer,
                              key="whole_patch_at")  # fmt: skip
    right.button(t("whole.patch", layer=layer, heads=s.heads), key="whole_patch", on_click=lambda: _patch(view))
    if view.patched_layer is None:
        return
    try:
        a, _ = model.tokenize(view.clean)
        b, _ = model.tokenize(view.corrupt)
    except CaseError as e:
        st.error(plain(render(session.lang, e.message)))
        return
    if len(a) != len(b):
        st.warning(t("whole.patch_lengths", a=len(a), b=len(b)))
        return
    at = view.patched_layer
    key = ("patch", view.clean, view.corrupt, last.choice.model, at)
    result = session.derived.get(key, lambda: compute.patch(model, a, b, at - 1))
    good, bad = (token(model, i) for i in result.tokens)
    st.caption(t("whole.patch_read", good=good, bad=bad, clean=f"{result.clean_difference:.2f}",
                 corrupt=f"{result.corrupt_difference:.2f}"))  # fmt: skip
    if result.tokens[0] == result.tokens[1]:
        st.info(t("whole.patch_same", token=good))
        return
    rows = [(_heads_label(at, p.head + 1), p.difference, result.carried(p)) for p in result.heads]
    names = [t("whole.col_head"), t("whole.col_difference", good=good, bad=bad), t("whole.col_carried")]
    config = {names[1]: st.column_config.NumberColumn(format="%.2f"),
              names[2]: st.column_config.NumberColumn(format="percent")}  # fmt: skip
    st.dataframe(pd.DataFrame(rows, columns=names), hide_index=True, key="whole_patched", column_config=config)
