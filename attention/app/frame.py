"""The frame every page runs in: the session brought up to date, the sidebar, the banners, the URL, then the page.

One edit travels one way: widget → session (session.py) → case → trace (traces.py) → figures → page. The banners
(notices, the error, the check against PyTorch) and the share panel are drawn here, once a run, above the page.
"""

from __future__ import annotations

import threading

import streamlit as st

from ..base.i18n import msg, render
from ..forward.compute import Trace
from . import charts, editors, links, navigation, process, reconnect, share, sidebar, tab, traces
from .language import t
from .origins import make
from .registry import BY_URL, CAPABILITIES, PAGES
from .session import Session
from .text import plain

# Focus made visible where Streamlit's own indicator is not: a radio option or checkbox/toggle hides its real
# <input> (react-aria's VisuallyHidden) and marks focus only with a faint background, and sidebar page links
# show none. No theme option sets these, so a rule in the text colour (readable on both themes) outlines them.
# A page link's label is one line, clipped at the column's edge: the overview's questions end with their number,
# the point of the question, so a link in a page wraps instead (the sidebar's keep their one line).
APP_CSS = """<style>
[data-testid=stRadioOption]:has(input:focus-visible), [data-testid=stCheckbox] label:has(input:focus-visible),
[data-testid=stSidebarNavLink]:focus-visible { outline: 2px solid currentColor; outline-offset: 2px; }
[data-testid=stMain] [data-testid=stPageLink-NavLink] :is(span, div, p) { white-space: normal; overflow: visible; }
.st-key-fit_numbers { display: none; }
</style>"""
STATUS_PX = 76  # the status row's height: a badge, or a message of up to two lines
BADGE_PX = 230  # the check's badge and the way back to the article: their labels whole, in either language
# An emoji: the browser draws it from a data: URL. A ":material/…:" icon makes every visit fetch its SVG from
# fonts.gstatic.com (Streamlit's frontend builds that URL): offline it fails, hosted it tells a third party of each.
PAGE_ICON = "👁️"
_run = threading.local()  # whether this thread is inside run(): each session's script runs in a thread of its own
LIVE = {p.url_path for p in PAGES if p.live}  # pages that draw the banners in their own fragment (live.py)
process.settle()  # once a process: this module is imported by its first run


def run(pages: list | None = None) -> None:
    """app.py's whole body: bring the session up to date, draw the frame, run the chosen page of the registry (or
    of `pages`: a benchmark's frame around an empty page)."""
    first_run = tab.current() is None
    s = links.started()
    sidebar.read(s)  # the widgets' (and the origin's room's) and editors' new values, before any widget is drawn
    editors.read(s)
    links.follow(s)  # a link made inside the app: a question's, a ready-made exercise's
    trace = traces.current(s)
    st.set_page_config(page_title=t("app.title"), page_icon=PAGE_ICON, layout="wide")
    st.html(APP_CSS)
    charts.fit_numbers()  # cell numbers fitted to the size each chart is drawn at, in the browser (web/fit.js)
    if reconnect.follow(t("notice.upload_lost"), first_run):  # its server was lost: restored from its link
        s.notices.append(msg("notice.server_changed"))
    page = navigation.navigation(pages)
    sidebar.draw(s)
    for capability in CAPABILITIES:  # what a capability draws around every page (an exercise's progress)
        capability.frame(s, trace)
    if page.url_path not in LIVE:
        banners(s, trace)
    links.keep(s)
    share.panel(s, trace)
    _run.framed = True
    try:
        hiding = [c for c in CAPABILITIES if c.hides(s, trace)]
        if BY_URL[page.url_path].hides or not hiding:  # a page that draws hidden numbers as "?" runs; others wait
            page.run()
        else:
            hiding[0].waits()
        editors.pace(s)  # the run's last element: a dragged editor sends its next value when it is drawn
    finally:  # a rerun or a stop interrupts the page with an exception
        _run.framed = False


def trace() -> Trace:
    """The trace every page shows: the session's case, computed (or kept) by the frame before the page runs."""
    if not framed():  # Streamlit ran this page alone (see navigation.leave_pages_folder_mode)
        navigation.leave_pages_folder_mode()
    s = tab.current()
    return shown(s, traces.current(s))


def shown(s: Session, trace: Trace) -> Trace:
    """The trace as the pages draw it: an open exercise's numbers hidden (a capability's, Capability.shown)."""
    for capability in CAPABILITIES:
        trace = capability.shown(s, trace)
    return trace


def framed() -> bool:
    """Whether this thread runs the whole app now (False: a fragment reruns alone)."""
    return getattr(_run, "framed", False)


def banners(s: Session, trace: Trace) -> None:
    """What the reader must know before the page: notices (a refused link, an opened file), then one status row of
    a fixed height (an edit's message must not push the page down): whether the trace agrees with PyTorch's
    attention, as a badge with the detail on demand, and beside it the one line that matters now: the error that
    keeps the last valid result, or why the article's rounded softmax is not used, with the way back."""
    lang = s.lang
    notices, s.notices = s.notices, []  # each said once
    for notice in notices:
        st.warning(plain(render(lang, notice)), icon=":material/info:")
    row = st.container(horizontal=True, wrap=False, vertical_alignment="center", height=STATUS_PX, border=False)
    own = traces.origin_check(s, trace)  # a model's head: checked against the model's own output instead
    check, kind = (traces.check(s, trace), "verify") if own is None else (own, s.origin.verify)
    where = "" if trace.device == "cpu" else t("verify.computed_on", device=trace.device)
    note = "" if traces.exact(s, trace) is trace else t("verify.exact_note")
    said = {"oracle": render(lang, check.oracle), "difference": check.difference, "note": note, "where": where}
    if check.agrees:
        badge = row.popover(t(f"{kind}.badge"), icon=":material/verified:", key="check", width=BADGE_PX)
        badge.caption(t(f"{kind}.agrees", **said))
    else:
        row.error(t(f"{kind}.differs", **said))
    if s.error is not None:
        row.error(t("error.last_valid", error=plain(render(lang, s.error.message))), icon="⚠️")
    elif s.rounding is not None:  # the rounded softmax is chosen but would be wrong here: say so, and the way back
        row.info(render(lang, s.rounding), icon=":material/info:")
        back = lambda: make.back_to_article(s)  # noqa: E731
        row.button(t("notice.back_to_article"), key="back_to_article", on_click=back, width=BADGE_PX)
