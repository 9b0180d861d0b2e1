"""The model view in the frame: its page, and its link's sort, opened and kept."""

from __future__ import annotations

from collections.abc import MutableMapping

from ..app.capability import Capability, Page, Params
from ..app.origins import make
from ..app.session import Session
from . import state
from .state import ASK, PARAMS, Looking


def opens(session: Session, params: Params) -> None:
    view, notice = state.open_link(params)
    if view is not None:
        session.keep(view)
    if notice is not None:
        session.notices.append(notice)


def link(session: Session) -> dict[str, str | None]:
    return state.link(session.view(Looking))


def follows(session: Session, params: MutableMapping[str, str]) -> None:
    """A question's link (?ask=rank…), set up once and taken out of the URL; another capability's is left."""
    ask = params.get(ASK)
    if ask not in ("first", "why_first", "rank", "patch", "induction"):
        return
    params.pop(ASK)
    last = make.shown(session)
    state.answer(session.view(Looking), ask, last.choice.layer if last is not None else 1)


CAPABILITY = Capability(
    "whole", (Page("pages/whole.py", "page.whole", ":material/apps:", "whole"),), PARAMS, opens, link, follows
)
