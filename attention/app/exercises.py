"""Exercises in the app: one opened from a link (or a ready-made one), the pages drawn with its numbers hidden, the
answers judged; one being made by a teacher (the cells to hide, picked or clicked), its link and QR code; and the
presenter view."""

from __future__ import annotations

import io
from urllib.parse import urlencode

import segno
import streamlit as st

from .. import exercise, figures
from ..case import CaseError
from ..core import Trace
from ..exercise import Attempt, Blank, Exercise
from ..explain import Explanation, explain
from ..i18n import msg
from . import compute, origins
from .language import lang, t
from .pages import Page
from .session import Session

PARAM, FOUND, SHOWN, PRESENT = "exercise", "found", "shown", "present"  # the link's parameters
# The overview's ready-made exercises on the article, one a step: name -> (the mask, the blanks' (tensor, index)).
READY = {
    "key": ("none", [("keys", (1, c)) for c in range(3)]),  # key 2
    "score": ("none", [("scores_raw", (1, 2))]),  # score (2, 3): q₂ · k₃ (its scaled twin is hidden with it)
    "softmax": ("none", [("weights_exact", (0, c)) for c in range(3)]),  # the softmax of row 1
    "weighted": ("none", [("weighted", (1, 2, c)) for c in range(3)]),  # the weighted value (key 2, query 3)
    "output": ("none", [("outputs", (2, c)) for c in range(3)]),  # output 3
    "causal": ("causal", [("outputs", (0, c)) for c in range(3)]),  # what a causal mask does to output 1
}


# Opening, keeping in the URL


def open_link(session: Session, params) -> None:
    """An exercise the URL names (a shared link, or a ready-made one's from the overview), opened once: its blanks
    checked against the case's trace, and the answers found so far (found=, shown=) kept. A bad one is refused with
    a notice; the case opens all the same."""
    if (present := params.get(PRESENT)) is not None:
        session.classroom.present = present == "1"
    token = params.get(PARAM)
    if token is None or (session.classroom.exercise is not None and _token(session.classroom.exercise) == token):
        return
    if token in READY:
        mask, cells = READY[token]
        session.back_to_article()
        if mask != "none":
            session.choose(mask=mask)
        blanks = tuple(Blank(name, index) for name, index in cells)  # their prompt is the catalogue's
        made, ready = Exercise(blanks), token
    else:
        try:
            made, ready = exercise.from_link(token, compute.current(session)), None
        except CaseError as e:
            session.notices.append(msg("exercise.refused", reason=e.message))
            st.query_params.pop(PARAM, None)
            return
    attempt = Attempt(made, session.case, ready=ready)
    for param, into in ((FOUND, attempt.found), (SHOWN, attempt.shown)):
        into.update(_numbers(params.get(param), len(made.blanks)))
    session.classroom.exercise, session.classroom.making = attempt, None
    session.go_to(step_of(compute.current(session), made.blanks[0]))


def _numbers(text: str | None, count: int) -> set[int]:
    """found=1.3: the blanks (1-based in the link) found so far; anything else in it is left out."""
    parts = (text or "").split(".")[:count]
    return {int(p) - 1 for p in parts if p.isdigit() and 1 <= int(p) <= count}


def _token(attempt: Attempt) -> str:
    return attempt.ready or attempt.exercise.to_link()


def keep_url(session: Session) -> None:
    """The URL keeps the exercise, the answers found and shown so far (a reload or a lost replica keeps them), and
    the presenter view."""
    params, attempt = st.query_params, session.classroom.exercise
    values = {PARAM: None, FOUND: None, SHOWN: None, PRESENT: "1" if session.classroom.present else None}
    if attempt is not None:
        values[PARAM] = _token(attempt)
        for param, numbers in ((FOUND, attempt.found), (SHOWN, attempt.shown)):
            values[param] = ".".join(str(i + 1) for i in sorted(numbers)) or None
    for name, value in values.items():
        if value is None:
            params.pop(name, None)
        elif params.get(name) != value:
            params[name] = value


def leave(session: Session) -> None:
    """Close the exercise (a button's callback: the URL forgets it before the next run reads it)."""
    session.classroom.exercise = None
    for param in (PARAM, FOUND, SHOWN):
        st.query_params.pop(param, None)


def leave_presenting(session: Session) -> None:
    session.classroom.present = False
    st.query_params.pop(PRESENT, None)


# What the pages show


def hiding(session: Session, trace: Trace) -> bool:
    """Whether this trace's numbers are an open exercise's: its case, and blanks left."""
    attempt = session.classroom.exercise
    return attempt is not None and attempt.case == trace.case and not attempt.done


def hidden(session: Session, trace: Trace) -> dict:
    """Each tensor's hidden cells (exercise.hidden), none when no exercise is open on this case."""
    if not hiding(session, trace):
        return {}
    attempt = session.classroom.exercise
    return exercise.hidden(trace, attempt.exercise, attempt.open)


def shown(session: Session, trace: Trace) -> Trace:
    """The trace the pages draw: with an open exercise's hidden numbers NaN ("?"), kept while the answers are."""
    if not hiding(session, trace):
        return trace
    key = ("redacted", trace.case, trace.device, session.classroom.exercise.open, _token(session.classroom.exercise))
    return session.derived.get(key, lambda: exercise.redacted(trace, hidden(session, trace)))


def page_allowed(session: Session, trace: Trace, page: Page) -> bool:
    """A page may run during an open exercise only if it draws the hidden numbers as "?" (Page.hides): the rest
    recompute or rearrange them, and wait until the exercise is done."""
    return page.hides or not hiding(session, trace)


