"""The forward pass's explainers: one number of a trace with the arithmetic that made it, step by step, written out
with the trace's own numbers (the engine, its notation and its checks: base/explain.py)."""

from __future__ import annotations

import math
from decimal import Decimal

import torch

from ..base.explain import Cells, Context, Derivation, abbreviate, close, explains, factor, pair, place, prefixed
from ..base.i18n import msg
from ..base.numbers import approx, sub, written
from .compute import Trace, relative_bucket, scale_factor

DIRECT_EXP_UP_TO = 80.0  # exp(s) is written out as is when every |s| is at most this; past it, exp(s − max)


# Steps 1-3: inputs, weights, queries, keys and values -------------------------------------------------------------

_WEIGHTS = {"w_query": ("W_Q", "query"), "w_key": ("W_K", "key"), "w_value": ("W_V", "value")}  # symbol, kind
_WEIGHTS |= {"w_latent": ("W_DKV", "latent")}  # multi-head latent attention's: x down to the latent
_LATENT_WEIGHTS = {"w_key": "W_UK", "w_value": "W_UV"}  # with a latent, keys and values are made up from it
_PROJECTIONS = {"queries": ("q", "w_query"), "keys": ("k", "w_key"), "values": ("v", "w_value")}  # letter, weight
_PROJECTIONS |= {"queries_unrotated": ("q", "w_query"), "keys_unrotated": ("k", "w_key")}  # step 3's, before RoPE
_PROJECTIONS |= {"queries_unnormed": ("q", "w_query"), "keys_unnormed": ("k", "w_key")}  # before a q/k norm
# A projection's row: of x, of cross-attention's x_kv (keys and values from the source sentence), of MLA's latent
_ROW_LINES = {"x": "row", "x_kv": "kv_row", "latent": "latent_row"}  # explain.projection.<its line>


def _symbol(c: Context, weight: str) -> tuple[str, str]:
    """A weight's symbol and kind of column: W_Q, W_K, W_V, and with multi-head latent attention W_DKV, and W_UK and
    W_UV for w_key and w_value (they read the latent, not x)."""
    symbol, kind = _WEIGHTS[weight]
    if c.record.case.options.w_latent is not None:
        symbol = _LATENT_WEIGHTS.get(weight, symbol)
    return symbol, kind


