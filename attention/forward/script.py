"""A case as a runnable, self-contained PyTorch script in the article's style: steps 1-8 with the case's own numbers."""

from __future__ import annotations

import inspect
import re

from ..base import tolerance as rule
from ..base.case import MODERN, Case, Matrix
from .compute import scale_factor, step_names
from .steps import LABELS, NORM, ROPE, TITLES

MAX_LABEL_CHARS = 80  # a label in a comment is cut here (labels are user text; the case limits them to 40)
SHOWN_ROWS = 16  # rows of a matrix a page shows in a step's code (the exported script has them all)
SHOWN_COLUMNS = 8  # numbers of a row it shows: a real model's x has 577 a row, its weights' rows 64 or more


def to_script(case: Case) -> str:
    """Python source that reproduces attention.attend(case).outputs with torch alone, step by step like the article."""
    kind = "Cross-attention" if case.cross else "Self-attention"  # (step 1 says where each sentence is)
    header = [
        f'"""{kind} in eight steps, as in the article, with one case\'s numbers (generated; needs torch)."""',
        "",
        *(["import math", ""] if case.options.scale == "sqrt_dk" else []),
        "import torch",
    ]
    lines = list(header)
    for name, block in blocks(case).items():
        note = {"inputs": " (one row per token)"}.get(name, "")
        lines += ["", f"# Step {LABELS[name]}: {TITLES[name]}{note}", *block]
    if modern(case):  # the same attention as today's models write it, asserted equal below
        lines += ["", "", *flex_lines(case)]
    elif case.cross:  # PyTorch's fused attention, which takes n_q ≠ n_kv, asserted equal below
        lines += ["", "", *sdpa_lines(case)]
    return "\n".join([*lines, "", "", *check_lines(case)]) + "\n"


def modern(case: Case) -> bool:
    """Whether the case has an option of today's models (a window, a softcap, ALiBi, sinks, partial rotary)."""
    return any(getattr(case.options, name) is not None for name in MODERN)


RULE = (rule.rounding, rule.product_error, rule.heads_of, rule.turned_error, rule.norm_axes, rule.mean_square,
        rule.normed_error,
        rule.latent_error, rule.attention_tolerance, rule.within)  # fmt: skip


def rule_lines(functions: tuple = RULE) -> list[str]:
    """The one rule of every check (attention/base/tolerance.py: its constant and these functions), inlined: a
    script is torch alone, and its assert holds it to the same tolerance as the app's check."""
    source = inspect.getsource(rule).splitlines()
    start = next(i for i, line in enumerate(source) if line.startswith("#"))  # the constant's comment
    end = next(i for i, line in enumerate(source) if line.startswith("ROUNDING_SAFETY"))
    lines = [
        "# The one rule of every check (the app's attention/base/tolerance.py, inlined): a float sum of K terms is",
        "# within about √K · eps · Σ|terms| of the exact sum, carried through the steps to each output number",
        "import math",
        "",
        *source[start : end + 1],
    ]
    for function in functions:
        lines += ["", "", *inspect.getsource(function).rstrip().splitlines()]
    return lines


def tolerance_call(case: Case, projected: bool = False, scores: str | None = None, weights: str = "weights") -> str:
    """The call of the inlined rule on the script's own tensors: how far another computation of the outputs may be
    (projected: it makes q, k and v its own way; scores: the name of step 4's final scores, which the rule reads
    where ALiBi or a softcap rounds each score once more; weights: the name of the weights the outputs used)."""
    o = case.options
    multiplier, turned = scale_factor(case) / o.temperature, o.rope_base is not None
    w_out = "w_out" if o.w_out is not None else "None"
    norm = ", (queries_unnormed, keys_unnormed, gamma_q, gamma_k, norm_eps, (rest_q, rest_k))" * (o.q_norm is not None)
    scores = f", scores={scores}" if scores is not None and (o.biased or o.softcap is not None) else ""
    latent = f", latent={latent_argument(case)}" if o.w_latent is not None else ""
    x_kv = ", x_kv=x_kv" if case.cross else ""  # cross-attention: keys and values were made from x_kv's rows
    return (f"tolerance = attention_tolerance(x, w_query, w_key, w_value, queries, keys, values, {weights}, "
            f"{multiplier!r}, {turned}, {w_out}, {projected}{norm}{scores}{latent}{x_kv})  # (n, d_out)")  # fmt: skip


def latent_argument(case: Case) -> str:
    """The rule's `latent` in a script's names (step 3's: _latent_lines): multi-head latent attention's W_DKV, the
    latent before its norm, γ or None, ε."""
    if case.options.latent_norm is None:
        return "(w_latent, latent, None, 0.0)"
    return "(w_latent, latent_unnormed, gamma_c, latent_eps)"


