"""The Decoding page's view and its operations: which token's decoding step is shown, of the session's case or of a
causal model's generation (its sentence, new tokens, layer and head), the generation itself, and the link's step.
The model that generates is the session's when it is causal, else the first causal one offered. Plain Python, no
Streamlit: the page draws it, tests drive it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import models
from ..app.session import Session
from ..base.case import Case, CaseError
from ..base.i18n import excerpt, msg
from ..models import MAX_SENTENCE_TOKENS, Spec
from ..models.generate import MAX_NEW_TOKENS, Generation, check_length, generate
from .compute import Decoding, decodable, decode, step_of

SOURCES = ("case", "generation")  # what is decoded: the session's case, or the tokens a causal model generated
PARAMS = ("token", "gen", "gen_tokens", "gen_layer", "gen_head")  # the link's parameters of the Decoding page
DEFAULT_NEW_TOKENS = 8  # a generation's new tokens, to start with


@dataclass(frozen=True)
class DecodingView:
    """What the Decoding page shows: a value the session holds (Session.view) and replaces whole."""

    t: int | None = None  # the decoding step (token t, from 0); None: the last token
    source: str = "case"
    sentence: str | None = None  # to generate from, as typed; None: the session's model sentence or the example
    new_tokens: int = DEFAULT_NEW_TOKENS
    generation: Generation | None = None  # the last finished (or stopped) generation
    uncached_seconds: tuple[float, ...] | None = None  # the same generation without the cache, per token
    uncached_same: bool | None = None  # whether it made the same tokens
    layer: int | None = None  # of the generation, from 1; None: the model's default head's (see layer_head)
    head: int | None = None  # from 1
    heard: tuple[str, ...] = ()  # the tokens heard so far while a generation runs (kept if it is stopped)
    pending: bool = False  # a link's generation, to be made when the page is drawn


def _change(session: Session, **changes: object) -> None:
    """The view with these changes (it is frozen: replaced whole)."""
    session.keep(replace(session.view(DecodingView), **changes))


def generator(session: Session) -> str | None:
    """The id of the model that generates: the session's model when it is causal, else the first causal model
    offered; None when no causal model is offered here."""
    return models.causal_id((session.origin.link() or {}).get("model"))


def layer_head(session: Session, spec: Spec) -> tuple[int, int]:
    """The generation's layer and head (from 1): as chosen while the model has them, else its default head's."""
    view, (_, layer, head) = session.view(DecodingView), spec.default
    if view.layer is not None and view.layer <= spec.layers:
        layer = view.layer
    if view.head is not None and view.head <= spec.heads:
        head = view.head
    return layer, max(head, 1)  # a default of 0 (every head) is head 1 here: decoding steps through one head


def sentence(session: Session) -> str:
    """The sentence to generate from: as typed on the page, else the model sentence the session shows, else the
    model's example."""
    view = session.view(DecodingView)
    if view.sentence is not None:
        return view.sentence
    named, id = session.origin.link() or {}, generator(session)
    return named.get("text") or (models.spec(id).default[0] if id is not None else models.EXAMPLES[0])


def case(session: Session) -> Case | None:
    """The case decoded: the session's, or the chosen head of the generation (None before one was made)."""
    view = session.view(DecodingView)
    if view.source == "case":
        return session.case
    if view.generation is None:
        return None
    model = session.loader(view.generation.run.model)  # the model that made it
    layer, head = layer_head(session, model.spec)
    return models.head_case(model, view.generation.run, layer - 1, head - 1)


def chosen_head(session: Session) -> tuple[int, tuple] | None:
    """The generation's head (0-based) and its choice, where its case is its layer's (OLMo 2): the head picker's
    first; None for the session's own case (its origin says)."""
    view = session.view(DecodingView)
    if view.source == "case" or view.generation is None:
        return None
    layer, head = layer_head(session, models.spec(view.generation.run.model))
    return head - 1, (view.generation.run.model, layer, head)


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
    t = session.view(DecodingView).t
    return n - 1 if t is None or t >= n else t


def go_to(session: Session, t: int, n: int) -> None:
    """Step t (from 0) of n, kept within them."""
    _change(session, t=max(0, min(n - 1, t)))


def choose(session: Session, **changes: object) -> None:
    """New page choices (source, sentence, new tokens, layer, head): a value no widget holds is refused, said."""
    id = generator(session)
    spec = models.spec(id) if id is not None else None
    bounds = {"new_tokens": (1, MAX_NEW_TOKENS)}
    if spec is not None:
        bounds |= {"layer": (1, spec.layers), "head": (1, spec.heads)}
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
    _change(session, **accepted)


