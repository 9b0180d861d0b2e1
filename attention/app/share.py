"""Share and export: the sidebar's panel with the link to the view, the files, the scripts and an import."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from ..base import files
from ..forward.compute import Trace
from ..forward.files import dump_trace
from . import links, traces
from .choices import IMAGE_FORMATS
from .language import t
from .origins import make
from .registry import CAPABILITIES
from .session import Session

TRACE_FILE_MAX_NUMBERS = 1_000_000  # a trace file is written in Python, number by number: ~1 s per million


def panel(session: Session, trace: Trace) -> None:
    """The Share and export panel: its link, downloads and upload are made when it opens (closed, it costs a rerun
    nothing)."""
    expander = st.sidebar.expander(t("share.expander"), icon=":material/share:", key="share_panel", on_change="rerun")
    if not expander.open:
        return
    with expander:
        if session.origin.link() is None and links.link_token(session) is None:
            st.caption(t("share.too_long", limit=files.MAX_LINK_CHARS))
        else:
            params = st.query_params  # the sentence is escaped; the rest is base64url, digits and names
            query = urlencode({k: params[k] for k in links.PARAMS if k in params})
            st.code(f"{st.context.url or ''}{'?' if query else ''}{query}", language=None, wrap_lines=True)
            st.caption(t("share.copy"))
        _downloads(session, trace)
        for capability in CAPABILITIES:
            capability.share(session, trace)
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
    too_big, hidden = trace.numbers > TRACE_FILE_MAX_NUMBERS, any(c.hides(session, trace) for c in CAPABILITIES)
    get(t("share.trace_file"), lambda: _trace_file(session), "trace.json", "application/json",
        on_click="ignore", key="get_trace", disabled=too_big or hidden)  # fmt: skip
    if too_big:
        st.caption(t("share.trace_too_big", numbers=trace.numbers))
    elif hidden:  # every number of every step is in it
        st.caption(t("exercise.no_trace_file"))
    origin = session.origin  # a model's head's script loads the model (its numbers are thousands)
    get(t("share.script"), lambda: origin.script(case), "attention_case.py", "text/x-python", on_click="ignore",
        key="get_script")  # fmt: skip


def _trace_file(session: Session) -> str:
    """The trace file, with the capabilities' sections (the Backward page's loss: its backward pass)."""
    trace = traces.current(session)
    return dump_trace(trace, **{k: v for c in CAPABILITIES for k, v in c.sections(session, trace).items()})


def _import(session: Session) -> None:
    upload = st.session_state.get("upload")
    if upload is not None:
        make.import_file(session, upload.name, upload.getvalue())
