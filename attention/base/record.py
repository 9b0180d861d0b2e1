"""The record every run makes (the forward trace, the backward pass, a decoding, a tiled run): its steps by name, each
tensor by name with what its axes are and what it was made from, and the check of the run against its oracle."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar

import torch

from .case import Case
from .device import synchronize
from .notebook import record_html

Tensor = torch.Tensor
NOTHING: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class Step:
    """One step of a run: what it is, its formula, the tensors it made (on the CPU), and what each was made from."""

    number: int  # as the article counts its eight steps (a backward step: the forward step it goes back through)
    name: str
    label: str  # as a reader counts it: "3b" for RoPE; a decoding step's token; a tile's "2.1"
    title: str
    explanation: str
    formula: str  # LaTeX
    tensors: Mapping[str, Tensor]
    reads: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: NOTHING
    )  # each tensor's parents: the recorded tensors it was made from
    device: str = "cpu"  # where the tensors were computed
    seconds: float = 0.0  # time on that device, synchronised
    notes: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> Tensor:
        return self.tensors[name]


class Record:
    """What every run's record is: its steps in order, each tensor recorded once by name (a decoding's steps record
    theirs each, by the same names: steps[t]), looked up by name. A kind says what each axis of its tensors is
    (AXES), and which have a head axis first when the case has several heads (PER_HEAD)."""

    AXES: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    PER_HEAD: ClassVar[frozenset[str]] = frozenset()
    # the tensors whose "token" axis counts the keys: cross-attention's keys and values are x_kv's rows, a "key token"
    # axis named after x_kv's tokens (a self-attention case's keys are x's rows: "token" as AXES says)
    KEY_ROWS: ClassVar[frozenset[str]] = frozenset()
    TITLE: ClassVar[str] = "Record"  # how a notebook names the kind
    case: Case
    steps: tuple[Step, ...]

    def step(self, name: str) -> Step:
        """A step by its name (KeyError for a step this run does not have, such as RoPE without rope_base)."""
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    def made_by(self, tensor: str) -> Step:
        """The step that recorded a tensor."""
        for step in self.steps:
            if tensor in step.tensors:
                return step
        raise KeyError(tensor)

    def __getitem__(self, tensor: str) -> Tensor:
        """A recorded tensor by its name, whichever step made it."""
        return self.made_by(tensor).tensors[tensor]

    def __contains__(self, tensor: str) -> bool:
        return any(tensor in step.tensors for step in self.steps)

    def made_from(self, tensor: str) -> tuple[str, ...]:
        """The recorded tensors a tensor was made from (micrograd's parents): what its step says it read."""
        return self.made_by(tensor).reads.get(tensor, ())

    def axes(self, name: str) -> tuple[str, ...]:
        """What each axis of a recorded tensor is, with "head" first when it has a head axis; a cross-attention
        case's keys and values count the keys' sentence ("key token")."""
        kinds = self.AXES[name]
        if name in self.KEY_ROWS and self.case.cross:
            kinds = tuple("key token" if kind == "token" else kind for kind in kinds)
        return ("head", *kinds) if name in self.PER_HEAD and self.case.options.heads > 1 else kinds

    def has_head(self, name: str) -> bool:
        """Whether a recorded tensor's first axis is the head."""
        return self.axes(name)[0] == "head"

    def view(self, name: str, head: int | None = None) -> Tensor:
        """A recorded tensor, or its slice of one head; a tensor without a head axis (or head None) as it is."""
        tensor = self[name]
        return tensor if head is None or not self.has_head(name) else tensor[head]

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(note for step in self.steps for note in step.notes)

    def heading(self) -> str:
        """One line that says what the run is: its sizes, and its check when it has one."""
        c = self.case
        heads = f", {c.options.heads} heads" if c.options.heads > 1 else ""
        keys = f", n_kv = {c.n_kv}" if c.cross else ""  # cross-attention: the keys' sentence's length
        return f"n = {c.n}{keys}, d_in = {c.d_in}, d_k = {c.d_k}, d_v = {c.d_v}{heads} · {c.options.dtype}"

    def _repr_html_(self) -> str:
        """The steps with their tensors' shapes and notes, as HTML: how a record shows itself in Jupyter."""
        rows = [(s.label, s.title, [(n, shape(t)) for n, t in s.tensors.items()], list(map(str, s.notes)))
                for s in self.steps]  # fmt: skip
        return record_html(self.TITLE, self.heading(), rows, self.tail())

    def tail(self) -> tuple[str, list[str], list[list[str]]] | None:
        """A matrix a notebook shows under the steps (the outputs): its caption, row labels and cells; None: none."""
        return None


class Recorder:
    """Collects a run's steps' tensors by step name, in the order the steps must come, copied to the CPU, with each
    step's time on the device (synchronised: a timer read after queued GPU work is true)."""

    def __init__(self, names: tuple[str, ...], device: torch.device | None = None):
        self.names, self.device, self.records = names, device or torch.device("cpu"), {}
        self.last = self._now()

    def _now(self) -> float:
        synchronize(self.device)
        return time.perf_counter()

    def record(self, step: str, **tensors: Tensor) -> None:
        expected = self.names[len(self.records)]
        if step != expected:  # the steps are the article's, in its order (or their reverse)
            raise ValueError(f"step {step!r} recorded where {expected!r} comes")
        seconds = self._now() - self.last
        self.records[step] = ({name: tensor.detach().cpu() for name, tensor in tensors.items()}, seconds)
        self.last = self._now()  # the copy to the CPU is not the step's time


def shape(tensor) -> str:
    """A tensor's shape and dtype, e.g. (3 × 4) float32 (step 6's Broadcast has both too)."""
    return f"({' × '.join(map(str, tensor.shape))}) {str(tensor.dtype).removeprefix('torch.')}"


@dataclass(frozen=True)
class Check:
    """A run against its oracle, number by number, each held to its own tolerance: float rounding's allowance for
    that number (base/tolerance.py). It reports the largest difference, or where they differ, the number furthest
    past its tolerance."""

    oracle: str  # what computed the reference
    difference: float  # the largest |run − reference| (where they differ: the one furthest past its tolerance)
    scale: float  # the largest |reference|
    tolerance: float  # what float rounding allows at that number
    agrees: bool = True  # every number within its tolerance (NaN never is)
    where: tuple[int, ...] = field(default=(), compare=False)  # the index of that number

    @property
    def relative(self) -> float:
        """The difference relative to the reference's largest number (the difference itself when that is 0)."""
        return self.difference / self.scale if self.scale > 0 else self.difference


def compare(oracle: str, got: Tensor, reference: Tensor, tolerance: Tensor | float) -> Check:
    """The check of `got` against `reference`, of the same shape, each number within its tolerance (a tensor of
    that shape, or one for all); float64 differences; an empty tensor agrees."""
    if not reference.numel():
        return Check(oracle, 0.0, 0.0, 0.0)
    reference = reference.detach().cpu().double()
    difference = (got.detach().cpu().double() - reference).abs()
    allowed = torch.as_tensor(tolerance, dtype=torch.float64).cpu().expand_as(difference)
    agrees = bool((difference <= allowed).all())  # NaN is never within
    past = (difference / allowed).nan_to_num(nan=math.inf, posinf=math.inf)  # how far past its tolerance: x/0 inf
    flat = int((difference.nan_to_num(nan=math.inf) if agrees else past).flatten().argmax())
    where = unravel(flat, tuple(difference.shape))
    said = difference.flatten()[flat].item(), reference.abs().max().item(), allowed.flatten()[flat].item()
    return Check(oracle, *said, agrees, where)


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of the `flat`-th number of a row-major tensor of `shape` (torch.unravel_index's first call imports
    sympy: 0.4 s of every server's first run)."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def worst(checks: Iterable[Check]) -> Check:
    """Of several checks, the one furthest past (or nearest to) its tolerance: it agrees only if every one does."""
    return max(checks, key=lambda c: (not c.agrees, c.difference / c.tolerance if c.tolerance else math.inf))
