"""The backward pass as a runnable script: the forward script, each backward step by hand, then autograd's check."""

from __future__ import annotations

from ..base import tolerance as rule
from ..base.case import Case
from ..forward.compute import scale_factor
from ..forward.script import WIDTH_GAMMA, literal, norm_axes_code, rule_lines, to_script, width_norm
from ..forward.script import _seen as seen_name
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
    if case.options.sinks is not None:  # step 5's own function: the sink's column dropped, and its weight
        lines.append("weights_exact, weights_sink = softmax_with_sink(scores)  # (h?, n_q, n_k), (h?, n_q, 1)")
    else:
        lines.append("weights_exact = softmax(scores, dim=-1).nan_to_num(nan=0.0)  # a fully masked row: 0")
    lines += [
        "row_mean = (weights_exact * d_weights).sum(-1, keepdim=True)  # (h?, n_q, 1): Σ_k A_ik dA_ik",
        "d_scores = weights_exact * (d_weights - row_mean)  # the softmax's Jacobian, row by row",
    ]
    if case.options.sinks is not None:
        lines.append("d_sinks = -(weights_sink * row_mean).sum(dim=(-2, -1)).reshape(1, -1)  # (1, h): a sink has no "
                     "value, raising it lowers every weight")  # fmt: skip
    return lines


def _scores(case: Case, loss: Loss) -> list[str]:
    o, factor = case.options, scale_factor(case) / case.options.temperature
    transpose = ".mT" if o.heads > 1 else ".T"
    lines, d = [], "d_scores"
    if o.softcap is not None:  # tanh' = 1 − tanh², from the scores before the cap
        bias = " + position_bias" if o.biased else ""
        lines += [
            f"scores_uncapped = queries @ keys{transpose} * {factor!r}{bias}  # (h?, n_q, n_k): before the cap",
            f"d_scores_uncapped = d_scores * (1 - torch.tanh(scores_uncapped / {float(o.softcap)!r}) ** 2)  # the "
            "cap's slope, at most 1",
        ]  # fmt: skip
        d = "d_scores_uncapped"
    if o.relative_bias is not None:  # T5's table: entry b was added to every score whose j − i is in bucket b
        lines.append(f"d_relative_bias = torch.zeros_like(relative_bias).index_add_(1, buckets.flatten(), "
                     f"{d}.reshape(-1, len(x) ** 2))  # (h, buckets): each bucket's scores' gradients")  # fmt: skip
    lines.append(f"d_scores_raw = {d} * {factor!r}  # the scale and temperature: one factor for every score")
    if o.alibi is not None:
        lines.append("# ALiBi's bias is a constant: it hands the gradient on unchanged and gets none itself")
    if o.mask is not None or o.window is not None:
        lines.append(f"d_scores_raw = d_scores_raw.masked_fill({seen_name(case)} == 0, 0.0)  # a masked score: 0")
    return [
        *lines,
        "d_queries = d_scores_raw @ keys  # (h?, n_q, d_k/h)",
        "d_keys = d_scores_raw.mT @ queries  # (h?, n_k, d_k/h)",
    ]


def _rope(case: Case, loss: Loss) -> list[str]:
    if case.d_rot == case.d_head:
        body = [
            "def rope_back(t):  # the opposite turn: a rotation's transpose",
            "    even, odd = t[..., 0::2], t[..., 1::2]",
            "    return torch.stack((even * cos + odd * sin, -even * sin + odd * cos), dim=-1).flatten(-2)",
        ]
    else:  # partial rotary: the first d_rot dims turned back, the rest were never turned
        body = [
            "def rope_back(t):  # the opposite turn of the first d_rot dims: a rotation's transpose",
            "    even, odd = t[..., 0:d_rot:2], t[..., 1:d_rot:2]",
            "    turned = torch.stack((even * cos + odd * sin, -even * sin + odd * cos), dim=-1).flatten(-2)",
            "    return torch.cat((turned, t[..., d_rot:]), dim=-1)  # the rest: their gradient as it is",
        ]
    return [*body, "", "", "d_queries, d_keys = rope_back(d_queries), rope_back(d_keys)"]


