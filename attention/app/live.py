"""Live pages: a page's editors and everything that shows their numbers, its banners too, as one fragment, so that
an edit (or a step of a drag, or the walkthrough's next step) reruns that alone, not the sidebar and the frame around
it (bench/server.md). When an edit changes what the frame around shows, the whole app reruns."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ..forward.compute import Trace
from . import editors, frame, links, tab, traces
from .session import Session

SHARE_PANEL = "share_panel"  # the share panel's expander key (share.py): open, it shows the case
FRAMED = "live_framed_as"  # what the frame around showed in the last run of the whole app (outside)


def page(body: Callable[[Trace], None]) -> None:
    """Draw the page's `body(trace)` under its banners, as a fragment that an edit in it reruns alone."""
    s = tab.current()
    st.fragment(lambda: _run(s, body))()


def _run(s: Session, body: Callable[[Trace], None]) -> None:
    if frame.framed():  # a run of the whole app: the frame read the edits; what it drew is this
        st.session_state[FRAMED] = outside(s)
    else:  # an edit in this fragment started this run: the frame's read is not run
        editors.read(s)
        if outside(s) != st.session_state.get(
            FRAMED
        ):  # a new grid (a file opened), or the open share panel's link and files
            st.rerun(scope="app")
    trace = traces.current(s)
    if not frame.framed():
        links.keep(s)  # the URL stays a link to what is shown
    frame.banners(s, trace)
    body(frame.shown(s, trace))  # an open exercise's numbers hidden
    editors.pace(s, live=True)


def outside(s: Session) -> tuple:
    """What the frame around a live page shows that its editors can change: the sidebar's controls and sizes (a
    file opened by a page's uploader), the language, and, while the share panel is open, the case and step it links
    to."""
    return s.controls, s.generation, s.lang, (s.case, s.step) if st.session_state.get(SHARE_PANEL) else None
