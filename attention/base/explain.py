"""The explain engine: one number of any record (the forward trace, the backward pass, a decoding, a tiled run)
with the arithmetic that made it, written out in the record's own numbers, in one notation. Each capability registers
its explainers here (@explains); the numbers themselves are written by numbers.py."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType

import torch

from .i18n import msg, render
from .numbers import approx, digits, shortest, sub, written
from .record import Record, Step

Cells = tuple[int, ...] | None  # 0-based indices along one axis of a tensor; None: all of them
Parts = Mapping[str, tuple[Cells, ...]]  # tensor name -> the cells that took part, one entry per axis but the head

ABBREVIATE_OVER = 8  # terms: a longer sum shows its first and last three terms and "…" (its total counts them all)
SHOWN_AT_ENDS = 3
LARGEST = 5  # a long sum (a real head's score: 64 products) lists its largest terms first, then its total


@dataclass(frozen=True)
class Explanation:
    """How one recorded number came about: its arithmetic, one equation per line, and the cells that took part.

    `parts` maps a recorded tensor to the cells that took part, in that tensor's own coordinates: one entry per axis
    of Record.axes(name) except the head, each a tuple of 0-based indices or None for all. A tensor with a head axis
    is meant in the slice of head `head` (Record.view(name, head)). The forward figures' flat_cells turns them into
    the rows and columns of the 2-D view a figure draws.
    """

    tensor: str  # e.g. "scores"
    index: tuple[int, ...]  # 0-based index into the step's tensor (with the head first when it has a head axis)
    value: float  # the number explained
    title: str  # e.g. "scores[Input 2, Input 3]: query Input 2 · key Input 3"
    lines: tuple[str, ...]  # the arithmetic with the real numbers; the last line ends with "= value"
    parts: Parts  # tensor name -> the cells that took part, per axis, for highlighting
    head: int | None = None  # the head (0-based) whose slices the parts with a head axis are; None with one head
    formula: str = ""  # the formula of the step that made it (LaTeX)


@dataclass(frozen=True)
class Derivation:
    """What one tensor's explainer gives: a title, the arithmetic, the cells that took part, and their head."""

    title: str
    lines: tuple[str, ...]
    parts: Parts
    head: int | None = None


Explainer = Callable[["Context", str, "int | None", tuple[int, ...]], Derivation]
EXPLAINERS: dict[tuple[type, str], Explainer] = {}  # (record kind, tensor name) -> its explainer, filled by @explains


def explains(kind: type[Record], *tensors: str) -> Callable[[Explainer], Explainer]:
    """Register the decorated function as the explainer of these tensors of a record kind: f(context, tensor, head,
    index without the head) -> Derivation."""

    def register(explainer: Explainer) -> Explainer:
        for name in tensors:
            if (kind, name) in EXPLAINERS:  # one explainer per tensor: a second would silently win
                raise ValueError(f"{name!r} is already explained by {EXPLAINERS[kind, name].__name__}")
            EXPLAINERS[kind, name] = explainer
        return explainer

    return register


def _explainer(record: Record, tensor: str) -> Explainer | None:
    """The explainer of a tensor of this record's kind (or of a kind it refines: an exercise's trace is a trace)."""
    return next((EXPLAINERS[k, tensor] for k in type(record).__mro__ if (k, tensor) in EXPLAINERS), None)


def explainable(record: Record) -> tuple[str, ...]:
    """The tensor names explain() accepts for this record, in the order its steps recorded them."""
    names = dict.fromkeys(name for step in record.steps for name in step.tensors)
    return tuple(name for name in names if _explainer(record, name) is not None)


