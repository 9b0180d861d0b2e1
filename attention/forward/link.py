"""The forward pass in the frame: its pages (the landing page first), its link's step, and the overview's questions,
whose links set up their answer."""

from __future__ import annotations

from ..app import traces
from ..app.capability import Capability, Page, Params
from ..app.session import Session
from ..base.explain import explainable
from ..base.i18n import excerpt, msg
from . import room, state
from .state import Explained
from .steps import STEP_NAMES, step_names, step_near, step_of


def opens(session: Session, params: Params) -> None:
    """The link's step: by its name (step=scores), or as old links held it, 1 … 8 (9), and 3b; the number the
    Explain page explains (explain=scores_raw.2.3)."""
    if said := params.get("step"):
        if (name := step_of(session.case, said)) is not None:
            session.step = name
        else:
            session.notices.append(msg("notice.bad_step", steps=len(step_names(session.case))))
    if said := params.get(state.PARAM):
        if (view := state.from_link(said, _shapes(session))) is not None:
            session.keep(view)
        else:
            session.notices.append(msg("notice.bad_explain", value=excerpt(said)))


def _shapes(session: Session) -> dict[str, tuple[int, ...]]:
    trace = traces.current(session)
    return {name: tuple(trace[name].shape) for name in explainable(trace)}


def link(session: Session) -> dict[str, str | None]:
    step = step_near(session.case, session.step)  # RoPE's, on a case without it: the step it is part of
    explained = state.link(session.view(Explained))
    if (said := explained[state.PARAM]) is not None and state.from_link(said, _shapes(session)) is None:
        explained = {state.PARAM: None}  # a number this case no longer has (fewer tokens now): not in a link
    return {"step": step if step != STEP_NAMES[0] else None} | explained


CAPABILITY = Capability(
    "forward",
    (
        Page("pages/overview.py", "page.overview", ":material/home:", "", hides=True),
        Page("pages/walkthrough.py", "page.walkthrough", ":material/stairs:", "walkthrough", live=True, hides=True),
        Page("pages/inputs.py", "page.inputs", ":material/edit:", "inputs", live=True, hides=True),
        Page("pages/broadcasting.py", "page.broadcasting", ":material/view_in_ar:", "broadcasting", hides=True),
        Page("pages/one_query.py", "page.one_query", ":material/my_location:", "one-query"),
        Page("pages/variants.py", "page.variants", ":material/compare:", "variants"),
        Page("pages/multi_head.py", "page.multi_head", ":material/view_week:", "multi-head", live=True),
        Page("pages/explain.py", "page.explain", ":material/calculate:", "explain", hides=True),
    ),
    ("step", state.PARAM),
    opens,
    link,
    follows=room.answer,
)
