"""The model room: the sidebar's model, sentence, layer and head (an encoder-decoder's attention and target sentence
too: the section of origins/model.py), every head of the layer as small maps to open one, and a decoder's next tokens
(an encoder-decoder's translation). The choice's operations are origins/make.py's."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from .. import models
from ..app.language import t
from ..app.origins import make
from ..app.origins.model import Choice, ModelHead, layers, made_case
from ..app.session import Session
from ..app.text import plain
from ..base.i18n import render, text
from ..forward.compute import attend
from ..show.heatmap import heatmap
from ..whole import room as whole_room
from . import translation_room
from .kinds import PROBE, first_heavy, kinds, probe_scores
from .seq2seq import PARTS
from .sink import sinks

KEYS = {"real_model": "model", "real_text": "sentence", "real_layer": "layer", "real_head": "head",
        "real_part": "part", "real_target": "target"}  # fmt: skip
EXAMPLE = "real_example"  # a picked example sentence goes into the sentence box
MAPS_PER_ROW = 4


def choice(session: Session) -> Choice:
    """The choice shown: the session's, or the default one before a model was loaded."""
    head = make.shown(session)
    return head.choice if head is not None else Choice.default()


def read(session: Session) -> None:
    """The room's new values (as the sidebar's: a value is new when it differs from what its widget showed)."""
    s, shown = st.session_state, session.widgets
    changes = {KEYS[k]: s[k] for k in KEYS if k in s and s[k] != shown.get(k, s[k])}
    if s.get(EXAMPLE) is not None:  # an example picked: into the sentence box, and the picker empty again
        changes["sentence"], s[EXAMPLE] = s[EXAMPLE], None
    if changes:
        make.choose_model(session, session.loader, **changes)


def draw(session: Session) -> None:
    """The room in the sidebar, under the preset: what to install, or the model, sentence, layer and head (an
    encoder-decoder's attention first, and its target sentence under the source)."""
    c, language, head = choice(session), session.lang, make.shown(session)
    typed = head.typed if head is not None else c.sentence
    shown = {"real_model": c.model, "real_text": typed, "real_layer": c.layer, "real_head": c.head}
    if c.part is not None:
        shown |= {"real_part": c.part, "real_target": _target(head)}
    for key, value in shown.items():
        if st.session_state.get(key) != value:
            st.session_state[key] = value
    session.widgets |= shown
    offered = models.ids()
    offered = offered if c.model in offered else (c.model, *offered)
    # each widget starts from the shown value, should the browser draw it afresh without its state (sidebar._at)
    st.selectbox(
        t("real.model"), offered, offered.index(c.model), key="real_model", help=t("real.model_help"),
        format_func=lambda m: render(language, models.label(m)),  # after the run: in the language drawn in
    )  # fmt: skip
    if (missing := models.install_message(c.model)) is not None:
        st.error(plain(render(language, missing)), icon=":material/download:")
        st.code(f"pip install -r requirements.txt && {models.INSTALL}", language="bash", wrap_lines=True)
        return
    spec = models.spec(c.model)
    st.caption(plain(render(language, models.about(spec))))
    if (sizes := models.sizes(c.model)) is not None:  # the picker's line is cut in a narrow sidebar: said whole
        st.caption(plain(render(language, sizes)))
    if c.part is not None:
        st.radio(t("real.part"), PARTS, PARTS.index(c.part), key="real_part", help=t("real.part_help"),
                 format_func=lambda p: text(language, f"real.part.{p}"))  # fmt: skip
    st.text_input(
        t("real.source" if c.part else "real.sentence"), typed, key="real_text", max_chars=models.MAX_SENTENCE_CHARS,
        help=t("real.sentence_help", tokens=models.MAX_SENTENCE_TOKENS),
    )  # fmt: skip
    if c.part is not None:
        _target_box(session, c, head)
    st.selectbox(
        t("real.examples"), models.EXAMPLES, index=None, key=EXAMPLE, placeholder=t("real.examples_placeholder")
    )
    left, right = st.columns(2)
    most = layers(spec, c.part)
    left.number_input(t("real.layer"), 1, most, c.layer, step=1, key="real_layer", help=t("real.layer_help"))
    right.number_input(t("real.head"), 0, spec.heads, c.head, step=1, key="real_head", help=t("real.head_help"))
    if head is not None and session.origin is not head:  # edited from it: say so, and the way back
        st.info(plain(render(language, session.origin.title())), icon=":material/edit:")
        st.button(t("real.back"), key="real_back", on_click=lambda: make.reset(session), width="stretch")