def check_lines(case: Case) -> list[str]:
    """After step 8: its rows against step 7's, and FlexAttention's where the case has an option of today's models,
    each number within the one rule's tolerance, asserted."""
    scores = "scores" if case.options.softcap is not None or case.options.biased else None
    lines = [
        *rule_lines(),
        "",
        "",
        "# The check: step 8's rows equal step 7's, each number within float rounding",
        tolerance_call(case, scores=scores),
        'assert within(outputs_by_query, outputs, tolerance), "step 8 differs from step 7 past float rounding"',
    ]
    if not checked_by_pytorch(case):
        return lines
    if case.options.weights_override is None:
        steps, weights = "outputs", "weights"
    else:  # the case's rounded weights are not attention's: FlexAttention is held to steps 6-7 on the exact ones
        steps, weights = "outputs_exact", "weights_exact"
        lines += ["", *_exact_outputs(case)]
    name, made = ("FlexAttention", "flex") if modern(case) else ("scaled_dot_product_attention", "sdpa")
    return [
        *lines,
        "",
        f"# And {name}'s outputs equal the steps' ({steps}), each number within float rounding",
        tolerance_call(case, scores=scores, weights=weights),
        f'assert within({made}, {steps}, tolerance), "{name} differs from the steps past float rounding"',
    ]


def checked_by_pytorch(case: Case) -> bool:
    """Whether the script asserts its steps equal PyTorch's own attention: FlexAttention where the case has an option
    of today's models, scaled_dot_product_attention for cross-attention (it takes n_q ≠ n_kv)."""
    return modern(case) or case.cross


def sdpa_lines(case: Case) -> list[str]:
    """Cross-attention's steps 4-7 as PyTorch's fused attention computes them, on the script's own queries, keys and
    values (n_q and n_kv rows): its attn_mask the case's mask (True: the query may attend to the key)."""
    o = case.options
    heads = "[None]" if o.heads > 1 else "[None, None]"  # (batch, h, n, d), as flex_attention takes them too
    mask = " attn_mask=mask != 0," if o.mask is not None else ""
    lines = [
        "# The same attention by PyTorch's fused scaled_dot_product_attention, which takes queries and keys of",
        "# different lengths: cross-attention's n_q target tokens against n_kv source tokens (a fully masked row is",
        "# 0 there too)",
        "from torch.nn.functional import scaled_dot_product_attention",
        "",
        f"sdpa = scaled_dot_product_attention(queries{heads}, keys{heads}, values{heads},{mask} "
        f"scale={scale_factor(case) / o.temperature!r})[0]",
        "sdpa = sdpa.transpose(0, 1).flatten(1)  # (n_q, d_v): the heads side by side",
    ]
    if o.w_out is not None:
        lines.append("sdpa = sdpa @ w_out")
    return [*lines, 'print("scaled_dot_product_attention\'s outputs:\\n", sdpa)']


def _exact_outputs(case: Case) -> list[str]:
    """Steps 6-7 again with the exact softmax, where the case's rounded weights replaced it."""
    o = case.options
    lines = ["# Steps 6-7 with the exact softmax (the case's rounded weights replaced it above)",
             "outputs_exact = weights_exact @ values  # (h?, n_q, d_v/h)"]  # fmt: skip
    if o.heads > 1:
        lines.append("outputs_exact = outputs_exact.transpose(0, 1).flatten(1)  # (n_q, d_v)")
    if o.w_out is not None:
        lines.append("outputs_exact = outputs_exact @ w_out")
    return lines


def flex_lines(case: Case) -> list[str]:
    """The case's steps 4-7 as today's models write them, with FlexAttention on the script's own queries, keys and
    values: ALiBi, T5's bias and the softcap in its score_mod, the mask and the window in its mask_mod (a block
    mask), and the sinks from its log-sum-exp."""
    o, h = case.options, case.options.heads
    lines = [
        "# The same attention as today's models write it: FlexAttention (torch.nn.attention.flex_attention). Its",
        "# score_mod changes a score (ALiBi, T5's bias, a softcap), its mask_mod says which keys a query sees (a mask,",
        "# a window), and a sink comes from its log-sum-exp lse = log Σ_j e^S_ij: a row's output times",
        "# Σe^S / (e^s_h + Σe^S), which is sigmoid(lse − s_h)",
        "import warnings",
        "",
        "from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention",
        "",
    ]
    if o.w_latent is not None:
        lines += [
            "# Multi-head latent attention changes where keys and values come from (step 3's, made from the",
            "# latent), not how they are attended to: FlexAttention takes them as any keys and values",
            "",
        ]
    mods, heads = [], "[None]" if h > 1 else "[None, None]"  # flex_attention takes (batch, h, n, d)
    if o.biased or o.softcap is not None:
        lines += ["", *_score_mod(case), ""]
        mods.append("score_mod=score_mod")
    if o.mask is not None or o.window is not None:
        keys = "len(x_kv)" if case.cross else "len(x)"  # cross-attention: n_kv keys
        lines += ["", *_mask_mod(case), "", "", "# which keys each block of queries needs, from mask_mod",
                  f'block_mask = create_block_mask(mask_mod, None, None, len(x), {keys}, device="cpu")']  # fmt: skip
        mods.append("block_mask=block_mask")
    scale = scale_factor(case) / o.temperature
    lines += [
        "# flex_attention warns when it runs without torch.compile: here it runs eagerly on purpose (every score",
        "# made, the same sums; slower, which a few tokens never notice)",
        "with warnings.catch_warnings():",
        '    warnings.simplefilter("ignore", UserWarning)',
        "    flex, aux = flex_attention(",
        f"        queries{heads}, keys{heads}, values{heads},{''.join(f' {mod},' for mod in mods)}",
        f"        scale={scale!r}, return_aux=AuxRequest(lse=True),  # step 4's scale; lse: each row's log Σ e^S",
        "    )",
        "flex = flex[0]  # (h, n_q, d_v/h)",
    ]
    if o.sinks is not None:
        lines.append("flex = flex * torch.sigmoid(aux.lse[0] - sinks[:, None])[..., None]  # gpt-oss: the sink's share")
    lines.append("flex = flex.transpose(0, 1).flatten(1)  # (n_q, d_v): the heads side by side")
    if o.w_out is not None:
        lines.append("flex = flex @ w_out")
    return [*lines, 'print("FlexAttention\'s outputs:\\n", flex)']


