"""The Decoding page's body: attention one token at a time with a KV cache, as a chat model generates (on the
session's case, or on tokens a causal model generates here), each output checked against row t of the causal trace."""

from __future__ import annotations

import streamlit as st

from ..app import frame, tab, traces
from ..app.language import lang, t
from ..app.text import plain
from ..base.case import CaseError
from ..base.i18n import render, text
from . import room, state


def decoding() -> None:
    frame.trace()  # (a page run outside the frame goes through it first)
    session = tab.current()
    language = session.lang  # a widget keeps its format_func, called after the run: the language it was drawn in
    st.header(t("decoding.header"))
    intro = st.empty()  # a chat model's decoding, or an encoder-decoder's (the case decoded decides: below)
    source = st.radio(
        t("decoding.source"), state.SOURCES, index=state.SOURCES.index(session.view(state.DecodingView).source),
        horizontal=True,
        format_func=lambda s: text(language, f"decoding.source_{s}"), key="decoding_source",
    )  # fmt: skip
    state.choose(session, source=source)
    if source == "generation":
        room.generation_controls(session)
    case = state.case(session)
    if case is not None and case.cross:  # an encoder-decoder's cross-attention: the source's cache, made once
        intro.write(t("decoding.intro_cross", n=case.n, n_kv=case.n_kv))
    else:
        intro.write(t("decoding.intro"))
    causal = lambda of: traces.trace_of(session, of)  # noqa: E731 (the session's own trace when the case is causal)
    made = None if case is None else state.decoding(session, case, causal)
    if case is None:
        st.info(t("decoding.generate_first"))
    elif isinstance(made, CaseError):
        st.error(t("decoding.refused", error=plain(render(lang(), made.message))))
    else:
        st.info(plain(render(lang(), made.status())), icon=":material/verified:")
        for note in made.notes:
            st.caption(plain(render(lang(), note)))
        room.step_view(session, made, causal(made.case))
        room.work_and_memory(session, made)
