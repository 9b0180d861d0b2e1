"""A case as a runnable, self-contained PyTorch script in the article's style: steps 1-8 with the case's own numbers."""

from __future__ import annotations

import inspect
import re

from ..base import tolerance as rule
from ..base.case import Case, Matrix
from .compute import scale_factor, step_names
from .steps import LABELS, NORM, ROPE, TITLES

MAX_LABEL_CHARS = 80  # a label in a comment is cut here (labels are user text; the case limits them to 40)
SHOWN_ROWS = 16  # rows of a matrix a page shows in a step's code (the exported script has them all)
SHOWN_COLUMNS = 8  # numbers of a row it shows: a real model's x has 577 a row, its weights' rows 64 or more


def to_script(case: Case) -> str:
    """Python source that reproduces attention.attend(case).outputs with torch alone, step by step like the article."""
    header = [
        '"""Self-attention in eight steps, as in the article, with one case\'s numbers (generated; needs torch)."""',
        "",
        *(["import math", ""] if case.options.scale == "sqrt_dk" else []),
        "import torch",
    ]
    lines = list(header)
    for name, block in blocks(case).items():
        note = {"inputs": " (one row per token)"}.get(name, "")
        lines += ["", f"# Step {LABELS[name]}: {TITLES[name]}{note}", *block]
    return "\n".join([*lines, "", "", *check_lines(case)]) + "\n"


RULE = (rule.rounding, rule.product_error, rule.heads_of, rule.turned_error, rule.normed_error,
        rule.attention_tolerance, rule.within)  # fmt: skip


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


def tolerance_call(case: Case, projected: bool = False) -> str:
    """The call of the inlined rule on the script's own tensors: how far another computation of the outputs may be
    (projected: it makes q, k and v its own way)."""
    o = case.options
    multiplier, turned = scale_factor(case) / o.temperature, o.rope_base is not None
    w_out = "w_out" if o.w_out is not None else "None"
    norm = ", (queries_unnormed, keys_unnormed, gamma_q, gamma_k, norm_eps)" if o.q_norm is not None else ""
    return (f"tolerance = attention_tolerance(x, w_query, w_key, w_value, queries, keys, values, weights, "
            f"{multiplier!r}, {turned}, {w_out}, {projected}{norm})  # (n, d_out)")  # fmt: skip


def check_lines(case: Case) -> list[str]:
    """After step 8: its rows against step 7's, each number within the one rule's tolerance, asserted."""
    return [
        *rule_lines(),
        "",
        "",
        "# The check: step 8's rows equal step 7's, each number within float rounding",
        tolerance_call(case),
        'assert within(outputs_by_query, outputs, tolerance), "step 8 differs from step 7 past float rounding"',
    ]


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
    return [
        *literal("x", case.x, labels=case.tokens),
        f"x = torch.tensor(x, dtype={dtype})  # (n, d_in) = ({case.n}, {case.d_in})",
    ]


def _weights(case: Case) -> list[str]:
    o, dtype = case.options, f"torch.{case.options.dtype}"
    matrices = [("w_key", case.w_key), ("w_query", case.w_query), ("w_value", case.w_value)]
    if o.w_out is not None:
        matrices.append(("w_out", o.w_out))
    lines = [line for name, matrix in matrices for line in literal(name, matrix)] + [""]
    shapes = {"w_key": "d_in, d_k", "w_query": "d_in, d_k", "w_value": "d_in, d_v", "w_out": "d_v, d_out"}
    for name, matrix in matrices:
        why = ": the output projection, applied in step 7" if name == "w_out" else ""
        shape = f"({shapes[name]}) = ({len(matrix)}, {len(matrix[0])})"
        lines.append(f"{name} = torch.tensor({name}, dtype={dtype})  # {shape}{why}")
    return lines


