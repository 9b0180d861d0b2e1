"""The backward pass: the loss's gradient through the eight steps in reverse, by hand in torch, recorded by name;
and the same gradients by torch.autograd, its oracle."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from ..base.case import Case
from ..base.record import Check, Record, Recorder, Step, compare, worst
from ..base.tolerance import gradient_tolerance, mean_square, norm_axes
from ..forward.compute import (
    Trace,
    buckets_of,
    norm_rests,
    option_tensors,
    position_bias,
    positions,
    qk_normed,
    rms_norm,
    rope,
    rope_theta,
    score_options,
)  # fmt: skip
from ..forward.steps import NORM, ROPE
from .loss import Loss, gradient
from .steps import GRAD_AXES, backward_names, step

# Step 3's tensors with a row per key: x_kv's tokens in cross-attention (n_kv rows), x's otherwise
KEY_SIDE = frozenset({"keys", "keys_unnormed", "keys_unrotated", "values", "latent", "latent_unnormed"})


@dataclass(frozen=True)
class Backward(Record):
    """The record of one backward pass: the forward trace it started from, the loss, and its steps in reverse."""

    TITLE: ClassVar = "Backward pass"
    forward: Trace
    loss: Loss
    value: float  # the loss's value
    steps: tuple[Step, ...]

    @property
    def case(self) -> Case:
        return self.forward.case

    def twin(self, name: str) -> str | None:
        """The forward tensor a gradient belongs to (d_scores → scores), None when the forward trace lacks it."""
        forward = name.removeprefix("d_")
        return forward if forward in self.forward else None

    def axes(self, name: str) -> tuple[str, ...]:
        """A gradient's axes: its forward twin's (the head first where it has one); in cross-attention the keys',
        the values' and MLA's latent's rows are the keys' sentence's tokens."""
        twin = self.twin(name)
        axes = self.forward.axes(twin) if twin is not None else GRAD_AXES.get(name, ("query", "value dim"))
        if self.case.cross and twin in KEY_SIDE:
            return tuple("key token" if axis == "token" else axis for axis in axes)
        return axes

    @property
    def gradients(self) -> dict[str, torch.Tensor]:
        """The leaves' gradients: x, W_Q, W_K, W_V (and cross-attention's x_kv, w_out, the sink logits, T5's table,
        MLA's W_DKV and its latent's γ when the case has them)."""
        names = ("d_x", "d_x_kv", "d_w_query", "d_w_key", "d_w_value", "d_w_latent", "d_latent_norm", "d_w_out",
                 "d_sinks", "d_relative_bias")  # fmt: skip
        return {name: self[name] for name in names if name in self}

    def heading(self) -> str:
        checked = check(self)
        agrees = "agrees with" if checked.agrees else "differs from"
        return (f"loss ({self.loss.kind}) = {self.value:.6g} · {agrees} {checked.oracle} "
                f"(largest difference {checked.difference:.2g})")  # fmt: skip


