"""Explain one number of a trace: the arithmetic that made it, written out with the trace's own numbers."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType

import torch

from .core import Trace, scale_factor
from .i18n import msg, render
from .numbers import approx, digits, shortest, written

Cells = tuple[int, ...] | None  # 0-based indices along one axis of a tensor; None: all of them
Parts = Mapping[str, tuple[Cells, ...]]  # tensor name -> the cells that took part, one entry per axis but the head

ABBREVIATE_OVER = 8  # terms: a longer sum shows its first and last three terms and "…" (its total counts them all)
SHOWN_AT_ENDS = 3
LARGEST = 5  # a long sum (a real head's score: 64 products) lists its largest terms first, then its total
DIRECT_EXP_UP_TO = 80.0  # exp(s) is written out as is when every |s| is at most this; past it, exp(s − max)


@dataclass(frozen=True)
class Explanation:
    """How one recorded number came about: its arithmetic, one equation per line, and the cells that took part.

    `parts` maps a recorded tensor to the cells that took part, in that tensor's own coordinates: one entry per axis
    of Trace.axes(name) except the head, each a tuple of 0-based indices or None for all. A tensor with a head axis
    is meant in the slice of head `head` (Trace.view(name, head)). figures.flat_cells turns them into the rows and
    columns of the 2-D view a figure draws.
    """

    tensor: str  # e.g. "scores"
    index: tuple[int, ...]  # 0-based index into trace[tensor] (with the head first when it has a head axis)
    value: float  # trace[tensor][index]
    title: str  # e.g. "scores[Input 2, Input 3]: query Input 2 · key Input 3"
    lines: tuple[str, ...]  # the arithmetic with the real numbers; the last line ends with "= value"
    parts: Parts  # tensor name -> the cells that took part, per axis, for highlighting
    head: int | None = None  # the head (0-based) whose slices the parts with a head axis are; None with one head


@dataclass(frozen=True)
class Derivation:
    """What one tensor's explainer gives: a title, the arithmetic, the cells that took part, and their head."""

    title: str
    lines: tuple[str, ...]
    parts: Parts
    head: int | None = None


Explainer = Callable[["Context", str, "int | None", tuple[int, ...]], Derivation]
EXPLAINERS: dict[str, Explainer] = {}  # tensor name -> its explainer, filled by @explains


def explains(*tensors: str) -> Callable[[Explainer], Explainer]:
    """Register the decorated function as the explainer of these tensors: f(context, tensor, head, index without
    the head) -> Derivation."""

    def register(explainer: Explainer) -> Explainer:
        for name in tensors:
            if name in EXPLAINERS:  # one explainer per tensor: a second would silently win
                raise ValueError(f"{name!r} is already explained by {EXPLAINERS[name].__name__}")
            EXPLAINERS[name] = explainer
        return explainer

    return register


def explainable(trace: Trace) -> tuple[str, ...]:
    """The tensor names explain() accepts for this trace, in the order the steps recorded them."""
    return tuple(name for step in trace.steps for name in step.tensors if name in EXPLAINERS)


def explain(trace: Trace, tensor: str, index: tuple[int, ...], lang: str = "en") -> Explanation:
    """The arithmetic behind trace[tensor][index], its words in `lang`; ValueError for an unknown tensor or an index
    out of range."""
    names = explainable(trace)
    if tensor not in names:
        raise ValueError(f"cannot explain {tensor!r}: this trace records {', '.join(names)}")
    index = _check_index(trace, tensor, index)
    head, rest = (index[0], index[1:]) if trace.has_head(tensor) else (None, index)
    made = EXPLAINERS[tensor](Context.of(trace), tensor, head, rest)
    parts = {name: tuple(_cells(axis) for axis in cells) for name, cells in made.parts.items()}
    title, lines = str(render(lang, made.title)), tuple(str(render(lang, line)) for line in made.lines)
    return Explanation(tensor, index, trace[tensor][index].item(), title, lines, MappingProxyType(parts), made.head)