def run_generation(session: Session, heard=None, timing=None) -> CaseError | None:
    """Generate the chosen number of tokens after the sentence with the cache, each token handed to heard(text) as
    it comes (and kept, so a stopped generation shows what it made), then again without the cache, timed, each of
    its tokens counted to timing(k); the error of a sentence the model cannot read or too many tokens in all,
    which changes nothing shown. Stopped while timed, the generation stays, without the uncached time."""
    _change(session, heard=())  # before the model's spinner, where a Stop can end the run: no earlier tokens said
    id = generator(session)
    if id is None:
        return CaseError(msg("where.model"), msg("decoding.no_causal"))
    try:
        view, model = session.view(DecodingView), session.loader(id)
    except (CaseError, models.ModelMissing) as e:  # its files do not match their config, not installed: said
        return e if isinstance(e, CaseError) else CaseError(models.title(id), e.args[0])
    text = sentence(session)
    try:
        check_length(len(model.tokenize(text)[0]), view.new_tokens)
    except CaseError as e:
        return e

    def on_token(_: int, token: str) -> None:
        _change(session, heard=(*session.view(DecodingView).heard, token))
        if (
            heard is not None and len(session.view(DecodingView).heard) < view.new_tokens
        ):  # the last is shown once kept:
            heard(token)  # a Stop clicked then ends the run only after the generation is

    def on_timed(_: int, __: str) -> None:
        timed.append(None)
        if timing is not None:
            timing(len(timed))

    made, timed = generate(model, text, view.new_tokens, cached=True, on_token=on_token), []
    _change(session, generation=made, uncached_seconds=None, uncached_same=None, source="generation", t=None, heard=())
    without = generate(model, text, len(made.new_ids), cached=False, on_token=on_timed)
    _change(session, uncached_seconds=without.seconds, uncached_same=made.new_ids == without.new_ids)
    return None


def open_link(session: Session, params) -> None:
    """A link's decoding view: the step (token=t, from 1) of the session's case, past its end said and the last
    shown; or a generation (gen=sentence, gen_tokens, gen_layer, gen_head), made when the page is drawn."""
    said, sentence = params.get("token"), params.get("gen")
    if sentence:
        numbers = {}
        for name, part in (("new_tokens", "gen_tokens"), ("layer", "gen_layer"), ("head", "gen_head")):
            value = params.get(part) or ""
            if value.isascii() and value.isdigit() and len(value) < 4:
                numbers[name] = int(value)
        choose(session, source="generation", sentence=sentence[: models.MAX_SENTENCE_CHARS], **numbers)
        t = step_of(MAX_SENTENCE_TOKENS, said)  # checked against the generation's length once it is made
        _change(session, t=t, pending=True)
        return
    if not said:
        return
    t = step_of(session.case.n, said)
    if t is None:
        session.notices.append(msg("decoding.bad_step", value=excerpt(said), n=session.case.n))
    else:
        _change(session, t=t, source="case")


def link(session: Session) -> dict[str, str]:
    """The link's decoding view: token t from 1 while one is chosen; a generation's sentence, new tokens, layer and
    head (not its tokens: greedy generation makes them again)."""
    view, out = session.view(DecodingView), {}
    if view.source == "generation" and view.generation is not None:
        layer, head = layer_head(session, models.spec(view.generation.run.model))
        out = {"gen": view.generation.sentence, "gen_tokens": str(len(view.generation.new_ids)),
               "gen_layer": str(layer), "gen_head": str(head)}  # fmt: skip
        n = len(view.generation.run.ids)
    else:
        n = session.case.n if view.source == "case" else 0
    if view.t is not None and view.t < n:
        out["token"] = str(view.t + 1)
    return out


def made_pending(session: Session, heard=None, timing=None) -> CaseError | None:
    """A link's generation, made now (once); its step past the end said, and the last shown."""
    view = session.view(DecodingView)
    if not view.pending:
        return None
    t = view.t
    session.keep(replace(view, pending=False))
    error = run_generation(session, heard, timing)
    generation = session.view(DecodingView).generation
    n = 0 if generation is None else len(generation.run.ids)
    if error is None and t is not None and t >= n:
        session.notices.append(msg("decoding.bad_step", value=excerpt(str(t + 1)), n=n))
    elif error is None:
        _change(session, t=t)
    return error