def _qkv(case: Case) -> list[str]:
    o, h = case.options, case.options.heads
    g = o.kv_heads or h
    d_key = case.d_head * g  # w_key's width: fewer columns when query heads share key/value heads
    later = [f"normed in step {LABELS[NORM]}"] * (o.q_norm is not None) + [f"turned by RoPE in step {LABELS[ROPE]}"] * (
        o.rope_base is not None
    )
    rotated = f" ({', then '.join(later)})" if later else ""
    lines = [
        f"keys = x @ w_key  # (n, d_k) = ({case.n}, {d_key})",
        f"queries = x @ w_query  # (n, d_k) = ({case.n}, {case.d_k})",
        f"values = x @ w_value  # (n, d_v) = ({case.n}, {case.d_v})",
    ]
    if h > 1 and g == h:
        lines += [
            "# Split the columns into heads, as nn.MultiheadAttention does: head i takes the i-th block of columns,",
            f"# so queries and keys become (h, n, d_k/h) = ({h}, {case.n}, {case.d_head}) and values "
            f"(h, n, d_v/h) = ({h}, {case.n}, {case.d_v // h})",
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


def _norm(case: Case) -> list[str]:
    return [
        "# Qwen3's q/k norm: each head's query (and key) of a token divided by its root mean square",
        "# √(mean(q²) + ε), then each dim times the model's weight γ for it (γ_Q for queries, γ_K for keys)",
        *norm_lines(case),
        "queries_unnormed, keys_unnormed = queries, keys  # step 3's, which the check's tolerance reads",
        "queries, keys = rms_norm(queries, gamma_q), rms_norm(keys, gamma_k)",
        'print("queries after the norm:\\n", queries)',
        'print("keys after the norm:\\n", keys)',
    ]


def norm_lines(case: Case) -> list[str]:
    """The q/k norm's weights, ε and function, in the case's dtype (the forward and decoding scripts' own)."""
    o = case.options
    return [
        f"gamma_q = torch.tensor({list(o.q_norm)!r}, dtype=torch.{o.dtype})  # (d,): γ_Q, a dim each",
        f"gamma_k = torch.tensor({list(o.k_norm)!r}, dtype=torch.{o.dtype})  # (d,): γ_K",
        f"norm_eps = {o.norm_eps!r}",
        "",
        "",
        "def rms_norm(t, gamma):",
        "    return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + norm_eps) * gamma",
        "",
        "",
    ]


def _rope(case: Case) -> list[str]:
    o = case.options
    d = case.d_head
    positions = "torch.arange(len(x))" if o.positions is None else f"torch.tensor({list(o.positions)})"
    theta = f"{float(o.rope_base)!r} ** (-torch.arange(0, {d}, 2, dtype=torch.float64) / {d})  # (d/2,)"
    if o.rope_frequencies is not None:  # a model's scaled RoPE (Llama 3's, linear, YaRN): its own θ_p
        theta = f"torch.tensor({list(o.rope_frequencies)!r}, dtype=torch.float64)  # (d/2,): the model's, scaled"
    return [
        "# RoPE: pair p of a query or key (its dims 2p and 2p+1) is turned by the angle t·θ_p, t the token's",
        f"# position and θ_p = base^(−2p/d), d = {d} per head: a score then depends on t_i − t_j alone.",
        f"positions = {positions}  # (n,)",
        f"theta = {theta}",
        "angles = positions.double()[:, None] * theta  # (n, d/2)",
        f"cos, sin = angles.cos().to(torch.{o.dtype}), angles.sin().to(torch.{o.dtype})",
        "",
        "def rope(t):",
        "    even, odd = t[..., 0::2], t[..., 1::2]  # (h?, n, d/2): the pairs' first and second numbers",
        "    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)",
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
    options = [f"{code}  # {why}" for code, why in _score_options(case, "scores", "mask")]
    if case.options.mask is not None:  # the masked_fill comes last; the mask is defined right above it
        options[-1:-1] = _mask_lines(case)
    return lines + options + ['print("scores:\\n", scores)']


def _softmax(case: Case) -> list[str]:
    o, blocked = case.options, _fully_masked(case)
    nan_to_num = ".nan_to_num(nan=0.0)" if blocked else ""
    lines = ["from torch.nn.functional import softmax", "", f"weights = softmax(scores, dim=-1){nan_to_num}"]
    if blocked:
        lines[-1] += f"  # fully masked rows ({', '.join(map(str, blocked))}) are NaN: 0, as fused attention gives"
    else:
        lines[-1] += "  # each row is positive and sums to 1"
    lines.append('print("weights:\\n", weights)')
    if o.weights_override is not None:
        lines += [
            "",
            "# For readability, approximate the above as follows: the case's weights override (the article's rounded",
            "# softmax) replaces the exact weights in steps 6-8, so the outputs are exact only with this matrix",
            *literal("weights", o.weights_override),
            f"weights = torch.tensor(weights, dtype=torch.{o.dtype})",
        ]
    return lines


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


def _score_options(case: Case, scores: str, mask: str) -> list[tuple[str, str]]:
    """Step 4's lines after the dot products, in the core's order (scale, temperature, mask last): (code, why)."""
    o, out = case.options, []
    if o.scale == "sqrt_dk":
        d = case.d_head
        out.append((f"{scores} = {scores} * (1 / math.sqrt({d}))", f"scaled dot product: × 1/√d_k, d_k = {d} per head"))
    elif o.scale != "none":
        out.append((f"{scores} = {scores} * {float(o.scale)!r}", "the case's scale factor"))
    if o.temperature != 1:
        out.append((f"{scores} = {scores} / {float(o.temperature)!r}", "temperature: < 1 sharpens, > 1 flattens"))
    if o.mask is not None:
        out.append((f'{scores} = {scores}.masked_fill({mask} == 0, float("-inf"))', "a blocked key gets weight 0"))
    return out


def _mask_lines(case: Case) -> list[str]:
    """The mask as a tensor: 1 = the query (row) may attend to the key (column), 0 = it may not."""
    if case.options.mask == "causal":
        return ["n = len(x)", "mask = torch.ones(n, n).tril()  # causal: query i may attend to keys 1..i only"]
    return [
        "# The case's mask: row i says which keys query i may attend to (1) or not (0)",
        *literal("mask", case.options.mask),
        "mask = torch.tensor(mask)",
    ]


def _repeat_lines(case: Case) -> list[str]:
    """Step 8: steps 4-7 again for query i alone, compared with row i of the matrix form."""
    o = case.options
    if o.weights_override is not None:
        body = ["weights_i = weights[i : i + 1]  # the override's row i, as in step 5"]
    else:
        body = ["scores_i = queries[..., i : i + 1, :] @ keys.mT  # (h?, 1, n_k): query i alone"]
        body += [code for code, _ in _score_options(case, "scores_i", "mask[i : i + 1]")]
        nan_to_num = ".nan_to_num(nan=0.0)" if _fully_masked(case) else ""
        body.append(f"weights_i = softmax(scores_i, dim=-1){nan_to_num}")
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
    """The 1-based rows whose every key is masked: their softmax is NaN, and the core makes it 0."""
    mask = case.options.mask
    if mask is None or mask == "causal":  # causal always leaves a query its own key
        return []
    return [i + 1 for i, row in enumerate(mask) if not any(row)]


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
