"""A model's head, or its whole layer, as the origin of the session's case: the choice (model, sentence, layer,
head), the sentence's run through the model, and what only it knows (its link, script, check against the model's
own output, title). Plain Python, no Streamlit: the loader is handed in (the app's is st.cache_resource)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

import torch

from ... import models
from ...base.case import Case, CaseError
from ...base.i18n import Message, excerpt, msg
from ...base.record import Check, compare
from ...forward.compute import Trace
from ...models import SPECS, Model, ModelMissing, Run
from ...models.script import real_script
from .origin import Origin

if TYPE_CHECKING:
    from ..session import Session

Loader = Callable[[str], Model]
LINK = ("model", "text", "layer", "head")  # a model's view in a link: ?model=smollm2&text=…&layer=3&head=5
AGREES_WITHIN = 1e-4  # the model's own head output vs the eight steps (float32; SmolLM2's weights are dequantized)


@dataclass(frozen=True)
class Choice:
    """Which head of which model reads which sentence; layer and head count from 1, as people say them."""

    model: str
    sentence: str
    layer: int
    head: int  # 0: every head of the layer, as one multi-head case

    @classmethod
    def default(cls, model: str = "smollm2", sentence: str | None = None) -> Choice:
        """The model's default head (a previous-token head: easy to read) on its example sentence or this one."""
        text, layer, head = SPECS[model].default
        return cls(model, text if sentence is None else sentence, layer, head)

    def title(self) -> Message:
        if self.head == 0:
            return msg("real.title_layer", model=SPECS[self.model].title, layer=self.layer)
        return msg("real.title", model=SPECS[self.model].title, layer=self.layer, head=self.head)


@dataclass(frozen=True)
class ModelHead(Origin):
    """A model's head (or layer) on a sentence: the last valid choice, its run, and the sentence as typed."""

    choice: Choice | None = None
    run: Run | None = None
    typed: str = ""  # the sentence as typed, perhaps invalid (the text box shows it; the case is the last valid one)
    section: ClassVar[str] = "model"  # model_room.py: the model, sentence, layer and head
    verify: ClassVar[str] = "verify_model"
    params: ClassVar[tuple[str, ...]] = LINK

    @classmethod
    def opens(cls, session: Session, params: Mapping[str, str | None]) -> bool:
        return open_link(session, params)

    @classmethod
    def start(cls, session: Session) -> None:
        """The model's head again: the last one shown (after an edit, its numbers back), else the default."""
        source = session.source
        show(session, session.loader, source.choice if isinstance(source, ModelHead) else Choice.default())

    def made(self, case: Case) -> bool:
        """On any device: a device is where the numbers are computed, not other numbers."""
        return case is self.case or replace(case, options=replace(case.options, device=self.case.options.device)) == (
            self.case
        )

    def title(self) -> Message:
        return self.choice.title()

    def link(self) -> dict[str, str]:
        c = self.choice
        return {"model": c.model, "text": c.sentence, "layer": str(c.layer), "head": str(c.head)}

    def script(self, case: Case) -> str:
        return real_script(**self.link())  # it loads the model: its numbers are thousands

    def own_output(self) -> torch.Tensor:
        """The model's own output of the head shown: (n, head_dim), or for the whole layer its heads side by side
        (n, heads · head_dim), as the multi-head case concatenates them."""
        c, run = self.choice, self.run
        if c.head == 0:
            every = run.head_outputs[c.layer - 1]  # (heads, n, head_dim)
            return every.permute(1, 0, 2).reshape(every.shape[1], -1)
        return run.head_output(c.layer - 1, c.head - 1)

    def check(self, trace: Trace) -> Check:
        """Whether the eight steps agree with the model's own output of that head (attention/models/)."""
        return compare(self.choice.title(), trace.outputs, self.own_output(), 0.0, AGREES_WITHIN)


