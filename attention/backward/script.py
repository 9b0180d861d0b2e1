"""The backward pass as a runnable script: the forward script, each backward step by hand, then autograd's check."""

from __future__ import annotations

from ..base import tolerance as rule
from ..base.case import Case
from ..forward.compute import scale_factor
from ..forward.script import literal, rule_lines, to_script
from ..forward.steps import LABELS, NORM, ROPE
from .loss import Loss
from .steps import backward_names


def code(case: Case, loss: Loss, step: str) -> str:
    """One backward step's lines, as the page shows them beside the step (the exported script's own)."""
    return "\n".join(BLOCKS[step](case, loss))


def to_backward_script(case: Case, loss: Loss) -> str:
    """The forward script (steps 1-8), then the backward steps with the case's loss, each gradient asserted equal to
    torch.autograd's on a differentiable copy of the same forward."""
    lines = [to_script(case).rstrip("\n"), "", "# The backward pass, step by step (the app's Backward page)"]
    for name in backward_names(case):
        lines += ["", f"# Back through step {_label(name)}", *BLOCKS[name](case, loss)]
    lines += ["", *_check(case, loss)]
    return "\n".join(lines) + "\n"


def _label(name: str) -> str:
    return "3 and 2" if name == "weights" else LABELS[name]  # step 3's gradients reach step 2's weights


def _outputs(case: Case, loss: Loss) -> list[str]:
    o, dtype = case.options, f"torch.{case.options.dtype}"
    heads = o.heads > 1
    concat = "weighted.sum(dim=-3).transpose(0, 1).flatten(1)" if heads else "weighted.sum(dim=0)"
    lines = [f"concat = {concat}  # step 7 before w_out: the heads side by side"]
    if loss.cell is not None:
        r, c = loss.cell
        lines += [
            f"loss = outputs[{r}, {c}]  # one output number: output {r + 1}'s number {c + 1}",
            "d_outputs = torch.zeros_like(outputs)",
            f"d_outputs[{r}, {c}] = 1.0  # ∂loss/∂outputs: 1 at that cell, 0 elsewhere",
        ]
    else:
        lines += [
            *literal("target", loss.target),
            f"target = torch.tensor(target, dtype={dtype})  # the outputs wanted",
            "loss = 0.5 * ((outputs - target) ** 2).sum()  # half the squared error",
            "d_outputs = outputs - target  # (n, d_out): ∂loss/∂outputs",
        ]
    lines.append('print("loss:", loss.item())')
    d = "d_outputs"
    if o.w_out is not None:
        lines += ["d_w_out = concat.T @ d_outputs  # (d_v, d_out)", "d_concat = d_outputs @ w_out.T  # (n, d_v)"]
        d = "d_concat"
    if heads:
        lines.append(f"d_head_outputs = {d}.unflatten(-1, (heads, -1)).transpose(0, 1)  # (h, n_q, d_v/h)")
        d = "d_head_outputs"
    else:
        lines.append(f"d_head_outputs = {d}")
    lines.append("d_weighted = d_head_outputs[..., None, :, :].expand_as(weighted)  # every key: the same gradient")
    return lines


def _weighted(case: Case, loss: Loss) -> list[str]:
    return [
        "d_weights = (d_weighted * values[..., :, None, :]).sum(-1).mT  # (h?, n_q, n_k) = d_head_outputs @ values.mT",
        "d_values = (d_weighted * weights.mT[..., :, :, None]).sum(-2)  # (h?, n_k, d_v) = weights.mT @ d_head_outputs",
    ]


def _softmax(case: Case, loss: Loss) -> list[str]:
    lines = []
    if case.options.weights_override is not None:
        lines.append("# the rounded weights are a constant with no gradient: the exact softmax's gradient is used")
    return [
        *lines,
        "weights_exact = softmax(scores, dim=-1).nan_to_num(nan=0.0)  # a fully masked row: 0",
        "d_scores = weights_exact * (d_weights - (weights_exact * d_weights).sum(-1, keepdim=True))",
    ]


def _scores(case: Case, loss: Loss) -> list[str]:
    factor = scale_factor(case) / case.options.temperature
    lines = [f"d_scores_raw = d_scores * {factor!r}  # the scale and temperature: one factor for every score"]
    if case.options.mask is not None:
        lines.append("d_scores_raw = d_scores_raw.masked_fill(mask == 0, 0.0)  # a masked score: exactly 0")
    return [
        *lines,
        "d_queries = d_scores_raw @ keys  # (h?, n_q, d_k/h)",
        "d_keys = d_scores_raw.mT @ queries  # (h?, n_k, d_k/h)",
    ]


def _rope(case: Case, loss: Loss) -> list[str]:
    return [
        "def rope_back(t):  # the opposite turn: a rotation's transpose",
        "    even, odd = t[..., 0::2], t[..., 1::2]",
        "    return torch.stack((even * cos + odd * sin, -even * sin + odd * cos), dim=-1).flatten(-2)",
        "",
        "",
        "d_queries, d_keys = rope_back(d_queries), rope_back(d_keys)",
    ]


