"""Exercises: numbers of a trace hidden for a learner to work out by hand, the link that carries them (never their
values: the case determines those), what else shows the same numbers, and the judge of an answer."""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from dataclasses import dataclass, replace
from types import MappingProxyType

import torch

from ..base.case import CaseError
from ..base.i18n import msg
from ..forward.compute import REPEAT_MAX_N, Broadcast, Trace

# What a teacher may hide: the numbers the steps compute (the inputs and weights are what a learner is given)
HIDEABLE = ("queries", "keys", "values", "scores_raw", "scores", "weights_exact", "weights", "weighted", "outputs")
MAX_BLANKS = 24  # a class's exercise is a handful of numbers; a forged link with thousands is refused
MAX_PROMPT = 280  # characters of a prompt: a sentence or two
MAX_TOKEN = 8_000  # characters of the link's token: 24 blanks with their prompts fit in a few thousand
MAX_JSON = 200_000  # bytes the token may unpack to: a forged one of thousands of blanks is read, then refused
RELATIVE = 1e-2  # an answer within 1 % of the number is right; an integer of the article's exactly
HINT_AFTER = 2  # wrong answers before the hint (which numbers take part, outlined)
SHOW_AFTER = 3  # wrong answers before the arithmetic itself


@dataclass(frozen=True)
class Blank:
    """One hidden number: a recorded tensor and its index (the head first when the tensor has a head axis), and
    what the teacher asks of it."""

    tensor: str
    index: tuple[int, ...]
    prompt: str = ""


@dataclass(frozen=True)
class Exercise:
    blanks: tuple[Blank, ...]

    def to_link(self) -> str:
        """The blanks as a link token: JSON, deflated, base64url (the numbers are not in it)."""
        text = json.dumps([[b.tensor, list(b.index), b.prompt] for b in self.blanks], ensure_ascii=False)
        packed = zlib.compress(text.encode(), 9)
        return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def from_link(token: str, trace: Trace) -> Exercise:
    """An exercise from its link token, checked against the trace it hides numbers of; CaseError says what is wrong
    (where: the exercise link)."""
    where = msg("where.exercise_link")
    if len(token) > MAX_TOKEN:
        raise CaseError(where, msg("error.link_long", count=len(token), limit=MAX_TOKEN))
    try:
        inflater = zlib.decompressobj()
        text = inflater.decompress(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)), MAX_JSON)
        if inflater.unconsumed_tail:
            raise CaseError(where, msg("exercise.error.big", limit=MAX_JSON))
        if not inflater.eof:
            raise ValueError
        raw = json.loads(text)
    except (binascii.Error, ValueError, zlib.error, UnicodeDecodeError, RecursionError):
        raise CaseError(where, msg("exercise.error.decode")) from None
    if not isinstance(raw, list) or not raw:
        raise CaseError(where, msg("exercise.error.no_blanks"))
    if len(raw) > MAX_BLANKS:
        raise CaseError(where, msg("exercise.error.too_many", count=len(raw), limit=MAX_BLANKS))
    blanks = []
    for number, item in enumerate(raw, start=1):
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and isinstance(item[2], str)):
            raise CaseError(where, msg("exercise.error.blank_form", number=number))
        tensor, index, prompt = item
        if len(prompt) > MAX_PROMPT:
            raise CaseError(where, msg("exercise.error.prompt_long", number=number, limit=MAX_PROMPT))
        blanks.append(blank(trace, tensor, index, prompt, number))
    if len(set((b.tensor, b.index) for b in blanks)) < len(blanks):
        raise CaseError(where, msg("exercise.error.twice"))
    return Exercise(tuple(blanks))


def blank(trace: Trace, tensor: str, index: object, prompt: str = "", number: int = 1) -> Blank:
    """A Blank checked against the trace: a hideable tensor it has, and an index inside it."""
    where = msg("where.exercise_link")
    if tensor not in HIDEABLE or not any(tensor in step.tensors for step in trace.steps):
        raise CaseError(where, msg("exercise.error.tensor", number=number, tensor=tensor[:40]))
    if isinstance(trace[tensor], Broadcast):
        raise CaseError(where, msg("exercise.error.too_big", tensor=tensor))
    shape = tuple(trace[tensor].shape)
    if not (
        isinstance(index, list | tuple)
        and len(index) == len(shape)
        and all(type(i) is int and 0 <= i < size for i, size in zip(index, shape, strict=True))
    ):
        shape_text = " × ".join(map(str, shape))
        raise CaseError(where, msg("exercise.error.index", number=number, tensor=tensor, shape=shape_text))
    return Blank(tensor, tuple(index), prompt)