def _target(head: ModelHead | None) -> str:
    """The target box's text: as typed, else the pair's target (the model's translation when none was typed)."""
    if head is None or head.pair is None:
        return ""
    return head.typed_target if head.typed_target is not None else head.pair.target.sentence


def _target_box(session: Session, c: Choice, head: ModelHead | None) -> None:
    """An encoder-decoder's target sentence, and the way back to the model's own translation of the source."""
    st.text_input(t("real.target"), _target(head), key="real_target", max_chars=models.MAX_SENTENCE_CHARS,
                  help=t("real.target_help", tokens=models.MAX_SENTENCE_TOKENS - 1))  # fmt: skip
    if c.target is None:
        st.caption(t("real.target_translated"))
    else:
        st.button(t("real.translate"), key="real_translate", icon=":material/translate:", width="stretch",
                  on_click=lambda: make.choose_model(session, session.loader, target=None))  # fmt: skip


def layer_weights(session: Session, head: ModelHead):
    """Every head's step-5 weights of the layer shown (h, n, n_kv), kept while the sentences, part and layer are."""
    c, run = head.choice, head.run

    def weights():
        every = replace(c, head=0)
        return attend(made_case(session.loader(c.model), every, run, head.pair))["weights"].cpu()

    return session.derived.get(("layer weights", c.model, c.sentence, c.target, c.part, c.layer), weights)


def heads(session: Session) -> None:
    """Every head of the layer as a small map of its weights; a head's button opens it."""
    if (last := make.shown(session)) is None:
        return
    c, tokens, made = last.choice, last.run.tokens, session.origin is last  # not edited since
    keys = tokens if c.part != "cross" else last.pair.source.tokens  # the cross-attention's keys: the source's
    st.header(t("real.heads", layer=c.layer, model=models.title(c.model)))
    st.caption(t("real.heads_help"))
    if c.part is not None:  # which attention, and which sentence is down and across
        st.caption(t(f"real.heads_part.{c.part}"))
    whole_room.ask(session)  # every layer's heads at once, and the questions about them
    every = layer_weights(session, last)
    spec = models.spec(c.model)
    scores = session.derived.get(  # one pass of the probe through the model, kept per layer
        ("induction", c.model, c.layer), lambda: probe_scores(session.loader(c.model), c.layer - 1)
    ) if spec.causal else None  # fmt: skip
    found = None if c.part == "cross" else kinds(every, causal(spec, c.part), scores)  # kinds: over its own sentence
    if found is not None:
        st.caption(t("real.kinds_help", n=len(tokens), first=first_heavy(found), heads=len(found)))
        if scores is not None:
            st.caption(t("real.kinds_probe", length=PROBE))
    st.button(
        t("real.open_layer", heads=len(every)), key="open_layer", disabled=made and c.head == 0,
        on_click=lambda: make.choose_model(session, session.loader, head=0), icon=":material/view_week:",
    )  # fmt: skip
    columns = st.columns(MAPS_PER_ROW)
    for head in range(len(every)):
        where = columns[head % MAPS_PER_ROW]
        title = t("real.head_title", head=head + 1)
        fig = heatmap(every[head], list(tokens), list(keys), "query", "key", title=title, lang=session.lang)
        fig.update_layout(height=220, margin={"l": 0, "r": 0, "t": 30, "b": 0}, showlegend=False)
        fig.update_traces(showscale=False, text=None, texttemplate=None)
        fig.update_xaxes(showticklabels=False)
        fig.update_yaxes(showticklabels=False)
        where.plotly_chart(fig, key=f"head_map_{head}", width="stretch", config={"displayModeBar": False})
        if found is not None:
            kind = found[head]
            where.caption(t(f"real.kind.{kind.name}", share=f"{kind.share:.2f}"))
        shown = made and head + 1 == c.head
        where.button(
            t("real.open_head", head=head + 1), key=f"open_head_{head}", disabled=shown, width="stretch",
            on_click=lambda h=head + 1: make.choose_model(session, session.loader, head=h),
        )  # fmt: skip