def explain(
    record: Record, tensor: str, index: tuple[int, ...], lang: str = "en", step: str | None = None
) -> Explanation:
    """The arithmetic behind one number of a recorded tensor (of `step`, by its name, where every step records one
    of that name: a decoding's), its words in `lang`; ValueError for a tensor it cannot explain or an index out of
    range."""
    at = record.step(step) if step is not None else record.made_by(tensor) if tensor in record else None
    explainer = _explainer(record, tensor)
    if explainer is None or at is None or tensor not in at.tensors:
        raise ValueError(f"cannot explain {tensor!r}: this record explains {', '.join(explainable(record))}")
    index = _check_index(record, at, tensor, index)
    head, rest = (index[0], index[1:]) if record.has_head(tensor) else (None, index)
    made = explainer(Context.of(record, at), tensor, head, rest)
    parts = {name: tuple(_cells(axis) for axis in cells) for name, cells in made.parts.items()}
    title, lines = str(render(lang, made.title)), tuple(str(render(lang, line)) for line in made.lines)
    value = at.tensors[tensor][index].item()
    return Explanation(tensor, index, value, title, lines, MappingProxyType(parts), made.head, at.formula)


def _check_index(record: Record, at: Step, tensor: str, index) -> tuple[int, ...]:
    axes, shape = record.axes(tensor), tuple(at.tensors[tensor].shape)
    where = f"{tensor} has shape {shape}, indexed [{', '.join(axes)}] from 0"
    try:
        index = tuple(operator.index(i) for i in index)
    except TypeError:
        raise ValueError(f"{where}; the index {index!r} is not a tuple of whole numbers") from None
    if len(index) != len(shape):
        raise ValueError(f"{where}; the index {list(index)} has {len(index)} numbers, not {len(shape)}")
    for axis, size, i in zip(axes, shape, index, strict=True):
        if not 0 <= i < size:
            raise ValueError(f"{where}; {axis} {i} is out of range (0 to {size - 1})")
    return index


def _cells(cells) -> Cells:
    return None if cells is None else tuple(int(c) for c in cells)


# The notation: one way to write an index, a product and a long sum -----------------------------------------------


def pair(i: int, j: int) -> str:
    """A (query, key) subscript: '₂₃' like the article while both are single digits, '₁₂,₃' otherwise."""
    return sub(i, j, sep="" if max(i, j) < 9 else ",")


def factor(s: str) -> str:
    """A number as a factor of a product: a negative one in parentheses, 2·(−1)."""
    return f"({s})" if s.startswith("−") else s


def abbreviate(terms: Sequence[str], keep: Sequence[int] = ()) -> str:
    """'t₁ + t₂ + …' with the middle of a long sum left out as '…' (the terms in `keep` stay)."""
    if len(terms) <= ABBREVIATE_OVER:
        return " + ".join(terms)
    shown = set(range(SHOWN_AT_ENDS)) | set(range(len(terms) - SHOWN_AT_ENDS, len(terms))) | set(keep)
    out, gap = [], False
    for k, term in enumerate(terms):
        if k in shown:
            out.append(term)
            gap = False
        elif not gap:
            out.append("…")
            gap = True
    return " + ".join(out)


def place(head: int | None, *labels: str) -> str:
    """The labels of an index, 'head 2, Input 3, 1', with the head first when there is one."""
    rest = ", ".join(labels)
    return rest if head is None else msg("explain.at_head", head=head + 1, rest=rest)


def prefixed(head: int | None, text: str) -> str:
    """'head 2: text' when there are several heads, else the text."""
    return text if head is None else msg("explain.head_prefix", head=head + 1, rest=text)


def close(computed: float, recorded: float, tol: float) -> bool:
    if math.isinf(computed) or math.isinf(recorded):
        return computed == recorded
    return abs(computed - recorded) <= tol