def _score_mod(case: Case) -> list[str]:
    o = case.options
    lines = ["def score_mod(score, b, h, q_idx, kv_idx):  # b: the batch, h: the head, q_idx: query i, kv_idx: key j"]
    if o.alibi is not None:
        lines.append("    score = score - slopes[h] * (q_idx - kv_idx)  # ALiBi: − m_h (i − j)")
    if o.relative_bias is not None:
        lines.append("    score = score + relative_bias[h, buckets[q_idx, kv_idx]]  # T5: t_h[bucket(j − i)]")
    if o.softcap is not None:
        lines.append(f"    score = {o.softcap!r} * torch.tanh(score / {o.softcap!r})  # the softcap")
    return [*lines, "    return score"]


def _mask_mod(case: Case) -> list[str]:
    o = case.options
    sees = []
    if o.mask == "causal" or o.window is not None:
        sees.append("(q_idx >= kv_idx)")
    if o.window is not None:
        sees.append("(q_idx - kv_idx < window)")
    if isinstance(o.mask, tuple):
        sees.append("(mask[q_idx, kv_idx] != 0)")
    return ["def mask_mod(b, h, q_idx, kv_idx):  # True: query i may attend to key j", f"    return {' & '.join(sees)}"]


def blocks(case: Case) -> dict[str, list[str]]:
    """Each step's lines of the script, by step name, with the case's numbers and the options in effect."""
    return {name: BLOCKS[name](case) for name in step_names(case)}


def shown(case: Case, step: str) -> str:
    """One step's block as a page shows it beside the step: the script's own lines, a matrix of more than
    SHOWN_ROWS rows or SHOWN_COLUMNS columns, or a list of more than SHOWN_COLUMNS numbers, cut short (the exported
    script has them all)."""
    out, rows = [], None  # rows: of the matrix literal being written, or None outside one
    for line in BLOCKS[step](case):
        if rows is not None and line != "]":
            rows += 1
            if rows > SHOWN_ROWS:
                if rows == SHOWN_ROWS + 1:
                    out.append("    # … the other rows are in the exported script")
                continue
            line = _cut_row(line)
        elif rows is None:
            line = LIST.sub(_cut_list, line)  # a model's γ or θ_p, one number per dim or pair
        rows = 0 if line.endswith(" = [") else None if line == "]" else rows
        out.append(line)
    return "\n".join(out)


LIST = re.compile(r"\[([-+0-9.e]+(?:, [-+0-9.e]+)+)\]")  # a list of numbers written in a line


def _cut_list(found: re.Match) -> str:
    numbers = found.group(1).split(", ")
    if len(numbers) <= SHOWN_COLUMNS:
        return found.group(0)
    return f"[{', '.join([*numbers[: SHOWN_COLUMNS - 2], '...', numbers[-1]])}]"


def _cut_row(line: str) -> str:
    """A literal's row of more than SHOWN_COLUMNS numbers: its first ones, `...` and its last (its label kept)."""
    numbers, end, label = line.strip().removeprefix("[").partition("],")
    numbers = numbers.split(", ")
    if len(numbers) <= SHOWN_COLUMNS:
        return line
    kept = [*numbers[: SHOWN_COLUMNS - 2], "...", numbers[-1]]
    return f"    [{', '.join(kept)}{end}{label or '  #'} ({len(numbers)} numbers)"


def _inputs(case: Case) -> list[str]:
    dtype = f"torch.{case.options.dtype}"
    lines = [
        *literal("x", case.x, labels=case.tokens),
        f"x = torch.tensor(x, dtype={dtype})  # (n, d_in) = ({case.n}, {case.d_in})",
    ]
    if not case.cross:
        return lines
    return [
        "# Cross-attention: the queries come from x (the target sentence), the keys and values from x_kv (the source",
        "# sentence), as an encoder-decoder's decoder reads its encoder's output",
        *lines,
        *literal("x_kv", case.x_kv, labels=case.key_tokens),
        f"x_kv = torch.tensor(x_kv, dtype={dtype})  # (n_kv, d_in) = ({case.n_kv}, {case.d_in})",
    ]


