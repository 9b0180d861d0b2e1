"""Explain one number of a trace: the arithmetic that made it, written out with the trace's own numbers."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType

import torch

from .core import AXES, PER_HEAD, Trace, scale_factor
from .i18n import msg, render
from .numbers import short_float32

Cells = tuple[int, ...] | None  # 0-based rows or columns of a 2-D view; None: all of them
Parts = Mapping[str, tuple[Cells, Cells]]

ABBREVIATE_OVER = 8  # terms: a longer sum shows its first and last three terms and "…" (its total counts them all)
SHOWN_AT_ENDS = 3
DIRECT_EXP_UP_TO = 80.0  # exp(s) is written out as is when every |s| is at most this; past it, exp(s − max)


@dataclass(frozen=True)
class Explanation:
    """How one recorded number came about: its arithmetic, one equation per line, and the cells that took part.

    `parts` maps a recorded tensor to the (rows, cols) that took part, 0-based, None for all. They are given in the
    2-D view the pages show: a per-head tensor (see PER_HEAD) in the slice of head `head`; "weighted" (n_k, n_q, d_v)
    flattened to rows j·n_q + i (key j, query i), as figures.weighted_heatmap draws it; every other tensor as it is.
    """

    tensor: str  # e.g. "scores"
    index: tuple[int, ...]  # 0-based index into trace[tensor] (with the head first when heads > 1)
    value: float  # trace[tensor][index]
    title: str  # e.g. "scores[Input 2, Input 3]: query Input 2 · key Input 3"
    lines: tuple[str, ...]  # the arithmetic with the real numbers; the last line ends with "= value"
    parts: Parts  # tensor name -> (rows, cols) that took part, for highlighting
    head: int | None = None  # the head (0-based) whose slices `parts` describes; None with one head


def explainable(trace: Trace) -> tuple[str, ...]:
    """The tensor names explain() accepts for this trace, in the order the steps recorded them."""
    return tuple(name for step in trace.steps for name in step.tensors if name in _BUILDERS)


def explain(trace: Trace, tensor: str, index: tuple[int, ...], lang: str = "en") -> Explanation:
    """The arithmetic behind trace[tensor][index], its words in `lang`; ValueError for an unknown tensor or an index
    out of range."""
    names = explainable(trace)
    if tensor not in names:
        raise ValueError(f"cannot explain {tensor!r}: this trace records {', '.join(names)}")
    t = trace[tensor]
    index = _check_index(trace, tensor, t, index)
    title, lines, parts, head = _BUILDERS[tensor](_Explainer(trace), tensor, index)
    parts = {name: (_cells(rows), _cells(cols)) for name, (rows, cols) in parts.items()}
    title, lines = str(render(lang, title)), tuple(str(render(lang, line)) for line in lines)
    return Explanation(tensor, index, t[index].item(), title, lines, MappingProxyType(parts), head)


def _check_index(trace: Trace, tensor: str, t: torch.Tensor, index) -> tuple[int, ...]:
    axes = (("head",) if t.dim() > len(AXES[tensor]) else ()) + AXES[tensor]
    shape = f"{tensor} has shape {tuple(t.shape)}, indexed [{', '.join(axes)}] from 0"
    try:
        index = tuple(operator.index(i) for i in index)
    except TypeError:
        raise ValueError(f"{shape}; the index {index!r} is not a tuple of whole numbers") from None
    if len(index) != t.dim():
        raise ValueError(f"{shape}; the index {list(index)} has {len(index)} numbers, not {t.dim()}")
    for axis, size, i in zip(axes, t.shape, index, strict=True):
        if not 0 <= i < size:
            raise ValueError(f"{shape}; {axis} {i} is out of range (0 to {size - 1})")
    return index


def _cells(cells) -> Cells:
    return None if cells is None else tuple(int(c) for c in cells)


# Numbers on screen ----------------------------------------------------------------------------------------------

_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(*zero_based: int, sep: str = ",") -> str:
    """Unicode subscripts of 1-based positions: _sub(1, 0) is '₂,₁'."""
    return sep.join(str(i + 1) for i in zero_based).translate(_SUBSCRIPTS)


def _pair(i: int, j: int) -> str:
    """A (query, key) subscript: '₂₃' like the article while both are single digits, '₁₂,₃' otherwise."""
    return _sub(i, j, sep="" if max(i, j) < 9 else ",")


def _text(v: float) -> str:
    """A Python float as written by hand: 2.0 → '2', -0.5 → '−0.5', 6e-06 → '6e−6', -inf → '−∞'."""
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if math.isnan(v):
        return "NaN"
    if v == 0:
        return "0"  # -0.0 too: a zero weight times a negative value
    mantissa, _, exponent = repr(v).partition("e")
    mantissa = mantissa.removesuffix(".0")
    return (mantissa + (f"e{int(exponent)}" if exponent else "")).replace("-", "−")


def _approx(v: float) -> str:
    """An intermediate computed here (in float64), to 7 significant digits."""
    return _text(float(f"{v:.7g}")) if math.isfinite(v) else _text(v)


def _factor(s: str) -> str:
    return f"({s})" if s.startswith("−") else s


def _digits(s: str) -> int:
    """Significant digits of a number as _text writes it."""
    return len(s.partition("e")[0].lstrip("−").replace(".", "").strip("0")) or 1


# The explanations ------------------------------------------------------------------------------------------------


class _Explainer:
    """The trace's numbers at hand, written in the trace's precision, and the checks that they add up."""

    def __init__(self, trace: Trace):
        self.trace, self.case, self.o = trace, trace.case, trace.case.options
        self.heads, self.n = self.o.heads, trace.case.n
        dtype = trace["x"].dtype
        self.dtype = str(dtype).removeprefix("torch.")
        self.short: Callable[[float], float] = short_float32 if dtype == torch.float32 else float
        self.eps, self.tiny = torch.finfo(dtype).eps, torch.finfo(dtype).tiny

    # numbers

    def num(self, v: float) -> str:
        """A recorded number, as short as reads back to the same float32 (or float64)."""
        return _text(self.short(v))

    def t(self, name: str, head: int | None = None) -> torch.Tensor:
        t = self.trace[name]
        return t if head is None else t[head]

    def token(self, i: int) -> str:
        return self.case.tokens[i]

    def cell(self, tensor: str, head: int | None, i: int, j: int) -> str:
        """'scores[Input 2, Input 3]': a (query, key) cell named by its tokens."""
        return msg("explain.cell", tensor=tensor, at=self.at(head, self.token(i), self.token(j)))

    def at(self, head: int | None, *labels: str) -> str:
        """The labels of an index, 'head 2, Input 3, 1', with the head first when there is one."""
        rest = ", ".join(labels)
        return rest if head is None else msg("explain.at_head", head=head + 1, rest=rest)

    def split(self, tensor: str, index: tuple[int, ...]) -> tuple[int | None, tuple[int, ...]]:
        """(head, the rest of the index): the head is the first number for per-head tensors when heads > 1."""
        if tensor in PER_HEAD and self.heads > 1:
            return index[0], index[1:]
        return None, index

    def prefixed(self, head: int | None, text: str) -> str:
        """'head 2: text' when there are several heads, else the text."""
        return text if head is None else msg("explain.head_prefix", head=head + 1, rest=text)

    # checks

    def close(self, computed: float, recorded: float, tol: float) -> bool:
        if math.isinf(computed) or math.isinf(recorded):
            return computed == recorded
        return abs(computed - recorded) <= tol

    def ending(
        self, name: str, computed: float, recorded: float, tol: float, by_hand: Decimal | None = None
    ) -> tuple[str, list[str]]:
        """The text after the last '=' of an equation, and a warning line when the terms do not add up."""
        rec = self.num(recorded)
        if not self.close(computed, recorded, tol):
            return rec, [msg("explain.not_add_up", computed=_approx(computed), name=name, recorded=rec)]
        if recorded == 0 and 0 < abs(computed) < self.tiny:  # a weight like exp(−170) / 1: below float32's range
            return msg("explain.rounds_to_zero", computed=_approx(computed), dtype=self.dtype), []
        if by_hand is not None:  # the sum of the numbers as printed, when it reads shorter than the float result
            hand = _text(float(by_hand))
            if hand != rec and _digits(hand) < _digits(rec) and abs(float(by_hand) - recorded) <= tol:
                return msg("explain.by_hand", hand=hand, dtype=self.dtype, recorded=rec), []
        return rec, []

    def products(
        self, pairs: Sequence[tuple[float, float]], keep: Sequence[int] = ()
    ) -> tuple[str, float, float, Decimal]:
        """'a·b + c·d + …', its float64 sum, the sum of |a·b| (for the tolerance), the sum of the printed numbers."""
        shown = [f"{_factor(self.num(a))}·{_factor(self.num(b))}" for a, b in pairs]
        total = math.fsum(a * b for a, b in pairs)
        magnitude = math.fsum(abs(a * b) for a, b in pairs)
        by_hand = sum((Decimal(repr(self.short(a))) * Decimal(repr(self.short(b))) for a, b in pairs), Decimal(0))
        return _abbreviate(shown, keep), total, magnitude, by_hand

    def sum_tol(self, magnitude: float, terms: int, recorded: float) -> float:
        """Float rounding in a sum of `terms` products: a few ulps per term of the largest partial sum."""
        return 2 * self.eps * (terms + 2) * magnitude + 4 * self.eps * abs(recorded) + 16 * self.tiny

    def dot_line(
        self, name: str, lhs: str, pairs: Sequence[tuple[float, float]], recorded: float, keep: Sequence[int] = ()
    ) -> list[str]:
        """'lhs = a·b + c·d + … = total', checked against the recorded total."""
        expression, total, magnitude, by_hand = self.products(pairs, keep)
        end, warning = self.ending(name, total, recorded, self.sum_tol(magnitude, len(pairs), recorded), by_hand)
        return [msg("explain.equation", lhs=lhs, expression=expression, end=end), *warning]

    # steps 1-2: inputs

    def inputs(self, tensor: str, index: tuple[int, ...]):
        r, c = index
        value = self.t(tensor)[r, c].item()
        if tensor == "x":
            title = msg("explain.x.title", token=self.token(r), column=c + 1)
            lines = [
                msg("explain.x.typed", token=self.token(r)),
                f"x{_sub(r, c)} = {self.num(value)}",
            ]
        else:
            symbol, kind = {"w_query": ("W_Q", "query"), "w_key": ("W_K", "key"), "w_value": ("W_V", "value")}[tensor]
            title = msg("explain.w.title", tensor=tensor, row=r + 1, column=c + 1, kind=msg(f"word.{kind}"))
            lines = [
                msg("explain.w.typed", symbol=symbol),
                f"{symbol}[{r + 1}, {c + 1}] = {self.num(value)}",
            ]
        return title, lines, {tensor: ((r,), (c,))}, None

    # step 3: queries, keys and values

    def projection(self, tensor: str, index: tuple[int, ...]):
        head, (i, c) = self.split(tensor, index)
        letter, weight, symbol = {
            "queries": ("q", "w_query", "W_Q"),
            "keys": ("k", "w_key", "W_K"),
            "values": ("v", "w_value", "W_V"),
        }[tensor]
        width = self.t(tensor, head).shape[-1]
        column = c if head is None else head * width + c  # head h takes the h-th block of columns
        kind = {"queries": "query", "keys": "key", "values": "value"}[tensor]
        at, kind = self.at(head, self.token(i), str(c + 1)), msg(f"word.{kind}")
        title = msg("explain.projection.title", tensor=tensor, at=at, kind=kind, token=self.token(i), column=c + 1)
        x_row, w_column = self.t("x")[i].tolist(), self.t(weight)[:, column].tolist()
        lines = []
        if head is not None:
            first, last = head * width + 1, (head + 1) * width
            lines.append(
                msg("explain.projection.head", head=head + 1, first=first, last=last, symbol=symbol, column=c + 1,
                   source=column + 1)
            )  # fmt: skip
        lines.append(msg("explain.projection.row", token=self.token(i), column=column + 1, symbol=symbol))
        value = self.t(tensor, head)[i, c].item()
        lhs = self.prefixed(head, f"{letter}{_sub(i, c)} = x{_sub(i)} · {symbol}[:, {column + 1}]")
        lines += self.dot_line(tensor, lhs, list(zip(x_row, w_column, strict=True)), value)
        parts = {"x": ((i,), None), weight: (None, (column,)), tensor: ((i,), (c,))}
        return title, lines, parts, head

    # step 4: scores

    def scores_raw(self, tensor: str, index: tuple[int, ...]):
        head, (i, j) = self.split(tensor, index)
        title = msg("explain.qk.title", cell=self.cell(tensor, head, i, j), query=self.token(i), key=self.token(j))
        pairs = list(zip(self.t("queries", head)[i].tolist(), self.t("keys", head)[j].tolist(), strict=True))
        value = self.t(tensor, head)[i, j].item()
        lines = [msg("explain.scores_raw.line", query=self.token(i), key=self.token(j))]
        lines += self.dot_line(tensor, self.prefixed(head, f"q{_sub(i)} · k{_sub(j)}"), pairs, value)
        parts = {"queries": ((i,), None), "keys": ((j,), None), tensor: ((i,), (j,))}
        return title, lines, parts, head

    def scores(self, tensor: str, index: tuple[int, ...]):
        head, (i, j) = self.split(tensor, index)
        title = msg("explain.qk.title", cell=self.cell(tensor, head, i, j), query=self.token(i), key=self.token(j))
        raw, value = self.t("scores_raw", head)[i, j].item(), self.t(tensor, head)[i, j].item()
        s, qk = f"s{_pair(i, j)}", f"q{_sub(i)} · k{_sub(j)}"
        parts = {"scores_raw": ((i,), (j,)), tensor: ((i,), (j,))}
        scale, temperature = scale_factor(self.case), self.o.temperature
        if value == float("-inf"):
            if self.o.mask == "causal":
                why = msg("explain.causal_blocks", key=self.token(j), query=self.token(i))
            else:
                why = msg("explain.mask_zero", query=self.token(i), key=self.token(j))
            lines = [
                msg("explain.masked", lhs=self.prefixed(head, qk), raw=self.num(raw), why=why),
                self.prefixed(head, f"{s} = −∞"),
            ]
            return title, lines, parts, head
        if scale == 1 and temperature == 1:
            lines = [msg("explain.raw_score", lhs=self.prefixed(head, s), qk=qk, value=self.num(value))]
            if raw != value:
                lines.append(msg("explain.scores_recorded", raw=self.num(raw), value=self.num(value)))
            return title, lines, parts, head
        if self.o.scale == "sqrt_dk":
            d = self.case.d_k // self.heads
            why, symbol = msg("explain.scaled_sqrt_head" if self.heads > 1 else "explain.scaled_sqrt", d=d), f"1/√{d}"
        else:
            why, symbol = msg("explain.scaled_by", scale=_approx(scale)), _approx(scale)
        ops, numbers = "", ""
        if scale != 1:
            ops, numbers = f" × {symbol}", f" × {_approx(scale)}"
        if temperature != 1:
            why = msg("explain.divided", why=why, temperature=_approx(temperature))
            ops, numbers = ops + f" ÷ {_approx(temperature)}", numbers + f" ÷ {_approx(temperature)}"
        computed = raw * scale / temperature
        end, warning = self.ending(tensor, computed, value, 8 * self.eps * abs(value) + 16 * self.tiny)
        lines = [
            msg("explain.raw_score_why", why=why),
            msg("explain.scaled_eq", lhs=self.prefixed(head, s), qk=qk, ops=ops, raw=_factor(self.num(raw)),
               numbers=numbers, end=end),
            *warning,
        ]  # fmt: skip
        return title, lines, parts, head

    # step 5: softmax

    def weights_exact(self, tensor: str, index: tuple[int, ...]):
        head, (i, j) = self.split(tensor, index)
        title = msg("explain.weight.title", cell=self.cell(tensor, head, i, j), query=self.token(i), key=self.token(j))
        lines = self._softmax_lines(tensor, head, i, j)
        parts = {"scores": ((i,), None), tensor: ((i,), (j,))}
        return title, lines, parts, head

    def _softmax_lines(self, tensor: str, head: int | None, i: int, j: int) -> list[str]:
        row = self.t("scores", head)[i].tolist()
        value = self.t(tensor if tensor == "weights_exact" else "weights_exact", head)[i, j].item()
        a = f"A{_pair(i, j)}"
        seen = [k for k, s in enumerate(row) if s != float("-inf")]  # the keys query i may attend to
        if not seen:
            return [
                msg("explain.all_masked", token=self.token(i)),
                msg("explain.all_masked_zero", lhs=self.prefixed(head, a)),
            ]
        lines = [msg("explain.softmax_row", token=self.token(i))]
        if len(seen) < self.n:
            masked = ", ".join(self.token(k) for k in range(self.n) if k not in seen)
            lines.append(msg("explain.masked_keys", keys=masked))
        direct = all(abs(row[k]) <= DIRECT_EXP_UP_TO for k in seen)
        top = max(row[k] for k in seen)
        shift = 0.0 if direct else top
        exps = {k: math.exp(row[k] - shift) for k in seen}
        total = math.fsum(exps.values())
        numerator = exps.get(j, 0.0)
        keep = [seen.index(j)] if j in seen else []

        def exp_of(k: int) -> str:
            return f"exp({self.num(row[k])})" if direct else f"exp({self.num(row[k])} − {_factor(self.num(top))})"

        symbolic = self.prefixed(head, f"{a} = exp(s{_pair(i, j)}) / Σₖ exp(s{_sub(i)}ₖ)")
        terms = f"({_abbreviate([exp_of(k) for k in seen], keep)})"
        if j not in seen:
            lines.append(msg("explain.equals", lhs=symbolic, rhs=f"exp(−∞) / {terms}"))
        else:
            lines.append(msg("explain.equals", lhs=symbolic, rhs=f"{exp_of(j)} / {terms}"))
        if not direct:
            lines.append(msg("explain.shifted", top=self.num(top)))
        computed = numerator / total
        ys = [abs(row[k] - top) for k in seen]
        tol = self.eps * (8 * (len(seen) + 1) + max(ys)) * max(abs(computed), abs(value)) + 16 * self.tiny
        end, warning = self.ending(tensor, computed, value, tol)
        sum_terms = _abbreviate([_approx(exps[k]) for k in seen], keep)
        lines.append(
            msg("explain.softmax_end", numerator=_approx(numerator), terms=sum_terms, total=_approx(total), end=end)
        )
        return lines + warning

    def weights(self, tensor: str, index: tuple[int, ...]):
        head, (i, j) = self.split(tensor, index)
        title = msg("explain.weight.title", cell=self.cell(tensor, head, i, j), query=self.token(i), key=self.token(j))
        a = f"A{_pair(i, j)}"
        if self.o.weights_override is None:
            lines = [msg("explain.no_override")]
            lines += self._softmax_lines(tensor, head, i, j)
            if self.t(tensor, head)[i, j].item() != self.t("weights_exact", head)[i, j].item():
                lines.append(msg("explain.weights_recorded", value=self.num(self.t(tensor, head)[i, j].item())))
            parts = {"scores": ((i,), None), "weights_exact": ((i,), (j,)), tensor: ((i,), (j,))}
            return title, lines, parts, head
        exact, value = self.t("weights_exact")[i, j].item(), self.t(tensor)[i, j].item()
        lines = [
            msg("explain.override"),
            msg("explain.override_exact", a=a, value=self.num(exact)),
            msg("explain.override_used", a=a, value=self.num(value)),
        ]
        return title, lines, {"weights_exact": ((i,), (j,)), tensor: ((i,), (j,))}, head

    # step 6: weighted values

    def weighted(self, tensor: str, index: tuple[int, ...]):
        head, (j, i, c) = self.split(tensor, index)
        where = self.at(head, self.token(j), self.token(i), str(c + 1))
        title = msg(
            "explain.weighted.title", tensor=tensor, at=where, key=self.token(j), query=self.token(i), column=c + 1
        )
        weight, v = self.t("weights", head)[i, j].item(), self.t("values", head)[j, c].item()
        value = self.t(tensor, head)[j, i, c].item()
        by_hand = Decimal(repr(self.short(weight))) * Decimal(repr(self.short(v)))
        end, warning = self.ending(tensor, weight * v, value, 4 * self.eps * abs(value) + 16 * self.tiny, by_hand)
        lines = [
            msg("explain.weighted.line", key=self.token(j), query=self.token(i)),
            msg("explain.weighted.eq", lhs=self.prefixed(head, f"A{_pair(i, j)} · v{_sub(j, c)}"),
               weight=_factor(self.num(weight)), value=_factor(self.num(v)), end=end),
            *warning,
        ]  # fmt: skip
        n_q = self.t(tensor, head).shape[1]
        parts = {"weights": ((i,), (j,)), "values": ((j,), (c,)), tensor: ((j * n_q + i,), (c,))}
        return title, lines, parts, head

    # step 7: outputs

    def _key_sum_lines(self, name: str, head: int | None, i: int, c: int, recorded: float) -> list[str]:
        """o_ic = Σ_j A_ij v_jc for one head (or the only one), checked against `recorded`."""
        weights, values = self.t("weights", head)[i].tolist(), self.t("values", head)[:, c].tolist()
        lines = [msg("explain.key_sum", token=self.token(i), column=c + 1)]
        lhs = self.prefixed(head, f"o{_sub(i, c)} = Σⱼ A{_sub(i)}ⱼ vⱼ,{_sub(c)}")
        return lines + self.dot_line(name, lhs, list(zip(weights, values, strict=True)), recorded)

    def _key_sum_parts(self, head: int | None, i: int, c: int) -> dict:
        n_k, n_q = self.t("weighted", head).shape[:2]
        rows = tuple(j * n_q + i for j in range(n_k))
        return {"weights": ((i,), None), "values": (None, (c,)), "weighted": (rows, (c,))}

    def head_outputs(self, tensor: str, index: tuple[int, ...]):
        head, (i, c) = self.split(tensor, index)
        at = self.at(head, self.token(i), str(c + 1))
        title = msg("explain.output.title", tensor=tensor, at=at, token=self.token(i), column=c + 1)
        lines = self._key_sum_lines(tensor, head, i, c, self.t(tensor, head)[i, c].item())
        return title, lines, self._key_sum_parts(head, i, c) | {tensor: ((i,), (c,))}, head

    def concat(self, tensor: str, index: tuple[int, ...]):
        i, c = index
        title = msg("explain.concat.title", token=self.token(i), column=c + 1)
        value = self.t(tensor)[i, c].item()
        if self.heads == 1:  # one head and a w_out: concat is the sum over keys, before the projection
            lines = self._key_sum_lines(tensor, None, i, c, value)
            return title, lines, self._key_sum_parts(None, i, c) | {tensor: ((i,), (c,))}, None
        lines, parts, head = self._copy_lines(tensor, i, c, value)
        return title, lines, parts | {tensor: ((i,), (c,))}, head

    def _copy_lines(self, name: str, i: int, c: int, value: float):
        """A column of the heads side by side: which head and column it copies."""
        width = self.t("head_outputs").shape[-1]
        head, hc = divmod(c, width)
        copied = self.t("head_outputs")[head, i, hc].item()
        lines = [
            msg("explain.copy", first=head * width + 1, last=(head + 1) * width, head=head + 1, column=c + 1,
               source=hc + 1),
            msg("explain.copied", head=head + 1, token=self.token(i), column=hc + 1, value=self.num(copied)),
        ]  # fmt: skip
        if copied != value:
            lines.append(msg("explain.copy_recorded", name=name, value=self.num(value)))
        lines.append(f"{name}[{self.token(i)}, {c + 1}] = {self.num(value)}")
        return lines, {"head_outputs": ((i,), (hc,))}, head

    def outputs(self, tensor: str, index: tuple[int, ...]):
        i, c = index
        at = f"{self.token(i)}, {c + 1}"
        title = msg("explain.output.title", tensor="outputs", at=at, token=self.token(i), column=c + 1)
        lines, parts, head = self._output_lines(tensor, i, c, self.t(tensor)[i, c].item())
        return title, lines, parts | {tensor: ((i,), (c,))}, head

    def _output_lines(self, name: str, i: int, c: int, value: float):
        if self.o.w_out is not None:
            concat = self.t("concat")[i].tolist()
            w_out = torch.tensor(self.o.w_out, dtype=self.trace["x"].dtype)[:, c].tolist()
            what = msg("explain.what_heads") if self.heads > 1 else msg("explain.what_summed")
            lines = [msg("explain.w_out", what=what, token=self.token(i), column=c + 1)]
            lines += self.dot_line(
                name, f"o{_sub(i, c)} = concat{_sub(i)} · W_O[:, {c + 1}]", list(zip(concat, w_out, strict=True)), value
            )
            return lines, {"concat": ((i,), None)}, None
        if self.heads > 1:  # no w_out: the outputs are the concatenation
            lines, parts, head = self._copy_lines(name, i, c, value)
            return [msg("explain.no_w_out"), *lines], parts, head
        return self._key_sum_lines(name, None, i, c, value), self._key_sum_parts(None, i, c), None

    # step 8: one query at a time

    def outputs_by_query(self, tensor: str, index: tuple[int, ...]):
        i, c = index
        title = msg("explain.by_query.title", token=self.token(i), column=c + 1)
        value, matrix = self.t(tensor)[i, c].item(), self.t("outputs")[i, c].item()
        override = msg("explain.by_query.override") if self.o.weights_override is not None else ""
        w_out = msg("explain.by_query.w_out") if self.o.w_out is not None else ""
        lines = [
            msg("explain.by_query.runs", token=self.token(i), override=override, w_out=w_out),
            msg("explain.by_query.matrix"),
        ]
        matrix_lines, parts, head = self._output_lines("outputs", i, c, matrix)
        lines += matrix_lines
        difference = abs(value - matrix)
        if difference == 0:
            lines.append(msg("explain.by_query.same", token=self.token(i), column=c + 1))
        elif self.close(value, matrix, self.sum_tol(abs(matrix) + 1, self.n, matrix)):
            lines.append(msg("explain.by_query.rounding", token=self.token(i), difference=difference))
        else:
            lines.append(msg("explain.by_query.differs", token=self.token(i), matrix=self.num(matrix)))
        lines.append(f"o{_sub(i, c)} = {self.num(value)}")
        return title, lines, parts | {"outputs": ((i,), (c,)), tensor: ((i,), (c,))}, head


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


_BUILDERS = {
    "x": _Explainer.inputs,
    "w_query": _Explainer.inputs,
    "w_key": _Explainer.inputs,
    "w_value": _Explainer.inputs,
    "queries": _Explainer.projection,
    "keys": _Explainer.projection,
    "values": _Explainer.projection,
    "scores_raw": _Explainer.scores_raw,
    "scores": _Explainer.scores,
    "weights_exact": _Explainer.weights_exact,
    "weights": _Explainer.weights,
    "weighted": _Explainer.weighted,
    "head_outputs": _Explainer.head_outputs,
    "concat": _Explainer.concat,
    "outputs": _Explainer.outputs,
    "outputs_by_query": _Explainer.outputs_by_query,
}
