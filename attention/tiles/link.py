"""The Tiles page in the frame: its page, its link's block sizes and tile, opened and kept."""

from __future__ import annotations

from ..app.capability import Capability, Page, Params
from ..app.session import Session
from . import state
from .state import PARAMS, Tiling


def opens(session: Session, params: Params) -> None:
    named = any(params.get(name) for name in PARAMS)  # the defaults made only for a link that names tiles
    view, notice = state.open_link(params, session.case.n, state.default_blocks(session.case) if named else None)
    if view is not None:
        session.keep(view)
    if notice is not None:
        session.notices.append(notice)


CAPABILITY = Capability(
    "tiles", (Page("pages/tiles.py", "page.tiles", ":material/grid_view:", "tiles"),), PARAMS, opens,
    lambda session: state.link(session.view(Tiling)),
)  # fmt: skip
