"""The forward pass's explainers: one number of a trace with the arithmetic that made it, step by step, written out
with the trace's own numbers (the engine, its notation and its checks: base/explain.py)."""

from __future__ import annotations

import math
from decimal import Decimal

import torch

from ..base.explain import Cells, Context, Derivation, abbreviate, close, explains, factor, pair, place, prefixed
from ..base.i18n import msg
from ..base.numbers import approx, sub
from .compute import Trace, scale_factor

DIRECT_EXP_UP_TO = 80.0  # exp(s) is written out as is when every |s| is at most this; past it, exp(s − max)


# Steps 1-3: inputs, weights, queries, keys and values -------------------------------------------------------------

_WEIGHTS = {"w_query": ("W_Q", "query"), "w_key": ("W_K", "key"), "w_value": ("W_V", "value")}  # symbol, kind
_PROJECTIONS = {"queries": ("q", "w_query"), "keys": ("k", "w_key"), "values": ("v", "w_value")}  # letter, weight
_PROJECTIONS |= {"queries_unrotated": ("q", "w_query"), "keys_unrotated": ("k", "w_key")}  # step 3's, before RoPE
_PROJECTIONS |= {"queries_unnormed": ("q", "w_query"), "keys_unnormed": ("k", "w_key")}  # before a q/k norm