def allowed(name: str, value: object, model: str) -> bool:
    """Whether a value could be this part of a choice of `model` (a forged client or a link sends anything)."""
    if name == "model":
        return value in SPECS
    if name == "sentence":
        return isinstance(value, str) and len(value) <= models.MAX_SENTENCE_CHARS
    bounds = {"layer": (1, SPECS[model].layers), "head": (0, SPECS[model].heads)}.get(name)  # head 0: all of them
    return bounds is not None and type(value) is int and bounds[0] <= value <= bounds[1]


def shown(session: Session) -> ModelHead | None:
    """The model's head the session last made (its case perhaps edited since), or None."""
    return session.source if isinstance(session.source, ModelHead) else None


def choose(session: Session, loader: Loader, **changes: object) -> None:
    """A new model, sentence, layer or head: the head's case becomes the session's. A new model starts on its
    default head; a bad value is refused with a notice, a sentence the model cannot read keeps the last valid case
    with the error, and a model not installed here says how to install it."""
    last = shown(session)
    base = last.choice if last is not None else Choice.default()
    model = changes.get("model", base.model)
    model = model if model in SPECS else base.model
    accepted = {}
    for name, value in changes.items():
        if allowed(name, value, model):
            accepted[name] = value
        else:
            session.notices.append(msg("notice.control_refused", name=name, value=excerpt(value)))
    if accepted.get("model", base.model) != base.model:
        fresh = Choice.default(accepted["model"], accepted.get("sentence", base.sentence))
        choice = replace(fresh, **{k: v for k, v in accepted.items() if k in ("layer", "head")})
    else:
        choice = replace(base, **accepted)
    error = show(session, loader, choice)
    if error is not None:  # the sentence as typed is kept, with why; the case stays the last valid one
        session.refuse(error, replace(last, typed=choice.sentence) if last is not None else None)


def show(session: Session, loader: Loader, choice: Choice) -> CaseError | None:
    """The choice's head as the session's case (its run kept while the model and sentence stay); the error of a
    sentence the model cannot read, which changes nothing."""
    last = shown(session)
    try:
        model = loader(choice.model)
    except ModelMissing as e:
        session.notices.append(e.args[0])
        return None
    same = last is not None and (last.choice.model, last.run.sentence) == (choice.model, choice.sentence)
    try:
        run = last.run if same else model.run(choice.sentence)
    except CaseError as e:
        return e
    layer, head = choice.layer - 1, choice.head - 1
    case = models.layer_case(model, run, layer) if head < 0 else models.head_case(model, run, layer, head)
    session.load(case, ModelHead(case, choice, run, choice.sentence), checked=True)
    return None


def open_link(session: Session, params: Mapping[str, str | None]) -> bool:
    """A link's model view (?model=…&text=…&layer=…&head=…): True when it had one. A bad part is said and the
    model's default is used for it (a sentence it cannot read too: its example sentence)."""
    name = params.get("model")
    if not name:
        return False
    if name not in SPECS:
        session.notices.append(msg("notice.bad_model", model=excerpt(name), models=", ".join(SPECS)))
        return True
    numbers = {}
    for part in ("layer", "head"):
        value = params.get(part)
        if value is None:
            continue
        number = int(value) if value.isascii() and value.isdigit() and len(value) < 4 else None
        if number is not None and allowed(part, number, name):
            numbers[part] = number
        else:
            bounds = (1, SPECS[name].layers) if part == "layer" else (0, SPECS[name].heads)
            session.notices.append(msg("notice.bad_model_part", part=part, value=excerpt(value), low=bounds[0],
                                       limit=bounds[1]))  # fmt: skip
    session.controls = replace(session.controls, preset="real")
    error = show(session, session.loader, replace(Choice.default(name, params.get("text") or None), **numbers))
    if error is not None:  # too long, too many tokens, empty: said, and the model's own sentence instead
        session.notices.append(msg("notice.bad_sentence", problem=error.problem))
        show(session, session.loader, replace(Choice.default(name), **numbers))
    return True
