"""Decoding as a runnable script, torch alone: the case's numbers decoded token by token with a KV cache, asserted
equal to the whole causal computation of the same numbers (with cross-attention: a target token at a time against
the source's keys and values, cached once, asserted equal to the whole computation)."""

from __future__ import annotations

from ..base.case import Case
from ..forward.compute import scale_factor
from ..forward.script import literal, relative_lines, rest_lines, rms_norm_lines, rule_lines, tolerance_call
from .compute import decodable

SCRIPT_ROPE = [  # the exported script's RoPE: the core's rope(), written out
    "def rope(m, t):",
    '    """Pair p of each row\'s first D_ROT dims (2p, 2p+1) turned by the angle t·θ_p, t the positions (n,)."""',
    "    if ROPE_BASE is None:",
    "        return m",
    "    d = D_ROT  # partial rotary: the first D_ROT dims of a head turned, the rest passed on",
    "    theta = ROPE_BASE ** (-torch.arange(0, d, 2, dtype=torch.float64) / d) if THETA is None else THETA",
    "    angles = t.double()[:, None] * theta",
    "    cos, sin = angles.cos().to(m.dtype), angles.sin().to(m.dtype)",
    "    even, odd = m[..., 0:d:2], m[..., 1:d:2]",
    "    turned = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)",
    "    return torch.cat((turned, m[..., d:]), dim=-1)",
    "",
    "",
]


def script_norm(case: Case) -> list[str]:
    """The exported script's q/k norm: the core's rms_norm(), written out (over the width: OLMo 2's, with the
    other heads' share of a head cut from its layer for the rows' tokens)."""
    return [
        "def norm(t, gamma, rest=None):",
        '    """The q/k norm: each row (a token\'s rows of every head with norm_width) over its root mean square,',
        '    times γ; rest: the layer\'s other heads\' share for its tokens (rows_of); without one (gamma None), t."""',
        "    if gamma is None:",
        "        return t",
        *rms_norm_lines("(0, -1)" if case.options.norm_width else "-1", case.options.norm_width),
        "",
        "",
        "def rows_of(rest, first, end):",
        '    """norm_rest\'s share for tokens first … end − 1 (None: the case holds every head)."""',
        "    return None if rest is None else (rest[0][first:end], rest[1])",
        "",
        "",
    ]


def decoding_script(case: Case) -> str:
    """Python source, torch alone: the case's numbers decoded token by token with a KV cache, asserted equal to the
    whole causal computation of the same numbers (every query at once under a causal mask and any window; with
    cross-attention every target token at once against the source, under the case's mask where it has one)."""
    case = decodable(case)
    lines = [
        *_docstring(case),
        "",
        "import torch",
        "",
        *_constants(case),
        "",
        "",
        *SCRIPT_ROPE,
        *script_norm(case),
        *_latent_function(case),
        *_score_functions(case),
        *_whole_heading(case),
        "n = len(x)",
        *_latent_whole(case),
        "queries_unnormed = (x @ w_query).unflatten(-1, (H, -1)).transpose(0, 1)  # (H, n, d)",
        f"keys_unnormed = ({_read(case)} @ w_key).unflatten(-1, (G, -1)).transpose(0, 1).repeat_interleave(H // G, 0)",
        "queries = rope(norm(queries_unnormed, gamma_q, rest_q), POSITIONS)",
        "keys = rope(norm(keys_unnormed, gamma_k, rest_k), POSITIONS)",
        f"values = ({_read(case)} @ w_value).unflatten(-1, (G, -1)).transpose(0, 1).repeat_interleave(H // G, 0)",
        *_allowed_lines(case),
        f"scores = options(queries @ keys.mT * MULTIPLIER, {_distance(case)}).masked_fill(~allowed, -torch.inf)",
        f"weights = softmax(scores){'.nan_to_num(0.0)' if case.cross else ''}  # (H, n, {_keys(case)})",
        "causal = (weights @ values).transpose(0, 1).flatten(1)  # (n, d_v): the heads side by side",
        "causal = causal if w_out is None else causal @ w_out",
        "",
        *_loop(case),
        "decoded = torch.cat(outputs)",
        *_check(case),
        f'print("decoding with the cache equals the {"whole" if case.cross else "causal"} computation; largest '
        'difference:",',
        "      (decoded - causal).abs().max().item())",
    ]
    return "\n".join(lines) + "\n"