def _weights(case: Case) -> list[str]:
    o, dtype = case.options, f"torch.{case.options.dtype}"
    matrices = [("w_key", case.w_key), ("w_query", case.w_query), ("w_value", case.w_value)]
    if o.w_latent is not None:  # multi-head latent attention: W_DKV first, the latent's, then W_UK and W_UV
        matrices.insert(0, ("w_latent", o.w_latent))
    if o.w_out is not None:
        matrices.append(("w_out", o.w_out))
    lines = [line for name, matrix in matrices for line in literal(name, matrix)] + [""]
    shapes = {"w_key": "d_in, d_k", "w_query": "d_in, d_k", "w_value": "d_in, d_v", "w_out": "d_v, d_out"}
    whys = {"w_out": ": the output projection, applied in step 7"}
    if o.w_latent is not None:  # keys and values read the latent's d_c numbers, not x's d_in
        shapes |= {"w_latent": "d_in, d_c", "w_key": "d_c, d_k", "w_value": "d_c, d_v"}
        whys |= {"w_latent": ": W_DKV, x down to the latent (step 3)", "w_key": ": W_UK, the latent up to keys",
                 "w_value": ": W_UV, the latent up to values"}  # fmt: skip
    for name, matrix in matrices:
        shape = f"({shapes[name]}) = ({len(matrix)}, {len(matrix[0])})"
        lines.append(f"{name} = torch.tensor({name}, dtype={dtype})  # {shape}{whys.get(name, '')}")
    return lines


def _qkv(case: Case) -> list[str]:
    o, h = case.options, case.options.heads
    g = o.kv_heads or h
    d_key = case.d_head * g  # w_key's width: fewer columns when query heads share key/value heads
    later = [f"normed in step {LABELS[NORM]}"] * (o.q_norm is not None) + [f"turned by RoPE in step {LABELS[ROPE]}"] * (
        o.rope_base is not None
    )
    rotated = f" ({', then '.join(later)})" if later else ""
    read = "latent" if o.w_latent is not None else "x_kv" if case.cross else "x"  # what keys and values are made from
    n_kv = "n_kv" if case.cross else "n"  # cross-attention: a key and a value per x_kv row
    lines = [
        *_latent_lines(case),
        f"keys = {read} @ w_key  # ({n_kv}, d_k) = ({case.n_kv}, {d_key})",
        f"queries = x @ w_query  # (n, d_k) = ({case.n}, {case.d_k})",
        f"values = {read} @ w_value  # ({n_kv}, d_v) = ({case.n_kv}, {case.d_v})",
    ]
    if h > 1 and g == h:
        lines += [
            "# Split the columns into heads, as nn.MultiheadAttention does: head i takes the i-th block of columns,",
            f"# so queries and keys become (h, n, d_k/h) = ({h}, {case.n}, {case.d_head}) and values "
            f"(h, n, d_v/h) = ({h}, {case.n}, {case.d_v // h})"
            if not case.cross
            else f"# so queries become (h, n, d_k/h) = ({h}, {case.n}, {case.d_head}), keys (h, n_kv, d_k/h) = ({h}, "
            f"{case.n_kv}, {case.d_head}) and values (h, n_kv, d_v/h) = ({h}, {case.n_kv}, {case.d_v // h})",
            f"heads = {h}",
            "queries, keys, values = (t.unflatten(-1, (heads, -1)).transpose(0, 1) for t in (queries, keys, values))",
        ]
    elif h > 1:
        lines += [
            f"# Grouped-query attention: {h} query heads share {g} key/value heads, {h // g} query heads each",
            f"heads, kv_heads = {h}, {g}",
            "queries = queries.unflatten(-1, (heads, -1)).transpose(0, 1)  # (h, n, d_k/h)",
            "keys, values = (t.unflatten(-1, (kv_heads, -1)).transpose(0, 1) for t in (keys, values))  # (g, n, d/g)",
            "# query head i reads key/value head i // (h/g): repeat each key/value head for its query heads",
            "keys, values = (t.repeat_interleave(heads // kv_heads, dim=0) for t in (keys, values))  # (h, n, d/g)",
        ]
    return [
        *lines, f'print("keys{rotated}:\\n", keys)', f'print("queries{rotated}:\\n", queries)',
        'print("values:\\n", values)',
    ]  # fmt: skip


def _latent_lines(case: Case) -> list[str]:
    """Step 3's latent, where the case has multi-head latent attention: c = x W_DKV, and DeepSeek's RMSNorm of its
    first len(γ) columns (the columns after them, the decoupled rotary key, pass as they are)."""
    o = case.options
    if o.w_latent is None:
        return []
    lines = [
        "# Multi-head latent attention (DeepSeek V2/V3): keys and values are made from a latent of d_c numbers a",
        f"# token, c = {'x_kv' if case.cross else 'x'} W_DKV, all that the KV cache keeps; W_UK and W_UV (w_key, "
        "w_value) make them from it",
        f"latent = {'x_kv' if case.cross else 'x'} @ w_latent  # (n{'_kv' * case.cross}, d_c) = ({case.n_kv}, "
        f"{case.d_c})",
    ]
    if o.latent_norm is None:
        return [*lines, 'print("latent:\\n", latent)', ""]
    d, rest = len(o.latent_norm), case.d_c - len(o.latent_norm)
    passes = f"; its other {rest} columns (the rotary key) pass as they are" if rest else ""
    return [
        *lines,
        f"# DeepSeek's RMSNorm of the latent's first {d} columns: each token's divided by their root mean square",
        f"# √(mean(c²) + ε), then each column times γ{passes}",
        f"gamma_c = torch.tensor({list(o.latent_norm)!r}, dtype=torch.{o.dtype})  # ({d},): γ, a column each",
        f"latent_eps = {o.norm_eps!r}",
        "latent_unnormed = latent  # before its norm, which the check's tolerance reads",
        f"part = latent[:, :{d}]  # (n, {d}): the columns the norm covers",
        "part = part * torch.rsqrt(part.pow(2).mean(-1, keepdim=True) + latent_eps) * gamma_c",
        f"latent = torch.cat((part, latent[:, {d}:]), dim=-1)  # (n, d_c)",
        'print("latent:\\n", latent)',
        "",
    ]


