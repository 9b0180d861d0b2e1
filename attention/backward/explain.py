"""A gradient's arithmetic, with the backward pass's own numbers: why ∂L/∂T of one number of the forward trace is
what it is (the Explain page shows it under the number's own arithmetic). Its numbers are brief: 4 digits, since
the float32 rounding of a gradient is not what it teaches."""

from __future__ import annotations

import math

import torch

from ..base.explain import Context, Derivation, abbreviate, explains, factor, pair
from ..base.i18n import msg
from ..base.numbers import brief, sub
from ..forward.compute import buckets_of, scale_factor
from .compute import Backward, step_3_gradients
from .steps import MADE_FROM

SCORES = ("scores", "scores_uncapped", "scores_raw")  # step 4's: each gradient the one after it times a factor
MAX_TERMS = 12  # a bucket's sum written out this far (a far bucket holds most of n² pairs)


@explains(Backward, *MADE_FROM)
def gradient(c: Context, grad: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """∂L/∂T of one number: the softmax's rule for a score (times the cap's slope and the scale for the ones before
    them), a sink logit's sum over the rows, the sum over the value dims for a weight, O − T for an output; the
    title alone for the others."""
    result, name = c.record, grad.removeprefix("d_")
    trace, whole = result.forward, ((head,) if head is not None else ()) + index
    i, j = index[-2:] if len(index) >= 2 else (index[0], 0)
    cell = sub(i, j, sep="")  # the row and column from 1, as subscripts: S₂₃
    if name == "relative_bias":  # T5's table: its head (from 1) and bucket (from 0, as the steps count them)
        i, j = (head, index[-1]) if head is not None else index[-2:]
        cell = f"{sub(i)}[{j}]"
    if name == "latent_norm":  # (1, len(γ)): the column is γ's number
        cell = sub(j)
    title = msg("backward.explain.title", name=name, cell=cell, value=brief(result[grad][whole].item()))
    lines, parts = [], {grad: tuple((k,) for k in index)}
    if name in SCORES and trace["scores"][whole].item() == float("-inf"):
        return Derivation(title, (msg("backward.explain.masked"),), parts, head)
    if name in SCORES:
        lines += _score_lines(result, name, head, i, j)
        parts |= {"d_weights": ((i,), None)}
    elif name == "sinks":  # (1, h): the column is the head
        lines += _sink_lines(result, j)
    elif name == "relative_bias":  # (h, buckets): T5's table
        lines += _bucket_lines(result, i, j)
    elif name in STEP_3_LINES:  # step 3 back: a weight matrix's, multi-head latent attention's latent's and γ's
        lines += STEP_3_LINES[name](result, i, j, name=name)
    elif name == "weights":
        d_o = next(result.view(d, head) for d in ("d_head_outputs", "d_concat", "d_outputs") if d in result)
        row, v = d_o[i], trace.view("values", head)[j]
        terms = " + ".join(
            f"{factor(brief(x))}·{factor(brief(y))}" for x, y in zip(row.tolist(), v.tolist(), strict=True)
        )
        value = factor(brief(result[grad][whole].item()))
        lines += [msg("backward.explain.weight", cell=cell, i=sub(i), j=sub(j), terms=terms, value=value),
                  msg("backward.explain.weights")]  # fmt: skip
    elif name == "outputs" and result.loss.cell is None:
        o, target = trace.outputs[i, j].item(), result.loss.target[i][j]
        value = factor(brief(result[grad][whole].item()))
        lines.append(msg("backward.explain.output", cell=cell, o=brief(o), t=brief(target), value=value))
    return Derivation(title, tuple(lines), parts, head)


def _score_lines(result: Backward, name: str, head: int | None, i: int, j: int) -> list:
    """A score's gradient: the softmax's rule for dS, then (before a cap) its slope's, then the scale's: each line
    the gradient after it times its factor, written first."""
    trace, cell = result.forward, sub(i, j, sep="")
    a, da = trace.view("weights_exact", head)[i], result.view("d_weights", head)[i]  # the row: (n_k,) each
    mean = (a * da).sum().item()
    terms = " + ".join(f"{factor(brief(x))}·{factor(brief(y))}" for x, y in zip(a.tolist(), da.tolist(), strict=True))
    said = {"cell": cell, "a": factor(brief(a[j].item())), "g": factor(brief(da[j].item()))}
    g = factor(brief(result.view("d_scores", head)[i, j].item()))
    lines = [
        msg("backward.explain.score_rule", cell=cell, row=sub(i)),
        msg("backward.explain.score_sum", row=sub(i), terms=terms, sum=factor(brief(mean))),
        msg("backward.explain.score", **said, sum=factor(brief(mean)), value=g),
        msg("backward.explain.softmax"),
    ]
    if name == "scores":
        return lines
    capped = "d_scores_uncapped" in result
    if capped:  # the cap's slope 1 − tanh²(U / cap), then its line before dS's
        cap, u = trace.case.options.softcap, trace.view("scores_uncapped", head)[i, j].item()
        d_u = factor(brief(result.view("d_scores_uncapped", head)[i, j].item()))
        slope = brief(1 - math.tanh(u / cap) ** 2)
        uncapped = msg("backward.explain.uncapped", cell=cell, cap=f"{cap:g}", u=factor(brief(u)), slope=slope, g=g,
                       value=d_u)  # fmt: skip
        lines[:0] = [uncapped, msg("backward.explain.cap")]
    if name == "scores_raw":  # then the arithmetic it reads
        said = {"cell": cell, "factor": f"{scale_factor(trace.case) / trace.case.options.temperature:g}"}
        raw = msg("backward.explain.raw_capped", **said, g=d_u) if capped else msg("backward.explain.raw", **said, g=g)
        lines.insert(0, raw)
    return lines


def _bucket_lines(result: Backward, h: int, b: int) -> list:
    """Head h's T5 bias of bucket b: dt_h[b] = Σ dU_ij over the query-key pairs whose distance falls in bucket b."""
    case, at = result.case, h if result.case.options.heads > 1 else None
    d = "d_scores_uncapped" if "d_scores_uncapped" in result else "d_scores"
    pairs = buckets_of(case.options, range(case.n), range(case.n)) == b  # (n, n)
    taken = result.view(d, at)[pairs].tolist()
    terms = " + ".join(factor(brief(v)) for v in taken[:MAX_TERMS]) + (" + …" if len(taken) > MAX_TERMS else "")
    value = factor(brief(result["d_relative_bias"][h, b].item()))
    return [msg("backward.explain.bucket", head=sub(h), bucket=b, name=d, count=len(taken), terms=terms or "0",
                value=value), msg("backward.explain.bucket_why")]  # fmt: skip


def _sink_lines(result: Backward, h: int) -> list:
    """Head h's sink logit: ds = −Σ_i A_i,sink · (Σ_k A_ik dA_ik), a row's weighted mean of dA times its sink's
    weight, summed over the rows."""
    trace = result.forward
    heads = trace.case.options.heads
    at = h if heads > 1 else None
    a, da = trace.view("weights_exact", at), result.view("d_weights", at)  # (n_q, n_k)
    sink, means = trace.view("weights_sink", at)[:, 0], (a * da).sum(-1)  # (n_q,) each
    terms = " + ".join(f"{factor(brief(x))}·{factor(brief(m))}" for x, m in zip(sink.tolist(), means.tolist(),
                                                                               strict=True))  # fmt: skip
    value = factor(brief(result["d_sinks"][0, h].item()))
    return [msg("backward.explain.sink", head=sub(h), terms=terms, value=value), msg("backward.explain.sink_why")]


# Step 3's projections, M = R W: each weight's symbol (without and with multi-head latent attention), and M's
PROJECTIONS = {"w_query": ("W_Q", "W_Q", "Q"), "w_key": ("W_K", "W_UK", "K"), "w_value": ("W_V", "W_UV", "V"),
               "w_latent": ("W_DKV", "W_DKV", "C")}  # fmt: skip


def _projection_lines(result: Backward, i: int, j: int, name: str) -> list:
    """A projection's weight: W (W_Q, W_K, W_V; or W_DKV, W_UK, W_UV) made M = R W from what it read, R (x, or
    multi-head latent attention's latent C), so dW_ij = Σ_t R_ti · dM_tj, a sum over the tokens."""
    o, trace = result.case.options, result.forward
    latent, normed = o.w_latent is not None, o.latent_norm is not None
    w, made = PROJECTIONS[name][latent], PROJECTIONS[name][2]
    read, r = (trace["latent"], "C") if latent and name in ("w_key", "w_value") else (trace["x"], "X")
    if name == "w_latent":  # W_DKV made the latent before its norm (U), where it has one
        made = "U" if normed else "C"
        d = result["d_latent_unnormed" if normed else "d_latent"]
    else:
        d = dict(zip(("w_query", "w_key", "w_value"), step_3_gradients(result), strict=True))[name]
    pairs = zip(read[:, i].tolist(), d[:, j].tolist(), strict=True)
    terms = [f"{factor(brief(a))}·{factor(brief(b))}" for a, b in pairs]
    value = factor(brief(result[f"d_{name}"][i, j].item()))
    return [msg("backward.explain.projection", w=w, cell=pair(i, j), r=r, g=f"d{made}", i=sub(i), j=sub(j),
                terms=abbreviate(terms), value=value),
            msg("backward.explain.projection_why", w=w, r=r, m=made, i=i + 1, j=j + 1, ri=sub(i),
                dj=sub(j))]  # fmt: skip


def _latent_lines(result: Backward, t: int, c: int, name: str = "latent") -> list:
    """Token t's latent number c (multi-head latent attention): it made keys (C W_UK) and values (C W_UV), so its
    gradient gathers both: dC_tc = Σ_k dK_tk W_UK,ck + Σ_k dV_tk W_UV,ck."""
    _, d_k, d_v = step_3_gradients(result)
    w_key, w_value = result.forward["w_key"][c], result.forward["w_value"][c]  # latent number c's rows
    keys, values = ([f"{factor(brief(a))}·{factor(brief(b))}" for a, b in zip(d[t].tolist(), w.tolist(), strict=True)]
                    for d, w in ((d_k, w_key), (d_v, w_value)))  # fmt: skip
    value = factor(brief(result["d_latent"][t, c].item()))
    return [msg("backward.explain.latent", cell=pair(t, c), t=sub(t), c=sub(c), keys=abbreviate(keys),
                values=abbreviate(values), value=value), msg("backward.explain.latent_why")]  # fmt: skip


def _latent_norm_lines(result: Backward, _: int, c: int, name: str = "latent_norm") -> list:
    """γ's number c (the latent's norm): it scaled every token's normed latent number c, Ĉ_tc = U_tc / r_t, so its
    gradient is Σ_t dC_tc · Ĉ_tc."""
    o = result.case.options
    u = result.forward["latent_unnormed"][:, : len(o.latent_norm)]
    unit = (u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + o.norm_eps))[:, c]  # (n,): Ĉ's column c
    terms = [f"{factor(brief(a))}·{factor(brief(b))}" for a, b in zip(result["d_latent"][:, c].tolist(),
                                                                     unit.tolist(), strict=True)]  # fmt: skip
    value = factor(brief(result["d_latent_norm"][0, c].item()))
    return [msg("backward.explain.latent_norm", c=sub(c), terms=abbreviate(terms), value=value),
            msg("backward.explain.latent_norm_why")]  # fmt: skip