def _docstring(case: Case) -> list[str]:
    """The script's first lines: what it decodes and checks."""
    if case.cross:
        return [
            '"""Cross-attention decoded with a KV cache, as an encoder-decoder translates: the source\'s keys and',
            "values made once from x_kv and cached, then one target token at a time against all of them, checked",
            'against the whole computation (generated; needs torch)."""',
        ]
    return [
        '"""Decoding with a KV cache, one token at a time, checked against the whole causal computation (generated;',
        'needs torch)."""',
    ]


def _whole_heading(case: Case) -> list[str]:
    """The whole computation's comment: causal, or cross-attention's (every target token against every source key)."""
    if case.cross:
        return ["# The whole computation: every target token's query at once against every source key (no causal mask:",
                "# the source exists before the target), the case's mask where it has one"]  # fmt: skip
    return ["# The whole causal computation: every query at once, a key after its query (or outside the window) masked"]


def _allowed_lines(case: Case) -> list[str]:
    """Which keys each query sees in the whole computation: causal (and the window); cross-attention's every source
    key, or its mask's."""
    if not case.cross:
        return ["i = torch.arange(n)", "allowed = i[:, None] >= i[None, :]  # causal: query i sees keys j ≤ i",
                *_window_line(case)]  # fmt: skip
    if isinstance(case.options.mask, tuple):
        return ["allowed = MASK != 0  # (n, n_kv): target token i may see source token j where the mask has a 1"]
    return ["allowed = torch.ones(n, len(x_kv), dtype=torch.bool)  # (n, n_kv): every target token sees every source"]


def _distance(case: Case) -> str:
    """The score options' distance argument: i − j in one sentence; None across two (cross-attention has none)."""
    return "None" if case.cross else "i[:, None] - i[None, :]"


def _keys(case: Case) -> str:
    return "n_kv" if case.cross else "n"


def _window_line(case: Case) -> list[str]:
    """The whole computation's window, where the case has one: keys i − WINDOW < j."""
    return [] if case.options.window is None else ["allowed &= i[:, None] - i[None, :] < WINDOW  # and in the window"]


def _read(case: Case) -> str:
    """What the script's keys and values are made from: x (cross-attention's x_kv), or multi-head latent
    attention's latent (of x or x_kv)."""
    return ("x_kv" if case.cross else "x") if case.options.w_latent is None else "latent"


def _latent_function(case: Case) -> list[str]:
    """Multi-head latent attention's latent as a function (the core's latent_of), where the case has one."""
    if case.options.w_latent is None:
        return []
    return [
        "def latent_of(c):",
        '    """DeepSeek\'s latent c = x W_DKV after its RMSNorm of the first len(γ) columns (the decoupled rotary',
        '    key\'s columns after them pass as they are); without the norm (gamma_c None), c as it is."""',
        "    if gamma_c is None:",
        "        return c",
        "    d = len(gamma_c)",
        "    normed = c[..., :d] * torch.rsqrt(c[..., :d].pow(2).mean(-1, keepdim=True) + latent_eps) * gamma_c",
        "    return torch.cat((normed, c[..., d:]), dim=-1)",
        "",
        "",
    ]


def _latent_whole(case: Case) -> list[str]:
    """The whole computation's latent of every token (and before its norm, which the check's tolerance reads)."""
    if case.options.w_latent is None:
        return []
    return [
        f"latent_unnormed = {'x_kv' if case.cross else 'x'} @ w_latent  # multi-head latent attention's latent, d_c "
        "numbers a token",
        "latent = latent_of(latent_unnormed)  # keys and values are made from it",
    ]


def _loop(case: Case) -> list[str]:
    """The decoding loop: token t's query, key and value alone, the cache appended to (and under a window, its
    oldest row evicted), one row of scores against it. With a latent the cache holds each token's latent, and the
    keys and values are made from it (_latent_loop)."""
    if case.cross:
        return _cross_loop(case)
    if case.options.w_latent is not None:
        return _latent_loop(case)
    evict = [
        "    if len(k_cache) > WINDOW:  # the window is full: the oldest key and value are evicted",
        "        k_cache.pop(0)",
        "        v_cache.pop(0)",
        "    assert len(k_cache) <= WINDOW  # the cache never holds more than the window",
    ]
    return [
        "# Decoding: token t's query, key and value alone; k_t and v_t appended to the cache",
        "k_cache, v_cache, outputs = [], [], []",
        "for t in range(n):",
        "    x_t = x[t : t + 1]  # (1, d_in)",
        "    q_t = norm((x_t @ w_query).view(H, 1, -1), gamma_q, rows_of(rest_q, t, t + 1))  # (H, 1, d)",
        "    k_t = norm((x_t @ w_key).view(G, 1, -1), gamma_k, rows_of(rest_k, t, t + 1))  # normed once, here",
        "    q_t, k_t = rope(q_t, POSITIONS[t : t + 1]), rope(k_t, POSITIONS[t : t + 1])  # turned once, here",
        "    v_t = (x_t @ w_value).view(G, 1, -1)",
        "    k_cache.append(k_t)",
        "    v_cache.append(v_t)",
        *(evict if case.options.window is not None else []),
        "    first = t + 1 - len(k_cache)  # the oldest token the cache holds",
        "    keys_t, values_t = torch.cat(k_cache, dim=1), torch.cat(v_cache, dim=1)  # (G, cached, d): the cache",
        *ATTEND_T,
    ]