def _norm(case: Case) -> list[str]:
    what = ["# Qwen3's q/k norm: each head's query (and key) of a token divided by its root mean square"]
    if case.options.norm_rest is not None:  # OLMo 2's head cut from its layer
        what = ["# OLMo 2's q/k norm over the width, for heads cut from their layer: a token's query (and key) divided",
                "# by the root mean square of the layer's whole row, the other heads' share given"]  # fmt: skip
    elif width_norm(case):
        what = ["# OLMo 2's q/k norm over the width: a token's query (and key) of every head divided by one root",
                "# mean square, as the model norms the whole projection before splitting it into heads"]  # fmt: skip
    return [
        *what,
        "# √(mean(q²) + ε), then each dim times the model's weight γ for it (γ_Q for queries, γ_K for keys)",
        *norm_lines(case),
        "queries_unnormed, keys_unnormed = queries, keys  # step 3's, which the check's tolerance reads",
        "queries, keys = rms_norm(queries, gamma_q, rest_q), rms_norm(keys, gamma_k, rest_k)",
        'print("queries after the norm:\\n", queries)',
        'print("keys after the norm:\\n", keys)',
    ]


def width_norm(case: Case) -> bool:
    """The case norms a token's queries (keys) of every head at once (OLMo 2's), not each head's alone."""
    return case.options.norm_width and case.options.heads > 1


# The norm over the width in a script: γ (one number per dim of every head) shaped (h, 1, d) beside the rows t
# (h, n, d), and the mean over a token's numbers of every head (axes 0 and -1)
WIDTH_GAMMA = [
    "    gamma = gamma.view(-1, 1, t.shape[-1])  # (g, 1, d): each head's block of the width",
    "    gamma = gamma.repeat_interleave(len(t) // len(gamma), dim=0)  # (h, 1, d): beside the query heads reading it",
]


def norm_axes_code(case: Case) -> str:
    return "(0, -1)" if width_norm(case) else "-1"


def norm_lines(case: Case) -> list[str]:
    """The q/k norm's weights, ε and function, in the case's dtype (the forward and decoding scripts' own)."""
    o, width = case.options, width_norm(case)
    shape = "(d_k,): γ_Q, a dim of every head each" if width else "(d,): γ_Q, a dim each"
    return [
        f"gamma_q = torch.tensor({list(o.q_norm)!r}, dtype=torch.{o.dtype})  # {shape}",
        f"gamma_k = torch.tensor({list(o.k_norm)!r}, dtype=torch.{o.dtype})  # γ_K",
        f"norm_eps = {o.norm_eps!r}",
        *rest_lines(case),
        "",
        "",
        "def rms_norm(t, gamma, rest=None):",
        *rms_norm_lines(norm_axes_code(case), width),
        "",
        "",
    ]


def rms_norm_lines(axes: str, width: bool) -> list[str]:
    """The body of a script's q/k norm of rows t with weights gamma and the other heads' share rest (or None)."""
    return [
        "    own = gamma.numel()  # the numbers of a token's sum of squares that this case holds",
        *(WIDTH_GAMMA if width else []),
        f"    mean = t.pow(2).mean({axes}, keepdim=True)",
        "    if rest is not None:  # a head cut from its layer: the other heads' sums join, over the layer's width",
        "        mean = (mean * own + rest[0].reshape(-1, 1)) / rest[1]",
        "    return t * torch.rsqrt(mean + norm_eps) * gamma",
    ]


def rest_lines(case: Case) -> list[str]:
    """norm_rest as the script's rest_q and rest_k: (each token's sum of squares in the layer's other heads, the
    layer's width), or None."""
    o = case.options
    if o.norm_rest is None:
        return ["rest_q = rest_k = None  # the case holds every head the norm runs over"]
    r = o.norm_rest
    return [
        "# A head cut from its layer: each token's sum of squares of its query (key) numbers in the layer's other",
        "# heads, before the norm, and the layer's whole width, which the mean divides by",
        f"rest_q = (torch.tensor({list(r.q)!r}, dtype=torch.{o.dtype}), {r.q_width})",
        f"rest_k = (torch.tensor({list(r.k)!r}, dtype=torch.{o.dtype}), {r.k_width})",
    ]


