"""The model view's rooms: the grid of every head (its sort, a click that opens a head or its layer, the kinds'
colours, its text version), heads switched off, a layer's heads ranked, a head patched from another sentence, and
where the weight goes without the first token."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..app import clicks
from ..app.language import t
from ..app.origins import make
from ..app.session import Session
from ..app.text import plain
from ..base.case import CaseError
from ..base.i18n import msg, render, text
from ..models.model import Model
from ..show.heatmap import heatmap
from . import compute, figures
from .compute import Whole
from .state import ASK, OPENS, SORTS, Looking, questions

CHART = "chart_whole"
READABLE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})  # as the tokens are labelled (models.readable)


def shown(session: Session) -> tuple[object, Model] | None:
    """The model's head the session shows (as the model made it or edited since) and its model; None without one."""
    if (last := make.shown(session)) is None:
        return None
    if session.view(Looking).of(last.choice.model):  # the layer pickers' numbers were another model's
        for key in ("whole_rank_at", "whole_patch_at"):
            st.session_state.pop(key, None)
    return last, session.loader(last.choice.model)


def whole(session: Session, last, model: Model) -> Whole:
    """Every head on the sentence, kept while the model and sentence are."""
    scores = compute.induction_scores(model)  # kept per loaded model: a new sentence or session reuses them
    key = ("whole", last.choice.model, last.run.sentence)
    return session.derived.get(key, lambda: compute.whole(model, last.run, scores))


def parts(session: Session, last, model: Model) -> dict[str, Whole]:
    """An encoder-decoder's three attentions on its source and target, kept while the model and sentences are."""
    key = ("whole parts", last.choice.model, last.choice.sentence, last.choice.target)
    return session.derived.get(key, lambda: compute.parts(model, last.pair))


def token(model: Model, i: int) -> str:
    return model.tokenizer.decode([i]).translate(READABLE)


def no_model(session: Session) -> None:
    """What the page needs (a real model's case), and a button that opens one."""
    st.info(t("whole.no_model"), icon=":material/neurology:")
    st.button(t("whole.open_model"), key="whole_open_model", icon=":material/play_arrow:",
              on_click=lambda: make.choose(session, preset="real"))  # fmt: skip


def picks(session: Session) -> Looking:
    """The sort and what a click opens (radios bound to the view)."""
    view = session.view(Looking)
    for name, options in (("sort", SORTS), ("opens", OPENS)):
        radio(st, session, view, name, options)
    return view


def radio(where, session: Session, view: Looking, name: str, options: tuple[str, ...]) -> None:
    """A radio bound to the view's field `name`, its labels in the reader's language (a key per language: a widget
    keeps its options' labels). The labels themselves are the options, with no format_func: AppTest formats a kept
    value with the format_func of the run that made it."""
    key = f"whole_{name}_{session.lang}"
    labels = {text(session.lang, f"whole.{name}.{o}"): o for o in options}
    st.session_state[key] = next(label for label, o in labels.items() if o == getattr(view, name))
    where.radio(t(f"whole.{name}"), list(labels), key=key, horizontal=True,
                on_change=lambda: view.choose(**{name: labels[st.session_state[key]]}))  # fmt: skip


def grid(session: Session, last, found: Whole, view: Looking, part: str | None = None) -> None:
    """Every head's map at once (of an encoder-decoder's part); a click opens the head (or its layer) and goes to
    the walkthrough."""
    ordered = compute.order(found, view.sort)
    c = last.choice
    here = session.origin is last and c.part == part  # as the model made it, in this part
    open_head = (c.layer - 1, c.head - 1) if c.head > 0 and here else None
    key = ("whole figure", c.model, c.sentence, c.target, part, view.sort, session.lang, open_head)
    fig = session.derived.get(key, lambda: figures.view(found, ordered, view.sort, session.lang, open_head))
    summary = figures.summary(found, session.lang)
    chart = CHART if part is None else f"{CHART}_{part}"
    box = st.container(gap=None)  # the chart and the component that hears its clicks, together
    box.plotly_chart(fig, key=chart, width="stretch", alt=summary,
                     config={"displayModeBar": False, "scrollZoom": False})  # fmt: skip
    with box:
        picked = clicks.hook(chart)
    if picked is not None and (head := figures.head_at(ordered, picked)) is not None:
        layer, h = head
        opened = {"layer": layer + 1, "head": 0 if view.opens == "layer" else h + 1}
        make.choose_model(session, session.loader, **opened, **({} if part is None else {"part": part}))
        session.go_to("softmax")  # the weights the map showed
        st.switch_page("pages/walkthrough.py")


def legend(session: Session, found: Whole, how: bool = True) -> None:
    """The kinds' colours (the strip above each map), each with its count, and (`how`) how they were measured."""
    rows = figures.legend(session.lang, found)
    if not rows:
        return
    chips = " ".join(f'<span style="color:{colour}">■</span>&nbsp;{plain(name)}&nbsp;({count})'
                     for colour, name, count in rows)  # fmt: skip
    st.markdown(chips, unsafe_allow_html=True)
    if how:
        st.caption(t("whole.kinds_how", n=found.weights.shape[-1]))