def _cross_loop(case: Case) -> list[str]:
    """Cross-attention's decoding loop: the source's keys and values (or latents) made once, before the first target
    token, and cached; each target token's query alone, scored against all of them (its mask's row t, where it has
    one). The cache is never appended to or evicted from."""
    if case.options.w_latent is None:
        made = [
            "k_cache = norm((x_kv @ w_key).unflatten(-1, (G, -1)).transpose(0, 1), gamma_k, rest_k)  # made once",
            "v_cache = (x_kv @ w_value).unflatten(-1, (G, -1)).transpose(0, 1)  # (G, n_kv, d_v/G)",
        ]
        read = ["    keys_t, values_t = k_cache, v_cache  # the whole source, the same at every step"]
    else:
        made = ["latent_cache = latent_of(x_kv @ w_latent)  # (n_kv, d_c): the source's latents, made once"]
        read = [
            "    keys_t = (latent_cache @ w_key).unflatten(-1, (G, -1)).transpose(0, 1)  # (G, n_kv, d): C W_UK",
            "    values_t = (latent_cache @ w_value).unflatten(-1, (G, -1)).transpose(0, 1)  # (G, n_kv, d_v/G)",
            "    keys_t = norm(keys_t, gamma_k, rest_k)",
        ]
    return [
        "# Decoding: the source's keys and values made once from x_kv (an encoder-decoder's: from the encoder's",
        "# output) and cached; then target token t's query alone, scored against every source key",
        *made,
        "outputs = []",
        "for t in range(n):",
        "    x_t = x[t : t + 1]  # (1, d_in)",
        "    q_t = norm((x_t @ w_query).view(H, 1, -1), gamma_q, rows_of(rest_q, t, t + 1))  # (H, 1, d): no RoPE",
        *read,
        "    assert keys_t.shape[1] == len(x_kv)  # the cache holds the source's n_kv keys, never more or fewer",
        "    scores_t = (q_t.view(G, H // G, -1) @ keys_t.mT * MULTIPLIER).view(H, 1, -1)  # (H, 1, n_kv)",
        "    scores_t = options(scores_t, None).masked_fill(~allowed[t : t + 1], -torch.inf)  # the mask's row t",
        "    weights_t = softmax(scores_t).nan_to_num(0.0)  # its alignment over the source (a fully masked row: 0)",
        "    output_t = (weights_t.view(G, H // G, -1) @ values_t).view(H, 1, -1).transpose(0, 1).flatten(1)",
        "    outputs.append(output_t if w_out is None else output_t @ w_out)  # (1, d_out)",
        '    print(f"step {t + 1}: target token {t + 1} against the {len(x_kv)} cached source tokens, output",',
        "          outputs[-1])",
    ]


ATTEND_T = [  # the loop's steps 4-7 for token t's query against keys_t and values_t
    "    scores_t = (q_t.view(G, H // G, -1) @ keys_t.mT * MULTIPLIER).view(H, 1, -1)  # (H, 1, cached)",
    "    scores_t = options(scores_t, (t - torch.arange(first, t + 1))[None])  # (1, cached): each key's t − j",
    "    weights_t = softmax(scores_t)",
    "    output_t = (weights_t.view(G, H // G, -1) @ values_t).view(H, 1, -1).transpose(0, 1).flatten(1)",
    "    outputs.append(output_t if w_out is None else output_t @ w_out)  # (1, d_out)",
    '    print(f"step {t + 1}: tokens {first + 1}…{t + 1} cached ({first} evicted), output", outputs[-1])',
]


