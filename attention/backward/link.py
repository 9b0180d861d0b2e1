"""The Backward page in the frame: its page, its link's loss and training steps, its script in the share panel, and
its section of the trace file."""

from __future__ import annotations

from ..app import origins, traces
from ..app.capability import Capability, Page, Params
from ..app.session import Session
from ..forward.compute import Trace
from . import room, state
from .files import backward_to_dict
from .state import PARAMS, Learned


def opens(session: Session, params: Params) -> None:
    state.open_link(session, params, lambda case: traces.trace_of(session, case))


def link(session: Session) -> dict[str, str | None]:
    """The loss, and training steps as the learning rate and their count on the case the link named before the first
    step (the weights themselves stay out of the link)."""
    state.settle(session)
    out, view = state.link(session), session.view(Learned)
    if view.trained and view.untrained_link is not None:
        out |= {name: view.untrained_link.get(name) for name in origins.PARAMS}
    return out


def sections(session: Session, trace: Trace) -> dict:
    return {} if state.too_big(trace) else {"backward": backward_to_dict(state.result(session, trace))}


CAPABILITY = Capability(
    "backward", (Page("pages/backward.py", "backward.page", ":material/undo:", "backward"),), PARAMS, opens, link,
    share=room.script_button, sections=sections, explains=room.explanation,
)  # fmt: skip
