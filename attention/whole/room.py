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
from ..base.i18n import render
from ..models.model import Model
from ..show.heatmap import heatmap
from . import compute, figures
from .compute import Ablation, Whole
from .state import ASK, OPENS, SORTS, Looking, questions

CHART = "chart_whole"
READABLE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})  # as the tokens are labelled (models.readable)


def shown(session: Session) -> tuple[object, Model] | None:
    """The model's head the session shows (as the model made it or edited since) and its model; None without one."""
    if (last := make.shown(session)) is None:
        return None
    return last, session.loader(last.choice.model)


def whole(session: Session, last, model: Model) -> Whole:
    """Every head on the sentence, kept while the model and sentence are."""
    key = ("whole", last.choice.model, last.run.sentence)
    return session.derived.get(key, lambda: compute.whole(model, last.run.ids))


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
        key = f"whole_{name}"
        st.session_state[key] = getattr(view, name)
        st.radio(t(f"whole.{name}"), options, key=key, horizontal=True,
                    format_func=lambda o, name=name: t(f"whole.{name}.{o}"),
                    on_change=lambda key=key, name=name: view.choose(**{name: st.session_state[key]}))  # fmt: skip
    return view


def grid(session: Session, last, found: Whole, view: Looking) -> None:
    """Every head's map at once; a click opens the head (or its layer) and goes to the walkthrough."""
    ordered = compute.order(found, view.sort)
    key = ("whole figure", last.choice.model, last.run.sentence, view.sort, session.lang)
    fig = session.derived.get(key, lambda: figures.view(found, ordered, view.sort, session.lang))
    summary = figures.summary(found, session.lang)
    box = st.container(gap=None)  # the chart and the component that hears its clicks, together
    box.plotly_chart(fig, key=CHART, width="stretch", alt=summary,
                     config={"displayModeBar": False, "scrollZoom": False})  # fmt: skip
    with box:
        picked = clicks.hook(CHART)
    if picked is not None and (head := figures.head_at(ordered, picked)) is not None:
        layer, h = head
        make.choose_model(session, session.loader, layer=layer + 1, head=0 if view.opens == "layer" else h + 1)
        session.go_to("softmax")  # the weights the map showed
        st.switch_page("pages/walkthrough.py")


def legend(session: Session, found: Whole) -> None:
    """The kinds' colours (the strip above each map), each with its count, and how they were measured."""
    rows = figures.legend(session.lang, found)
    if not rows:
        return
    chips = " ".join(f'<span style="color:{colour}">■</span>&nbsp;{plain(name)}&nbsp;({count})'
                     for colour, name, count in rows)  # fmt: skip
    st.markdown(chips, unsafe_allow_html=True)
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


# What a head does for the next token


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
    st.session_state["whole_switched"] = list(view.switched)
    st.multiselect(t("whole.switched"), every, key="whole_switched", format_func=lambda p: _heads_label(*p),
                   on_change=lambda: setattr(view, "switched", tuple(st.session_state["whole_switched"])))  # fmt: skip
    left, right = st.columns(2, vertical_alignment="bottom")
    st.session_state["whole_how"] = view.how
    left.radio(t("whole.how"), compute.HOWS, key="whole_how", horizontal=True,
               format_func=lambda h: t(f"whole.how.{h}"),
               on_change=lambda: view.choose(how=st.session_state["whole_how"]))  # fmt: skip
    layer = last.choice.layer
    every_head = tuple((layer, h) for h in range(1, s.heads + 1))
    right.button(t("whole.switch_layer", layer=layer, heads=s.heads), key="whole_switch_layer",
                 on_click=lambda: setattr(view, "switched", every_head))  # fmt: skip
    if not view.switched:
        st.caption(t("whole.switch_none"))
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
    try:
        other_ids, _ = model.tokenize(word)
    except CaseError as e:
        st.error(plain(render(session.lang, e.message)))
        return
    other = other_ids[0 if model.spec.causal else min(1, len(other_ids) - 1)]  # an encoder's first is its [CLS]
    key = ("first token", c.model, last.run.sentence, c.layer, head, other)
    found = session.derived.get(key, lambda: compute.first_token(model, last.run.ids, c.layer - 1, head - 1, other))
    labels = [[token(model, i) for i in v.ids] for v in found]
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
    for key, question in questions(s.layers, s.heads, last.choice.layer, s.causal, top).items():
        label = plain(render(session.lang, question))
        st.page_link("pages/whole.py", label=label, icon=":material/help:", query_params={ASK: key})
