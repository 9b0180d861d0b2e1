"""The frame every page runs in: the session brought up to date, the sidebar, the banners, the URL, then the page.

One edit travels one way: widget → session (state.py) → case → trace (compute.py) → figures → page. The banners
(notices, the error, the check against PyTorch) and the share panel are drawn here, once a run, above the page.
"""

from __future__ import annotations

import threading

import streamlit as st

from ..core import Trace
from ..i18n import render
from . import compute, editors, navigation, session, share, sidebar
from .language import t
from .pages import PAGES
from .state import Session
from .text import plain

# Focus made visible where Streamlit's own indicator is not: a radio option or checkbox/toggle hides its real
# <input> (react-aria's VisuallyHidden) and marks focus only with a faint background, and sidebar page links
# show none. No theme option sets these, so a rule in the text colour (readable on both themes) outlines them.
FOCUS_CSS = """<style>
[data-testid=stRadioOption]:has(input:focus-visible), [data-testid=stCheckbox] label:has(input:focus-visible),
[data-testid=stSidebarNavLink]:focus-visible { outline: 2px solid currentColor; outline-offset: 2px; }
</style>"""
_run = threading.local()  # whether this thread is inside run(): each session's script runs in a thread of its own
LIVE = {p.url_path for p in PAGES if p.live}  # pages that draw the banners in their own fragment (live.py)


def run(pages: list | None = None) -> None:
    """app.py's whole body: bring the session up to date, draw the frame, run the chosen page of the registry (or
    of `pages`: a benchmark's frame around an empty page)."""
    s = session.started()
    sidebar.read(s)  # the widgets' and editors' new values, before any widget is drawn
    editors.read(s)
    trace = compute.current(s)
    st.set_page_config(page_title=t("app.title"), page_icon=":material/visibility:", layout="wide")
    st.html(FOCUS_CSS)
    page = navigation.navigation(pages)
    sidebar.draw(s)
    if page.url_path not in LIVE:
        banners(s, trace)
    share.keep_url(s, trace)
    share.panel(s, trace)
    _run.framed = True
    try:
        page.run()
        editors.pace(s)  # the run's last element: a dragged editor sends its next value when it is drawn
    finally:  # a rerun or a stop interrupts the page with an exception
        _run.framed = False


def trace() -> Trace:
    """The trace every page shows: the session's case, computed (or kept) by the frame before the page runs."""
    if not framed():  # Streamlit ran this page alone (see navigation.leave_pages_folder_mode)
        navigation.leave_pages_folder_mode()
    return compute.current(session.current())


def framed() -> bool:
    """Whether this thread runs the whole app now (False: a fragment reruns alone)."""
    return getattr(_run, "framed", False)


def banners(s: Session, trace: Trace) -> None:
    """What the reader must know before the page: notices (a refused link, an opened file), the error that keeps
    the last valid result, the stale rounded weights, and whether the trace agrees with PyTorch's attention."""
    lang = s.lang
    for notice in s.take_notices():
        st.warning(plain(render(lang, notice)), icon=":material/info:")
    if s.error is not None:
        st.error(t("error.last_valid", error=plain(render(lang, s.error.message))), icon="⚠️")
    for note in trace.step("softmax").notes:
        if getattr(note, "key", None) == "note.stale_override":
            st.info(t("notice.stale_override", note=plain(render(lang, note))))
    check = compute.check(s, trace)
    where = "" if trace.device == "cpu" else t("verify.computed_on", device=trace.device)
    note = "" if compute.exact(s, trace) is trace else t("verify.exact_note")
    said = {"oracle": check.oracle, "difference": check.difference, "note": note, "where": where}
    if check.agrees:
        st.caption(f":material/verified: {t('verify.agrees', **said)}")
    else:
        st.error(t("verify.differs", **said))