def _check_index(trace: Trace, tensor: str, index) -> tuple[int, ...]:
    axes, shape = trace.axes(tensor), tuple(trace[tensor].shape)
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


# Numbers on screen (the numbers themselves are written by attention/numbers.py) ----------------------------------

_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(*zero_based: int, sep: str = ",") -> str:
    """Unicode subscripts of 1-based positions: _sub(1, 0) is '₂,₁'."""
    return sep.join(str(i + 1) for i in zero_based).translate(_SUBSCRIPTS)


def _pair(i: int, j: int) -> str:
    """A (query, key) subscript: '₂₃' like the article while both are single digits, '₁₂,₃' otherwise."""
    return _sub(i, j, sep="" if max(i, j) < 9 else ",")


def _factor(s: str) -> str:
    """A number as a factor of a product: a negative one in parentheses, 2·(−1)."""
    return f"({s})" if s.startswith("−") else s


def _abbreviate(terms: Sequence[str], keep: Sequence[int] = ()) -> str:
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


def _at(head: int | None, *labels: str) -> str:
    """The labels of an index, 'head 2, Input 3, 1', with the head first when there is one."""
    rest = ", ".join(labels)
    return rest if head is None else msg("explain.at_head", head=head + 1, rest=rest)


def _prefixed(head: int | None, text: str) -> str:
    """'head 2: text' when there are several heads, else the text."""
    return text if head is None else msg("explain.head_prefix", head=head + 1, rest=text)


def _close(computed: float, recorded: float, tol: float) -> bool:
    if math.isinf(computed) or math.isinf(recorded):
        return computed == recorded
    return abs(computed - recorded) <= tol


# The trace at hand -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """The trace's numbers at hand, written in the trace's precision, and the checks that they add up."""

    trace: Trace
    dtype: str  # "float32" or "float64": the warnings name the precision that rounded
    eps: float  # the precision's machine epsilon and smallest normal number, for the tolerances
    tiny: float

    @classmethod
    def of(cls, trace: Trace) -> Context:
        info = torch.finfo(trace["x"].dtype)
        return cls(trace, str(trace["x"].dtype).removeprefix("torch."), info.eps, info.tiny)

    def num(self, v: float) -> str:
        """A recorded number, as short as reads back to the same float32 (or float64)."""
        return written(self.short(v))

    def short(self, v: float) -> float:
        return shortest(v, self.dtype == "float32")

    def token(self, i: int) -> str:
        return self.trace.case.tokens[i]

    def view(self, name: str, head: int | None = None) -> torch.Tensor:
        return self.trace.view(name, head)

    def cell_name(self, tensor: str, head: int | None, i: int, j: int) -> str:
        """'scores[Input 2, Input 3]': a (query, key) cell named by its tokens."""
        return msg("explain.cell", tensor=tensor, at=_at(head, self.token(i), self.token(j)))

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
        if not _close(computed, recorded, tol):
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
        shown = [f"{_factor(self.num(a))}·{_factor(self.num(b))}" for a, b in pairs]
        total = math.fsum(a * b for a, b in pairs)
        magnitude = math.fsum(abs(a * b) for a, b in pairs)  # for the tolerance
        # the sum of the numbers as printed: 0.9·8 + 0.1·6 is 7.8 by hand, though float32 gives 7.7999997
        by_hand = sum((Decimal(repr(self.short(a))) * Decimal(repr(self.short(b))) for a, b in pairs), Decimal(0))
        end, warning = self.ending(name, total, recorded, self.sum_tol(magnitude, len(pairs), recorded), by_hand)
        line = msg("explain.equation", lhs=lhs, expression=_abbreviate(shown), end=end)
        return [*self.largest(shown, [a * b for a, b in pairs], total), line, *warning]  # the biggest first

    def largest(self, shown: Sequence[str], products: Sequence[float], total: float) -> list[str]:
        """For a sum too long to show whole: its LARGEST terms by size, first, with their place, and the total."""
        if len(products) <= ABBREVIATE_OVER:
            return []
        order = sorted(range(len(products)), key=lambda k: -abs(products[k]))[:LARGEST]
        top = "; ".join(f"[{k + 1}] {shown[k]} = {approx(products[k])}" for k in order)
        return [msg("explain.largest", count=len(order), terms=len(products), top=top, total=approx(total))]