@explains(Trace, "x", "x_kv", "w_query", "w_key", "w_value", "w_latent")
def inputs(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """A typed number: nothing to compute, only where it came from (cross-attention's x_kv: the source sentence)."""
    r, col = index
    value = c.view(tensor)[r, col].item()
    if tensor in ("x", "x_kv"):
        token = c.token(r) if tensor == "x" else c.key_token(r)
        title = msg(f"explain.{tensor}.title", token=token, column=col + 1)
        lines = (msg(f"explain.{tensor}.typed", token=token), f"{tensor}{sub(r, col)} = {c.num(value)}")
    else:
        symbol, kind = _symbol(c, tensor)
        latent_rows = symbol in _LATENT_WEIGHTS.values()  # W_UK's and W_UV's rows are the latent's dims
        title = msg("explain.w.title_latent" if latent_rows else "explain.w.title", tensor=tensor, row=r + 1,
                    column=col + 1, kind=msg(f"word.{kind}"))  # fmt: skip
        lines = (msg("explain.w.typed", symbol=symbol), f"{symbol}[{r + 1}, {col + 1}] = {c.num(value)}")
    return Derivation(title, lines, {tensor: ((r,), (col,))})


@explains(Trace, "latent", "latent_unnormed")
def latent(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 3, multi-head latent attention: a token's latent, x's row times a column of W_DKV; with DeepSeek's norm
    of it, the latent after it (latent_norm below)."""
    if tensor == "latent" and c.record.case.options.latent_norm is not None:
        return latent_norm(c, tensor, head, index)
    i, col = index
    read = _keys_input(c)  # x, or cross-attention's x_kv: the latent is made from the keys' rows
    title = msg("explain.latent.title", tensor=tensor, token=c.key_token(i), column=col + 1)
    row = msg("explain.latent.row" if read == "x" else "explain.latent.kv_row", token=c.key_token(i), j=i + 1,
              column=col + 1, d_c=c.record.case.d_c)  # fmt: skip
    pairs = list(zip(c.view(read)[i].tolist(), c.view("w_latent")[:, col].tolist(), strict=True))
    lhs = f"c{sub(i, col)} = {read}{sub(i)} · W_DKV[:, {col + 1}]"
    lines = [row, *c.dot_line(tensor, lhs, pairs, c.view(tensor)[i, col].item())]
    return Derivation(title, tuple(lines), {read: ((i,), None), "w_latent": (None, (col,)), tensor: ((i,), (col,))})


def _keys_input(c: Context) -> str:
    """What keys and values (and MLA's latent) are made from: x, or cross-attention's other sentence x_kv."""
    return "x_kv" if c.record.case.cross else "x"


def _row_token(c: Context, tensor: str, i: int) -> str:
    """Row i's token of a step-3 tensor: a key's (values', the latent's) from the keys' sentence, a query's from x."""
    return c.key_token(i) if tensor in c.record.KEY_ROWS else c.token(i)


def latent_norm(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """DeepSeek's norm of the latent: a number of its first len(γ) columns over the root mean square of the token's
    numbers there, times γ of its column; a column past them (the rotary key) passes as it is."""
    i, col = index
    o = c.record.case.options
    before, value, d = c.view("latent_unnormed")[i].tolist(), c.view(tensor)[i, col].item(), len(o.latent_norm)
    title = msg("explain.latent_norm.title", tensor=tensor, token=c.key_token(i), column=col + 1)
    lhs = f"c{sub(i, col)}"
    if col >= d:
        end, warning = c.ending(tensor, before[col], value, 0.0)
        lines = (msg("explain.latent_norm.passes", d=d, column=col + 1), msg("explain.equals", lhs=lhs, rhs=end),
                 *warning)  # fmt: skip
        return Derivation(title, lines, {"latent_unnormed": ((i,), (col,)), tensor: ((i,), (col,))})
    mean = math.fsum(b * b for b in before[:d]) / d
    root = math.sqrt(mean + o.norm_eps)
    u, gamma = before[col], o.latent_norm[col]
    root_line = msg("explain.latent_norm.root", token=c.key_token(i), d=d, mean=approx(mean), eps=approx(o.norm_eps),
                    root=approx(root))  # fmt: skip
    expression = f"{factor(c.num(gamma))}·{factor(c.num(u))} / {approx(root)}"
    end, warning = c.ending(tensor, gamma * u / root, value, c.tol(4 * math.sqrt(d) + 8, value))  # d squares summed
    lines = (root_line, msg("explain.equation", lhs=lhs, expression=expression, end=end), *warning)
    return Derivation(title, lines, {"latent_unnormed": ((i,), tuple(range(d))), tensor: ((i,), (col,))})


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
    symbol, kind = _symbol(c, weight)
    # keys and values read x, or cross-attention's x_kv, or (MLA) the latent c made from either
    read = "x" if weight == "w_query" else "latent" if o.w_latent is not None else _keys_input(c)
    token = _row_token(c, tensor, i)  # a key's row: the keys' sentence's token
    width = c.view(tensor, head).shape[-1]
    block = head  # the block of the weight's columns this head reads
    if head is not None and weight != "w_query" and o.kv_heads:  # grouped-query attention: a shared key/value head
        block = head // (o.heads // o.kv_heads)
    column = col if head is None else block * width + col  # head h takes the h-th block of columns
    at = place(head, token, str(col + 1))
    title = msg("explain.projection.title", tensor=tensor, at=at, kind=msg(f"word.{kind}"), token=token,
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
    lines.append(msg(f"explain.projection.{_ROW_LINES[read]}", token=token, j=i + 1, column=column + 1, symbol=symbol))
    row_of = "c" if read == "latent" else read  # the latent's letter, as the formula's C
    lhs = prefixed(head, f"{letter}{sub(i, col)} = {row_of}{sub(i)} · {symbol}[:, {column + 1}]")
    pairs = list(zip(c.view(read)[i].tolist(), c.view(weight)[:, column].tolist(), strict=True))
    lines += c.dot_line(tensor, lhs, pairs, c.view(tensor, head)[i, col].item())
    parts = {read: ((i,), None), weight: (None, (column,)), tensor: ((i,), (col,))}
    return Derivation(title, tuple(lines), parts, head)


def rotation(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """RoPE: a pair of step 3's numbers turned by the token's position times the pair's frequency."""
    i, col = index
    o, letter = c.record.case.options, tensor[0]
    before = c.view(f"{tensor}_unrotated", head)
    d, p = c.record.case.d_rot, col // 2  # the dims RoPE turns: all of a head's, or partial rotary's first d_rot
    if col >= d:
        return _unturned(c, tensor, head, index)
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


def _unturned(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Partial rotary: a dim past the first d_rot is not turned; the number is step 3's as it was."""
    i, col = index
    before, value = c.view(f"{tensor}_unrotated", head)[i, col].item(), c.view(tensor, head)[i, col].item()
    title = msg("explain.rope.title", tensor=tensor, at=place(head, c.token(i), str(col + 1)), token=c.token(i))
    end, warning = c.ending(tensor, before, value, 0.0)
    lines = (msg("explain.rope.unturned", column=col + 1, d_rot=c.record.case.d_rot, d=c.record.case.d_head),
             msg("explain.equals", lhs=prefixed(head, f"{tensor[0]}{sub(i, col)}"), rhs=end), *warning)  # fmt: skip
    return Derivation(title, lines, {f"{tensor}_unrotated": ((i,), (col,)), tensor: ((i,), (col,))}, head)


def normalization(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """The q/k norm: a number of step 3 over the root mean square of its token's query (key) in the head (Qwen3's),
    or in every head (OLMo 2's, over the width), times the model's weight γ for its dim."""
    i, col = index
    o, kind, letter = c.record.case.options, tensor.split("_")[0], tensor[0]
    before, at = c.view(f"{kind}_unnormed", head)[i].tolist(), col  # (d,): the token's query (key) in this head
    width = o.norm_width and o.heads > 1
    if width:  # the token's row of every head (a key/value head once, not each query head's copy of it)
        every = c.view(f"{kind}_unnormed")[:, i]  # (h, d)
        group = o.heads // (o.kv_heads or o.heads) if kind == "keys" else 1
        before, at = every[::group].flatten().tolist(), head // group * every.shape[-1] + col
    d, u, gamma = len(before), before[at], (o.q_norm if kind == "queries" else o.k_norm)[at]
    rest = o.norm_rest  # a head cut from its layer: the other heads' share of the token's sum, over the layer's width
    share, over = (0.0, d) if rest is None else ((rest.q, rest.q_width) if letter == "q" else (rest.k, rest.k_width))
    share = share if rest is None else share[i]
    mean = (math.fsum(b * b for b in before) + share) / over
    root = math.sqrt(mean + o.norm_eps)
    value = c.view(tensor, head)[i, col].item()
    token = _row_token(c, tensor, i)  # a key's: the keys' sentence's token
    title = msg("explain.norm.title", tensor=tensor, at=place(head, token, str(col + 1)), token=token)
    root_line = msg("explain.norm.root_width" if width else "explain.norm.root", token=token, letter=letter, d=d,
                    mean=approx(mean), eps=approx(o.norm_eps), root=approx(root))  # fmt: skip
    if rest is not None:  # where the rest comes from, and the mean over the layer's width it makes
        root_line = msg("explain.norm.root_rest", token=token, letter=letter, d=d, rest=approx(share), width=over,
                        mean=approx(mean), eps=approx(o.norm_eps), root=approx(root))  # fmt: skip
    expression = f"{factor(c.num(gamma))}·{factor(c.num(u))} / {approx(root)}"
    terms = d + (rest is not None)  # d squares summed, and the other heads' share
    end, warning = c.ending(tensor, gamma * u / root, value, c.tol(4 * math.sqrt(terms) + 8, value))
    lhs = prefixed(head, f"{letter}{sub(i, col)}")
    lines = (root_line, msg("explain.equation", lhs=lhs, expression=expression, end=end), *warning)
    return Derivation(title, lines, {f"{kind}_unnormed": ((i,), None), tensor: ((i,), (col,))}, head)


# Step 4: scores --------------------------------------------------------------------------------------------------


@explains(Trace, "scores_raw")
def scores_raw(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 4: query i dotted with key j."""
    i, j = index
    title = msg("explain.qk.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.key_token(j))
    pairs = list(zip(c.view("queries", head)[i].tolist(), c.view("keys", head)[j].tolist(), strict=True))
    cross = c.record.case.cross  # two sentences: each token named from its own
    lines = [msg("explain.scores_raw.cross_line" if cross else "explain.scores_raw.line", query=c.token(i),
                 key=c.key_token(j))]  # fmt: skip
    lines += c.dot_line(tensor, prefixed(head, f"q{sub(i)} · k{sub(j)}"), pairs, c.view(tensor, head)[i, j].item())
    return Derivation(title, tuple(lines), {"queries": ((i,), None), "keys": ((j,), None), tensor: ((i,), (j,))}, head)


@explains(Trace, "position_bias")
def position_bias(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 4's bias for where the key is: ALiBi's slope times how far back the key is, subtracted (− m_h · (i − j)),
    and T5's learned number for the bucket of the key's distance (b_h[bucket(j − i)])."""
    i, j = index
    o, value = c.record.case.options, c.view(tensor, head)[i, j].item()
    title = msg("explain.alibi.title" if o.relative_bias is None else "explain.relative.title",
                cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.key_token(j))  # fmt: skip
    lines, terms, expression, computed = [], [], [], 0.0
    if o.alibi is not None:
        slope = o.alibi[head or 0]
        lines.append(msg("explain.alibi.line", head=(head or 0) + 1, slope=c.num(slope), query=c.token(i),
                         key=c.key_token(j), distance=i - j))  # fmt: skip
        terms.append("− m · (i − j)")
        expression.append(f"−{factor(c.num(slope))} · {factor(written(float(i - j)))}")
        computed -= slope * (i - j)
    if o.relative_bias is not None:
        k = relative_bucket(o, j - i)
        bias = o.relative_bias[head or 0][k]
        lines.append(_bucket_line(c, o, i, j, k))
        terms.append(f"t[{k}]")
        expression.append(factor(c.num(bias)))
        computed += bias
    end, warning = c.ending(tensor, computed, value, c.tol(4, value))
    lines.append(msg("explain.equation", lhs=prefixed(head, f"b{pair(i, j)} = {' + '.join(terms)}"),
                     expression=" + ".join(expression), end=end))  # fmt: skip
    return Derivation(title, (*lines, *warning), {tensor: ((i,), (j,))}, head)


def _bucket_line(c: Context, o, i: int, j: int, k: int) -> str:
    """Which of T5's buckets key j's distance from query i falls in, and why: its own (a near one), a logarithmic
    one, the last (max distance and beyond), or, keys behind alone (a decoder's), bucket 0 for a key ahead."""
    bidirectional, distance = o.relative_bidirectional, j - i
    if not bidirectional and distance > 0:
        return msg("explain.relative.ahead_decoder", query=c.token(i), key=c.key_token(j), distance=distance)
    half = len(o.relative_bias[0]) // (2 if bidirectional else 1)  # the buckets of one direction
    far = abs(distance)
    kind = "near" if far < half // 2 else "last" if far >= o.relative_max_distance else "log"
    return msg(f"explain.relative.{kind}", query=c.token(i), key=c.key_token(j), distance=distance, bucket=k,
               exact=half // 2, max=o.relative_max_distance, ahead=msg("explain.relative.ahead", half=half)
               if bidirectional and distance > 0 else "")  # fmt: skip


@explains(Trace, "scores_uncapped")
def scores_uncapped(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 4 before the softcap: the raw score scaled, and ALiBi's bias added where the case has it."""
    i, j = index
    title = msg("explain.qk.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.key_token(j))
    lines, parts = _score_sum(c, tensor, head, i, j, f"u{pair(i, j)}")
    return Derivation(title, lines, parts | {tensor: ((i,), (j,))}, head)


@explains(Trace, "scores")
def scores(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 4: the raw score scaled and divided by the temperature, ALiBi's bias added, capped; or masked."""
    i, j = index
    o = c.record.case.options
    title = msg("explain.qk.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.key_token(j))
    raw, value = c.view("scores_raw", head)[i, j].item(), c.view(tensor, head)[i, j].item()
    s, qk = f"s{pair(i, j)}", f"q{sub(i)} · k{sub(j)}"
    if value == float("-inf"):
        lines = (msg("explain.masked", lhs=prefixed(head, qk), raw=c.num(raw), why=_blocked_why(c, i, j)),
                 prefixed(head, f"{s} = −∞"))  # fmt: skip
        return Derivation(title, lines, {"scores_raw": ((i,), (j,)), tensor: ((i,), (j,))}, head)
    if o.softcap is None:
        lines, parts = _score_sum(c, tensor, head, i, j, s)
        return Derivation(title, lines, parts | {tensor: ((i,), (j,))}, head)
    # Gemma 2's softcap: the sum above, then c · tanh(u / c)
    u_name = f"u{pair(i, j)}"
    lines, parts = _score_sum(c, "scores_uncapped", head, i, j, u_name)
    u, cap = c.view("scores_uncapped", head)[i, j].item(), o.softcap
    computed = cap * math.tanh(u / cap)
    end, warning = c.ending(tensor, computed, value, c.tol(8, value) + 2 * c.eps * abs(u))  # tanh's slope ≤ 1
    cap_lines = (
        msg("explain.softcap.line", cap=approx(cap), u=u_name),
        msg("explain.equation", lhs=prefixed(head, f"{s} = c · tanh({u_name} / c)"),
            expression=f"{approx(cap)} · tanh({factor(c.num(u))} / {approx(cap)})", end=end),
        *warning,
    )  # fmt: skip
    return Derivation(title, (*lines, *cap_lines), parts | {"scores_uncapped": ((i,), (j,)), tensor: ((i,), (j,))},
                      head)  # fmt: skip


def _blocked_why(c: Context, i: int, j: int) -> str:
    """Why query i may not see key j: after it under a causal mask, outside its sliding window, or the mask's 0."""
    o = c.record.case.options
    if o.window is not None and not i - o.window < j <= i:  # the window first: it alone would block the key
        if j > i:
            return msg("explain.window_after", key=c.key_token(j), query=c.token(i), window=o.window)
        return msg("explain.window_blocks", key=c.key_token(j), query=c.token(i), window=o.window, j=j + 1, i=i + 1,
                   edge=i - o.window + 1)  # fmt: skip
    if o.mask == "causal":
        return msg("explain.causal_blocks", key=c.key_token(j), query=c.token(i))
    return msg("explain.mask_zero", query=c.token(i), key=c.key_token(j))


def _score_sum(c: Context, tensor: str, head: int | None, i: int, j: int, lhs: str) -> tuple[tuple, dict]:
    """The lines of a score before any cap: q_i · k_j, scaled and divided by the temperature, plus ALiBi's bias
    b_ij where the case has it, checked against `tensor`'s number; and the cells that took part."""
    o = c.record.case.options
    raw, value = c.view("scores_raw", head)[i, j].item(), c.view(tensor, head)[i, j].item()
    qk, parts = f"q{sub(i)} · k{sub(j)}", {"scores_raw": ((i,), (j,))}
    scale, temperature = scale_factor(c.record.case), o.temperature
    bias = c.view("position_bias", head)[i, j].item() if o.biased else None
    if scale == 1 and temperature == 1 and bias is None:
        lines = [msg("explain.raw_score", lhs=prefixed(head, lhs), qk=qk, value=c.num(value))]
        if raw != value:
            lines.append(msg("explain.scores_recorded", raw=c.num(raw), value=c.num(value)))
        return tuple(lines), parts
    lines, ops, numbers = [], "", ""
    if scale != 1 or temperature != 1:
        if o.scale == "sqrt_dk":
            d = c.record.case.d_head
            why, symbol = msg("explain.scaled_sqrt_head" if o.heads > 1 else "explain.scaled_sqrt", d=d), f"1/√{d}"
        else:
            why, symbol = msg("explain.scaled_by", scale=approx(scale)), approx(scale)
        if scale != 1:
            ops, numbers = f" × {symbol}", f" × {approx(scale)}"
        if temperature != 1:
            why = msg("explain.divided", why=why, temperature=approx(temperature))
            ops, numbers = ops + f" ÷ {approx(temperature)}", numbers + f" ÷ {approx(temperature)}"
        lines.append(msg("explain.raw_score_why", why=why))
    scaled = raw * scale / temperature
    computed, size = scaled, abs(scaled)
    if bias is not None:  # ALiBi's or T5's: its bias added after the scale
        lines.append(msg("explain.alibi_added" if o.relative_bias is None else "explain.relative_added",
                         b=f"b{pair(i, j)}", bias=c.num(bias)))  # fmt: skip
        ops, numbers = ops + f" + b{pair(i, j)}", numbers + f" + {factor(c.num(bias))}"
        computed, size = scaled + bias, size + abs(bias)
        parts["position_bias"] = ((i,), (j,))
    end, warning = c.ending(tensor, computed, value, c.tol(8, size))
    lines.append(msg("explain.scaled_eq", lhs=prefixed(head, lhs), qk=qk, ops=ops, raw=factor(c.num(raw)),
                     numbers=numbers, end=end))  # fmt: skip
    return (*lines, *warning), parts


# Step 5: softmax -------------------------------------------------------------------------------------------------


@explains(Trace, "weights_exact")
def weights_exact(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 5: the softmax of row i of the scores, at key j (with a sink, e^s_h in the denominator)."""
    i, j = index
    title = msg("explain.weight.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.key_token(j))
    parts = {"scores": ((i,), None), tensor: ((i,), (j,))}
    return Derivation(title, _softmax_lines(c, tensor, head, i, j), parts, head)


@explains(Trace, "weights_sink")
def weights_sink(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 5, gpt-oss: the share of row i's softmax its sink took, e^s_h / (e^s_h + Σ_k e^S_ik)."""
    i, _ = index
    title = msg("explain.sink.title", tensor=tensor, at=place(head, c.token(i)), query=c.token(i))
    parts = {"scores": ((i,), None), tensor: ((i,), (0,))}
    return Derivation(title, _softmax_lines(c, tensor, head, i, None), parts, head)


def _softmax_lines(c: Context, tensor: str, head: int | None, i: int, j: int | None) -> tuple[str, ...]:
    """A_ij = exp(s_ij) / Σ_k exp(s_ik), with the row's numbers, checked against the recorded one; with a sink,
    exp(s_h) joins the sum (and j None: the sink's own share, exp(s_h) over the same sum)."""
    row = c.view("scores", head)[i].tolist()
    n = len(row)  # the keys: n, or cross-attention's n_kv
    sinks = c.record.case.options.sinks
    sink = None if sinks is None else sinks[head or 0]
    value = c.view(tensor, head)[i, 0 if j is None else j].item()
    a = f"A{pair(i, j)}" if j is not None else f"A{sub(i)},sink"
    seen = [k for k, s in enumerate(row) if s != float("-inf")]  # the keys query i may attend to
    if not seen and sink is None:
        return msg("explain.all_masked", token=c.token(i)), msg("explain.all_masked_zero", lhs=prefixed(head, a))
    lines = [msg("explain.softmax_row", token=c.token(i))]
    if sink is not None:
        lines.append(msg("explain.sink_joins", head=(head or 0) + 1, sink=c.num(sink)))
    if len(seen) < n:
        lines.append(msg("explain.masked_keys", keys=", ".join(c.key_token(k) for k in range(n) if k not in seen)))
    logits = {k: row[k] for k in seen} | ({} if sink is None else {"sink": sink})  # the denominator's exponents
    direct = all(abs(s) <= DIRECT_EXP_UP_TO for s in logits.values())
    top = max(logits.values())
    shift = 0.0 if direct else top  # past DIRECT_EXP_UP_TO exp overflows: the same ratio with the largest taken off
    exps = {k: math.exp(s - shift) for k, s in logits.items()}
    at = "sink" if j is None else j
    total, numerator = math.fsum(exps.values()), exps.get(at, 0.0)
    keep = [list(logits).index(at)] if at in logits else []

    def exp_of(k) -> str:
        s = c.num(logits[k])
        return f"exp({s})" if direct else f"exp({s} − {factor(c.num(top))})"

    lines.append(_softmax_symbolic(c, head, a, i, j, sink, exp_of(at) if at in logits else "exp(−∞)",
                                   abbreviate([exp_of(k) for k in logits], keep)))  # fmt: skip
    if not direct:
        lines.append(msg("explain.shifted", top=c.num(top)))
    computed = numerator / total
    ys = [abs(s - top) for s in logits.values()]  # exp's rounding grows with its argument
    tol = c.eps * (8 * (len(logits) + 1) + max(ys)) * max(abs(computed), abs(value)) + 16 * c.tiny
    end, warning = c.ending(tensor, computed, value, tol)
    sum_terms = abbreviate([approx(exps[k]) for k in logits], keep)
    lines.append(msg("explain.softmax_end", numerator=approx(numerator), terms=sum_terms, total=approx(total), end=end))
    return (*lines, *warning)


def _softmax_symbolic(c: Context, head, a: str, i: int, j: int | None, sink, numerator: str, terms: str) -> str:
    """The softmax written with symbols, then with the row's exponents: 'A₂₃ = exp(s₂₃) / Σₖ exp(s₂ₖ) = …'."""
    top = "exp(s_h)" if j is None else f"exp(s{pair(i, j)})"
    below = f"Σₖ exp(s{sub(i)}ₖ)" if sink is None else f"(exp(s_h) + Σₖ exp(s{sub(i)}ₖ))"
    return msg("explain.equals", lhs=prefixed(head, f"{a} = {top} / {below}"), rhs=f"{numerator} / ({terms})")


@explains(Trace, "weights")
def weights(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Step 5: the exact softmax, or the override's number beside it."""
    i, j = index
    title = msg("explain.weight.title", cell=c.cell_name(tensor, head, i, j), query=c.token(i), key=c.key_token(j))
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
    at = place(head, c.key_token(j), c.token(i), str(col + 1))
    title = msg("explain.weighted.title", tensor=tensor, at=at, key=c.key_token(j), query=c.token(i), column=col + 1)
    weight, v = c.view("weights", head)[i, j].item(), c.view("values", head)[j, col].item()
    value = c.view(tensor, head)[j, i, col].item()
    by_hand = Decimal(repr(c.short(weight))) * Decimal(repr(c.short(v)))
    end, warning = c.ending(tensor, weight * v, value, c.tol(4, value), by_hand)
    lines = (
        msg("explain.weighted.line", key=c.key_token(j), query=c.token(i)),
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
    elif close(value, matrix, c.sum_tol(abs(matrix) + 1, c.record.case.n_kv, matrix)):
        lines.append(msg("explain.by_query.rounding", token=c.token(i), difference=difference))
    else:
        lines.append(msg("explain.by_query.differs", token=c.token(i), matrix=c.num(matrix)))
    lines.append(f"o{sub(i, col)} = {c.num(value)}")
    parts = {**made.parts, "outputs": ((i,), (col,)), tensor: ((i,), (col,))}
    return Derivation(title, tuple(lines), parts, made.head)


def _with_part(made: Derivation, tensor: str, cells: tuple[Cells, ...]) -> Derivation:
    """The derivation with the explained cell itself among its parts (last, as the pages lay them out)."""
    return Derivation(made.title, made.lines, {**made.parts, tensor: cells}, made.head)
