"""The Decoding page's state and operations: which token's decoding step is shown, of the session's case or of a
SmolLM2 generation (its sentence, new tokens, layer and head), the generation itself, and the link's step. Plain
Python, no Streamlit: the page draws it, tests drive it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .. import models
from ..case import Case, CaseError
from ..decoding import Decoding, decodable, decode, step_of
from ..i18n import excerpt, msg
from ..models import SMOLLM2
from ..models.generate import MAX_NEW_TOKENS, Generation, check_length, generate

if TYPE_CHECKING:
    from .session import Session

SOURCES = ("case", "generation")  # what is decoded: the session's case, or the tokens SmolLM2 generated
DEFAULT_NEW_TOKENS = 8


@dataclass(frozen=True)
class DecodingView:
    """What the Decoding page shows: a value the session holds (Session.decoding) and replaces whole."""

    t: int | None = None  # the decoding step (token t, from 0); None: the last token
    source: str = "case"
    sentence: str | None = None  # to generate from, as typed; None: the session's model sentence or the example
    new_tokens: int = DEFAULT_NEW_TOKENS
    generation: Generation | None = None  # the last finished (or stopped) generation
    uncached_seconds: tuple[float, ...] | None = None  # the same generation without the cache, per token
    uncached_same: bool | None = None  # whether it made the same tokens
    layer: int = 3  # of the generation, from 1 (SmolLM2's layer 3 head 4: a previous-token head)
    head: int = 4  # from 1
    heard: tuple[str, ...] = ()  # the tokens heard so far while a generation runs (kept if it is stopped)


def sentence(session: Session) -> str:
    """The sentence to generate from: as typed on the page, else the model sentence the session shows, else the
    model's example."""
    view = session.decoding
    if view.sentence is not None:
        return view.sentence
    named = session.origin.link() or {}
    return named.get("text") or SMOLLM2.default[0]


def case(session: Session) -> Case | None:
    """The case decoded: the session's, or the chosen head of the generation (None before one was made)."""
    view = session.decoding
    if view.source == "case":
        return session.case
    if view.generation is None:
        return None
    model = session.loader(SMOLLM2.name)
    return models.head_case(model, view.generation.run, view.layer - 1, view.head - 1)


def decoding(session: Session, of: Case, trace_of) -> Decoding | CaseError:
    """The case decoded (kept while it is), or why it cannot be (a custom mask that is not causal); its causal
    trace from trace_of(case) (compute.trace_of: the session's own trace when the case is already causal)."""
    try:
        causal = trace_of(decodable(of))
    except CaseError as e:
        return e
    return session.derived.get(("decoding", of), lambda: decode(of, causal))


def shown_step(session: Session, n: int) -> int:
    """The step shown of a decoding of n tokens: the chosen one, the last when none (or past the end)."""
    t = session.decoding.t
    return n - 1 if t is None or t >= n else t


def go_to(session: Session, t: int, n: int) -> None:
    """Step t (from 0) of n, kept within them."""
    session.decoding = replace(session.decoding, t=max(0, min(n - 1, t)))


def choose(session: Session, **changes: object) -> None:
    """New page choices (source, sentence, new tokens, layer, head): a value no widget holds is refused, said."""
    bounds = {"new_tokens": (1, MAX_NEW_TOKENS), "layer": (1, SMOLLM2.layers), "head": (1, SMOLLM2.heads)}
    accepted = {}
    for name, value in changes.items():
        low_high = bounds.get(name)
        good = (
            (name == "source" and value in SOURCES)
            or (name == "sentence" and isinstance(value, str) and len(value) <= models.MAX_SENTENCE_CHARS)
            or (low_high is not None and type(value) is int and low_high[0] <= value <= low_high[1])
        )
        if good:
            accepted[name] = value
        else:
            session.notices.append(msg("notice.control_refused", name=name, value=excerpt(value)))
    session.decoding = replace(session.decoding, **accepted)


def run_generation(session: Session, heard=None) -> CaseError | None:
    """Generate the chosen number of tokens after the sentence with the cache, each token handed to heard(text) as
    it comes (and kept, so a stopped generation shows what it made), then again without the cache, timed; the
    error of a sentence the model cannot read or too many tokens in all, which changes nothing shown."""
    view, model = session.decoding, session.loader(SMOLLM2.name)
    text = sentence(session)
    try:
        check_length(len(model.tokenize(text)[0]), view.new_tokens)
    except CaseError as e:
        return e

    def on_token(_: int, token: str) -> None:
        session.decoding = replace(session.decoding, heard=(*session.decoding.heard, token))
        if heard is not None:
            heard(token)

    session.decoding = replace(view, heard=())
    made = generate(model, text, view.new_tokens, cached=True, on_token=on_token)
    without = generate(model, text, view.new_tokens, cached=False)
    session.decoding = replace(
        session.decoding, generation=made, uncached_seconds=without.seconds, uncached_same=made.new_ids ==
        without.new_ids, source="generation", t=None, heard=(),
    )  # fmt: skip
    return None


def open_link(session: Session, said: str) -> None:
    """A link's decoding step (token=t, from 1) of the session's case; past its end, said, and the last shown."""
    t = step_of(session.case.n, said)
    if t is None:
        session.notices.append(msg("decoding.bad_step", value=excerpt(said), n=session.case.n))
    else:
        session.decoding = replace(session.decoding, t=t, source="case")


def link(session: Session) -> str | None:
    """The link's decoding step: token t from 1 while one is chosen on the session's case; else none."""
    view = session.decoding
    return None if view.t is None or view.source != "case" or view.t >= session.case.n else str(view.t + 1)