def causal(spec, part: str | None) -> bool:
    """Whether the part's rows see earlier tokens alone: a causal model's, an encoder-decoder's decoder's."""
    return spec.causal or part == "decoder"


def sink(session: Session, trace) -> None:
    """Why so many heads park their weight on the first token, with this head's numbers (a head as the model made
    it: an edited one, or a whole layer, is not one head of the model any more)."""
    last = make.shown(session)
    if last is None or session.origin is not last or trace.case.options.heads != 1 or trace.case.n < 2:
        return
    if last.choice.part == "cross":  # its rows read another sentence: no first token of their own to park on
        return
    one_way, n = causal(models.spec(last.choice.model), last.choice.part), trace.case.n
    layer = kinds(layer_weights(session, last), one_way)
    st.header(t("real.sink_header"))
    st.write(t("real.sink_why" if one_way else "real.sink_why_encoder", first=first_heavy(layer), heads=len(layer)))
    rows = [(trace.case.tokens[s.position], s.share, s.value_norm, s.others_norm, s.output_norm, s.without_norm)
            for s in sinks(trace["weights"].cpu(), trace["values"].cpu(), trace.outputs.cpu(), one_way)]  # fmt: skip
    names = [t("real.sink_token"), t("real.sink_share", n=n), t("real.sink_norm"), t("real.sink_others"),
             t("real.sink_output"), t("real.sink_without")]  # fmt: skip
    three = {name: st.column_config.NumberColumn(format="%.3f") for name in names[1:]}
    st.dataframe(pd.DataFrame(rows, columns=names), hide_index=True, key="sink_table", column_config=three)
    token, *numbers = rows[0]  # the first token's, in words
    said = dict(zip(("share", "v", "others", "output", "without"), (f"{x:.2f}" for x in numbers), strict=True))
    st.caption(t("real.sink_read", token=token, **said))
    if last.choice.part == "decoder":  # the whole model's page takes the first token from a one-stack pass alone
        return
    st.page_link("pages/whole.py", label=t("whole.question.why_first"), icon=":material/help:",
                 query_params={"ask": "why_first"})  # fmt: skip


def next_tokens(session: Session) -> None:
    """A decoder's five most likely next tokens after the sentence, with their probabilities; an encoder-decoder's
    translation, a token at a time, with its alignment first (and its decoder's next tokens after the target)."""
    if (last := make.shown(session)) is not None and last.pair is not None:
        translation_room.translation(session, last)
    if last is None or last.run.next_tokens is None:
        return
    st.subheader(t("real.next_tokens"))
    shown = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥"})  # as the tokens are labelled (models.readable)
    rows = [(token.translate(shown), p) for token, p in last.run.next_tokens]
    table = pd.DataFrame(rows, columns=[t("real.token"), t("real.probability")])
    probability = st.column_config.ProgressColumn(t("real.probability"), format="percent", min_value=0, max_value=1)
    st.dataframe(table, hide_index=True, column_config={t("real.probability"): probability}, key="next_tokens")
    st.caption(t("real.next_tokens_help" if last.pair is None else "real.next_tokens_target"))
