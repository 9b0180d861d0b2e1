"""Navigation between the pages of the registry, and the one workaround for Streamlit's pages/ folder mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from .language import t
from .registry import PAGES

if TYPE_CHECKING:
    from streamlit.navigation.page import StreamlitPage  # what st.Page returns


def pages() -> list[StreamlitPage]:
    """The registry as st.Page objects, titled in the session's language."""
    return [
        st.Page(p.file, title=t(p.title), icon=p.icon, url_path=p.url_path or None, default=not p.url_path)
        for p in PAGES
    ]


def navigation(among: list[StreamlitPage] | None = None) -> StreamlitPage:
    """The page this run shows, of the registry's (st.navigation draws their links at the top of the sidebar)."""
    return st.navigation(pages() if among is None else among, expanded=True)  # every page, not 10 and "View more"


def leave_pages_folder_mode() -> None:
    """Send this URL through app.py when Streamlit ran a page alone, in its legacy pages/ folder mode.

    A folder named pages/ beside app.py makes a fresh server start in the legacy multipage mode, which runs a
    deep-linked page without app.py (no frame, no session) until some session has called st.navigation: as the
    documentation says, "as soon as any session of your app executes the st.navigation command, your app will
    ignore the pages/ directory (across all sessions)". Calling it (hidden) and rerunning leaves that mode with
    public API only. The design card names the folder pages/; a Streamlit option to turn off the folder mode (or
    an entry point that is always run first) would let this go.
    """
    st.navigation(pages(), position="hidden")
    st.rerun()
