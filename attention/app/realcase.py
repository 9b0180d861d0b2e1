"""A real model's head as the session's case: the choice (model, sentence, layer, head), the sentence's run through
the model, and the case it made, kept after an edit as where the edited case came from. Plain Python, no Streamlit:
the loader is handed in (the app's is st.cache_resource, tests may hand in their own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from .. import models
from ..case import Case, CaseError
from ..i18n import Message, excerpt, msg
from ..models import SPECS, Model, ModelMissing, Run

if TYPE_CHECKING:
    from .state import Session

Loader = Callable[[str], Model]
LINK = ("model", "text", "layer", "head")  # a real model's view in a link: ?model=smollm2&text=…&layer=3&head=5
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
class Real:
    """The session's real-model view: the last valid choice, its run, and the head's case as the model made it."""

    choice: Choice
    run: Run
    case: Case  # the session's case while it is the model's (an edit or an option makes another: "edited from")
    typed: str  # the sentence as typed, perhaps invalid (the text box shows it; the case is the last valid one)


def allowed(name: str, value: object, model: str) -> bool:
    """Whether a value could be this part of a choice of `model` (a forged client or a link sends anything)."""
    if name == "model":
        return value in SPECS
    if name == "sentence":
        return isinstance(value, str) and len(value) <= models.MAX_SENTENCE_CHARS
    bounds = {"layer": (1, SPECS[model].layers), "head": (0, SPECS[model].heads)}.get(name)  # head 0: all of them
    return bounds is not None and type(value) is int and bounds[0] <= value <= bounds[1]


def choose(session: Session, loader: Loader, **changes: object) -> None:
    """A new model, sentence, layer or head: the head's case becomes the session's. A new model starts on its
    default head; a bad value is refused with a notice, a sentence the model cannot read keeps the last valid case
    with the error, and a model not installed here says how to install it."""
    real = session.real
    base = real.choice if real is not None else Choice.default()
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
    show(session, loader, choice)


def show(session: Session, loader: Loader, choice: Choice) -> None:
    """The choice's head as the session's case (its run kept while the model and sentence stay)."""
    real = session.real
    try:
        model = loader(choice.model)
    except ModelMissing as e:
        session.notices.append(e.args[0])
        return
    same = real is not None and (real.choice.model, real.run.sentence) == (choice.model, choice.sentence)
    try:
        run = real.run if same else model.run(choice.sentence)
    except CaseError as e:  # the sentence as typed is kept, with why; the case stays the last valid one
        session.error = e
        if real is not None:
            session.real = replace(real, typed=choice.sentence)
        return
    layer, head = choice.layer - 1, choice.head - 1
    case = models.layer_case(model, run, layer) if head < 0 else models.head_case(model, run, layer, head)
    session.load_model_case(case)
    session.real = Real(choice, run, session.case, choice.sentence)


def is_real(session: Session) -> bool:
    """Whether the session's case is still the model's head as the model made it (on any device)."""
    real = session.real
    if real is None:
        return False
    case = session.case
    if case is real.case:
        return True
    return replace(case, options=replace(case.options, device=real.case.options.device)) == real.case


def edited_from(session: Session) -> Message | None:
    """The title of the real head an edited case came from ("edited from SmolLM2, layer 3, head 5"), else None."""
    if session.real is None or is_real(session):
        return None
    return msg("real.edited_from", title=session.real.choice.title())


def model_output(session: Session) -> torch.Tensor | None:
    """The model's own output of the head shown, while the case is the model's: (n, head_dim), or for the whole
    layer its heads side by side (n, heads · head_dim), as the multi-head case concatenates them."""
    if not is_real(session):
        return None
    c, run = session.real.choice, session.real.run
    if c.head == 0:
        every = run.head_outputs[c.layer - 1]  # (heads, n, head_dim)
        return every.permute(1, 0, 2).reshape(every.shape[1], -1)
    return run.head_output(c.layer - 1, c.head - 1)


def open_link(session: Session, params: Mapping[str, str | None], loader: Loader) -> bool:
    """A link's real-model view (?model=…&text=…&layer=…&head=…): True when it had one. A bad part is said and
    the model's default is used for it."""
    name = params.get("model")
    if not name:
        return False
    if name not in SPECS:
        session.notices.append(msg("notice.bad_model", model=excerpt(name), models=", ".join(SPECS)))
        return True
    choice = Choice.default(name, params.get("text") or None)
    numbers = {}
    for part in ("layer", "head"):
        value = params.get(part)
        if value is None:
            continue
        number = int(value) if value.isdigit() and len(value) < 4 else None
        if number is not None and allowed(part, number, name):
            numbers[part] = number
        else:
            bounds = (1, SPECS[name].layers) if part == "layer" else (0, SPECS[name].heads)
            session.notices.append(msg("notice.bad_model_part", part=part, value=excerpt(value), low=bounds[0],
                                       limit=bounds[1]))  # fmt: skip
    session.controls = replace(session.controls, preset="real")
    show(session, loader, replace(choice, **numbers))
    return True


def link(session: Session) -> dict[str, str] | None:
    """The link's parameters of the real view shown, or None when the case is not the model's."""
    if not is_real(session):
        return None
    c = session.real.choice
    return {"model": c.model, "text": c.sentence, "layer": str(c.layer), "head": str(c.head)}