def _input_lines(result: Backward, t: int, c: int, name: str) -> list:
    """Token t's input number c (x's, or cross-attention's x_kv's): step 3 made each of its products M = R W from
    the row (x: the queries, and the keys and values or MLA's latent unless the case is cross-attention; x_kv: the
    keys and values, or the latent), so dR_tc = Σ_k dM_tk W_ck, one sum for each product it went into."""
    case, trace = result.case, result.forward
    o, d = case.options, dict(zip(("w_query", "w_key", "w_value"), step_3_gradients(result), strict=True))
    if o.w_latent is not None:  # the latent before its norm (U), where it has one
        d["w_latent"] = result["d_latent_unnormed" if o.latent_norm is not None else "d_latent"]
    made = ("w_query",) if name == "x" else ()
    if name == "x_kv" or not case.cross:
        made += ("w_latent",) if o.w_latent is not None else ("w_key", "w_value")
    r = "X_kv" if name == "x_kv" else "X"
    sums, terms, products = [], [], []  # one of each for every product the row went into
    for weight in made:
        w, m = INPUT_WAYS[weight][o.latent_norm is not None]
        pairs = zip(d[weight][t].tolist(), trace[weight][c].tolist(), strict=True)  # dM_tk and W_ck, over k
        written = abbreviate([f"{factor(brief(a))}·{factor(brief(b))}" for a, b in pairs])
        sums.append(f"Σ_k d{m}{sub(t)}ₖ · {w}{sub(c)}ₖ")
        terms.append(written if len(made) == 1 else f"({written})")
        products.append(f"{m} = {r} {w}")
    value = factor(brief(result[f"d_{name}"][t, c].item()))
    weights = ", ".join(INPUT_WAYS[weight][0][0] for weight in made)
    lines = [msg("backward.explain.input", r=r, cell=pair(t, c), sums=" + ".join(sums), terms=" + ".join(terms),
                 value=value),
             msg("backward.explain.input_why", r=r, made=", ".join(products), weights=weights, c=c + 1)]  # fmt: skip
    if case.cross:  # which sentence made what
        lines.append(msg("backward.explain.input_cross" if name == "x" else "backward.explain.input_kv"))
    return lines


# A weight's symbol and the product it made, M = R W (with MLA's latent normed: W_DKV made U, the latent before it)
INPUT_WAYS = {"w_query": (("W_Q", "Q"),) * 2, "w_key": (("W_K", "K"),) * 2, "w_value": (("W_V", "V"),) * 2,
              "w_latent": (("W_DKV", "C"), ("W_DKV", "U"))}  # fmt: skip


# plain functions (a partial is a new object in each copy: test_hosting compares the module's globals)
STEP_3_LINES = dict.fromkeys(PROJECTIONS, _projection_lines) | {
    "latent": _latent_lines,
    "latent_norm": _latent_norm_lines,
    "x": _input_lines,
    "x_kv": _input_lines,
}
