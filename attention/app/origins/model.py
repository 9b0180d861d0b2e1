"""A model's head, or its whole layer, as the origin of the session's case: the choice (model, sentence, layer,
head), the sentence's run through the model, and what only it knows (its link, script, check against the model's
own output, title). Plain Python, no Streamlit: the loader is handed in (the app's shows its progress: loaded.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from ... import models
from ...base.case import Case
from ...base.i18n import Message, msg
from ...base.record import Check, compare
from ...forward.compute import Trace, tolerance
from ...models import Model, Run
from ...models.script import real_script
from .origin import Origin

Loader = Callable[[str], Model]
LINK = ("model", "text", "layer", "head")  # a model's view in a link: ?model=hf:org/name&text=…&layer=3&head=5


@dataclass(frozen=True)
class Choice:
    """Which head of which model reads which sentence; layer and head count from 1, as people say them."""

    model: str
    sentence: str
    layer: int
    head: int  # 0: every head of the layer, as one multi-head case

    @classmethod
    def default(cls, model: str | None = None, sentence: str | None = None) -> Choice:
        """The model's default head (a previous-token head: easy to read) on its example sentence or this one; the
        first model offered when none is named."""
        model = models.default_id() if model is None else model
        text, layer, head = models.spec(model).default
        return cls(model, text if sentence is None else sentence, layer, head)

    def title(self) -> Message:
        if self.head == 0:
            return msg("real.title_layer", model=models.title(self.model), layer=self.layer)
        return msg("real.title", model=models.title(self.model), layer=self.layer, head=self.head)


@dataclass(frozen=True)
class ModelHead(Origin):
    """A model's head (or layer) on a sentence: the last valid choice, its run, and the sentence as typed."""

    choice: Choice | None = None
    run: Run | None = None
    typed: str = ""  # the sentence as typed, perhaps invalid (the text box shows it; the case is the last valid one)
    section: ClassVar[str] = "model"  # model_room.py: the model, sentence, layer and head
    verify: ClassVar[str] = "verify_model"
    params: ClassVar[tuple[str, ...]] = LINK

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
        return real_script(
            **self.link(), where=models.home(self.choice.model)
        )  # it loads the model: thousands of numbers

    def own_output(self) -> torch.Tensor:
        """The model's own output of the head shown: (n, head_dim), or for the whole layer its heads side by side
        (n, heads · head_dim), as the multi-head case concatenates them."""
        c, run = self.choice, self.run
        if c.head == 0 or self.case.options.heads > 1:  # a layer, or a head whose case is its layer's (OLMo 2's)
            every = run.head_outputs[c.layer - 1]  # (heads, n, head_dim)
            return every.permute(1, 0, 2).reshape(every.shape[1], -1)
        return run.head_output(c.layer - 1, c.head - 1)

    def head(self, case: Case) -> tuple[int, Choice] | None:
        """The head chosen in the model room (and that choice), where its case is the whole layer (OLMo 2's q/k
        norm over the width)."""
        return (self.choice.head - 1, self.choice) if self.choice.head > 0 and case.options.heads > 1 else None

    def check(self, trace: Trace) -> Check:
        """Whether the eight steps agree with the model's own output of that head (attention/models/), each number
        within the one rule's tolerance (base/tolerance.py): the model makes q, k and v its own way."""
        allowed = tolerance(trace.case, trace.__getitem__, projected=True)
        return compare(self.choice.title(), trace.outputs, self.own_output(), allowed)


def allowed(name: str, value: object, model: str) -> bool:
    """Whether a value could be this part of a choice of `model` (a forged client or a link sends anything)."""
    if name == "model":
        return value in models.ids()
    if name == "sentence":
        return isinstance(value, str) and len(value) <= models.MAX_SENTENCE_CHARS
    spec = models.spec(model)
    bounds = {"layer": (1, spec.layers), "head": (0, spec.heads)}.get(name)  # head 0: all of them
    return bounds is not None and type(value) is int and bounds[0] <= value <= bounds[1]