def _rope(case: Case) -> list[str]:
    o = case.options
    d, d_rot = case.d_head, case.d_rot
    positions = "torch.arange(len(x))" if o.positions is None else f"torch.tensor({list(o.positions)})"
    theta = f"{float(o.rope_base)!r} ** (-torch.arange(0, {d_rot}, 2, dtype=torch.float64) / {d_rot})  # (d/2,)"
    if o.rope_frequencies is not None:  # a model's scaled RoPE (Llama 3's, linear, YaRN): its own θ_p
        theta = f"torch.tensor({list(o.rope_frequencies)!r}, dtype=torch.float64)  # (d/2,): the model's, scaled"
    lines = [
        "# RoPE: pair p of a query or key (its dims 2p and 2p+1) is turned by the angle t·θ_p, t the token's",
        f"# position and θ_p = base^(−2p/d), d = {d} per head: a score then depends on t_i − t_j alone.",
    ]
    turned, rest = "", []
    if d_rot < d:  # partial rotary: the first d_rot dims of a head turned, the others passed on as they are
        lines = [
            f"# RoPE, partial (GPT-NeoX, Pythia, Phi): pair p of each head's first d_rot = {d_rot} of its {d} dims is",
            "# turned by the angle t·θ_p, t the token's position and θ_p = base^(−2p/d_rot); the other "
            f"{d - d_rot} dims are",
            "# not turned: a score's part from them matches by content alone, wherever the tokens are.",
            f"d_rot = {d_rot}",
        ]
        theta = theta.replace("(d/2,)", "(d_rot/2,)")
        turned, rest = "turned = ", ["    return torch.cat((turned, t[..., d_rot:]), dim=-1)  # the rest unturned"]
    pairs = "0::2], t[..., 1::2]" if d_rot == d else "0:d_rot:2], t[..., 1:d_rot:2]"
    return [
        *lines,
        f"positions = {positions}  # (n,)",
        f"theta = {theta}",
        "angles = positions.double()[:, None] * theta  # (n, d/2)",
        f"cos, sin = angles.cos().to(torch.{o.dtype}), angles.sin().to(torch.{o.dtype})",
        "",
        "def rope(t):",
        f"    even, odd = t[..., {pairs}  # (h?, n, d/2): the pairs' first and second numbers",
        f"    {turned or 'return '}torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)",
        *rest,
        "",
        "",
        "queries, keys = rope(queries), rope(keys)",
        'print("queries after RoPE:\\n", queries)',
        'print("keys after RoPE:\\n", keys)',
    ]


def _scores(case: Case) -> list[str]:
    transpose, per_head = (
        (".mT", "(h, n_q, n_k), one matrix per head") if case.options.heads > 1 else (".T", "(n_q, n_k)")
    )
    lines = [f"scores = queries @ keys{transpose}  # {per_head}: row i is query i dotted with every key"]
    made = {"bias": _bias_lines, "mask": _mask_lines}  # what an option's line reads, defined right above it
    for option, code, why in _score_options(case, "scores", _seen(case), "position_bias"):
        lines += [*made.get(option, lambda case: [])(case), f"{code}  # {why}"]
    return [*lines, 'print("scores:\\n", scores)']


def _softmax(case: Case) -> list[str]:
    o, blocked = case.options, _fully_masked(case)
    nan_to_num = ".nan_to_num(nan=0.0)" if blocked else ""
    lines = ["from torch.nn.functional import softmax", "", f"weights = softmax(scores, dim=-1){nan_to_num}"]
    if o.sinks is not None:  # the sink's column keeps every row's softmax finite: no NaN to replace
        lines[-1:] = _sink_lines(case)
    elif blocked:
        lines[-1] += f"  # fully masked rows ({', '.join(map(str, blocked))}) are NaN: 0, as fused attention gives"
    else:
        lines[-1] += "  # each row is positive and sums to 1"
    lines.append('print("weights:\\n", weights)')
    if o.weights_override is not None:
        exact = ["weights_exact = weights  # the exact softmax, which PyTorch's attention is checked against"]
        exact *= checked_by_pytorch(case)
        lines += [
            "",
            "# For readability, approximate the above as follows: the case's weights override (the article's rounded",
            "# softmax) replaces the exact weights in steps 6-8, so the outputs are exact only with this matrix",
            *exact,
            *literal("weights", o.weights_override),
            f"weights = torch.tensor(weights, dtype=torch.{o.dtype})",
        ]
    return lines


def _sink_lines(case: Case) -> list[str]:
    """gpt-oss's softmax: each head's sink logit as one more column of the scores, dropped after the softmax."""
    o = case.options
    column = "sinks[:, None, None]" if o.heads > 1 else "sinks"
    return [
        f"sinks = torch.tensor({list(o.sinks)!r}, dtype=torch.{o.dtype})  # (h,): s_h, each head's sink logit",
        "# gpt-oss: e^s_h joins each row's denominator, A_ij = e^S_ij / (e^s_h + Σ_k e^S_ik): a softmax over the row",
        "# and the sink, as one more key with no value; the sink's own share is dropped, so a row sums to less than 1",
        "",
        "",
        "def softmax_with_sink(scores):",
        f"    sink = {column}.expand(*scores.shape[:-1], 1)  # (h?, n_q, 1): the head's s_h beside each row",
        "    both = softmax(torch.cat((scores, sink), dim=-1), dim=-1)  # (h?, n_q, n_k + 1)",
        "    return both[..., :-1], both[..., -1:]  # the weights, and the weight the sink took",
        "",
        "",
        "weights, weights_sink = softmax_with_sink(scores)  # a fully masked row: all its weight on the sink, 0 here",
        'print("the sink\'s weight in each row:\\n", weights_sink)',
    ]


def _weighted(case: Case) -> list[str]:
    if case.options.heads > 1:
        product = "values[..., :, None, :] * weights.mT[..., :, :, None]  # (h, n_k, 1, d_v/h) * (h, n_k, n_q, 1)"
    else:
        product = "values[:, None] * weights.T[:, :, None]  # (n_k, 1, d_v) * (n_k, n_q, 1) -> (n_k, n_q, d_v)"
    return [f"weighted = {product}", 'print("weighted:\\n", weighted)']