def answer(trace: Trace, b: Blank) -> float:
    """The hidden number itself."""
    return float(trace[b.tensor][b.index])


def right(typed: float, expected: float, exact: bool) -> bool:
    """Whether an answer is the number: the integer itself where it must be exact, else within 1 % of it."""
    if exact:
        return typed == round(expected)
    return abs(typed - expected) <= RELATIVE * abs(expected) + 1e-12


def exact(trace: Trace, expected: float) -> bool:
    """Whether a number must be answered exactly: an integer (to float32's rounding) on integer inputs and weights,
    as the article's are, where every step up to the softmax is integer arithmetic."""
    c = trace.case
    givens = (v for m in (c.x, c.w_query, c.w_key, c.w_value) for row in m for v in row)
    near = abs(expected - round(expected)) <= 1e-5 * max(1.0, abs(expected))
    return near and all(float(v).is_integer() for v in givens)


def shown_with(trace: Trace, b: Blank) -> list[tuple[str, tuple[int, ...]]]:
    """Every recorded cell that shows the blank's number, itself first: the tensors of its step made from it alone, or
    that it is made from alone, of its shape (_alone); a key or value in every query head that shares it; an output
    in step 7's heads and in step 8's rows (see docs/pages.md, Exercises)."""
    o, name, index = trace.case.options, b.tensor, b.index
    step, shape = trace.made_by(name), trace[name].shape
    twins = [t for t in step.tensors if t != name and trace[t].shape == shape and _alone(trace, t, name)]
    cells = [(name, index), *((t, index) for t in twins)]
    if name in ("keys", "values") and trace.has_head(name) and o.kv_heads:  # grouped: one key/value head, h/g copies
        group = o.heads // o.kv_heads
        cells += [(name, (h, *index[1:])) for h in range(o.heads) if h // group == index[0] // group and h != index[0]]
    if name == "outputs":
        i, c = index
        if i < REPEAT_MAX_N:
            cells.append(("outputs_by_query", index))
        if o.w_out is None and "head_outputs" in trace:
            d = trace["head_outputs"].shape[-1]
            cells.append(("head_outputs", (c // d, i, c % d)))
    return cells


def _alone(trace: Trace, a: str, b: str) -> bool:
    """Whether one of two tensors is made from the other alone: the same number scaled, masked or copied (the scores
    and the raw scores, the weights and the exact softmax, step 7's outputs and its concatenation)."""
    return trace.made_from(a) == (b,) or trace.made_from(b) == (a,)


def hidden(trace: Trace, exercise: Exercise, found: frozenset[int]) -> dict[str, frozenset[tuple[int, ...]]]:
    """Each tensor's cells still hidden: those that show a blank not found yet."""
    cells: dict[str, set] = {}
    for number, b in enumerate(exercise.blanks):
        if number not in found:
            for name, index in shown_with(trace, b):
                cells.setdefault(name, set()).add(index)
    return {name: frozenset(indices) for name, indices in cells.items()}


def takes_part(hidden_cells: dict[str, frozenset], parts) -> list[tuple[str, tuple[int, ...]]]:
    """The hidden cells among an explanation's parts (explain.Explanation.parts, head included by the caller as a
    leading entry where the tensor has a head axis)."""
    uses = []
    for name, cells in parts.items():
        for index in hidden_cells.get(name, ()):
            if all(c is None or i in c for i, c in zip(index, cells, strict=False)):
                uses.append((name, index))
    return uses


def redacted(trace: Trace, hidden_cells: dict[str, frozenset]) -> Trace:
    """The trace with every hidden cell NaN; the trace itself when nothing is hidden."""
    if not hidden_cells:
        return trace
    steps = []
    for step in trace.steps:
        tensors = dict(step.tensors)
        for name in tensors.keys() & hidden_cells.keys():
            tensor = tensors[name].clone()
            for index in hidden_cells[name]:
                tensor[index] = math.nan
            tensors[name] = tensor
        steps.append(replace(step, tensors=MappingProxyType(tensors)))
    outputs = trace.outputs.clone()
    for index in hidden_cells.get("outputs", ()):
        outputs[index] = math.nan
    key = tuple(sorted((name, tuple(sorted(cells))) for name, cells in hidden_cells.items()))
    return replace(trace, steps=tuple(steps), outputs=outputs, hidden=key)  # its key tells it from the trace's own


def is_hidden(value: float | torch.Tensor) -> bool:
    """A number an exercise hides (NaN: no trace has one of its own, since a case's numbers are finite)."""
    return math.isnan(float(value))