def _norm(case: Case, loss: Loss) -> list[str]:
    axes = norm_axes_code(case)  # a row's dims, or a token's of every head (the norm over the width)
    return [
        "def norm_back(d, t, gamma, rest=None):  # y = γ ⊙ t / r back to t: the part along t / r (the norm undoes it)",
        "    own, share = gamma.numel(), 1.0  # removed; the other heads' share (rest) held fixed: own / width",
        *(WIDTH_GAMMA if width_norm(case) else []),
        f"    mean = t.pow(2).mean({axes}, keepdim=True)",
        "    if rest is not None:",
        "        mean, share = (mean * own + rest[0].reshape(-1, 1)) / rest[1], own / rest[1]",
        "    r_inv = torch.rsqrt(mean + norm_eps)",
        "    g, unit = d * gamma, t * r_inv",
        f"    return r_inv * (g - share * unit * (g * unit).mean({axes}, keepdim=True))",
        "",
        "",
        "d_queries = norm_back(d_queries, queries_unnormed, gamma_q, rest_q)",
        "d_keys = norm_back(d_keys, keys_unnormed, gamma_k, rest_k)",
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
    if o.w_latent is not None:  # keys and values were made from the latent: W_UK and W_UV read it, not x
        return [*lines, "d_w_query = x.T @ d_queries  # (d_in, d_k)", *_latent_back(case)]
    kv, why = ("x_kv", ": the keys' sentence made keys and values") if case.cross else ("x", "")
    return [
        *lines,
        "d_w_query = x.T @ d_queries  # (d_in, d_k)",
        f"d_w_key = {kv}.T @ d_keys  # (d_in, d_k){why}",
        f"d_w_value = {kv}.T @ d_values  # (d_in, d_v)",
        'print("d_w_query:\\n", d_w_query)',
    ]


def _latent_back(case: Case) -> list[str]:
    """Multi-head latent attention's step 3 back: W_UK and W_UV read the latent, which gathers both gradients, goes
    back through its norm (γ, of its first len(γ) columns; the rotary key's after them pass) and C = X W_DKV (X_kv
    in cross-attention)."""
    kv = "x_kv" if case.cross else "x"  # what the latent was made from
    lines = [
        "d_w_key = latent.T @ d_keys  # (d_c, d_k): W_UK made keys from the latent",
        "d_w_value = latent.T @ d_values  # (d_c, d_v): W_UV made values from it",
        "d_latent = d_keys @ w_key.T + d_values @ w_value.T  # (n, d_c): the latent made both",
    ]
    d = "d_latent"
    if case.options.latent_norm is not None:  # as the q/k norm's backward, over a token's first len(γ) columns
        n_normed = len(case.options.latent_norm)
        lines += [
            f"part = latent_unnormed[:, :{n_normed}]  # (n, {n_normed}): the columns the norm covered",
            "r_inv = torch.rsqrt(part.pow(2).mean(-1, keepdim=True) + latent_eps)",
            "unit = part * r_inv  # each column over the root mean square, before γ",
            f"d_latent_norm = (d_latent[:, :{n_normed}] * unit).sum(0, keepdim=True)  # (1, {n_normed}): dγ",
            f"g = d_latent[:, :{n_normed}] * gamma_c",
            "d_part = r_inv * (g - unit * (g * unit).mean(-1, keepdim=True))  # the part along unit removed",
            f"d_latent_unnormed = torch.cat((d_part, d_latent[:, {n_normed}:]), dim=-1)  # the rotary key's: as is",
        ]
        d = "d_latent_unnormed"
    return [
        *lines,
        f"d_w_latent = {kv}.T @ {d}  # (d_in, d_c): W_DKV made the latent from {kv}",
        'print("d_w_latent:\\n", d_w_latent)',
    ]


def _inputs(case: Case, loss: Loss) -> list[str]:
    if case.options.w_latent is not None:  # keys and values reached x through the latent
        d = "d_latent" if case.options.latent_norm is None else "d_latent_unnormed"
        ways, why = f"{d} @ w_latent.T", "through the latent"
    else:
        ways, why = "d_keys @ w_key.T + d_values @ w_value.T", "as keys and values"
    shown = ['print("d_x:\\n", d_x)', "print(d_x.tolist())  # one line a program can parse"]
    if not case.cross:
        return [f"d_x = d_queries @ w_query.T + {ways}  # (n, d_in): as queries, and {why}", *shown]
    return [  # cross-attention: x made the queries alone, the keys' sentence x_kv the keys and values
        f"d_x_kv = {ways}  # (n_kv, d_in): {why}",
        "d_x = d_queries @ w_query.T  # (n, d_in): as queries alone",
        'print("d_x_kv:\\n", d_x_kv)',
        "print(d_x_kv.tolist())",
        *shown,
    ]


BLOCKS = {
    "outputs": _outputs, "weighted": _weighted, "softmax": _softmax, "scores": _scores, ROPE: _rope, NORM: _norm,
    "weights": _weights, "inputs": _inputs,
}  # fmt: skip


def _check(case: Case, loss: Loss) -> list[str]:
    """The same forward again with x and the weights (and the sink logits) as autograd's leaves, and every gradient
    asserted equal."""
    o = case.options
    h, g = o.heads, o.kv_heads or o.heads
    leaves = _leaves(case)  # the script's tensor, its gradient's name, autograd's leaf
    lines = [
        "# The check: the same forward, differentiable, and torch.autograd's gradients",
        f"leaves = [t.clone().requires_grad_(True) for t in ({', '.join(t for t, _, _ in leaves)})]",
        f"{', '.join(leaf for _, _, leaf in leaves)} = leaves",
        *_check_projections(case),
        f"q = q.unflatten(-1, ({h}, -1)).transpose(0, 1)",
        f"k, v = (t.unflatten(-1, ({g}, -1)).transpose(0, 1).repeat_interleave({h // g}, dim=0) for t in (k, v))",
    ]
    if o.q_norm is not None:
        lines.append("q, k = rms_norm(q, gamma_q, rest_q), rms_norm(k, gamma_k, rest_k)")
    if o.rope_base is not None:
        lines.append("q, k = rope(q), rope(k)")
    lines += _check_weights(case)
    lines.append("out = (a @ v).transpose(0, 1).flatten(1)")
    if o.w_out is not None:
        lines.append("out = out @ w_out")
    if loss.cell is not None:
        lines.append(f"out[{loss.cell[0]}, {loss.cell[1]}].backward()")
    else:
        lines.append("(0.5 * ((out - target) ** 2).sum()).backward()")
    multiplier, turned = scale_factor(case) / o.temperature, case.d_rot if o.rope_base is not None else 0
    w_out, target = "w_out" if o.w_out is not None else "None", loss.cell is None
    norm = ", (queries_unnormed, keys_unnormed, gamma_q, gamma_k, norm_eps, (rest_q, rest_k))" * (o.q_norm is not None)
    options = "".join(f", {name}={value}" for name, value in _tolerance_options(case).items())
    mine = ", ".join(f'"{grad}": {grad}' for _, grad, _ in leaves)
    return [
        *lines,
        "",
        "",
        *rule_lines(GRADIENT_RULE),
        "",
        "",
        "# Each gradient number within float rounding of autograd's: the one rule (the app's check), on the chain",
        "tolerance = gradient_tolerance(x, w_query, w_key, w_value, queries, keys, values, weights, weights_exact, "
        f"d_outputs, {multiplier!r}, {turned}, {w_out}, {target}{norm}{options})",
        f"mine = {{{mine}}}",
        "for (name, gradient), leaf in zip(mine.items(), leaves):",
        "    assert within(gradient, leaf.grad.reshape(gradient.shape), tolerance[name]), name",
        'print("every gradient equals torch.autograd\'s")',
    ]


GRADIENT_RULE = (rule.gradient_tolerance, rule.inputs_back_errors, rule.scores_back_errors, rule.capped_back,
                 rule.both_of_pair, rule.normed_back_errors, rule.normed_back, rule.latent_back_errors,
                 rule.weights_back)  # fmt: skip


def _leaves(case: Case) -> list[tuple[str, str, str]]:
    """Autograd's leaves, in order: the script's tensor, the gradient the steps made of it, and its name in the
    check: x and the weights, cross-attention's x_kv, the sink logits, T5's table, MLA's W_DKV and its latent's γ
    where the case has them."""
    o = case.options
    leaves = [("x", "d_x", "X"), ("w_query", "d_w_query", "WQ"), ("w_key", "d_w_key", "WK"),
              ("w_value", "d_w_value", "WV")]  # fmt: skip
    leaves += [("x_kv", "d_x_kv", "XKV")] * case.cross  # cross-attention's other sentence
    leaves += [("sinks", "d_sinks", "S")] * (o.sinks is not None)
    leaves += [("relative_bias", "d_relative_bias", "T")] * (o.relative_bias is not None)
    leaves += [("w_latent", "d_w_latent", "WL")] * (o.w_latent is not None)
    return leaves + [("gamma_c", "d_latent_norm", "G")] * (o.latent_norm is not None)


def _check_projections(case: Case) -> list[str]:
    """The check's step 3: q, k and v from the leaves (keys and values from x_kv in cross-attention), keys and values
    from MLA's latent where the case has one (its first len(γ) columns RMS-normed, the rotary key's after them
    kept)."""
    o, kv = case.options, "XKV" if case.cross else "X"  # cross-attention: keys and values from x_kv
    if o.w_latent is None:
        return [f"q, k, v = X @ WQ, {kv} @ WK, {kv} @ WV"]
    lines = [f"c = {kv} @ WL  # the latent"]
    if o.latent_norm is not None:
        d = len(o.latent_norm)
        lines.append(f"c = torch.cat((c[:, :{d}] * torch.rsqrt(c[:, :{d}].pow(2).mean(-1, keepdim=True) + latent_eps) "
                     f"* G, c[:, {d}:]), dim=-1)")  # fmt: skip
    return [*lines, "q, k, v = X @ WQ, c @ WK, c @ WV"]


def _check_weights(case: Case) -> list[str]:
    """The check's steps 4-5, differentiable: the scale, ALiBi's bias, T5's (its table T, autograd's leaf), the
    cap, the mask and window, the softmax (with the sink logits S, autograd's leaf, as one more column), the
    override's value."""
    o = case.options
    lines = [f"s = q @ k.mT * {scale_factor(case) / o.temperature!r}"]
    if o.alibi is not None:
        lines.append("s = s - slopes[:, None, None] * distance  # ALiBi's bias: a constant")
    if o.relative_bias is not None:
        lines.append("s = s + T[:, buckets]  # T5's bias: its table T, a leaf")
    if o.softcap is not None:
        lines.append(f"s = {float(o.softcap)!r} * torch.tanh(s / {float(o.softcap)!r})")
    seen = seen_name(case)
    if o.mask is not None or o.window is not None:
        lines += [
            f's = s.masked_fill({seen} == 0, float("-inf"))',
            f"s = torch.where(({seen} != 0).any(-1, keepdim=True), s, 0.0)  # a fully masked row: no NaN",
        ]
    if o.sinks is not None:
        lines.append("a = softmax(torch.cat((s, S[:, None, None].expand(*s.shape[:-1], 1)), dim=-1), dim=-1)[..., :-1]")
    else:
        lines.append("a = softmax(s, dim=-1)")
    if o.mask is not None or o.window is not None:
        lines.append(f"a = a.masked_fill({seen} == 0, 0.0)")
    if o.weights_override is not None:
        lines.append("a = a + (weights - a).detach()  # the rounded weights' value, the exact softmax's gradient")
    return lines


def _tolerance_options(case: Case) -> dict[str, str]:
    """The rule's reads of steps 4-5's options, by the script's names (as compute.tolerance_options)."""
    o, out = case.options, {}
    if o.softcap is not None or o.biased:
        out["scores"] = "scores_uncapped" if o.softcap is not None else "scores"
    if o.softcap is not None:
        out["softcap"] = repr(float(o.softcap))
    if o.sinks is not None:
        out["sink"] = "weights_sink"
    if o.relative_bias is not None:
        out["buckets"] = f"(buckets, {len(o.relative_bias[0])})"
    if o.w_latent is not None:  # the latent before its norm, as the forward's check passes it
        norm = o.latent_norm is not None
        out["latent"] = "(w_latent, latent_unnormed, gamma_c, latent_eps)" if norm else "(w_latent, latent, None, 0.0)"
    if case.cross:  # the keys' sentence: the keys' sums read it, and its own gradient is checked
        out["x_kv"] = "x_kv"
    return out
