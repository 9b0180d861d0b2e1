"""Share and export: the URL kept a link to the view, and the sidebar's panel with the link, the files and an import."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from .. import files, i18n, tiles
from ..core import STEP_NAMES, Trace, step_near
from . import compute, decoding_room, exercises, learning, origins
from .choices import IMAGE_FORMATS
from .language import t
from .session import Session

TRACE_FILE_MAX_NUMBERS = 1_000_000  # a trace file is written in Python, number by number: ~1 s per million


def link_token(session: Session, trace: Trace) -> str | None:
    """The case as a link token; None when it is longer than a link may be (it is then shared as a file)."""
    return session.derived.get(("link", trace.case), lambda: files.case_to_link(trace.case, files.MAX_LINK_CHARS))


def keep_url(session: Session, trace: Trace) -> None:
    """Keep the URL a link to this view: the case by what its origin names it with (a model's head by its model,
    sentence, layer and head; the article by nothing), else by its numbers (unless too long); the step by its name,
    the language."""
    params, named = st.query_params, session.origin.link()
    token = link_token(session, trace) if named is None else None
    for name in origins.PARAMS:
        _set(params, name, token if name == "case" else (named or {}).get(name))
    # the backward pass (issue 21): its loss, and training steps as the learning rate and their count on the case
    # the link named before the first step (the weights themselves stay out of the link)
    learning.settle(session)
    for name, value in learning.link(session).items():
        _set(params, name, value)
    if session.learned.trained and session.learned.untrained_link is not None:
        for name in origins.PARAMS:
            _set(params, name, session.learned.untrained_link.get(name))
    step = step_near(trace.case, session.step)  # RoPE's, on a case without it: the step it is part of
    _set(params, "step", step if step != STEP_NAMES[0] else None)
    for name, value in tiles.link(session.tiling.blocks, session.tiling.tile).items():  # the Tiles page's blocks, tile
        _set(params, name, value)
    decoding = decoding_room.link(session)  # the Decoding page's step, when one is chosen; its generation
    for name in decoding_room.PARAMS:
        _set(params, name, decoding.get(name))
    browser = i18n.language_for(st.context.locale)
    _set(params, "lang", session.lang if (session.lang, browser) != (i18n.DEFAULT,) * 2 else None)
    exercises.keep_url(session)


def _set(params, name: str, value: str | None) -> None:
    if value is None:
        params.pop(name, None)
    elif params.get(name) != value:
        params[name] = value


def panel(session: Session, trace: Trace) -> None:
    """The Share and export panel: its link, downloads and upload are made when it opens (closed, it costs a rerun
    nothing)."""
    expander = st.sidebar.expander(t("share.expander"), icon=":material/share:", key="share_panel", on_change="rerun")
    if not expander.open:
        return
    with expander:
        if session.origin.link() is None and link_token(session, trace) is None:
            st.caption(t("share.too_long", limit=files.MAX_LINK_CHARS))
        else:
            params = st.query_params  # the sentence is escaped; the rest is base64url, digits and names
            named = (*origins.PARAMS, *learning.PARAMS, "step", *tiles.PARAMS, *decoding_room.PARAMS, "lang")
            query = urlencode({k: params[k] for k in named if k in params})
            st.code(f"{st.context.url or ''}{'?' if query else ''}{query}", language=None, wrap_lines=True)
            st.caption(t("share.copy"))
        _downloads(session, trace)
        exercises.share_part(session)
        st.file_uploader(t("share.upload"), type=["json"], key="upload", on_change=lambda: _import(session))
        st.session_state.image_format = session.image_format
        st.radio(
            t("share.image_format"), IMAGE_FORMATS, key="image_format", horizontal=True,
            on_change=lambda: setattr(session, "image_format", st.session_state.image_format),
        )  # fmt: skip


def _downloads(session: Session, trace: Trace) -> None:
    """The case file, the trace file and the script, each made on click (the trace file can be large). The buttons
    keep what makes them until the next run: the case, and the session to find its trace, never a trace itself."""
    get, case = st.download_button, trace.case
    get(t("share.case_file"), lambda: files.dump_case(case), "case.json", "application/json",
        on_click="ignore", key="get_case")  # fmt: skip
    too_big, hiding = trace.numbers > TRACE_FILE_MAX_NUMBERS, exercises.hiding(session, trace)
    get(t("share.trace_file"), lambda: _trace_file(session), "trace.json", "application/json",
        on_click="ignore", key="get_trace", disabled=too_big or hiding)  # fmt: skip
    if too_big:
        st.caption(t("share.trace_too_big", numbers=trace.numbers))
    elif hiding:  # every number of every step is in it
        st.caption(t("exercise.no_trace_file"))
    origin = session.origin  # a model's head's script loads the model (its numbers are thousands)
    get(
        t("share.script"),
        lambda: origin.script(case),
        "attention_case.py",
        "text/x-python",
        on_click="ignore",
        key="get_script",
    )
    get(
        t("backward.script"),
        lambda: _backward_script(session),
        "attention_backward.py",
        "text/x-python",
        on_click="ignore",
        key="get_backward_script",
    )  # fmt: skip  (issue 21)


def _backward_script(session: Session) -> str:
    """The backward pass's script with the session's loss: the steps by hand, then autograd's check (issue 21)."""
    from ..backward_script import to_backward_script

    trace = compute.current(session)
    return to_backward_script(trace.case, learning.loss(session, trace))


def _trace_file(session: Session) -> str:
    """The trace file, with its backward section for the Backward page's loss (issue 21)."""
    trace = compute.current(session)
    return files.dump_trace(trace, None if learning.too_big(trace) else learning.result(session, trace))


def _import(session: Session) -> None:
    upload = st.session_state.get("upload")
    if upload is not None:
        session.import_file(upload.name, upload.getvalue())