def _outputs(case: Case) -> list[str]:
    o = case.options
    if o.heads > 1:
        lines = [
            "head_outputs = weighted.sum(dim=-3)  # (h, n_q, d_v/h): summed over the keys",
            "outputs = head_outputs.transpose(0, 1).flatten(1)  # (n_q, d_v): the heads side by side",
        ]
    else:
        lines = ["outputs = weighted.sum(dim=0)  # (n_q, d_v): summed over the keys, one row per query"]
    if o.w_out is not None:
        lines.append(f"outputs = outputs @ w_out  # (n_q, d_out) = ({case.n}, {len(o.w_out[0])})")
    return lines


def _repeat(case: Case) -> list[str]:
    return [
        "# Steps 4-7 above ran for all queries at once; the article repeats them for one input at a time,",
        "# which gives the same rows. This loop does that and reports the largest difference.",
        *_repeat_lines(case),
        "",
        'print("outputs:\\n", outputs)',
        "print(outputs.tolist())  # one line a program can parse",
    ]


BLOCKS = {
    "inputs": _inputs, "weights": _weights, "qkv": _qkv, NORM: _norm, ROPE: _rope, "scores": _scores,
    "softmax": _softmax, "weighted": _weighted, "outputs": _outputs, "repeat": _repeat,
}  # fmt: skip


def _score_options(case: Case, scores: str, seen: str, bias: str) -> list[tuple[str, str, str]]:
    """Step 4's lines after the dot products, in the core's order (scale, temperature, ALiBi's or T5's bias, softcap,
    the mask and the window last): (option, code, why); `seen`: which keys a query may see, `bias`: the bias's name,
    for these rows."""
    o, out = case.options, []
    if o.scale == "sqrt_dk":
        d = case.d_head
        out.append(("scale", f"{scores} = {scores} * (1 / math.sqrt({d}))",
                    f"scaled dot product: × 1/√d_k, d_k = {d} per head"))  # fmt: skip
    elif o.scale != "none":
        out.append(("scale", f"{scores} = {scores} * {float(o.scale)!r}", "the case's scale factor"))
    if o.temperature != 1:
        out.append(("temperature", f"{scores} = {scores} / {float(o.temperature)!r}",
                    "temperature: < 1 sharpens, > 1 flattens"))  # fmt: skip
    if o.biased:
        why = "ALiBi: the further back a key, the lower its score" if o.relative_bias is None else (
            "T5: the head's learned number for how far the key is")  # fmt: skip
        out.append(("bias", f"{scores} = {scores} + {bias}", why))
    if o.softcap is not None:
        cap = repr(float(o.softcap))
        out.append(("softcap", f"{scores} = {cap} * torch.tanh({scores} / {cap})",
                    f"Gemma 2's softcap: each score squashed into (−{cap}, {cap}), the order kept"))  # fmt: skip
    if o.mask is not None or o.window is not None:
        masked = f'{scores} = {scores}.masked_fill({seen} == 0, float("-inf"))'
        out.append(("mask", masked, "a blocked key gets weight 0"))
    return out


def _seen(case: Case) -> str:
    """The script's name for which keys each query sees: the case's mask, the window, or both."""
    o = case.options
    return "mask" if o.window is None else "in_window" if o.mask is None else "seen"


def _bias_lines(case: Case) -> list[str]:
    """Step 4's bias for where each key is (h?, n, n): ALiBi's − m_h (i − j), each head's slope times how far back
    the key is; T5's b_h[bucket(j − i)], each head's learned number for the distance's bucket; or both, summed."""
    o = case.options
    lines = ["place = torch.arange(len(x))  # each token's place i: its index"]
    if o.alibi is not None:
        per_head = ("-slopes[:, None, None] * distance  # (h, n_q, n_k)" if o.heads > 1
                    else "-slopes[0] * distance  # (n_q, n_k)")  # fmt: skip
        lines += [
            "# ALiBi (BLOOM, MPT): no position embedding; head h subtracts m_h times the distance i − j from a score",
            f"slopes = torch.tensor({list(o.alibi)!r}, dtype=torch.{o.dtype})  # (h,): m_h, a slope per head",
            f"distance = (place[:, None] - place[None, :]).to(torch.{o.dtype})  # (n_q, n_k): i − j",
            f"position_bias = {per_head}",
        ]
    if o.relative_bias is not None:
        looked_up = "relative_bias[:, buckets]" if o.heads > 1 else "relative_bias[0][buckets]"
        plus = "position_bias + " if o.alibi is not None else ""
        lines += [*relative_lines(case), "buckets = bucket(place[None, :] - place[:, None])  # (n_q, n_k): j − i's",
                  f"position_bias = {plus}{looked_up}  # (h?, n_q, n_k): t_h[bucket(j − i)]"]  # fmt: skip
    return lines


