"""A model's head, or its whole layer, as the origin of the session's case: the choice (model, sentence, layer,
head; an encoder-decoder's part and target sentence too), the sentence's run through the model, and what only it
knows (its link, script, check against the model's own output, title). Plain Python, no Streamlit: the loader is
handed in (the app's shows its progress: loaded.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from ... import models
from ...base.case import Case, CaseError
from ...base.i18n import Message, msg
from ...base.record import Check, compare
from ...forward.compute import Trace, tolerance
from ...models import Model, Run, Spec
from ...models.script import real_script
from ...models.seq2seq import PARTS, PairRun, pair_run, part_case
from .origin import Origin

Loader = Callable[[str], Model]
LINK = ("model", "text", "layer", "head")  # a model's view in a link: ?model=hf:org/name&text=…&layer=3&head=5
# and an encoder-decoder's: &part=cross&target_text=… (the backward pass's link has its own "target", a loss's)
PAIR_LINK = ("part", "target_text")


@dataclass(frozen=True)
class Choice:
    """Which head of which model reads which sentence; layer and head count from 1, as people say them."""

    model: str
    sentence: str  # an encoder-decoder's source sentence
    layer: int
    head: int  # 0: every head of the layer, as one multi-head case
    part: str | None = None  # an encoder-decoder's attention (seq2seq.PARTS); None: a model of one stack
    target: str | None = None  # an encoder-decoder's target sentence; None: the model's own translation of the source

    @classmethod
    def default(cls, model: str | None = None, sentence: str | None = None) -> Choice:
        """The model's default head (a previous-token head: easy to read) on its example sentence or this one; the
        first model offered when none is named. An encoder-decoder's: its cross-attention on its own translation,
        which says at once which source token each target token reads."""
        model = models.default_id() if model is None else model
        spec = models.spec(model)
        text, layer, head = spec.default
        part = "cross" if spec.decoder_layers else None
        return cls(model, text if sentence is None else sentence, min(layer, layers(spec, part)), head, part)

    def title(self) -> Message:
        said = {"model": models.title(self.model), "layer": self.layer}
        if self.part is not None:  # which of the three attentions, said first
            said["part"] = msg(f"real.part_short.{self.part}")
            return msg("real.title_layer_part", **said) if self.head == 0 else msg("real.title_part", **said,
                                                                                    head=self.head)  # fmt: skip
        return msg("real.title_layer", **said) if self.head == 0 else msg("real.title", **said, head=self.head)


def layers(spec: Spec, part: str | None) -> int:
    """The layers of a part: the encoder's (a one-stack model's own), or the decoder's (its self- and
    cross-attention)."""
    return spec.layers if part in (None, "encoder") else spec.decoder_layers


@dataclass(frozen=True)
class ModelHead(Origin):
    """A model's head (or layer) on a sentence: the last valid choice, its run, and the sentence as typed."""

    choice: Choice | None = None
    run: Run | None = None
    typed: str = ""  # the sentence as typed, perhaps invalid (the text box shows it; the case is the last valid one)
    # an encoder-decoder's source and target through it (`run` is its part's: the rows its queries are made of)
    pair: PairRun | None = None
    typed_target: str | None = None  # the target as typed, likewise; None: the model's translation
    section: ClassVar[str] = "model"  # model_room.py: the model, sentence, layer and head
    verify: ClassVar[str] = "verify_model"
    params: ClassVar[tuple[str, ...]] = (*LINK, *PAIR_LINK)

    def made(self, case: Case) -> bool:
        """On any device: a device is where the numbers are computed, not other numbers."""
        return case is self.case or replace(case, options=replace(case.options, device=self.case.options.device)) == (
            self.case
        )

    def title(self) -> Message:
        return self.choice.title()

    def link(self) -> dict[str, str]:
        """The choice's parameters; an encoder-decoder's part, and its target unless it is the model's translation
        (greedy: the link makes it again)."""
        c = self.choice
        out = {"model": c.model, "text": c.sentence, "layer": str(c.layer), "head": str(c.head)}
        if c.part is not None:
            out["part"] = c.part
            if c.target is not None:
                out["target_text"] = c.target
        return out

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


def allowed(name: str, value: object, model: str, part: str | None = None) -> bool:
    """Whether a value could be this part of a choice of `model` (a forged client or a link sends anything); a
    layer within `part`'s layers; a part and a target (None: the model's translation) of an encoder-decoder alone."""
    if name == "model":
        return value in models.ids()
    if name == "sentence":
        return isinstance(value, str) and len(value) <= models.MAX_SENTENCE_CHARS
    spec = models.spec(model)
    if name in ("part", "target") and not spec.decoder_layers:
        return False
    if name == "part":
        return value in PARTS
    if name == "target":
        return value is None or (isinstance(value, str) and len(value) <= models.MAX_SENTENCE_CHARS)
    bounds = {"layer": (1, layers(spec, part)), "head": (0, spec.heads)}.get(name)  # head 0: all of them
    return bounds is not None and type(value) is int and bounds[0] <= value <= bounds[1]


def paired(model: Model, source: str, target: str) -> PairRun:
    """The source through the encoder and the target through the decoder; CaseError naming the sentence that the
    model cannot take (empty, too long, too many tokens)."""
    model.tokenize(source)  # its errors name the (source) sentence
    try:
        return pair_run(model, source, target)
    except CaseError as e:  # the source passed: the target is what is wrong
        problem = e.problem
        if getattr(problem, "key", None) == "error.sentence_tokens":  # its limit: one less, for the start token
            problem = msg("error.sentence_tokens", count=problem.params["count"], limit=models.MAX_SENTENCE_TOKENS - 1)
        raise CaseError(msg("where.target"), problem) from None


def made_case(model: Model, choice: Choice, run: Run, pair: PairRun | None) -> Case:
    """The choice's head (head 0: its whole layer) as a case: a one-stack model's on the run's sentence, an
    encoder-decoder's part on the pair's sentences."""
    layer, head = choice.layer - 1, choice.head - 1
    if pair is not None:
        return part_case(model, pair, choice.part, layer, None if head < 0 else head)
    return models.layer_case(model, run, layer) if head < 0 else models.head_case(model, run, layer, head)