# The record at hand ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """The record's numbers at hand (of the step explained first), written in its precision, and the checks that
    they add up."""

    record: Record
    step: Step  # the step whose tensor is explained: where a name is looked up first
    dtype: str  # "float32" or "float64": the warnings name the precision that rounded
    eps: float  # the precision's machine epsilon and smallest normal number, for the tolerances
    tiny: float

    @classmethod
    def of(cls, record: Record, at: Step) -> Context:
        dtype = getattr(torch, record.case.options.dtype)
        info = torch.finfo(dtype)
        return cls(record, at, record.case.options.dtype, info.eps, info.tiny)

    def num(self, v: float) -> str:
        """A recorded number, as short as reads back to the same float32 (or float64)."""
        return written(self.short(v))

    def short(self, v: float) -> float:
        return shortest(v, self.dtype == "float32")

    def token(self, i: int) -> str:
        return self.record.case.tokens[i]

    def key_token(self, j: int) -> str:
        """Key j's token: in cross-attention x_kv's own (the source sentence's), else x's."""
        return self.record.case.key_tokens[j]

    @property
    def case(self):
        return self.record.case

    def view(self, name: str, head: int | None = None) -> torch.Tensor:
        """A tensor of the step explained, else of the record, or one head's slice of it."""
        if name not in self.step.tensors:
            return self.record.view(name, head)
        tensor = self.step.tensors[name]
        return tensor if head is None or not self.record.has_head(name) else tensor[head]

    def cell_name(self, tensor: str, head: int | None, i: int, j: int) -> str:
        """'scores[Input 2, Input 3]': a (query, key) cell named by its tokens (the key's from its own sentence)."""
        return msg("explain.cell", tensor=tensor, at=place(head, self.token(i), self.key_token(j)))

    def tol(self, ulps: float, recorded: float) -> float:
        """Float rounding in one or two operations: a few ulps of the result."""
        return ulps * self.eps * abs(recorded) + 16 * self.tiny

    def sum_tol(self, magnitude: float, terms: int, recorded: float) -> float:
        """Float rounding in a sum of `terms` products: a few ulps per term of the largest partial sum."""
        return 2 * self.eps * (terms + 2) * magnitude + 4 * self.eps * abs(recorded) + 16 * self.tiny

    def ending(
        self, name: str, computed: float, recorded: float, tol: float, by_hand: Decimal | None = None
    ) -> tuple[str, list[str]]:
        """The text after the last '=' of an equation, and a warning line when the terms do not add up."""
        rec = self.num(recorded)
        if not close(computed, recorded, tol):
            return rec, [msg("explain.not_add_up", computed=approx(computed), name=name, recorded=rec)]
        if recorded == 0 and 0 < abs(computed) < self.tiny:  # a weight like exp(−170) / 1: below float32's range
            return msg("explain.rounds_to_zero", computed=approx(computed), dtype=self.dtype), []
        if by_hand is not None:  # the sum of the numbers as printed, when it reads shorter than the float result
            hand = written(float(by_hand))
            if hand != rec and digits(hand) < digits(rec) and abs(float(by_hand) - recorded) <= tol:
                return msg("explain.by_hand", hand=hand, dtype=self.dtype, recorded=rec), []
        return rec, []

    def dot_line(self, name: str, lhs: str, pairs: Sequence[tuple[float, float]], recorded: float) -> list[str]:
        """'lhs = a·b + c·d + … = total', checked against the recorded total."""
        shown = [f"{factor(self.num(a))}·{factor(self.num(b))}" for a, b in pairs]
        total = math.fsum(a * b for a, b in pairs)
        magnitude = math.fsum(abs(a * b) for a, b in pairs)  # for the tolerance
        # the sum of the numbers as printed: 0.9·8 + 0.1·6 is 7.8 by hand, though float32 gives 7.7999997
        by_hand = sum((Decimal(repr(self.short(a))) * Decimal(repr(self.short(b))) for a, b in pairs), Decimal(0))
        end, warning = self.ending(name, total, recorded, self.sum_tol(magnitude, len(pairs), recorded), by_hand)
        line = msg("explain.equation", lhs=lhs, expression=abbreviate(shown), end=end)
        return [*self.largest(shown, [a * b for a, b in pairs], total), line, *warning]  # the biggest first

    def largest(self, shown: Sequence[str], products: Sequence[float], total: float) -> list[str]:
        """For a sum too long to show whole: its LARGEST terms by size, first, with their place, and the total."""
        if len(products) <= ABBREVIATE_OVER:
            return []
        order = sorted(range(len(products)), key=lambda k: -abs(products[k]))[:LARGEST]
        top = "; ".join(f"[{k + 1}] {shown[k]} = {approx(products[k])}" for k in order)
        return [msg("explain.largest", count=len(order), terms=len(products), top=top, total=approx(total))]