def uses_hidden(session: Session, trace: Trace, explanation: Explanation) -> list[str]:
    """The hidden numbers an explanation would show (the number itself, or one of its terms), as labels."""
    cells = hidden(session, trace)
    parts = {
        name: ((explanation.head,) if trace.has_head(name) else ()) + tuple(part)
        for name, part in explanation.parts.items()
    }
    own = tuple((i,) for i in explanation.index)
    uses = exercise.takes_part(cells, {explanation.tensor: own, **parts})
    return [label(trace, Blank(name, index)) for name, index in uses]


def label(trace: Trace, b: Blank) -> str:
    """A blank's place as a reader names it: scores[Input 2, Input 3], with the head first where there are several."""
    names = []
    for kind, i, size in zip(trace.axes(b.tensor), b.index, trace[b.tensor].shape, strict=True):
        names.append(t("picker.head_n", head=i + 1) if kind == "head" else figures.labels(trace, kind, size)[i])
    return f"{b.tensor}[{', '.join(names)}]"


def step_of(trace: Trace, b: Blank) -> str:
    return next(step.name for step in trace.steps if b.tensor in step.tensors)


def explanation(session: Session, trace: Trace, number: int) -> Explanation:
    """A blank's arithmetic, of the trace's own numbers."""
    b = session.classroom.exercise.exercise.blanks[number]
    return explain(compute.current(session), b.tensor, b.index, lang())


# Making one


def making(session: Session) -> bool:
    return session.classroom.making is not None


def start_making(session: Session, on: bool) -> None:
    session.classroom.making = () if on else None
    if on:
        session.classroom.exercise = None


def toggle(session: Session, trace: Trace, name: str, index: tuple[int, ...], prompt_text: str = "") -> None:
    """Hide a number (or show it again, when it is hidden already) in the exercise being made."""
    if name not in exercise.HIDEABLE:
        session.notices.append(msg("exercise.not_hideable", tensor=name))
        return
    blanks = tuple(b for b in session.classroom.making if (b.tensor, b.index) != (name, index))
    if len(blanks) == len(session.classroom.making):
        if len(blanks) >= exercise.MAX_BLANKS:
            session.notices.append(msg("exercise.error.too_many", count=len(blanks) + 1, limit=exercise.MAX_BLANKS))
            return
        try:
            blanks += (made := exercise.blank(trace, name, index, prompt_text[: exercise.MAX_PROMPT]),)
        except CaseError as e:
            session.notices.append(e.message)
            return
        session.notices.append(msg("exercise.now_hidden", cell=label(trace, made), count=len(blanks)))
    else:
        session.notices.append(msg("exercise.now_shown", cell=label(trace, Blank(name, index)), count=len(blanks)))
    session.classroom.making = blanks


def set_prompt(session: Session, number: int, text: str) -> None:
    blanks = list(session.classroom.making)
    blanks[number] = Blank(blanks[number].tensor, blanks[number].index, text[: exercise.MAX_PROMPT])
    session.classroom.making = tuple(blanks)


def link(session: Session) -> str | None:
    """The exercise being made as a link: the case as the URL names it now, the blanks, the language; None without
    blanks."""
    if not session.classroom.making:
        return None
    params = st.query_params
    query = {k: params[k] for k in (*origins.PARAMS, "lang") if k in params}
    query[PARAM] = Exercise(session.classroom.making).to_link()
    return f"{st.context.url or ''}?{urlencode(query)}"


def qr_png(url: str) -> bytes:
    """The link as a QR code, black on white, big enough to read from the back of a classroom."""
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="png", scale=6, border=2)
    return out.getvalue()


PRESENTER_CSS = """<style>
[data-testid=stSidebar], [data-testid=stSidebarCollapsedControl], [data-testid=stExpandSidebarButton] { display: none; }
[data-testid=stMain] { font-size: 1.3rem; }
[data-testid=stMain] h1 { font-size: 3rem; } [data-testid=stMain] h2 { font-size: 2.4rem; }
[data-testid=stMain] code { font-size: 1.1rem; }
</style>"""


# The frame's parts


def progress(session: Session, trace: Trace) -> None:
    """The sidebar's line on an open exercise: how far the learner is, and the way to its answers."""
    attempt = session.classroom.exercise
    if attempt is None:
        return
    done, total = len(attempt.found), len(attempt.exercise.blanks)
    with st.sidebar:
        st.info(t("exercise.progress", done=done, total=total), icon=":material/school:")
        st.page_link("pages/exercise.py", label=t("exercise.to_answers"), icon=":material/school:")
        if attempt.case != trace.case:  # the learner changed the numbers: the exercise is on its own case
            st.caption(t("exercise.other_case"))
            st.button(t("exercise.back"), key="exercise_back", on_click=lambda: _back(session))


def _back(session: Session) -> None:
    session.load(session.classroom.exercise.case)


def waiting_page() -> None:
    """A page that would show an open exercise's numbers its own way, in its place until the exercise is done."""
    st.info(t("exercise.page_waits"), icon=":material/school:")
    st.page_link("pages/exercise.py", label=t("exercise.to_answers"), icon=":material/school:")


def share_part(session: Session) -> None:
    """In the share panel: make an exercise of this case (on the Exercise page), and the presenter view."""
    on = st.toggle(t("exercise.make"), value=making(session), key="exercise_making", help=t("exercise.make_help"))
    if on != making(session):
        start_making(session, on)
        st.switch_page("pages/exercise.py")
    st.page_link("pages/walkthrough.py", label=t("exercise.present"), icon=":material/slideshow:",
                 query_params={PRESENT: "1"})  # fmt: skip
