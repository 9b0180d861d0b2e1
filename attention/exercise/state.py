"""A learner's work on an exercise (what is found, shown, tried), a session's part in a class, and what an open
exercise hides of the pages; plain Python, no Streamlit."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..app import traces
from ..app.session import Session
from ..base.case import Case, CaseError
from ..base.explain import Explanation, explain
from ..base.i18n import Message, clip, msg, text
from ..forward import teach
from ..forward.compute import Trace
from ..show.heatmap import labels
from .compute import (
    HIDEABLE,
    HINT_AFTER,
    MAX_BLANKS,
    MAX_PROMPT,
    SHOW_AFTER,
    Blank,
    Exercise,
    answer,
    blank,
    exact,
    redacted,
    right,
    takes_part,
)
from .compute import hidden as hidden_cells

PARAM, FOUND, SHOWN, PRESENT = "exercise", "found", "shown", "present"  # the link's parameters
PARAMS = (PARAM, FOUND, SHOWN, PRESENT)


# The overview's ready-made exercises on the article, one a step: name -> (the mask, the blanks' (tensor, index)).
READY = {
    "key": ("none", [("keys", (1, c)) for c in range(3)]),  # key 2
    "score": ("none", [("scores_raw", (1, 2))]),  # score (2, 3): q₂ · k₃ (its scaled twin is hidden with it)
    "softmax": ("none", [("weights_exact", (0, c)) for c in range(3)]),  # the softmax of row 1
    "weighted": ("none", [("weighted", (1, 2, c)) for c in range(3)]),  # the weighted value (key 2, query 3)
    "output": ("none", [("outputs", (2, c)) for c in range(3)]),  # output 3
    "causal": ("causal", [("outputs", (0, c)) for c in range(3)]),  # what a causal mask does to output 1
}

CASE_READY = ("case_weight", "case_score")  # the names of a case's own, beside the article's (READY)
ROW_BY_HAND = 16  # the longest row of scores whose softmax a person works out (a real sentence's ten are fine)


def on_case(trace: Trace) -> dict[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    """The ready-made exercises on the case in front of the learner (any case but the article's), by name: a weight
    from its row of scores where the row is short, a score from two vectors where they are short (teach.BY_HAND);
    none where neither is."""
    head, out = (0,) if trace.has_head("weights_exact") else (), {}
    if trace.case.n <= ROW_BY_HAND:
        out["case_weight"] = (("weights_exact", head + teach.most_looked_at(trace)),)
    if teach.by_hand(trace.case.d_head):
        out["case_score"] = (("scores_raw", head + teach.seen_cell(trace)),)
    return out


def offered(session: Session, trace: Trace) -> dict[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    """The ready-made exercises the overview and the Exercise page offer: the article's, one a step, on the article
    as it is; on any other case, its own (on_case), which a link opens on that case rather than on the article."""
    if session.origin.exercises == "article":
        return {name: tuple(cells) for name, (_, cells) in READY.items()}
    return on_case(trace)


@dataclass
class Attempt:
    """A learner's work on an exercise, on the case it was made on: which blanks are found (answered right) or
    shown (after three tries, or asked for), how often each was tried, and what the last answer was told."""

    exercise: Exercise
    case: Case
    ready: str | None = None  # a ready-made exercise's name: its link names it, its prompts are the catalogue's
    found: set[int] = field(default_factory=set)  # blanks by their 0-based number
    shown: set[int] = field(default_factory=set)
    tries: dict[int, int] = field(default_factory=dict)
    said: dict[int, Message] = field(default_factory=dict)

    @property
    def open(self) -> frozenset[int]:
        """The blanks no longer hidden: found or shown."""
        return frozenset(self.found | self.shown)

    @property
    def done(self) -> bool:
        return len(self.open) == len(self.exercise.blanks)

    def hint(self, number: int) -> bool:
        return self.tries.get(number, 0) >= HINT_AFTER

    def try_answer(self, trace: Trace, number: int, typed: str) -> None:
        """Judge an answer as typed: a number right or not yet (counted), or text that is no number (not counted)."""
        if number in self.open:
            return
        value = _typed_number(typed)
        if value is None:
            self.said[number] = msg("exercise.not_a_number", typed=clip(typed))
            return
        expected = answer(trace, self.exercise.blanks[number])
        self.tries[number] = tries = self.tries.get(number, 0) + 1
        if right(value, expected, exact(trace, expected)):
            self.found.add(number)
            self.said[number] = msg("exercise.right", tries=tries)
        else:
            self.said[number] = msg("exercise.not_yet", tries=tries)
            if tries >= SHOW_AFTER:
                self.shown.add(number)

    def show(self, number: int) -> None:
        """The learner asked for the arithmetic: the blank is shown, not found."""
        if number not in self.found:
            self.shown.add(number)


@dataclass
class Classroom:
    """A session's part in a class: the exercise it is doing, or the one it is making, and the presenter view."""

    exercise: Attempt | None = None  # opened from a link: its numbers hidden until found
    making: tuple[Blank, ...] | None = None  # the blanks of an exercise being made (None: not making one)
    present: bool = False  # larger type, no sidebar (the link's present=1)


# What the pages show


def hiding(session: Session, trace: Trace) -> bool:
    """Whether this trace's numbers are an open exercise's: its case, and blanks left."""
    attempt = session.view(Classroom).exercise
    return attempt is not None and attempt.case == trace.case and not attempt.done


def hidden(session: Session, trace: Trace) -> dict:
    """Each tensor's hidden cells (exercise.hidden), none when no exercise is open on this case."""
    if not hiding(session, trace):
        return {}
    attempt = session.view(Classroom).exercise
    return hidden_cells(trace, attempt.exercise, attempt.open)


def shown(session: Session, trace: Trace) -> Trace:
    """The trace the pages draw: with an open exercise's hidden numbers NaN ("?"), kept while the answers are."""
    if not hiding(session, trace):
        return trace
    key = (
        "redacted",
        trace.case,
        trace.device,
        session.view(Classroom).exercise.open,
        session.view(Classroom).exercise.exercise.to_link(),  # the blanks: the Attempt's exercise
    )
    return session.derived.get(key, lambda: redacted(trace, hidden(session, trace)))


def uses_hidden(session: Session, trace: Trace, explanation: Explanation) -> list[str]:
    """The hidden numbers an explanation would show (the number itself, or one of its terms), as labels."""
    cells = hidden(session, trace)
    parts = {
        name: ((explanation.head,) if trace.has_head(name) else ()) + tuple(part)
        for name, part in explanation.parts.items()
    }
    own = tuple((i,) for i in explanation.index)
    uses = takes_part(cells, {explanation.tensor: own, **parts})
    return [label(trace, Blank(name, index), session.lang) for name, index in uses]


# An axis kind -> its field in the catalogue's exercise.cell.<tensor>: a token axis by its token, a dim by its number
CELL_WORDS = {
    "token": "token",
    "query": "query",
    "key": "key",
    "key token": "token",  # cross-attention's keys and values: the source sentence's tokens
    "query dim": "dim",
    "key dim": "dim",
    "value dim": "dim",
    "output dim": "dim",
}


def label(trace: Trace, b: Blank, lang: str = "en") -> str:
    """A blank's place in words, as a reader names it: "the score of query Input 2 on key Input 3", "number 2 of
    output Input 3", with "head 2: " first where there are several (the catalogue's exercise.cell.<tensor>)."""
    words, head = {}, None
    for kind, i, size in zip(trace.axes(b.tensor), b.index, trace[b.tensor].shape, strict=True):
        if kind == "head":
            head = text(lang, "picker.head_n", head=i + 1)
        else:
            words[CELL_WORDS[kind]] = labels(trace, kind, size, lang)[i]
    said = text(lang, f"exercise.cell.{b.tensor}", **words)
    return said if head is None else text(lang, "exercise.cell_head", head=head, cell=said)


def explanation(session: Session, trace: Trace, number: int) -> Explanation:
    """A blank's arithmetic, of the trace's own numbers."""
    b = session.view(Classroom).exercise.exercise.blanks[number]
    return explain(traces.current(session), b.tensor, b.index, session.lang)


def making(session: Session) -> bool:
    return session.view(Classroom).making is not None


def start_making(session: Session, on: bool) -> None:
    session.view(Classroom).making = () if on else None
    if on:
        session.view(Classroom).exercise = None


def toggle(session: Session, trace: Trace, name: str, index: tuple[int, ...], prompt_text: str = "") -> None:
    """Hide a number (or show it again, when it is hidden already) in the exercise being made."""
    if name not in HIDEABLE:
        session.notices.append(msg("exercise.not_hideable", tensor=name))
        return
    blanks = tuple(b for b in session.view(Classroom).making if (b.tensor, b.index) != (name, index))
    if len(blanks) == len(session.view(Classroom).making):
        if len(blanks) >= MAX_BLANKS:
            session.notices.append(msg("exercise.error.too_many", count=len(blanks) + 1, limit=MAX_BLANKS))
            return
        try:
            blanks += (made := blank(trace, name, index, prompt_text[:MAX_PROMPT]),)
        except CaseError as e:
            session.notices.append(e.message)
            return
        session.notices.append(msg("exercise.now_hidden", cell=label(trace, made, session.lang), count=len(blanks)))
    else:
        session.notices.append(
            msg("exercise.now_shown", cell=label(trace, Blank(name, index), session.lang), count=len(blanks))
        )
    session.view(Classroom).making = blanks


def set_prompt(session: Session, number: int, text: str) -> None:
    blanks = list(session.view(Classroom).making)
    blanks[number] = Blank(blanks[number].tensor, blanks[number].index, text[:MAX_PROMPT])
    session.view(Classroom).making = tuple(blanks)


def _typed_number(typed: str) -> float | None:
    """An answer's number: decimal, with a true minus sign or the keyboard's, finite; None for anything else."""
    text = typed.strip().replace("−", "-")
    try:
        value = float(text) if len(text) <= 40 else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None