def _latent_loop(case: Case) -> list[str]:
    """Multi-head latent attention's decoding loop: token t's latent c_t appended to the cache (d_c numbers a token,
    where keys and values take 2 · G · d_head), and every cached token's key and value made from its latent."""
    evict = [
        "    if len(latent_cache) > WINDOW:  # the window is full: the oldest latent is evicted",
        "        latent_cache.pop(0)",
        "    assert len(latent_cache) <= WINDOW  # the cache never holds more than the window",
    ]
    return [
        f"# Decoding: token t's query and latent alone; c_t ({case.d_c} numbers) appended to the cache, which holds",
        "# latents, not keys and values: each step makes the cached tokens' keys and values from them",
        "latent_cache, outputs = [], []",
        "for t in range(n):",
        "    x_t = x[t : t + 1]  # (1, d_in)",
        "    latent_cache.append(latent_of(x_t @ w_latent))  # c_t (1, d_c): all the cache keeps of token t",
        *(evict if case.options.window is not None else []),
        "    first = t + 1 - len(latent_cache)  # the oldest token the cache holds",
        "    cached = torch.cat(latent_cache)  # (cached, d_c): the cache",
        "    keys_t = (cached @ w_key).unflatten(-1, (G, -1)).transpose(0, 1)  # (G, cached, d): C W_UK",
        "    values_t = (cached @ w_value).unflatten(-1, (G, -1)).transpose(0, 1)  # (G, cached, d_v/G): C W_UV",
        "    q_t = norm((x_t @ w_query).view(H, 1, -1), gamma_q, rows_of(rest_q, t, t + 1))  # (H, 1, d)",
        "    q_t = rope(q_t, POSITIONS[t : t + 1])",
        "    keys_t = norm(keys_t, gamma_k, rows_of(rest_k, first, t + 1))",
        "    keys_t = rope(keys_t, POSITIONS[first : t + 1])  # each at its own token's position",
        *ATTEND_T,
    ]


def _score_functions(case: Case) -> list[str]:
    """Steps 4 and 5's options as two functions the whole computation and the decoding loop both call: ALiBi's
    bias and the cap on the scaled scores, the softmax with any sink in its denominator."""
    o = case.options
    lines = [
        "def options(scores, distance):",
        '    """Step 4 after the scale: ALiBi\'s or T5\'s bias, then Gemma 2\'s cap; distance: i − j."""',
    ]
    if o.alibi is not None:
        lines.append("    scores = scores - SLOPES * distance  # (H, 1, 1) slopes: the further back, the lower")
    if o.relative_bias is not None:
        lines.append("    scores = scores + relative_bias[:, bucket(-distance)]  # T5: the head's t_h[bucket(j − i)]")
    if o.softcap is not None:
        lines.append("    scores = SOFTCAP * torch.tanh(scores / SOFTCAP)  # within ±SOFTCAP, the order kept")
    lines += ["    return scores", "", ""]
    if o.sinks is None:
        return [*lines, "def softmax(scores):", "    return torch.softmax(scores, dim=-1)", "", ""]
    return [
        *lines,
        "def softmax(scores):",
        '    """gpt-oss\'s softmax: e^s_h, the head\'s sink logit, joins each row\'s denominator (sums to < 1)."""',
        "    top = torch.maximum(scores.amax(dim=-1, keepdim=True), SINKS)  # each exponent less the row's largest",
        "    e = (scores - top).exp()",
        "    return e / (e.sum(dim=-1, keepdim=True) + (SINKS - top).exp())",
        "",
        "",
    ]


def _constants(case: Case) -> list[str]:
    """The case's numbers and options as the script's tensors and constants."""
    o, dtype = case.options, f"torch.{case.options.dtype}"
    h, g = o.heads, o.kv_heads or o.heads
    at = list(o.positions) if o.positions is not None else list(range(case.n))
    theta = "None" if o.rope_frequencies is None else f"torch.tensor({list(o.rope_frequencies)!r}, dtype=torch.float64)"
    gamma_q, gamma_k = (
        "None" if w is None else f"torch.tensor({list(w)!r}, dtype={dtype})" for w in (o.q_norm, o.k_norm)
    )
    return [
        *literal("x", case.x, labels=case.tokens),
        *_source_constants(case),
        *literal("w_query", case.w_query),
        *literal("w_key", case.w_key),
        *literal("w_value", case.w_value),
        *(literal("w_out", o.w_out) if o.w_out is not None else ["w_out = None"]),
        f"x, w_query, w_key, w_value = (torch.tensor(m, dtype={dtype}) for m in (x, w_query, w_key, w_value))",
        *_latent_constants(case),
        f"w_out = None if w_out is None else torch.tensor(w_out, dtype={dtype})",
        f"H, G = {h}, {g}  # query heads, and key/value heads (each shared by H // G query heads)",
        f"MULTIPLIER = {scale_factor(case) / o.temperature!r}  # the scale over the temperature",
        f"ROPE_BASE = {o.rope_base!r}  # None: no rotary position embedding",
        f"THETA = {theta}  # each pair's RoPE frequency θ_p; None: base^(−2p/d)",
        f"D_ROT = {case.d_rot}  # the dims of a head RoPE turns (partial rotary: fewer than the head's {case.d_head})",
        *_modern_constants(case),
        f"POSITIONS = torch.tensor({at})",
        f"gamma_q = {gamma_q}  # the q/k norm's weights γ_Q, γ_K (one per dim of a head, or of the width with OLMo 2's"
        " norm over it); None: no norm",
        f"gamma_k = {gamma_k}",
        f"norm_eps = {o.norm_eps!r}",
        *rest_lines(case),
    ]


