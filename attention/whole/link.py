"""The model view in the frame: its page, and its link's sort, opened and kept."""

from __future__ import annotations

from ..app.capability import Capability, Page, Params
from ..app.session import Session
from . import state
from .state import PARAMS, Looking


def opens(session: Session, params: Params) -> None:
    view, notice = state.open_link(params)
    if view is not None:
        session.keep(view)
    if notice is not None:
        session.notices.append(notice)


def link(session: Session) -> dict[str, str | None]:
    return state.link(session.view(Looking))


CAPABILITY = Capability(
    "whole", (Page("pages/whole.py", "page.whole", ":material/apps:", "whole"),), PARAMS, opens, link
)