@explains(Trace, "x", "w_query", "w_key", "w_value")
def inputs(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """A typed number: nothing to compute, only where it came from."""
    r, col = index
    value = c.view(tensor)[r, col].item()
    if tensor == "x":
        title = msg("explain.x.title", token=c.token(r), column=col + 1)
        lines = (msg("explain.x.typed", token=c.token(r)), f"x{sub(r, col)} = {c.num(value)}")
    else:
        symbol, kind = _WEIGHTS[tensor]
        title = msg("explain.w.title", tensor=tensor, row=r + 1, column=col + 1, kind=msg(f"word.{kind}"))
        lines = (msg("explain.w.typed", symbol=symbol), f"{symbol}[{r + 1}, {col + 1}] = {c.num(value)}")
    return Derivation(title, lines, {tensor: ((r,), (col,))})


@explains(
    Trace, "queries", "keys", "values", "queries_unrotated", "keys_unrotated", "queries_unnormed", "keys_unnormed"
)
def projection(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 3: a row of x times a column of the weight (the head's block of columns); with a q/k norm or RoPE, the
    queries and keys after them are step 3's normed (normalization below) or turned by position (rotation)."""
    o = c.record.case.options
    if tensor in ("queries", "keys") and o.rope_base is not None:
        return rotation(c, tensor, head, index)
    if tensor in ("queries", "keys", "queries_unrotated", "keys_unrotated") and o.q_norm is not None:
        return normalization(c, tensor, head, index)
    i, col = index
    letter, weight = _PROJECTIONS[tensor]
    symbol, kind = _WEIGHTS[weight]
    width = c.view(tensor, head).shape[-1]
    block = head  # the block of the weight's columns this head reads
    if head is not None and weight != "w_query" and o.kv_heads:  # grouped-query attention: a shared key/value head
        block = head // (o.heads // o.kv_heads)
    column = col if head is None else block * width + col  # head h takes the h-th block of columns
    at = place(head, c.token(i), str(col + 1))
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
    lhs = prefixed(head, f"{letter}{sub(i, col)} = x{sub(i)} · {symbol}[:, {column + 1}]")
    pairs = list(zip(c.view("x")[i].tolist(), c.view(weight)[:, column].tolist(), strict=True))
    lines += c.dot_line(tensor, lhs, pairs, c.view(tensor, head)[i, col].item())
    return Derivation(title, tuple(lines), {"x": ((i,), None), weight: (None, (column,)), tensor: ((i,), (col,))}, head)


def rotation(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """RoPE: a pair of step 3's numbers turned by the token's position times the pair's frequency."""
    i, col = index
    o, letter = c.record.case.options, tensor[0]
    before = c.view(f"{tensor}_unrotated", head)
    d, p = before.shape[-1], col // 2
    t = int(o.positions[i]) if o.positions is not None else i
    theta = o.rope_base ** (-2 * p / d) if o.rope_frequencies is None else o.rope_frequencies[p]
    angle = t * theta
    u, v = before[i, 2 * p].item(), before[i, 2 * p + 1].item()
    computed = u * math.cos(angle) - v * math.sin(angle) if col % 2 == 0 else u * math.sin(angle) + v * math.cos(angle)
    value = c.view(tensor, head)[i, col].item()
    title = msg("explain.rope.title", tensor=tensor, at=place(head, c.token(i), str(col + 1)), token=c.token(i))
    scaled = o.rope_frequencies is not None  # a model's own θ_p, scaled from the paper's
    angle_line = msg("explain.rope.angle_scaled" if scaled else "explain.rope.angle", token=c.token(i),
                     position=t, pair=p + 1, first=2 * p + 1, second=2 * p + 2, base=approx(o.rope_base),
                     power=2 * p, d=d, theta=approx(theta), angle=approx(angle))  # fmt: skip
    cos, sin = approx(math.cos(angle)), approx(math.sin(angle))
    if col % 2 == 0:
        expression = f"{factor(c.num(u))}·{factor(cos)} − {factor(c.num(v))}·{factor(sin)}"
    else:
        expression = f"{factor(c.num(u))}·{factor(sin)} + {factor(c.num(v))}·{factor(cos)}"
    end, warning = c.ending(tensor, computed, value, c.tol(64, value) + 64 * c.eps * (abs(u) + abs(v)))
    lhs = prefixed(head, f"{letter}{sub(i, col)}")
    lines = (angle_line, msg("explain.equation", lhs=lhs, expression=expression, end=end),
             *warning)  # fmt: skip
    unrotated = f"{tensor}_unrotated"
    return Derivation(title, lines, {unrotated: ((i,), (2 * p, 2 * p + 1)), tensor: ((i,), (col,))}, head)


def normalization(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Qwen3's q/k norm: a number of step 3 over the root mean square of its token's query (key) in the head, times
    the model's weight γ for its dim."""
    i, col = index
    o, kind, letter = c.record.case.options, tensor.split("_")[0], tensor[0]
    before = c.view(f"{kind}_unnormed", head)[i].tolist()  # (d,): the token's query (key) in this head
    d, u, gamma = len(before), before[col], (o.q_norm if kind == "queries" else o.k_norm)[col]
    mean = math.fsum(b * b for b in before) / d
    root = math.sqrt(mean + o.norm_eps)
    value = c.view(tensor, head)[i, col].item()
    title = msg("explain.norm.title", tensor=tensor, at=place(head, c.token(i), str(col + 1)), token=c.token(i))
    root_line = msg("explain.norm.root", token=c.token(i), letter=letter, d=d, mean=approx(mean),
                    eps=approx(o.norm_eps), root=approx(root))  # fmt: skip
    expression = f"{factor(c.num(gamma))}·{factor(c.num(u))} / {approx(root)}"
    end, warning = c.ending(tensor, gamma * u / root, value, c.tol(4 * math.sqrt(d) + 8, value))  # d squares summed
    lhs = prefixed(head, f"{letter}{sub(i, col)}")
    lines = (root_line, msg("explain.equation", lhs=lhs, expression=expression, end=end), *warning)
    return Derivation(title, lines, {f"{kind}_unnormed": ((i,), None), tensor: ((i,), (col,))}, head)


# Step 4: scores --------------------------------------------------------------------------------------------------


@explains(Trace, "scores_raw")
def scores_raw(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 4: query i dotted with key j."""
    i, j = index
    title = msg("explain.qk.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.token(j))
    pairs = list(zip(c.view("queries", head)[i].tolist(), c.view("keys", head)[j].tolist(), strict=True))
    lines = [msg("explain.scores_raw.line", query=c.token(i), key=c.token(j))]
    lines += c.dot_line(tensor, prefixed(head, f"q{sub(i)} · k{sub(j)}"), pairs, c.view(tensor, head)[i, j].item())
    return Derivation(title, tuple(lines), {"queries": ((i,), None), "keys": ((j,), None), tensor: ((i,), (j,))}, head)


@explains(Trace, "scores")
def scores(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 4: the raw score, masked, or scaled and divided by the temperature."""
    i, j = index
    o = c.record.case.options
    title = msg("explain.qk.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.token(j))
    raw, value = c.view("scores_raw", head)[i, j].item(), c.view(tensor, head)[i, j].item()
    s, qk = f"s{pair(i, j)}", f"q{sub(i)} · k{sub(j)}"
    parts = {"scores_raw": ((i,), (j,)), tensor: ((i,), (j,))}
    scale, temperature = scale_factor(c.record.case), o.temperature
    if value == float("-inf"):
        if o.mask == "causal":
            why = msg("explain.causal_blocks", key=c.token(j), query=c.token(i))
        else:
            why = msg("explain.mask_zero", query=c.token(i), key=c.token(j))
        lines = (msg("explain.masked", lhs=prefixed(head, qk), raw=c.num(raw), why=why), prefixed(head, f"{s} = −∞"))
        return Derivation(title, lines, parts, head)
    if scale == 1 and temperature == 1:
        lines = [msg("explain.raw_score", lhs=prefixed(head, s), qk=qk, value=c.num(value))]
        if raw != value:
            lines.append(msg("explain.scores_recorded", raw=c.num(raw), value=c.num(value)))
        return Derivation(title, tuple(lines), parts, head)
    if o.scale == "sqrt_dk":
        d = c.record.case.d_head
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
        msg("explain.scaled_eq", lhs=prefixed(head, s), qk=qk, ops=ops, raw=factor(c.num(raw)), numbers=numbers,
            end=end),
        *warning,
    )  # fmt: skip
    return Derivation(title, lines, parts, head)


# Step 5: softmax -------------------------------------------------------------------------------------------------


@explains(Trace, "weights_exact")
def weights_exact(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 5: the softmax of row i of the scores, at key j."""
    i, j = index
    title = msg("explain.weight.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.token(j))
    parts = {"scores": ((i,), None), tensor: ((i,), (j,))}
    return Derivation(title, _softmax_lines(c, tensor, head, i, j), parts, head)


def _softmax_lines(c: Context, tensor: str, head: int | None, i: int, j: int) -> tuple[str, ...]:
    """A_ij = exp(s_ij) / Σ_k exp(s_ik), with the row's numbers, checked against weights_exact."""
    n, row = c.record.case.n, c.view("scores", head)[i].tolist()
    value = c.view("weights_exact", head)[i, j].item()
    a = f"A{pair(i, j)}"
    seen = [k for k, s in enumerate(row) if s != float("-inf")]  # the keys query i may attend to
    if not seen:
        return msg("explain.all_masked", token=c.token(i)), msg("explain.all_masked_zero", lhs=prefixed(head, a))
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
        return f"exp({c.num(row[k])})" if direct else f"exp({c.num(row[k])} − {factor(c.num(top))})"

    symbolic = prefixed(head, f"{a} = exp(s{pair(i, j)}) / Σₖ exp(s{sub(i)}ₖ)")
    terms = f"({abbreviate([exp_of(k) for k in seen], keep)})"
    lines.append(msg("explain.equals", lhs=symbolic, rhs=f"{exp_of(j) if j in seen else 'exp(−∞)'} / {terms}"))
    if not direct:
        lines.append(msg("explain.shifted", top=c.num(top)))
    computed = numerator / total
    ys = [abs(row[k] - top) for k in seen]  # exp's rounding grows with its argument
    tol = c.eps * (8 * (len(seen) + 1) + max(ys)) * max(abs(computed), abs(value)) + 16 * c.tiny
    end, warning = c.ending(tensor, computed, value, tol)
    sum_terms = abbreviate([approx(exps[k]) for k in seen], keep)
    lines.append(msg("explain.softmax_end", numerator=approx(numerator), terms=sum_terms, total=approx(total), end=end))
    return (*lines, *warning)


@explains(Trace, "weights")
def weights(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 5: the exact softmax, or the override's number beside it."""
    i, j = index
    title = msg("explain.weight.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.token(j))
    exact, value = c.view("weights_exact", head)[i, j].item(), c.view(tensor, head)[i, j].item()
    if c.record.case.options.weights_override is None:
        lines = [msg("explain.no_override"), *_softmax_lines(c, tensor, head, i, j)]
        if value != exact:
            lines.append(msg("explain.weights_recorded", value=c.num(value)))
        parts = {"scores": ((i,), None), "weights_exact": ((i,), (j,)), tensor: ((i,), (j,))}
        return Derivation(title, tuple(lines), parts, head)
    a = f"A{pair(i, j)}"
    lines = (
        msg("explain.override"),
        msg("explain.override_exact", a=a, value=c.num(exact)),
        msg("explain.override_used", a=a, value=c.num(value)),
    )
    return Derivation(title, lines, {"weights_exact": ((i,), (j,)), tensor: ((i,), (j,))}, head)


# Step 6: weighted values -----------------------------------------------------------------------------------------


@explains(Trace, "weighted")
def weighted(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 6: query i's weight on key j times value row j, key first as the broadcast lays it out."""
    j, i, col = index
    at = place(head, c.token(j), c.token(i), str(col + 1))
    title = msg("explain.weighted.title", tensor=tensor, at=at, key=c.token(j), query=c.token(i), column=col + 1)
    weight, v = c.view("weights", head)[i, j].item(), c.view("values", head)[j, col].item()
    value = c.view(tensor, head)[j, i, col].item()
    by_hand = Decimal(repr(c.short(weight))) * Decimal(repr(c.short(v)))
    end, warning = c.ending(tensor, weight * v, value, c.tol(4, value), by_hand)
    lines = (
        msg("explain.weighted.line", key=c.token(j), query=c.token(i)),
        msg("explain.weighted.eq", lhs=prefixed(head, f"A{pair(i, j)} · v{sub(j, col)}"),
            weight=factor(c.num(weight)), value=factor(c.num(v)), end=end),
        *warning,
    )  # fmt: skip
    parts = {"weights": ((i,), (j,)), "values": ((j,), (col,)), tensor: ((j,), (i,), (col,))}
    return Derivation(title, lines, parts, head)


# Step 7: outputs -------------------------------------------------------------------------------------------------


def _key_sum(c: Context, title: str, name: str, head: int | None, i: int, col: int, recorded: float) -> Derivation:
    """o_ic = Σ_j A_ij v_jc for one head (or the only one), checked against `recorded`."""
    a_row, v_column = c.view("weights", head)[i].tolist(), c.view("values", head)[:, col].tolist()
    lhs = prefixed(head, f"o{sub(i, col)} = Σⱼ A{sub(i)}ⱼ vⱼ,{sub(col)}")
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
    o = c.record.case.options
    if o.w_out is not None:
        concat = c.view("concat")[i].tolist()
        w_out = torch.tensor(o.w_out, dtype=c.view("x").dtype)[:, col].tolist()  # as the trace's precision read it
        what = msg("explain.what_heads") if o.heads > 1 else msg("explain.what_summed")
        lhs = f"o{sub(i, col)} = concat{sub(i)} · W_O[:, {col + 1}]"
        lines = (
            msg("explain.w_out", what=what, token=c.token(i), column=col + 1),
            *c.dot_line(name, lhs, list(zip(concat, w_out, strict=True)), value),
        )
        return Derivation(title, lines, {"concat": ((i,), None)})
    if o.heads > 1:  # no w_out: the outputs are the concatenation
        copy = _copy(c, title, name, i, col, value)
        return Derivation(title, (msg("explain.no_w_out"), *copy.lines), copy.parts, copy.head)
    return _key_sum(c, title, name, None, i, col, value)


@explains(Trace, "head_outputs")
def head_outputs(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 7, one head: the weighted values of query i summed over the keys."""
    i, col = index
    at = place(head, c.token(i), str(col + 1))
    title = msg("explain.output.title", tensor=tensor, at=at, token=c.token(i), column=col + 1)
    made = _key_sum(c, title, tensor, head, i, col, c.view(tensor, head)[i, col].item())
    return _with_part(made, tensor, ((i,), (col,)))


@explains(Trace, "concat")
def concat(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 7: the heads side by side, or (one head and a w_out) the sum over keys before the projection."""
    i, col = index
    title = msg("explain.concat.title", token=c.token(i), column=col + 1)
    value = c.view(tensor)[i, col].item()
    if c.record.case.options.heads == 1:
        made = _key_sum(c, title, tensor, None, i, col, value)
    else:
        made = _copy(c, title, tensor, i, col, value)
    return _with_part(made, tensor, ((i,), (col,)))


@explains(Trace, "outputs")
def outputs(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 7: the output of query i, column col."""
    i, col = index
    at = f"{c.token(i)}, {col + 1}"
    title = msg("explain.output.title", tensor="outputs", at=at, token=c.token(i), column=col + 1)
    return _with_part(_output(c, title, tensor, i, col, c.view(tensor)[i, col].item()), tensor, ((i,), (col,)))


# Step 8: one query at a time ------------------------------------------------------------------------------------


@explains(Trace, "outputs_by_query")
def outputs_by_query(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 8: steps 4-7 for query i alone, against the matrix form's number."""
    i, col = index
    o = c.record.case.options
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
    elif close(value, matrix, c.sum_tol(abs(matrix) + 1, c.record.case.n, matrix)):
        lines.append(msg("explain.by_query.rounding", token=c.token(i), difference=difference))
    else:
        lines.append(msg("explain.by_query.differs", token=c.token(i), matrix=c.num(matrix)))
    lines.append(f"o{sub(i, col)} = {c.num(value)}")
    parts = {**made.parts, "outputs": ((i,), (col,)), tensor: ((i,), (col,))}
    return Derivation(title, tuple(lines), parts, made.head)


def _with_part(made: Derivation, tensor: str, cells: tuple[Cells, ...]) -> Derivation:
    """The derivation with the explained cell itself among its parts (last, as the pages lay them out)."""
    return Derivation(made.title, made.lines, {**made.parts, tensor: cells}, made.head)
