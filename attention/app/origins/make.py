"""How each kind of origin makes the session's case: a preset's (made again by Reset), an opened file's, a link's,
a model's chosen head. The kinds themselves are plain values (origin.py, given.py, model.py); these operations are
the ones that take the session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ... import models
from ...base import files, presets
from ...base.case import CaseError
from ...base.i18n import LANGUAGES, clip, excerpt, msg
from ...models import Model, ModelMissing, Run
from ...models.generate import MAX_NEW_TOKENS
from ...models.seq2seq import PairRun, Translation, translate
from ..session import Session
from . import PRESETS
from .given import Article, File, Link, Random
from .model import Choice, Loader, ModelHead, allowed, layers, made_case, paired
from .origin import Origin


def reset(session: Session) -> None:
    """The chosen preset's origin makes its case again, dropping edits (the chosen device stays)."""
    STARTS[PRESETS[session.controls.preset]](session)


def choose(session: Session, **changes: object) -> None:
    """The sidebar's choices (Session.choose); a new preset, or a new seed of the random one, makes its case."""
    if session.choose(**changes):
        reset(session)


def back_to_article(session: Session) -> None:
    """The article's numbers and options (its preset) again; the device stays."""
    session.controls = replace(session.controls, preset="article")
    _article(session)


def import_file(session: Session, name: str, data: bytes) -> None:
    """An uploaded case file; a bad one changes nothing and says why."""
    try:
        session.load(case := files.load_case(data), File(case, clip(name)))
        session.notices.append(msg("notice.opened", name=clip(name)))
    except CaseError as e:
        session.notices.append(msg("notice.not_opened", name=clip(name), error=e.message))


def open_origin(session: Session, params: Mapping[str, str | None]) -> None:
    """A shared link's case (?case=…, or a model's ?model=…&text=…) and language; a bad part is refused with a
    notice, and the rest is kept (the step and the capabilities' parameters: app/links.py)."""
    for opens in (_open_case, open_model):  # the first kind the link names opens it
        if opens(session, params):
            break
    language = params.get("lang")
    if language and language in LANGUAGES:
        session.lang = language
    elif language:
        session.notices.append(msg("notice.bad_lang", languages=", ".join(LANGUAGES)))


def _article(session: Session) -> None:
    article = presets.article()
    session.load(article, Article(article), keep_device=True)


def _random(session: Session) -> None:
    c = session.controls
    case = presets.random_case(c.n, c.d_in, c.d_k, c.d_v, seed=c.seed)
    session.load(case, Random(case, c.seed), keep_device=True)


def _model_head(session: Session) -> None:
    """The model's head again: the last one shown (after an edit, its numbers back), else the default."""
    source = session.source
    show(session, session.loader, source.choice if isinstance(source, ModelHead) else Choice.default())


def _open_case(session: Session, params: Mapping[str, str | None]) -> bool:
    """A link's case (?case=…, its numbers in the link): whether the link had one."""
    if not (token := params.get(Link.params[0])):
        return False
    try:
        case = files.case_from_link(token)
        session.load(case, Link(case))
    except CaseError as e:
        session.notices.append(msg("notice.link_refused", error=e.message))
    return True


STARTS = {Article: _article, Random: _random, ModelHead: _model_head}  # each preset's kind: how it makes its case


# A model's head


def shown(session: Session) -> ModelHead | None:
    """The model's head the session last made (its case perhaps edited since), or None."""
    return session.source if isinstance(session.source, ModelHead) else None


def forget_gone_model(session: Session) -> None:
    """A model the server stopped offering while this session showed it (its files removed): said, and its head's
    numbers stay the session's case, no longer tied to the model (its spec and weights are gone with its files)."""
    head = shown(session)
    if head is not None and head.choice.model not in models.ids():
        session.notices.append(msg("notice.model_gone", model=models.title(head.choice.model)))
        session.source = Origin(session.case)


def choose_model(session: Session, loader: Loader, **changes: object) -> None:
    """A new model, sentence, layer or head (an encoder-decoder's part or target): the head's case becomes the
    session's. A new model starts on its default head; a bad value is refused with a notice, a sentence the model
    cannot read keeps the last valid case with the error, and a model that cannot be loaded here (not installed,
    broken, past the budget) says why and changes nothing. A new part keeps the layer where it has it (else its
    last); a target of None is the model's own translation."""
    last = shown(session)
    base = last.choice if last is not None else Choice.default()
    model = changes.get("model", base.model)
    model = model if model in models.ids() else base.model
    if model != base.model and (problem := models.problem(model)) is not None:
        session.notices.append(problem)
        return
    start = base if model == base.model else Choice.default(model, base.sentence)  # the sentence stays
    part = changes.get("part", start.part)
    part = part if allowed("part", part, model) else start.part  # (the part's own refusal is said below)
    accepted = {}
    for name, value in changes.items():
        if allowed(name, value, model, part):
            accepted[name] = value
        else:
            session.notices.append(msg("notice.control_refused", name=name, value=excerpt(value)))
    choice = replace(start, **accepted)
    choice = replace(choice, layer=min(choice.layer, layers(models.spec(model), choice.part)))
    error = show(session, loader, choice)
    if error is not None:  # the sentences as typed are kept, with why; the case stays the last valid one
        typed = {"typed": choice.sentence, "typed_target": choice.target} if last is not None else {}
        session.refuse(error, replace(last, **typed) if last is not None else None)