# Steps 1-3: inputs, weights, queries, keys and values -------------------------------------------------------------

_WEIGHTS = {"w_query": ("W_Q", "query"), "w_key": ("W_K", "key"), "w_value": ("W_V", "value")}  # symbol, kind
_PROJECTIONS = {"queries": ("q", "w_query"), "keys": ("k", "w_key"), "values": ("v", "w_value")}  # letter, weight
_PROJECTIONS |= {"queries_unrotated": ("q", "w_query"), "keys_unrotated": ("k", "w_key")}  # step 3's, before RoPE


@explains("x", "w_query", "w_key", "w_value")
def inputs(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """A typed number: nothing to compute, only where it came from."""
    r, col = index
    value = c.view(tensor)[r, col].item()
    if tensor == "x":
        title = msg("explain.x.title", token=c.token(r), column=col + 1)
        lines = (msg("explain.x.typed", token=c.token(r)), f"x{_sub(r, col)} = {c.num(value)}")
    else:
        symbol, kind = _WEIGHTS[tensor]
        title = msg("explain.w.title", tensor=tensor, row=r + 1, column=col + 1, kind=msg(f"word.{kind}"))
        lines = (msg("explain.w.typed", symbol=symbol), f"{symbol}[{r + 1}, {col + 1}] = {c.num(value)}")
    return Derivation(title, lines, {tensor: ((r,), (col,))})


@explains("queries", "keys", "values", "queries_unrotated", "keys_unrotated")
def projection(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 3: a row of x times a column of the weight (the head's block of columns); with RoPE, the queries and
    keys the scores use are step 3's turned by position (rotation below)."""
    if tensor in ("queries", "keys") and c.trace.case.options.rope_base is not None:
        return rotation(c, tensor, head, index)
    i, col = index
    letter, weight = _PROJECTIONS[tensor]
    symbol, kind = _WEIGHTS[weight]
    width = c.view(tensor, head).shape[-1]
    o = c.trace.case.options
    block = head  # the block of the weight's columns this head reads
    if head is not None and weight != "w_query" and o.kv_heads:  # grouped-query attention: a shared key/value head
        block = head // (o.heads // o.kv_heads)
    column = col if head is None else block * width + col  # head h takes the h-th block of columns
    at = _at(head, c.token(i), str(col + 1))
    title = msg("explain.projection.title", tensor=tensor, at=at, kind=msg(f"word.{kind}"), token=c.token(i),
                column=col + 1)  # fmt: skip
    lines = []
    if head is not None:
        first, last = block * width + 1, (block + 1) * width
        lines.append(
            msg("explain.projection.head", head=head + 1, first=first, last=last, symbol=symbol, column=col + 1,
               source=column + 1)
        )  # fmt: skip
        if block != head:
            lines.append(msg("explain.projection.shared", head=head + 1, kv=block + 1, group=o.heads // o.kv_heads))
    lines.append(msg("explain.projection.row", token=c.token(i), column=column + 1, symbol=symbol))
    lhs = _prefixed(head, f"{letter}{_sub(i, col)} = x{_sub(i)} · {symbol}[:, {column + 1}]")
    pairs = list(zip(c.view("x")[i].tolist(), c.view(weight)[:, column].tolist(), strict=True))
    lines += c.dot_line(tensor, lhs, pairs, c.view(tensor, head)[i, col].item())
    return Derivation(title, tuple(lines), {"x": ((i,), None), weight: (None, (column,)), tensor: ((i,), (col,))}, head)


def rotation(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """RoPE: a pair of step 3's numbers turned by the token's position times the pair's frequency."""
    i, col = index
    o, letter = c.trace.case.options, tensor[0]
    before = c.view(f"{tensor}_unrotated", head)
    d, p = before.shape[-1], col // 2
    t = int(o.positions[i]) if o.positions is not None else i
    angle = t * o.rope_base ** (-2 * p / d)
    u, v = before[i, 2 * p].item(), before[i, 2 * p + 1].item()
    computed = u * math.cos(angle) - v * math.sin(angle) if col % 2 == 0 else u * math.sin(angle) + v * math.cos(angle)
    value = c.view(tensor, head)[i, col].item()
    title = msg("explain.rope.title", tensor=tensor, at=_at(head, c.token(i), str(col + 1)), token=c.token(i))
    angle_line = msg("explain.rope.angle", token=c.token(i), position=t, pair=p + 1, first=2 * p + 1,
                     second=2 * p + 2, base=approx(o.rope_base), power=2 * p, d=d, angle=approx(angle))  # fmt: skip
    cos, sin = approx(math.cos(angle)), approx(math.sin(angle))
    if col % 2 == 0:
        expression = f"{_factor(c.num(u))}·{_factor(cos)} − {_factor(c.num(v))}·{_factor(sin)}"
    else:
        expression = f"{_factor(c.num(u))}·{_factor(sin)} + {_factor(c.num(v))}·{_factor(cos)}"
    end, warning = c.ending(tensor, computed, value, c.tol(64, value) + 64 * c.eps * (abs(u) + abs(v)))
    lhs = _prefixed(head, f"{letter}{_sub(i, col)}")
    lines = (angle_line, msg("explain.equation", lhs=lhs, expression=expression, end=end),
             *warning)  # fmt: skip
    unrotated = f"{tensor}_unrotated"
    return Derivation(title, lines, {unrotated: ((i,), (2 * p, 2 * p + 1)), tensor: ((i,), (col,))}, head)


# Step 4: scores --------------------------------------------------------------------------------------------------


@explains("scores_raw")
def scores_raw(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 4: query i dotted with key j."""
    i, j = index
    title = msg("explain.qk.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.token(j))
    pairs = list(zip(c.view("queries", head)[i].tolist(), c.view("keys", head)[j].tolist(), strict=True))
    lines = [msg("explain.scores_raw.line", query=c.token(i), key=c.token(j))]
    lines += c.dot_line(tensor, _prefixed(head, f"q{_sub(i)} · k{_sub(j)}"), pairs, c.view(tensor, head)[i, j].item())
    return Derivation(title, tuple(lines), {"queries": ((i,), None), "keys": ((j,), None), tensor: ((i,), (j,))}, head)


@explains("scores")
def scores(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 4: the raw score, masked, or scaled and divided by the temperature."""
    i, j = index
    o = c.trace.case.options
    title = msg("explain.qk.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.token(j))
    raw, value = c.view("scores_raw", head)[i, j].item(), c.view(tensor, head)[i, j].item()
    s, qk = f"s{_pair(i, j)}", f"q{_sub(i)} · k{_sub(j)}"
    parts = {"scores_raw": ((i,), (j,)), tensor: ((i,), (j,))}
    scale, temperature = scale_factor(c.trace.case), o.temperature
    if value == float("-inf"):
        if o.mask == "causal":
            why = msg("explain.causal_blocks", key=c.token(j), query=c.token(i))
        else:
            why = msg("explain.mask_zero", query=c.token(i), key=c.token(j))
        lines = (msg("explain.masked", lhs=_prefixed(head, qk), raw=c.num(raw), why=why), _prefixed(head, f"{s} = −∞"))
        return Derivation(title, lines, parts, head)
    if scale == 1 and temperature == 1:
        lines = [msg("explain.raw_score", lhs=_prefixed(head, s), qk=qk, value=c.num(value))]
        if raw != value:
            lines.append(msg("explain.scores_recorded", raw=c.num(raw), value=c.num(value)))
        return Derivation(title, tuple(lines), parts, head)
    if o.scale == "sqrt_dk":
        d = c.trace.case.d_head
        why, symbol = msg("explain.scaled_sqrt_head" if o.heads > 1 else "explain.scaled_sqrt", d=d), f"1/√{d}"
    else:
        why, symbol = msg("explain.scaled_by", scale=approx(scale)), approx(scale)
    ops, numbers = "", ""
    if scale != 1:
        ops, numbers = f" × {symbol}", f" × {approx(scale)}"
    if temperature != 1:
        why = msg("explain.divided", why=why, temperature=approx(temperature))
        ops, numbers = ops + f" ÷ {approx(temperature)}", numbers + f" ÷ {approx(temperature)}"
    end, warning = c.ending(tensor, raw * scale / temperature, value, c.tol(8, value))
    lines = (
        msg("explain.raw_score_why", why=why),
        msg("explain.scaled_eq", lhs=_prefixed(head, s), qk=qk, ops=ops, raw=_factor(c.num(raw)), numbers=numbers,
            end=end),
        *warning,
    )  # fmt: skip
    return Derivation(title, lines, parts, head)


# Step 5: softmax -------------------------------------------------------------------------------------------------


@explains("weights_exact")
def weights_exact(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 5: the softmax of row i of the scores, at key j."""
    i, j = index
    title = msg("explain.weight.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.token(j))
    parts = {"scores": ((i,), None), tensor: ((i,), (j,))}
    return Derivation(title, _softmax_lines(c, tensor, head, i, j), parts, head)


def _softmax_lines(c: Context, tensor: str, head: int | None, i: int, j: int) -> tuple[str, ...]:
    """A_ij = exp(s_ij) / Σ_k exp(s_ik), with the row's numbers, checked against weights_exact."""
    n, row = c.trace.case.n, c.view("scores", head)[i].tolist()
    value = c.view("weights_exact", head)[i, j].item()
    a = f"A{_pair(i, j)}"
    seen = [k for k, s in enumerate(row) if s != float("-inf")]  # the keys query i may attend to
    if not seen:
        return msg("explain.all_masked", token=c.token(i)), msg("explain.all_masked_zero", lhs=_prefixed(head, a))
    lines = [msg("explain.softmax_row", token=c.token(i))]
    if len(seen) < n:
        lines.append(msg("explain.masked_keys", keys=", ".join(c.token(k) for k in range(n) if k not in seen)))
    direct = all(abs(row[k]) <= DIRECT_EXP_UP_TO for k in seen)
    top = max(row[k] for k in seen)
    shift = 0.0 if direct else top  # past DIRECT_EXP_UP_TO exp overflows: the same ratio with the largest taken off
    exps = {k: math.exp(row[k] - shift) for k in seen}
    total, numerator = math.fsum(exps.values()), exps.get(j, 0.0)
    keep = [seen.index(j)] if j in seen else []

    def exp_of(k: int) -> str:
        return f"exp({c.num(row[k])})" if direct else f"exp({c.num(row[k])} − {_factor(c.num(top))})"

    symbolic = _prefixed(head, f"{a} = exp(s{_pair(i, j)}) / Σₖ exp(s{_sub(i)}ₖ)")
    terms = f"({_abbreviate([exp_of(k) for k in seen], keep)})"
    lines.append(msg("explain.equals", lhs=symbolic, rhs=f"{exp_of(j) if j in seen else 'exp(−∞)'} / {terms}"))
    if not direct:
        lines.append(msg("explain.shifted", top=c.num(top)))
    computed = numerator / total
    ys = [abs(row[k] - top) for k in seen]  # exp's rounding grows with its argument
    tol = c.eps * (8 * (len(seen) + 1) + max(ys)) * max(abs(computed), abs(value)) + 16 * c.tiny
    end, warning = c.ending(tensor, computed, value, tol)
    sum_terms = _abbreviate([approx(exps[k]) for k in seen], keep)
    lines.append(msg("explain.softmax_end", numerator=approx(numerator), terms=sum_terms, total=approx(total), end=end))
    return (*lines, *warning)


@explains("weights")
def weights(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 5: the exact softmax, or the override's number beside it."""
    i, j = index
    title = msg("explain.weight.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.token(j))
    exact, value = c.view("weights_exact", head)[i, j].item(), c.view(tensor, head)[i, j].item()
    if c.trace.case.options.weights_override is None:
        lines = [msg("explain.no_override"), *_softmax_lines(c, tensor, head, i, j)]
        if value != exact:
            lines.append(msg("explain.weights_recorded", value=c.num(value)))
        parts = {"scores": ((i,), None), "weights_exact": ((i,), (j,)), tensor: ((i,), (j,))}
        return Derivation(title, tuple(lines), parts, head)
    a = f"A{_pair(i, j)}"
    lines = (
        msg("explain.override"),
        msg("explain.override_exact", a=a, value=c.num(exact)),
        msg("explain.override_used", a=a, value=c.num(value)),
    )
    return Derivation(title, lines, {"weights_exact": ((i,), (j,)), tensor: ((i,), (j,))}, head)


# Step 6: weighted values -----------------------------------------------------------------------------------------


@explains("weighted")
def weighted(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 6: query i's weight on key j times value row j, key first as the broadcast lays it out."""
    j, i, col = index
    at = _at(head, c.token(j), c.token(i), str(col + 1))
    title = msg("explain.weighted.title", tensor=tensor, at=at, key=c.token(j), query=c.token(i), column=col + 1)
    weight, v = c.view("weights", head)[i, j].item(), c.view("values", head)[j, col].item()
    value = c.view(tensor, head)[j, i, col].item()
    by_hand = Decimal(repr(c.short(weight))) * Decimal(repr(c.short(v)))
    end, warning = c.ending(tensor, weight * v, value, c.tol(4, value), by_hand)
    lines = (
        msg("explain.weighted.line", key=c.token(j), query=c.token(i)),
        msg("explain.weighted.eq", lhs=_prefixed(head, f"A{_pair(i, j)} · v{_sub(j, col)}"),
            weight=_factor(c.num(weight)), value=_factor(c.num(v)), end=end),
        *warning,
    )  # fmt: skip
    parts = {"weights": ((i,), (j,)), "values": ((j,), (col,)), tensor: ((j,), (i,), (col,))}
    return Derivation(title, lines, parts, head)


# Step 7: outputs -------------------------------------------------------------------------------------------------


def _key_sum(c: Context, title: str, name: str, head: int | None, i: int, col: int, recorded: float) -> Derivation:
    """o_ic = Σ_j A_ij v_jc for one head (or the only one), checked against `recorded`."""
    a_row, v_column = c.view("weights", head)[i].tolist(), c.view("values", head)[:, col].tolist()
    lhs = _prefixed(head, f"o{_sub(i, col)} = Σⱼ A{_sub(i)}ⱼ vⱼ,{_sub(col)}")
    lines = (
        msg("explain.key_sum", token=c.token(i), column=col + 1),
        *c.dot_line(name, lhs, list(zip(a_row, v_column, strict=True)), recorded),
    )
    # every key's product weighted[j, i, col] took part: the whole key axis
    parts = {"weights": ((i,), None), "values": (None, (col,)), "weighted": (None, (i,), (col,))}
    return Derivation(title, lines, parts, head)


def _copy(c: Context, title: str, name: str, i: int, col: int, value: float) -> Derivation:
    """A column of the heads side by side: which head and column it copies."""
    width = c.view("head_outputs").shape[-1]
    head, head_col = divmod(col, width)
    copied = c.view("head_outputs", head)[i, head_col].item()
    lines = [
        msg("explain.copy", first=head * width + 1, last=(head + 1) * width, head=head + 1, column=col + 1,
            source=head_col + 1),
        msg("explain.copied", head=head + 1, token=c.token(i), column=head_col + 1, value=c.num(copied)),
    ]  # fmt: skip
    if copied != value:
        lines.append(msg("explain.copy_recorded", name=name, value=c.num(value)))
    lines.append(f"{name}[{c.token(i)}, {col + 1}] = {c.num(value)}")
    return Derivation(title, tuple(lines), {"head_outputs": ((i,), (head_col,))}, head)


def _output(c: Context, title: str, name: str, i: int, col: int, value: float) -> Derivation:
    """outputs[i, col]: concat times w_out, or (no w_out) the heads' copy, or (one head) the sum over keys."""
    o = c.trace.case.options
    if o.w_out is not None:
        concat = c.view("concat")[i].tolist()
        w_out = torch.tensor(o.w_out, dtype=c.view("x").dtype)[:, col].tolist()  # as the trace's precision read it
        what = msg("explain.what_heads") if o.heads > 1 else msg("explain.what_summed")
        lhs = f"o{_sub(i, col)} = concat{_sub(i)} · W_O[:, {col + 1}]"
        lines = (
            msg("explain.w_out", what=what, token=c.token(i), column=col + 1),
            *c.dot_line(name, lhs, list(zip(concat, w_out, strict=True)), value),
        )
        return Derivation(title, lines, {"concat": ((i,), None)})
    if o.heads > 1:  # no w_out: the outputs are the concatenation
        copy = _copy(c, title, name, i, col, value)
        return Derivation(title, (msg("explain.no_w_out"), *copy.lines), copy.parts, copy.head)
    return _key_sum(c, title, name, None, i, col, value)


@explains("head_outputs")
def head_outputs(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 7, one head: the weighted values of query i summed over the keys."""
    i, col = index
    at = _at(head, c.token(i), str(col + 1))
    title = msg("explain.output.title", tensor=tensor, at=at, token=c.token(i), column=col + 1)
    made = _key_sum(c, title, tensor, head, i, col, c.view(tensor, head)[i, col].item())
    return _with_part(made, tensor, ((i,), (col,)))


@explains("concat")
def concat(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 7: the heads side by side, or (one head and a w_out) the sum over keys before the projection."""
    i, col = index
    title = msg("explain.concat.title", token=c.token(i), column=col + 1)
    value = c.view(tensor)[i, col].item()
    if c.trace.case.options.heads == 1:
        made = _key_sum(c, title, tensor, None, i, col, value)
    else:
        made = _copy(c, title, tensor, i, col, value)
    return _with_part(made, tensor, ((i,), (col,)))


@explains("outputs")
def outputs(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 7: the output of query i, column col."""
    i, col = index
    at = f"{c.token(i)}, {col + 1}"
    title = msg("explain.output.title", tensor="outputs", at=at, token=c.token(i), column=col + 1)
    return _with_part(_output(c, title, tensor, i, col, c.view(tensor)[i, col].item()), tensor, ((i,), (col,)))


# Step 8: one query at a time ------------------------------------------------------------------------------------


@explains("outputs_by_query")
def outputs_by_query(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 8: steps 4-7 for query i alone, against the matrix form's number."""
    i, col = index
    o = c.trace.case.options
    title = msg("explain.by_query.title", token=c.token(i), column=col + 1)
    value, matrix = c.view(tensor)[i, col].item(), c.view("outputs")[i, col].item()
    override = msg("explain.by_query.override") if o.weights_override is not None else ""
    w_out = msg("explain.by_query.w_out") if o.w_out is not None else ""
    lines = [
        msg("explain.by_query.runs", token=c.token(i), override=override, w_out=w_out),
        msg("explain.by_query.matrix"),
    ]
    made = _output(c, title, "outputs", i, col, matrix)
    lines += made.lines
    difference = abs(value - matrix)
    if difference == 0:
        lines.append(msg("explain.by_query.same", token=c.token(i), column=col + 1))
    elif _close(value, matrix, c.sum_tol(abs(matrix) + 1, c.trace.case.n, matrix)):
        lines.append(msg("explain.by_query.rounding", token=c.token(i), difference=difference))
    else:
        lines.append(msg("explain.by_query.differs", token=c.token(i), matrix=c.num(matrix)))
    lines.append(f"o{_sub(i, col)} = {c.num(value)}")
    parts = {**made.parts, "outputs": ((i,), (col,)), tensor: ((i,), (col,))}
    return Derivation(title, tuple(lines), parts, made.head)


def _with_part(made: Derivation, tensor: str, cells: tuple[Cells, ...]) -> Derivation:
    """The derivation with the explained cell itself among its parts (last, as the pages lay them out)."""
    return Derivation(made.title, made.lines, {**made.parts, tensor: cells}, made.head)