def backward(trace: Trace, loss: Loss) -> Backward:
    """The gradient of the loss through the eight steps in reverse, by hand in torch, on the CPU (where the trace's
    tensors are): each step's gradients recorded under its forward step's name."""
    case, o = trace.case, trace.case.options
    h, g = o.heads, o.kv_heads or o.heads
    w_out = option_tensors(case, torch.device("cpu"))[2]  # (d_v, d_out) or None
    x, w_query, w_key, w_value = (trace[name] for name in ("x", "w_query", "w_key", "w_value"))
    values = trace["values"]  # (h?, n, d_v/h)
    weights, weights_exact = trace["weights"], trace["weights_exact"]  # (h?, n_q, n_k): used in step 6, exact
    recorder = Recorder(backward_names(case))
    record = recorder.record
    # the loss, and step 7 back: d outputs, through w_out and the heads' concatenation, to every key's product
    value, d_outputs = gradient(trace.outputs, loss)  # (n, d_out)
    tensors = {"d_outputs": d_outputs}
    d_concat = d_outputs
    if w_out is not None:  # outputs = concat @ w_out
        concat = trace["concat"]  # (n, d_v)
        tensors["d_w_out"] = concat.T @ d_outputs  # (d_v, d_out)
        d_concat = tensors["d_concat"] = d_outputs @ w_out.T  # (n, d_v)
    d_head_outputs = d_concat
    if h > 1:  # the concatenation undone: head i's columns back to head i
        d_head_outputs = tensors["d_head_outputs"] = d_concat.unflatten(-1, (h, -1)).transpose(0, 1)  # (h, n, d/h)
    # step 7 summed the products over the keys: the sum hands each key the same gradient (a view, no copy)
    n_k = values.shape[-2]
    d_weighted = d_head_outputs[..., None, :, :].expand(*values.shape[:-2], n_k, *d_head_outputs.shape[-2:])
    record("outputs", **tensors, d_weighted=d_weighted)  # d_weighted: (h?, n_k, n_q, d_v)
    # step 6 back: weighted[j, i, :] = A_ij · v_j, so d A_ij = Σ_c dW[j, i, c] v_jc and d v_j = Σ_i dW[j, i, :] A_ij
    d_weights = d_head_outputs @ values.mT  # (h?, n_q, n_k): the broadcast's sum over value dims, as a matmul
    d_values = weights.mT @ d_head_outputs  # (h?, n_k, d_v/h): the weights used (the rounded ones, when used)
    record("weighted", d_weights=d_weights, d_values=d_values)
    # step 5 back: the softmax's Jacobian (a sink's too, whose column has no value); the rounded override has no
    # gradient (a constant), so the exact softmax's is used
    d_scores, d_sinks = softmax_back(weights_exact, d_weights, trace["weights_sink"] if o.sinks is not None else None)
    record("softmax", d_scores=d_scores, **({} if d_sinks is None else {"d_sinks": d_sinks}))
    d_queries, d_keys = _back_through_step_4(trace, d_scores, record)  # the cap, the scale, the mask; Q and K
    d_queries, d_keys = _back_through_step_3(trace, d_queries, d_keys, record)  # RoPE's turns, the q/k norm
    # step 3 back: the heads joined again (a shared key/value head sums its query heads' gradients), then Q = X W_Q,
    # K = C W_K and V = C W_V, C = X (cross-attention's X_kv; or MLA's latent, which goes back through its norm and
    # C = X W_DKV in turn)
    d_q, d_k, d_v = joined(d_queries, h), joined(d_keys, g), joined(d_values, g)  # (n_q, d), (n_k, d), (n_k, d)
    read = trace["latent"] if o.w_latent is not None else trace["x_kv"] if case.cross else x  # keys' and values'
    tensors = {"d_w_query": x.T @ d_q, "d_w_key": read.T @ d_k, "d_w_value": read.T @ d_v}  # (d_in or d_c, d)
    if o.w_latent is not None:
        tensors |= latent_back(trace, d_k, d_v)
    record("weights", **tensors)
    # step 1 back: x reached the scores three ways (as queries, keys and values; the last two through the latent);
    # in cross-attention x as queries alone, and x_kv as keys and values
    if o.w_latent is None:
        ways = [d_k @ w_key.T, d_v @ w_value.T]  # (n_k, d_in) each: as keys, as values
    else:
        d_latent = tensors.get("d_latent_unnormed", tensors["d_latent"])  # the latent as x W_DKV made it
        ways = [d_latent @ trace["w_latent"].T]  # (n_k, d_in): through the latent
    d_x = d_q @ w_query.T  # (n_q, d_in): as queries
    if case.cross:
        record("inputs", d_x=d_x, d_x_kv=sum(ways[1:], ways[0]))
    else:
        record("inputs", d_x=sum(ways, d_x))  # left to right, as the formula (and the exported script) adds them
    steps = tuple(step(case, loss, name, *recorder.records[name]) for name in backward_names(case))
    return Backward(trace, loss, value, steps)


def token_dependence(trace: Trace, columns: int = 8) -> torch.Tensor:
    """For output row i, the size ‖∂(Σ_c o_ic)/∂x_j‖ of every input row j's gradient (its first `columns` output
    numbers summed), (n, n); in cross-attention of x_kv's rows (n, n_kv): an output reads x only through its own
    query, and the other sentence through every key and value."""
    leaf, rows = "d_x_kv" if trace.case.cross else "d_x", []
    for i in range(trace.case.n):
        grad = sum(backward(trace, Loss(cell=(i, c)))[leaf] for c in range(min(trace.outputs.shape[1], columns)))
        rows.append(grad.norm(dim=-1))  # (n or n_kv,): how much output i moves with input row j
    return torch.stack(rows)