def relative_lines(case: Case) -> list[str]:
    """T5's table `relative_bias` (h, buckets) and `bucket`, the bucket of each distance j − i (whole numbers), as
    transformers' T5Attention computes it."""
    o = case.options
    both = o.relative_bidirectional
    return [
        "import math",
        "",
        "# T5: no position embedding; each head adds a learned number for the distance j − i's bucket: one bucket for",
        "# each near distance, then logarithmically wider ones up to max_distance (past it, the last)"
        + (", and the second half of the buckets for keys ahead" if both else " (a decoder's: keys behind alone)"),
        f"relative_bias = torch.tensor({[list(row) for row in o.relative_bias]!r}, dtype=torch.{o.dtype})"
        "  # (h, buckets): t_h",
        "",
        "",
        f"def bucket(distance, buckets={len(o.relative_bias[0])}, max_distance={o.relative_max_distance}):",
        "    ahead = 0",
        *(["    buckets //= 2", "    ahead = (distance > 0).long() * buckets  # keys ahead: the second half",
           "    distance = distance.abs()"] if both else ["    distance = (-distance).clamp(min=0)  # keys behind"]),
        "    exact = buckets // 2  # distances below it: a bucket each",
        "    spread = torch.log(distance.float() / exact) / math.log(max_distance / exact) * (buckets - exact)",
        "    far = (exact + spread.long()).clamp(max=buckets - 1)  # logarithmic, the last past max_distance",
        "    return ahead + torch.where(distance < exact, distance, far)",
        "",
        "",
    ]  # fmt: skip


def _mask_lines(case: Case) -> list[str]:
    """The mask as a tensor: 1 = the query (row) may attend to the key (column), 0 = it may not; and the window."""
    o = case.options
    if o.mask == "causal":
        lines = ["n = len(x)", "mask = torch.ones(n, n).tril()  # causal: query i may attend to keys 1..i only"]
    elif o.mask is not None:
        lines = [
            "# The case's mask: row i says which keys query i may attend to (1) or not (0)",
            *literal("mask", o.mask),
            "mask = torch.tensor(mask)",
        ]
    else:
        lines = []
    if o.window is None:
        return lines
    w = o.window
    return [
        *lines,
        *(["n = len(x)"] * (o.mask != "causal")),
        f"# Sliding window (Mistral, Gemma 2/3, gpt-oss): query i sees keys i − {w} < j ≤ i, itself and the {w - 1} "
        "before it",
        f"window = {w}",
        "in_window = torch.ones(n, n).tril().triu(1 - window)  # (n_q, n_k): 1 inside query i's window",
        *(["seen = mask * in_window  # a key the mask allows, inside the window"] * (o.mask is not None)),
    ]


def _repeat_lines(case: Case) -> list[str]:
    """Step 8: steps 4-7 again for query i alone, compared with row i of the matrix form."""
    o = case.options
    if o.weights_override is not None:
        body = ["weights_i = weights[i : i + 1]  # the override's row i, as in step 5"]
    else:
        body = ["scores_i = queries[..., i : i + 1, :] @ keys.mT  # (h?, 1, n_k): query i alone"]
        rows = f"{_seen(case)}[i : i + 1]", "position_bias[..., i : i + 1, :]"
        body += [code for _, code, _ in _score_options(case, "scores_i", *rows)]
        nan_to_num = ".nan_to_num(nan=0.0)" if _fully_masked(case) else ""
        softmax = "softmax_with_sink(scores_i)[0]" if o.sinks is not None else f"softmax(scores_i, dim=-1){nan_to_num}"
        body.append(f"weights_i = {softmax}")
    body.append("outputs_i = (values[..., :, None, :] * weights_i.mT[..., :, :, None]).sum(dim=-3)")
    if o.heads > 1:
        body.append("outputs_i = outputs_i.transpose(0, 1).flatten(1)")
    if o.w_out is not None:
        body.append("outputs_i = outputs_i @ w_out")
    body.append("by_query.append(outputs_i)")
    return [
        "by_query = []",
        "for i in range(len(x)):",
        *(f"    {line}" for line in body),
        "outputs_by_query = torch.cat(by_query)  # (n, d_out): the rows, one query at a time",
        "difference = (outputs_by_query - outputs).abs().max().item()",
        'print("step 8, one query at a time: largest difference from the matrix form", difference)',
    ]


def _fully_masked(case: Case) -> list[int]:
    """The 1-based rows whose every key is masked (by the mask, or outside the window): their softmax is NaN, and
    the core makes it 0 (with sinks, the sink takes the whole row instead)."""
    o = case.options
    if not isinstance(o.mask, tuple):  # a causal mask and a window always leave a query its own key
        return []
    window = o.window or len(o.mask)
    return [i + 1 for i, row in enumerate(o.mask) if not any(row[max(0, i - window + 1) : i + 1] if o.window else row)]


def literal(name: str, matrix: Matrix, labels: tuple[str, ...] | None = None) -> list[str]:
    """`name = [...]`, one row per line, numbers as repr(float) (an exact round trip), labels as trailing comments."""
    rows = []
    for i, row in enumerate(matrix):
        text = f"    [{', '.join(repr(float(v)) for v in row)}],"
        rows.append(text + (f"  # {_comment_text(labels[i])}" if labels else ""))
    return [f"{name} = [", *rows, "]"]


def _comment_text(text: str) -> str:
    """User text made safe inside a `#` comment: only printable characters, so nothing can end the line."""
    # A newline (or \r, \x0c, \u2028, a NUL or a lone surrogate) could end the comment or break the file; escaped,
    # it stays visible and harmless. Everything else printable is inert after `#`, quotes and backslashes included.
    safe = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))
    return safe if len(safe) <= MAX_LABEL_CHARS else safe[: MAX_LABEL_CHARS - 1] + "…"