def _norm(case: Case, loss: Loss) -> list[str]:
    return [
        "def norm_back(d, u, gamma):  # y = γ ⊙ u / r back to u: the part along u / r, which the norm undoes, removed",
        "    r_inv = torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + norm_eps)",
        "    g, unit = d * gamma, u * r_inv",
        "    return r_inv * (g - unit * (g * unit).mean(-1, keepdim=True))",
        "",
        "",
        "d_queries = norm_back(d_queries, queries_unnormed, gamma_q)",
        "d_keys = norm_back(d_keys, keys_unnormed, gamma_k)",
    ]


def _weights(case: Case, loss: Loss) -> list[str]:
    o = case.options
    lines = []
    if o.heads > 1:
        g = o.kv_heads or o.heads
        lines += [
            f"d_keys, d_values = (t.unflatten(0, ({g}, -1)).sum(1) for t in (d_keys, d_values))  # shared: summed",
            "d_queries, d_keys, d_values = (t.transpose(0, 1).flatten(1) for t in (d_queries, d_keys, d_values))",
        ]
    return [
        *lines,
        "d_w_query = x.T @ d_queries  # (d_in, d_k)",
        "d_w_key = x.T @ d_keys  # (d_in, d_k)",
        "d_w_value = x.T @ d_values  # (d_in, d_v)",
        'print("d_w_query:\\n", d_w_query)',
    ]


def _inputs(case: Case, loss: Loss) -> list[str]:
    return [
        "d_x = d_queries @ w_query.T + d_keys @ w_key.T + d_values @ w_value.T  # (n, d_in): three ways in",
        'print("d_x:\\n", d_x)',
        "print(d_x.tolist())  # one line a program can parse",
    ]


BLOCKS = {
    "outputs": _outputs, "weighted": _weighted, "softmax": _softmax, "scores": _scores, ROPE: _rope, NORM: _norm,
    "weights": _weights, "inputs": _inputs,
}  # fmt: skip


def _check(case: Case, loss: Loss) -> list[str]:
    """The same forward again with x and the weights as autograd's leaves, and every gradient asserted equal."""
    o = case.options
    h, g = o.heads, o.kv_heads or o.heads
    lines = [
        "# The check: the same forward, differentiable, and torch.autograd's gradients",
        "leaves = [t.clone().requires_grad_(True) for t in (x, w_query, w_key, w_value)]",
        "X, WQ, WK, WV = leaves",
        "q, k, v = X @ WQ, X @ WK, X @ WV",
        f"q = q.unflatten(-1, ({h}, -1)).transpose(0, 1)",
        f"k, v = (t.unflatten(-1, ({g}, -1)).transpose(0, 1).repeat_interleave({h // g}, dim=0) for t in (k, v))",
    ]
    if o.q_norm is not None:
        lines.append("q, k = rms_norm(q, gamma_q), rms_norm(k, gamma_k)")
    if o.rope_base is not None:
        lines.append("q, k = rope(q), rope(k)")
    lines.append(f"s = q @ k.mT * {scale_factor(case) / o.temperature!r}")
    if o.mask is not None:
        lines += [
            's = s.masked_fill(mask == 0, float("-inf"))',
            "s = torch.where((mask != 0).any(-1, keepdim=True), s, 0.0)  # a fully masked row: no NaN",
        ]
    lines.append("a = softmax(s, dim=-1)")
    if o.mask is not None:
        lines.append("a = a.masked_fill(mask == 0, 0.0)")
    if o.weights_override is not None:
        lines.append("a = a + (weights - a).detach()  # the rounded weights' value, the exact softmax's gradient")
    lines.append("out = (a @ v).transpose(0, 1).flatten(1)")
    if o.w_out is not None:
        lines.append("out = out @ w_out")
    if loss.cell is not None:
        lines.append(f"out[{loss.cell[0]}, {loss.cell[1]}].backward()")
    else:
        lines.append("(0.5 * ((out - target) ** 2).sum()).backward()")
    multiplier, turned = scale_factor(case) / o.temperature, o.rope_base is not None
    w_out, target = "w_out" if o.w_out is not None else "None", loss.cell is None
    norm = ", (queries_unnormed, keys_unnormed, gamma_q, gamma_k, norm_eps)" if o.q_norm is not None else ""
    lines += [
        "",
        "",
        *rule_lines((rule.gradient_tolerance, rule.both_of_pair, rule.normed_back_errors, rule.weights_back)),
        "",
        "",
        "# Each gradient number within float rounding of autograd's: the one rule (the app's check), on the chain",
        "tolerance = gradient_tolerance(x, w_query, w_key, w_value, queries, keys, values, weights, weights_exact, "
        f"d_outputs, {multiplier!r}, {turned}, {w_out}, {target}{norm})",
        'mine = {"d_x": d_x, "d_w_query": d_w_query, "d_w_key": d_w_key, "d_w_value": d_w_value}',
        "for (name, gradient), leaf in zip(mine.items(), leaves):",
        "    assert within(gradient, leaf.grad, tolerance[name]), name",
        'print("every gradient equals torch.autograd\'s")',
    ]
    return lines