def softmax_back(weights, d_weights, weights_sink=None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Step 5 back, row by row: d S_ij = A_ij (d A_ij − Σ_k A_ik d A_ik) (a masked A_ij is 0, so its d S_ij is 0),
    and with gpt-oss's sinks (weights_sink: A_i,sink (h?, n_q, 1)) each head's sink logit's d s_h = −Σ_i A_i,sink
    Σ_k A_ik d A_ik as (1, h): a sink has no value, so it adds no term of its own to the rows' sums."""
    row_mean = torch.linalg.vecdot(weights, d_weights).unsqueeze(-1)  # (h?, n_q, 1): Σ_k A_ik dA_ik
    d_scores = (d_weights - row_mean).mul_(weights)  # (h?, n_q, n_k): one n × n tensor made, not three
    if weights_sink is None:
        return d_scores, None
    d_sinks = -(weights_sink * row_mean).sum(dim=(-2, -1)).reshape(1, -1)  # (1, h): raising s_h lowers every A_ij
    return d_scores, d_sinks


def _back_through_step_4(trace: Trace, d_scores: torch.Tensor, record) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 4 back: S = cap · tanh(U / cap) (a softcap) with U = (scale / temperature) · Q Kᵀ + ALiBi's bias (a
    constant: no gradient to pass to anything) or T5's (its learned table's entries: each gathers the gradients of
    the scores it was added to), masked (a masked score is a constant −∞, its gradient exactly 0)."""
    options = score_options(trace.case, torch.device("cpu"))
    allowed, cap, tensors = options["allowed"], options["softcap"], {}
    d_scores_uncapped = d_scores  # (h?, n_q, n_k)
    if cap is not None:  # tanh' = 1 − tanh², at most 1: a capped score moves less than the one before the cap
        slope = 1 - torch.tanh(trace["scores_uncapped"] / cap).square()  # (h?, n_q, n_k): as the forward's tanh
        d_scores_uncapped = tensors["d_scores_uncapped"] = d_scores * slope
    if trace.case.options.relative_bias is not None:  # T5's learned table: each entry was added to its bucket's scores
        tensors["d_relative_bias"] = bucket_sums(trace.case, d_scores_uncapped)  # (h, buckets)
    factor = options["scale"] / options["temperature"]
    d_scores_raw = d_scores_uncapped if factor == 1 else d_scores_uncapped * factor  # at 1 the same tensor (memory)
    if allowed is not None:
        d_scores_raw = d_scores_raw.masked_fill(~allowed, 0.0)  # already 0 there (A = 0); said once more, for −0
    queries, keys = trace["queries"], trace["keys"]  # (h?, n, d_k/h)
    d_queries = d_scores_raw @ keys  # (h?, n_q, d_k/h)
    d_keys = d_scores_raw.mT @ queries  # (h?, n_k, d_k/h)
    record("scores", **tensors, d_scores_raw=d_scores_raw, d_queries=d_queries, d_keys=d_keys)
    return d_queries, d_keys


def bucket_sums(case: Case, d_biased: torch.Tensor) -> torch.Tensor:
    """dt_h[b] = Σ dU_h,ij over the pairs whose distance j − i falls in bucket b (h, buckets): the gradient of T5's
    table, whose entry b was added to every such score (a masked pair's dU is 0)."""
    o, n = case.options, case.n
    d = d_biased.reshape(-1, n * n)  # (h, n²)
    buckets = buckets_of(o, range(n), range(n)).flatten()  # (n²,): each pair's
    return d.new_zeros(d.shape[0], len(o.relative_bias[0])).index_add_(1, buckets, d)


def _back_through_step_3(trace: Trace, d_queries, d_keys, record) -> tuple[torch.Tensor, torch.Tensor]:
    """Steps 3b and 3a back, where the case has them: RoPE's turns and the q/k norm, undone in reverse."""
    case, o = trace.case, trace.case.options
    if o.rope_base is not None:  # step 3b back: a rotation's transpose is the rotation by the opposite angle (partial
        t, theta = positions(case), rope_theta(o, case.d_rot)  # rotary: the first d_rot dims, the rest unturned)
        d_queries, d_keys = rope(d_queries, -t, theta), rope(d_keys, -t, theta)
        record(ROPE, d_queries_unrotated=d_queries, d_keys_unrotated=d_keys)
    if o.q_norm is not None:  # step 3a back: through each row's (or token's, over the width) root mean square and γ
        rest_q, rest_k = norm_rests(o)  # the other heads' share (norm_rest): a constant of the case, held fixed
        d_queries = rms_norm_back(d_queries, trace["queries_unnormed"], o.q_norm, o.norm_eps, rest_q)
        d_keys = rms_norm_back(d_keys, trace["keys_unnormed"], o.k_norm, o.norm_eps, rest_k)
        record(NORM, d_queries_unnormed=d_queries, d_keys_unnormed=d_keys)
    return d_queries, d_keys


def joined(m: torch.Tensor, g: int) -> torch.Tensor:
    """A gradient of queries, keys or values (h, n, d/h) as step 3 made them (n, g · d/h), g the heads it had there:
    a shared key/value head sums its query heads' gradients (g < h), then the heads side by side; one head's (n, d)
    as it is."""
    if m.dim() == 2:
        return m
    if m.shape[0] != g:
        m = m.unflatten(0, (g, -1)).sum(1)  # (g, n, d/h): each group summed
    return m.transpose(0, 1).flatten(1)  # (n, g · d/h): head i's columns


def step_3_gradients(result: Backward) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dQ, dK and dV as step 3 made Q, K and V (n, d) each: the last of each the steps recorded (before RoPE's turn
    and the q/k norm, where the case has them), joined."""
    o = result.case.options

    def last(name: str) -> torch.Tensor:
        return next(result[m] for m in (f"{name}_unnormed", f"{name}_unrotated", name) if m in result)

    return (
        joined(last("d_queries"), o.heads),
        joined(last("d_keys"), o.kv_heads or o.heads),
        joined(result["d_values"], o.kv_heads or o.heads),
    )


def latent_back(trace: Trace, d_keys: torch.Tensor, d_values: torch.Tensor) -> dict[str, torch.Tensor]:
    """Step 3 back through multi-head latent attention's latent C (n, d_c): K = C W_UK and V = C W_UV, so the
    latent gathers both, dC = dK W_UKᵀ + dV W_UVᵀ; through DeepSeek's norm of its first len(γ) columns (γ's gradient
    dγ = Σ_t dC ⊙ Ĉ, Ĉ the normed columns before γ; dC back to before the norm as the q/k norm's; the rotary key's
    columns pass); then C = X W_DKV (cross-attention's X_kv): dW_DKV = Xᵀ dC."""
    o = trace.case.options
    d_latent = d_keys @ trace["w_key"].T + d_values @ trace["w_value"].T  # (n, d_c)
    tensors = {"d_latent": d_latent}
    d_unnormed = d_latent
    if o.latent_norm is not None:
        d, u = len(o.latent_norm), trace["latent_unnormed"]
        unit = u[:, :d] * torch.rsqrt(u[:, :d].pow(2).mean(-1, keepdim=True) + o.norm_eps)  # Ĉ (n, d): u / r_u
        tensors["d_latent_norm"] = (d_latent[:, :d] * unit).sum(0, keepdim=True)  # (1, d): γ_c scaled column c
        normed_back = rms_norm_back(d_latent[:, :d], u[:, :d], o.latent_norm, o.norm_eps)  # (n, d)
        d_unnormed = tensors["d_latent_unnormed"] = torch.cat((normed_back, d_latent[:, d:]), dim=-1)  # (n, d_c)
    tensors["d_w_latent"] = trace["x_kv" if trace.case.cross else "x"].T @ d_unnormed  # (d_in, d_c)
    return tensors


def rms_norm_back(d_y: torch.Tensor, u: torch.Tensor, gamma, eps: float, rest=None) -> torch.Tensor:
    """y = γ ⊙ u / r, r = √(mean(u²) + ε), back: du = (g − û · mean(g ⊙ û)) / r with g = γ ⊙ dy and û = u / r (the
    part of g along û is what lengthening u would change, and the norm takes it away); the means over a row, or
    with the norm over the width over a token's rows of every head (norm_axes). With the other heads' share (rest,
    norm_rest's: held fixed, a constant of the case) r takes it in and the mean runs over the layer's width: own /
    width of it."""
    gamma = torch.tensor(gamma, dtype=d_y.dtype)
    own = gamma.numel()
    gamma, axes = norm_axes(u, gamma)
    r_inv = torch.rsqrt(mean_square(u, axes, own, rest) + eps)  # (…, 1)
    g, unit = d_y * gamma, u * r_inv
    share = 1.0 if rest is None else own / rest[1]
    return r_inv * (g - share * unit * (g * unit).mean(axes, keepdim=True))


def autograd(case: Case, loss: Loss) -> dict[str, torch.Tensor]:
    """The same gradients by torch.autograd: the forward written with differentiable torch ops (no in-place ones),
    the rounded override as its value with the exact softmax's gradient (straight through), then .backward()."""
    o, dtype = case.options, getattr(torch, case.options.dtype)
    h, g = o.heads, o.kv_heads or o.heads
    w_out = option_tensors(case, torch.device("cpu"))[2]
    names = (*_LEAVES, "x_kv") if case.cross else _LEAVES  # cross-attention's other sentence: a leaf too
    leaves = {name: torch.tensor(getattr(case, name), dtype=dtype, requires_grad=True) for name in names}
    if w_out is not None:
        leaves["w_out"] = w_out.clone().requires_grad_(True)
    if o.sinks is not None:  # gpt-oss's sink logits: learned, so a leaf
        leaves["sinks"] = torch.tensor(o.sinks, dtype=dtype, requires_grad=True)  # (h,)
    if o.relative_bias is not None:  # T5's table: learned, so a leaf
        leaves["relative_bias"] = torch.tensor(o.relative_bias, dtype=dtype, requires_grad=True)  # (h, buckets)
    for name in ("w_latent", "latent_norm"):  # MLA's W_DKV and its latent's γ: learned, so leaves
        if getattr(o, name) is not None:
            leaves[name] = torch.tensor(getattr(o, name), dtype=dtype, requires_grad=True)
    x, x_kv = leaves["x"], leaves.get("x_kv", leaves["x"])  # keys and values from x_kv (x's own sentence)
    read = x_kv if o.w_latent is None else _autograd_latent(o, x_kv, leaves["w_latent"], leaves.get("latent_norm"))
    q, k, v = x @ leaves["w_query"], read @ leaves["w_key"], read @ leaves["w_value"]
    q = q.unflatten(-1, (h, -1)).transpose(0, 1)
    k, v = (m.unflatten(-1, (g, -1)).transpose(0, 1).repeat_interleave(h // g, dim=0) for m in (k, v))
    q, k = qk_normed(o, q, k)  # a q/k norm, where the case has one
    if o.rope_base is not None:
        t, theta = positions(case), rope_theta(o, case.d_rot)
        q, k = rope(q, t, theta), rope(k, t, theta)
    a = _autograd_weights(case, q, k, leaves.get("sinks"), leaves.get("relative_bias"))  # (h, n, n_kv)
    outputs = (a @ v).transpose(0, 1).flatten(1)
    if w_out is not None:
        outputs = outputs @ leaves["w_out"]
    if loss.cell is not None:
        outputs[loss.cell].backward()
    else:
        (0.5 * ((outputs - torch.tensor(loss.target, dtype=dtype)) ** 2).sum()).backward()
    grads = {f"d_{name}": leaf.grad for name, leaf in leaves.items()}
    rows = {name: grads[name].reshape(1, -1) for name in ("d_sinks", "d_latent_norm") if name in grads}
    return grads | rows  # (1, h) and (1, len(γ)): a row, as the steps record them


def _autograd_latent(o, x: torch.Tensor, w_latent: torch.Tensor, gamma: torch.Tensor | None) -> torch.Tensor:
    """MLA's latent for autograd, differentiable in W_DKV and γ: C = X W_DKV, its first len(γ) columns RMS-normed
    by the forward's own rms_norm (as the forward's projections are its own), the rotary key's after them kept."""
    latent = x @ w_latent  # (n, d_c)
    if gamma is None:
        return latent
    d = len(gamma)
    return torch.cat((rms_norm(latent[:, :d], gamma, o.norm_eps), latent[:, d:]), dim=-1)


def _autograd_weights(case: Case, q, k, sinks: torch.Tensor | None, table: torch.Tensor | None) -> torch.Tensor:
    """Steps 4-5 for autograd, differentiable: the scaled scores, ALiBi's bias (a constant) and T5's (the table's
    entries, looked up: differentiable), the cap, the mask (a
    fully masked row made finite, then its weights 0), and the softmax, with the sink as one more logit per row
    whose weight is dropped (its own formulation: the core's softmax_with_sink is what it checks)."""
    options = score_options(case, torch.device("cpu"))
    allowed, override, cap = (options[name] for name in ("allowed", "override", "softcap"))
    scores = q @ k.mT * (options["scale"] / options["temperature"])  # (h, n, n_kv): one head's too
    every = range(case.n)
    if case.options.alibi is not None:
        scores = scores + position_bias(replace(case.options, relative_bias=None), every, every, q.dtype, q.device)
    if table is not None:
        scores = scores + table[:, buckets_of(case.options, every, every)]
    if cap is not None:
        scores = cap * torch.tanh(scores / cap)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
        scores = torch.where(allowed.any(-1, keepdim=True), scores, 0.0)  # a fully masked row: no NaN to pass
    if sinks is None:
        a = torch.softmax(scores, dim=-1)
    else:  # (h,) as (h, n, 1): the logits' last column
        sink = sinks[:, None, None].expand(*scores.shape[:-1], 1)
        a = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
    if allowed is not None:
        a = a.masked_fill(~allowed, 0.0)  # that row's weights 0, as the core gives
    if override is not None:
        a = a + (override - a).detach()  # the override's value, the exact softmax's gradient
    return a


_LEAVES = ("x", "w_query", "w_key", "w_value")


def check(result: Backward) -> Check:
    """The hand-written gradients against autograd's on the same case (the forward is checked against SDPA): every
    leaf's, each number within the one rule's tolerance (base/tolerance.py), the worst of them."""
    allowed, theirs = tolerances(result), autograd(result.case, result.loss)
    return worst(compare("torch.autograd", result[name], theirs[name], allowed[name]) for name in theirs)


def tolerances(result: Backward) -> dict[str, torch.Tensor]:
    """How far another float computation of each leaf's gradient may be from these: the one rule, on the chain."""
    trace, case = result.forward, result.forward.case
    o, (_, _, w_out) = case.options, option_tensors(case, torch.device("cpu"))
    tensors = (trace[name] for name in ("x", "w_query", "w_key", "w_value", "queries", "keys", "values", "weights"))
    options = score_options(case, torch.device("cpu"))
    multiplier = options["scale"] / options["temperature"]
    norm, x_kv = None, trace["x_kv"] if case.cross else None  # cross-attention: keys and values from x_kv
    if o.q_norm is not None:  # step 3's queries and keys, before the norm
        norm = (trace["queries_unnormed"], trace["keys_unnormed"], o.q_norm, o.k_norm, o.norm_eps, norm_rests(o))
    return gradient_tolerance(*tensors, trace["weights_exact"], result["d_outputs"], multiplier,
                              case.d_rot if o.rope_base is not None else 0, w_out, result.loss.cell is None, norm,
                              x_kv=x_kv, **tolerance_options(trace))  # fmt: skip


def tolerance_options(trace: Trace) -> dict:
    """What the one rule reads of the case's options: the scores before any cap where a bias or a cap came after the
    scale, the cap, the sinks' weights, T5's buckets, and MLA's latent."""
    o, out = trace.case.options, {}
    if o.softcap is not None or o.biased:
        out["scores"] = trace["scores_uncapped" if o.softcap is not None else "scores"]
    if o.softcap is not None:
        out["softcap"] = o.softcap
    if o.sinks is not None:
        out["sink"] = trace["weights_sink"]
    if o.relative_bias is not None:  # T5's bucket of each pair: its table's gradient sums them
        out["buckets"] = buckets_of(o, range(trace.case.n), range(trace.case.n)), len(o.relative_bias[0])
    if o.w_latent is not None:  # MLA: keys and values from the latent (before its norm, where it has one)
        unnormed = trace["latent" if o.latent_norm is None else "latent_unnormed"]
        out["latent"] = (trace["w_latent"], unnormed, o.latent_norm, o.norm_eps)
    return out
