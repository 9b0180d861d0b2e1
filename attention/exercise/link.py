"""An exercise's link: a shared one or a ready-made one's opened (its blanks checked against the case's trace), the
answers found so far kept in it, and the exercise capability as the frame registers it."""

from __future__ import annotations

from collections.abc import MutableMapping

from ..app import traces
from ..app.capability import Capability, Page
from ..app.origins import make
from ..app.session import Session
from ..base.case import CaseError
from ..base.i18n import excerpt, msg
from . import room
from .compute import Blank, Exercise, from_link
from .state import FOUND, PARAM, PARAMS, PRESENT, READY, SHOWN, Attempt, Classroom, hiding, on_case, shown


def follows(session: Session, params: MutableMapping[str, str]) -> None:
    """An exercise the URL names (a shared link, or a ready-made one's from the overview), opened once: its blanks
    checked against the case's trace, and the answers found so far (found=, shown=) kept. A bad one is refused with
    a notice; the case opens all the same."""
    classroom = session.view(Classroom)
    if (present := params.get(PRESENT)) is not None:
        classroom.present = present == "1"
        if present not in ("0", "1"):  # said once: the URL forgets it (the view keeps no presenter)
            session.notices.append(msg("exercise.bad_present", value=excerpt(present)))
            params.pop(PRESENT, None)
    token = params.get(PARAM)
    if token is None or (classroom.exercise is not None and _token(classroom.exercise) == token):
        return
    if token in READY:
        mask, cells = READY[token]
        make.back_to_article(session)
        if mask != "none":
            session.choose(mask=mask)
        blanks = tuple(Blank(name, index) for name, index in cells)  # their prompt is the catalogue's
        made, ready = Exercise(blanks), token
    elif token in (own := on_case(traces.current(session))):  # the case's own: opened on it, as it is
        made, ready = Exercise(tuple(Blank(name, index) for name, index in own[token])), token
    else:
        try:
            made, ready = from_link(token, traces.current(session)), None
        except CaseError as e:
            session.notices.append(msg("exercise.refused", reason=e.message))
            params.pop(PARAM, None)  # the link is refused once: the URL forgets it
            return
    attempt = Attempt(made, session.case, ready=ready)
    for param, into in ((FOUND, attempt.found), (SHOWN, attempt.shown)):
        numbers, junk = _numbers(params.get(param), len(made.blanks))
        into.update(numbers)
        if junk:  # said, like every other bad part of a link; the numbers that are blanks' are kept
            said = msg("exercise.bad_answers", param=param, value=excerpt(params[param]), count=len(made.blanks))
            session.notices.append(said)
    classroom.exercise, classroom.making = attempt, None
    session.go_to(traces.current(session).made_by(made.blanks[0].tensor).name)


def _numbers(text: str | None, count: int) -> tuple[set[int], bool]:
    """found=1.3: the blanks (1-based in the link) found so far, and whether anything else was in it (it is left
    out, and said)."""
    if not text:
        return set(), False
    parts = text.split(".", count)  # more than count parts: the rest is junk, whatever it holds (a long link)
    blanks = [int(p) - 1 for p in parts if p.isascii() and p.isdecimal() and len(p) <= 3 and 1 <= int(p) <= count]
    return set(blanks), len(blanks) != len(parts)


def _token(attempt: Attempt) -> str:
    return attempt.ready or attempt.exercise.to_link()


def link(session: Session) -> dict[str, str | None]:
    """The exercise, the answers found and shown so far (a reload or a lost replica keeps them), and the presenter
    view."""
    classroom = session.view(Classroom)
    attempt, values = classroom.exercise, dict.fromkeys(PARAMS)
    values[PRESENT] = "1" if classroom.present else None
    if attempt is not None:
        values[PARAM] = _token(attempt)
        for param, numbers in ((FOUND, attempt.found), (SHOWN, attempt.shown)):
            values[param] = ".".join(str(i + 1) for i in sorted(numbers)) or None
    return values


CAPABILITY = Capability(
    "exercise", (Page("pages/exercise.py", "page.exercise", ":material/school:", "exercise", hides=True),), PARAMS,
    link=link, follows=follows, share=room.share_part, frame=room.frame_part, hides=hiding, shown=shown,
    waits=room.waiting_page,
)  # fmt: skip
