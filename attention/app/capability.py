"""What a capability plugs into the frame, registered once (app/registry.py): its pages, its link's parameters, and how
a link opens its view and keeps it. The frame, the share panel and the navigation loop over these."""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from ..forward.compute import Trace
from .session import Session

Params = Mapping[str, str | None]


@dataclass(frozen=True)
class Page:
    file: str  # the page's script, relative to the folder of app.py (as st.Page takes it)
    title: str  # the catalogue key of its title
    icon: str
    url_path: str  # its address after the app's: "" is the landing page
    live: bool = False  # its editors rerun it alone, banners and all (live.py): the frame leaves the banners to it
    hides: bool = False  # it draws an open exercise's hidden numbers as "?" (exercise/); the rest wait till done

    @property
    def name(self) -> str:
        """The file's name without .py: "one_query"."""
        return Path(self.file).stem


def _none(session: Session, params: Params) -> None:
    """No view to open from a link."""


def _nothing(session: Session, *trace: Trace) -> dict:
    return {}


def _no_part(session: Session, trace: Trace, *picked: object) -> None:
    """No part in the share panel, or under a number's arithmetic."""


def _hides_nothing(session: Session, trace: Trace) -> bool:
    return False


def _as_it_is(session: Session, trace: Trace) -> Trace:
    return trace


@dataclass(frozen=True)
class Capability:
    """One capability as the frame sees it."""

    name: str
    pages: tuple[Page, ...]
    params: tuple[str, ...] = ()  # its link's parameters (the share panel's link carries them)
    opens: Callable[[Session, Params], None] = _none  # a tab's first run: its view from the link
    link: Callable[[Session], dict[str, str | None]] = _nothing  # its view as link parameters (None: left out)
    # every run, before the page: a link made inside the app (a question's, a ready-made exercise's) set up once;
    # it may take its parameter out of the URL (the mapping is the URL's)
    follows: Callable[[Session, MutableMapping[str, str]], None] = _none
    share: Callable[[Session, Trace], None] = _no_part  # its part of the share panel (Streamlit): a script, say
    sections: Callable[[Session, Trace], dict] = _nothing  # its sections of the trace file (backward=…)
    # under a number's arithmetic on the Explain page (Streamlit), given the tensor's name and the index: its own
    explains: Callable[[Session, Trace, str, tuple[int, ...]], None] = _no_part
    frame: Callable[[Session, Trace], None] = _no_part  # drawn around every page (Streamlit): an exercise's progress
    # Whether it hides numbers of the trace now (an open exercise): then pages draw shown(session, trace), a page that
    # would show them its own way (not Page.hides) waits (its `waits` drawn instead), and the trace file is off
    hides: Callable[[Session, Trace], bool] = _hides_nothing
    shown: Callable[[Session, Trace], Trace] = _as_it_is
    waits: Callable[[], None] = lambda: None