def translated(session: Session, model: Model, source: str) -> Translation:
    """The model's greedy translation of the source (an encoder-decoder's), kept while the model and source are;
    CaseError for a source it cannot read."""
    key = ("translation", model.spec.name, source)
    return session.derived.get(key, lambda: translate(model, source, MAX_NEW_TOKENS))


def show(session: Session, loader: Loader, choice: Choice) -> CaseError | None:
    """The choice's head as the session's case (its run kept while the model and sentences stay); the error of a
    sentence the model cannot read, which changes nothing."""
    last = shown(session)
    try:
        model = loader(choice.model)
    except ModelMissing as e:
        session.notices.append(e.args[0])
        return None
    except CaseError as e:  # its files do not match their config: said, and the case stays
        session.notices.append(msg("notice.model_refused", model=models.title(choice.model), error=e.message))
        return None
    try:
        run, pair = _runs(session, model, choice, last)
    except CaseError as e:
        return e
    case = made_case(model, choice, run, pair)
    session.load(case, ModelHead(case, choice, run, choice.sentence, pair, choice.target), checked=True)
    return None


def _runs(session: Session, model: Model, choice: Choice, last: ModelHead | None) -> tuple[Run, PairRun | None]:
    """The choice's sentence through the model (an encoder-decoder's source and target, and its part's run), the
    last ones again while the model and sentences are the same."""
    if choice.part is None:
        same = last is not None and last.pair is None and (last.choice.model, last.run.sentence) == (
            choice.model, choice.sentence)  # fmt: skip
        return (last.run if same else model.run(choice.sentence)), None
    same = last is not None and last.pair is not None and (last.choice.model, last.choice.sentence,
                                                           last.choice.target) == (choice.model, choice.sentence,
                                                                                   choice.target)  # fmt: skip
    if same:
        return last.pair.run(choice.part), last.pair
    if choice.target is None:  # the model's own translation: its pair as generated, token for token (its text
        # read again could be cut otherwise, or lose the special tokens it decodes to nothing)
        model.tokenize(choice.sentence)  # (a source it cannot read is said as the sentence's error)
        made = translated(session, model, choice.sentence)  # (one token at least: its end, at the worst)
        return made.pair.run(choice.part), made.pair
    pair = paired(model, choice.sentence, choice.target)
    return pair.run(choice.part), pair


def open_model(session: Session, params: Mapping[str, str | None]) -> bool:
    """A link's model view (?model=…&text=…&layer=…&head=…, an encoder-decoder's &part=…&target_text=…): True when it
    had one. A bad part is said and the model's default is used for it (a sentence it cannot read too: its example
    sentence; a target: its own translation)."""
    name = params.get("model")
    if not name:
        return False
    if name not in models.ids():
        session.notices.append(msg("notice.bad_model", model=excerpt(name), models=", ".join(models.ids())))
        return True
    if (problem := models.problem(name)) is not None:  # offered, but its heads cannot open: said, article stays
        session.notices.append(problem)
        return True
    spec, start = models.spec(name), Choice.default(name, params.get("text") or None)
    chosen = _link_part(session, params, name, start)
    numbers = {}
    for part in ("layer", "head"):
        value = params.get(part)
        if value is None:
            continue
        number = int(value) if value.isascii() and value.isdigit() and len(value) < 4 else None
        if number is not None and allowed(part, number, name, chosen.get("part", start.part)):
            numbers[part] = number
        else:
            limit = layers(spec, chosen.get("part", start.part)) if part == "layer" else spec.heads
            session.notices.append(msg("notice.bad_model_part", part=part, value=excerpt(value),
                                       low=int(part == "layer"), limit=limit))  # fmt: skip
    session.controls = replace(session.controls, preset="real")
    choice = replace(start, **chosen, **numbers)
    choice = replace(choice, layer=min(choice.layer, layers(spec, choice.part)))
    error = show(session, session.loader, choice)
    if error is not None and getattr(error.where, "key", None) == "where.target":  # its own translation instead
        session.notices.append(msg("notice.bad_target", problem=error.problem))
        error = show(session, session.loader, replace(choice, target=None))
    if error is not None:  # too long, too many tokens, empty: said, and the model's own sentence instead
        session.notices.append(msg("notice.bad_sentence", problem=error.problem))
        show(session, session.loader, replace(Choice.default(name), **chosen, **numbers))
    return True


def _link_part(session: Session, params: Mapping[str, str | None], name: str, start: Choice) -> dict[str, object]:
    """A link's part and target of an encoder-decoder, each one the model cannot take said (and left out)."""
    chosen = {}
    for key, said in (("part", "part"), ("target", "target_text")):
        value = params.get(said)
        if value is None:
            continue
        value = value[: models.MAX_SENTENCE_CHARS + 1] if key == "target" else value
        if allowed(key, value, name):
            chosen[key] = value
        else:
            session.notices.append(msg("notice.control_refused", name=key, value=excerpt(value)))
    return chosen