def text_version(session: Session, found: Whole) -> None:
    """The heads as a table, for screen readers (made only while its expander is open)."""
    version = st.expander(t("a11y.text_version", title=t("whole.title")), key="whole_text", on_change="rerun")
    if version.open:
        version.text(figures.summary(found, session.lang))
        version.dataframe(figures.table(found, session.lang), hide_index=True, key="whole_table",
                          column_config={c: st.column_config.NumberColumn(format="%.2f") for c in
                                         figures.table(found, session.lang).columns[3:]})  # fmt: skip


def open_layer(session: Session, last, layers: int) -> None:
    """A layer's heads as one multi-head case."""
    layer = st.number_input(t("whole.layer"), 1, layers, last.choice.layer, key="whole_open_layer_at")
    view = session.view(Looking)

    def opened() -> None:  # a callback, before the run (a rerun for the URL would lose a button's True)
        make.choose_model(session, session.loader, layer=int(st.session_state["whole_open_layer_at"]), head=0)
        session.go_to("softmax")
        view.leave = True

    st.button(t("whole.open_layer", layer=layer), key="whole_open_layer", icon=":material/view_week:", on_click=opened)
    if view.leave:
        view.leave = False
        st.switch_page("pages/walkthrough.py")


# Why the first token: take it away


def first_token(session: Session, last, model: Model) -> None:
    """The open head on the sentence as typed, without its first token, and with another first token: where its
    weight goes (a sink moves to whatever token comes first)."""
    view, c = session.view(Looking), last.choice
    st.header(t("whole.first_header"), anchor="first-token")
    st.write(t("whole.first_intro"))
    head = max(c.head, 1)  # a whole layer open: its first head
    word = st.text_input(t("whole.first_other"), view.other, key="whole_other", max_chars=40)
    view.other = word
    if not view.first_shown:  # three runs of the model on demand: the page's first draw stays the maps'
        st.button(t("whole.first_run", layer=c.layer, head=head), key="whole_first_run", type="primary",
                  icon=":material/play_arrow:", on_click=lambda: setattr(view, "first_shown", True))  # fmt: skip
        return
    if len(last.run.ids) < 2:  # one token: nothing after it to park weight away from
        st.caption(t("whole.first_short"))
        return
    try:
        other = compute.first_of(model, word)
    except CaseError as e:
        st.error(plain(render(session.lang, e.message)))
        return
    key = ("first token", c.model, last.run.sentence, c.layer, head, other)
    found = session.derived.get(key, lambda: compute.first_token(model, last.run.ids, c.layer - 1, head - 1, other))
    labels = [list(model.labels(v.ids)) for v in found]
    rows = []
    for v, words in zip(found, labels, strict=True):
        at, share = v.most_other
        rows.append((t(f"whole.variant.{v.name}"), words[0], v.first, words[at], share))
    names = [t("whole.col_variant"), t("whole.col_first_token"), t("whole.col_on_first"), t("whole.col_next_most"),
             t("whole.col_next_share")]  # fmt: skip
    config = {names[i]: st.column_config.NumberColumn(format="%.3f") for i in (2, 4)}
    st.dataframe(pd.DataFrame(rows, columns=names), hide_index=True, key="whole_first", column_config=config)
    typed, *others = found
    new = " / ".join(f"{words[0]}: {v.first:.2f}" for v, words in zip(others, labels[1:], strict=True))
    st.caption(t("whole.first_read", layer=c.layer, head=head, first=labels[0][0], share=f"{typed.first:.2f}", new=new))
    columns = st.columns(len(found))
    for where, v, words in zip(columns, found, labels, strict=True):
        title = t(f"whole.variant.{v.name}")
        fig = heatmap(v.weights.float(), words, words, "query", "key", title=title, lang=session.lang)
        fig.update_layout(height=260, margin={"l": 0, "r": 0, "t": 30, "b": 0}, showlegend=False)
        fig.update_traces(showscale=False, text=None, texttemplate=None)
        where.plotly_chart(fig, key=f"whole_first_{v.name}", width="stretch", config={"displayModeBar": False})


def ask(session: Session) -> None:
    """On a model case's overview: the link to this page, and its questions, each a link that sets up its answer."""
    if (found := shown(session)) is None:
        return
    last, model = found
    s = model.spec
    st.page_link("pages/whole.py", label=t("whole.link"), icon=":material/apps:")
    top = last.run.next_tokens[0][0].translate(READABLE) if last.run.next_tokens else None
    st.markdown(f"**{t('whole.ask_header')}**")
    found = questions(s.layers, s.heads, last.choice.layer, s.causal, top)
    if s.decoder_layers:  # an encoder-decoder: the grids by kind; taking the first token away is the encoder's alone
        found = {"first": msg("whole.question.first_parts")} | (
            {"why_first": found["why_first"]} if last.choice.part == "encoder" else {})  # fmt: skip
    for key, question in found.items():
        label = plain(render(session.lang, question))
        st.page_link("pages/whole.py", label=label, icon=":material/help:", query_params={ASK: key})
