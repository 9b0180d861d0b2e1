"""The Tiles page in the frame: its page, its link's block sizes and tile, opened and kept."""

from __future__ import annotations

from ..app.capability import Capability, Page, Params
from ..app.session import Session
from . import room, state
from .state import PARAMS, Tiling


def opens(session: Session, params: Params) -> None:
    case = session.case
    view, notice = state.open_link(params, case.n, case.n_kv if case.cross else None)  # key tiles: the source's
    if view is not None:
        session.keep(view)
    if notice is not None:
        session.notices.append(notice)


def link(session: Session) -> dict[str, str | None]:
    view = session.view(Tiling)  # the blocks in effect only once some were chosen: the defaults cost tiled runs
    return state.link(view, room.blocks(session) if view.tile is not None or view.blocks is not None else None)


CAPABILITY = Capability(
    "tiles", (Page("pages/tiles.py", "page.tiles", ":material/grid_view:", "tiles"),), PARAMS, opens, link
)