def _source_constants(case: Case) -> list[str]:
    """Cross-attention's source x_kv (its own labels) and the case's mask (n × n_kv), where it has them."""
    if not case.cross:
        return []
    dtype, mask = f"torch.{case.options.dtype}", case.options.mask
    return [
        "# Cross-attention: the keys and values are made from the source's rows x_kv (an encoder's output)",
        *literal("x_kv", case.x_kv, labels=case.key_tokens),
        f"x_kv = torch.tensor(x_kv, dtype={dtype})  # (n_kv, d_in) = ({case.n_kv}, {case.d_in})",
        *([] if not isinstance(mask, tuple) else [*literal("MASK", mask), "MASK = torch.tensor(MASK)  # (n, n_kv)"]),
    ]


def _latent_constants(case: Case) -> list[str]:
    """Multi-head latent attention's W_DKV and its norm's γ and ε, where the case has a latent (then w_key and
    w_value are W_UK and W_UV, of d_c rows)."""
    o, dtype = case.options, f"torch.{case.options.dtype}"
    if o.w_latent is None:
        return []
    gamma = "None" if o.latent_norm is None else f"torch.tensor({list(o.latent_norm)!r}, dtype={dtype})"
    return [
        "# Multi-head latent attention (DeepSeek V2/V3): keys and values are made from a latent c = x W_DKV of d_c",
        "# numbers a token, all the cache keeps; w_key and w_value are W_UK and W_UV, of d_c rows",
        *literal("w_latent", o.w_latent),
        f"w_latent = torch.tensor(w_latent, dtype={dtype})  # (d_in, d_c) = ({case.d_in}, {case.d_c})",
        f"gamma_c = {gamma}  # the latent's RMSNorm weights γ (its first columns); None: no norm",
        f"latent_eps = {o.norm_eps!r}",
    ]


def _modern_constants(case: Case) -> list[str]:
    """The options of today's models: the window, the cap, ALiBi's slopes and the sinks' logits (one per head)."""
    o, dtype = case.options, f"torch.{case.options.dtype}"
    window = f"WINDOW = {o.window!r}  # sliding window: query i sees keys i − WINDOW < j ≤ i; None: every earlier key"
    lines = [] if case.cross else [window]  # cross-attention has none: a source key is not before or after
    if o.softcap is not None:
        lines.append(f"SOFTCAP = {o.softcap!r}  # Gemma 2: scores → cap · tanh(scores / cap)")
    if o.alibi is not None:
        lines.append(f"SLOPES = torch.tensor({list(o.alibi)!r}, dtype={dtype}).view(-1, 1, 1)  # ALiBi's m_h, per head")
    if o.sinks is not None:
        lines.append(f"SINKS = torch.tensor({list(o.sinks)!r}, dtype={dtype}).view(-1, 1, 1)  # gpt-oss's sinks")
    return lines + ([] if o.relative_bias is None else ["", *relative_lines(case)])


def _check(case: Case) -> list[str]:
    """Output t against row t of the causal (cross-attention's: whole) computation, each number within the one
    rule's tolerance."""
    whole = "whole" if case.cross else "causal"
    return [
        "",
        "",
        *rule_lines(),
        "",
        "",
        f"# Output t is row t of the {whole} computation, each number within float rounding: the same sums, with q, k",
        "# and v made a row at a time",
        tolerance_call(case, projected=True),
        f'assert within(decoded, causal, tolerance), "decoding differs from the {whole} computation past float '
        'rounding"',
    ]
