"""PyTorch's own attention as the oracle: scaled_dot_product_attention, nn.MultiheadAttention where it fits, and
FlexAttention (its score_mod, mask_mod and log-sum-exp) for the attention of today's models."""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

from ..base.case import MODERN, Case
from ..base.record import Check, compare
from .compute import Trace, buckets_of, norm_rests, scale_factor, tolerance

CHUNK_CELLS = 1 << 22  # weights nn.MultiheadAttention makes at once (16 MiB in float32), a block of queries at a time


def projected(case: Case) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Step 3 as the oracles take it: q (h, n, d/h), k and v (g, n, d/h) with g key/value heads; a q/k norm by
    F.rms_norm (over the width: before the split into heads), RoPE as a complex rotation."""
    o, h = case.options, case.options.heads
    g = o.kv_heads or h
    dtype = getattr(torch, o.dtype)
    x = torch.tensor(case.x, dtype=dtype)
    x_kv = x if not case.cross else torch.tensor(case.x_kv, dtype=dtype)  # cross-attention's other sentence
    read = x_kv if o.w_latent is None else x_kv @ torch.tensor(o.w_latent, dtype=dtype)  # DeepSeek's latent
    if o.latent_norm is not None:  # its first len(γ) columns by torch's RMSNorm, the rotary key's after them kept
        d = len(o.latent_norm)
        normed = F.rms_norm(read[:, :d], (d,), torch.tensor(o.latent_norm, dtype=dtype), o.norm_eps)
        read = torch.cat((normed, read[:, d:]), dim=-1)
    q = x @ torch.tensor(case.w_query, dtype=dtype)
    k, v = (read @ torch.tensor(w, dtype=dtype) for w in (case.w_key, case.w_value))
    gamma_q, gamma_k = (None if w is None else torch.tensor(w, dtype=dtype) for w in (o.q_norm, o.k_norm))
    if gamma_q is not None and o.norm_width:  # OLMo 2's q/k norm: torch's RMSNorm of the whole projection, unsplit
        rest_q, rest_k = norm_rests(o)  # a head cut from its layer: the other heads' share (norm_rest), or None
        q, k = _layer_normed(q, gamma_q, o.norm_eps, rest_q), _layer_normed(k, gamma_k, o.norm_eps, rest_k)
    q = q.unflatten(-1, (h, -1)).transpose(0, 1)  # (h, n, d/h)
    k, v = (m.unflatten(-1, (g, -1)).transpose(0, 1) for m in (k, v))  # (g, n, d/h): g = h without grouping
    if gamma_q is not None and not o.norm_width:  # Qwen3's q/k norm: torch's own RMSNorm, a head's row at a time
        q, k = F.rms_norm(q, (q.shape[-1],), gamma_q, o.norm_eps), F.rms_norm(k, (k.shape[-1],), gamma_k, o.norm_eps)
    if o.rope_base is not None:
        q, k = _rotate_complex(q, case), _rotate_complex(k, case)
    return q, k, v


def _layer_normed(m: torch.Tensor, gamma: torch.Tensor, eps: float, rest) -> torch.Tensor:
    """torch's RMSNorm of a token's whole projection m (n, d); with the other heads' share (sums, the layer's width)
    as a row as wide as the layer's: m's numbers, one number whose square is the rest, zeros for the others' other
    dims; m's own columns of it."""
    if rest is None:
        return F.rms_norm(m, (m.shape[-1],), gamma, eps)
    sums, width = rest
    n, d = m.shape
    other = torch.tensor(sums, dtype=m.dtype).sqrt()[:, None]  # (n, 1): its square is the other heads' sum
    other = other if width > d else other[:, :0]  # no other heads (a multi-query key): nothing, the rest is 0
    row = torch.cat((m, other, m.new_zeros(n, width - d - other.shape[1])), dim=-1)  # (n, width): the layer's row
    return F.rms_norm(row, (width,), torch.cat((gamma, gamma.new_ones(width - d))), eps)[:, :d]


def fused_outputs(case: Case) -> torch.Tensor:
    """The case's exact attention (no override) by scaled_dot_product_attention, a key/value head at a time (with
    enable_gqa where query heads share it), then concat and w_out."""
    o, h = case.options, case.options.heads
    g = o.kv_heads or h
    dtype = getattr(torch, o.dtype)
    q, k, v = projected(case)
    mask = None
    if o.mask == "causal":
        mask = torch.ones(case.n, case.n, dtype=torch.bool).tril()
    elif o.mask is not None:
        mask = torch.tensor(o.mask) != 0  # True = may attend, as SDPA takes it
    scale = scale_factor(case) / o.temperature
    # A key/value head at a time: at the limits PyTorch's CPU kernels would make every head's n × n weights at once.
    r = h // g  # query heads per key/value head
    groups = [(q[j * r : (j + 1) * r], k[j : j + 1], v[j : j + 1]) for j in range(g)]  # (r, n, d), (1, n, d) ×2
    out = torch.cat(
        [F.scaled_dot_product_attention(*group, attn_mask=mask, scale=scale, enable_gqa=r > 1) for group in groups]
    )
    out = out.transpose(0, 1).flatten(1)  # (n, h · d_v/g): heads side by side
    return out if o.w_out is None else out @ torch.tensor(o.w_out, dtype=dtype)


def _rotate_complex(m: torch.Tensor, case: Case) -> torch.Tensor:
    """RoPE as the paper writes it: each pair of dims a complex number, times e^(i·t·θ_p); with partial rotary only
    the first d_rot dims' pairs (θ_p = base^(−2p/d_rot)), the others kept."""
    d = case.d_rot
    t = torch.arange(case.n) if case.options.positions is None else torch.tensor(case.options.positions)
    theta = case.options.rope_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    if case.options.rope_frequencies is not None:  # a model's scaled RoPE: its own θ_p, as given
        theta = torch.tensor(case.options.rope_frequencies, dtype=torch.float64)
    turn = torch.polar(torch.ones(case.n, d // 2, dtype=torch.float64), t[:, None].double() * theta)  # (n, d/2)
    pairs = torch.view_as_complex(m[..., :d].double().unflatten(-1, (d // 2, 2)).contiguous())  # (h, n, d/2)
    return torch.cat((torch.view_as_real(pairs * turn).flatten(-2).to(m.dtype), m[..., d:]), dim=-1)


def flex_outputs(case: Case) -> torch.Tensor:
    """The case's exact attention by FlexAttention, as today's models write theirs: ALiBi, T5's bias and the softcap
    in its score_mod, the mask and the sliding window in its mask_mod, and gpt-oss's sinks from its log-sum-exp (a row's
    output times Σe^S / (Σe^S + e^s_h) = sigmoid(lse − s_h)); then concat and w_out. Eager on the CPU (flex_attention
    without torch.compile: every score made, no fused kernel)."""
    o, n = case.options, case.n
    dtype = getattr(torch, o.dtype)
    q, k, v = projected(case)
    slopes = None if o.alibi is None else torch.tensor(o.alibi, dtype=dtype)
    table, buckets = None, None
    if o.relative_bias is not None:  # T5's table (h, buckets) and each query-key pair's bucket (n, n)
        table, buckets = torch.tensor(o.relative_bias, dtype=dtype), buckets_of(o, range(n), range(n))
    explicit = None if not isinstance(o.mask, tuple) else torch.tensor(o.mask) != 0

    def score_mod(score, b, h, q_idx, kv_idx):
        if slopes is not None:  # ALiBi
            score = score - slopes[h] * (q_idx - kv_idx)
        if table is not None:  # T5: the head's learned bias for the pair's bucket
            score = score + table[h, buckets[q_idx, kv_idx]]
        if o.softcap is not None:  # Gemma 2
            score = o.softcap * torch.tanh(score / o.softcap)
        return score

    def mask_mod(b, h, q_idx, kv_idx):
        allowed = q_idx >= kv_idx if o.mask == "causal" or o.window is not None else q_idx == q_idx
        if explicit is not None:
            allowed = allowed & explicit[q_idx, kv_idx]
        if o.window is not None:  # Mistral's and Gemma's sliding window
            allowed = allowed & (q_idx - kv_idx < o.window)
        return allowed

    masked = o.mask is not None or o.window is not None
    block_mask = create_block_mask(mask_mod, None, None, n, case.n_kv, device="cpu") if masked else None
    with warnings.catch_warnings():  # "flex_attention called without torch.compile()": meant, on the CPU
        warnings.simplefilter("ignore", UserWarning)
        out, aux = flex_attention(
            q[None], k[None], v[None], score_mod=score_mod, block_mask=block_mask,
            scale=scale_factor(case) / o.temperature, enable_gqa=k.shape[0] < q.shape[0],
            return_aux=AuxRequest(lse=True),
        )  # fmt: skip
    out = out[0]  # (h, n, d_v/g)
    if o.sinks is not None:  # gpt-oss: e^s_h in the denominator takes its share of each row
        out = out * torch.sigmoid(aux.lse[0] - torch.tensor(o.sinks, dtype=aux.lse.dtype)[:, None])[..., None]
    out = out.transpose(0, 1).flatten(1)  # (n, h · d_v/g): heads side by side
    return out if o.w_out is None else out @ torch.tensor(o.w_out, dtype=dtype)


def mha_outputs(case: Case) -> torch.Tensor | None:
    """nn.MultiheadAttention with our weights, where it can express the case; else None.

    It projects to embed_dim (so d_in = d_k = d_v, and w_out square) and gives NaN for a fully masked row. It
    always scales by 1/√(d_k/h): our scale and temperature go into its query weights instead.
    """
    o = case.options
    e = case.d_in
    fits = case.d_k == case.d_v == e and (o.w_out is None or len(o.w_out[0]) == e)
    fits = fits and o.rope_base is None and o.kv_heads is None  # it has neither RoPE nor grouped key/value heads
    fits = fits and not any(getattr(o, name) is not None for name in MODERN)  # nor today's changes to the scores
    explicit = isinstance(o.mask, tuple)
    if not fits or (explicit and not all(any(row) for row in o.mask)):
        return None
    dtype = getattr(torch, o.dtype)
    mha = torch.nn.MultiheadAttention(e, o.heads, bias=False, batch_first=True, dtype=dtype)
    with torch.no_grad():
        w_q, w_k, w_v = (torch.tensor(w, dtype=dtype) for w in (case.w_query, case.w_key, case.w_value))
        w_q = w_q * scale_factor(case) / o.temperature * (e // o.heads) ** 0.5  # undoes its own 1/√(d_k/h)
        mha.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))  # it computes x @ W.T
        mha.out_proj.weight.copy_(
            torch.eye(e, dtype=dtype) if o.w_out is None else torch.tensor(o.w_out, dtype=dtype).T
        )
        x = torch.tensor(case.x, dtype=dtype)[None]
        x_kv = x if not case.cross else torch.tensor(case.x_kv, dtype=dtype)[None]  # cross-attention's keys
        # its bool mask is True where attending is NOT allowed (the opposite of scaled_dot_product_attention's)
        blocked = torch.ones(case.n, case.n, dtype=torch.bool).triu(1) if o.mask == "causal" else None
        blocked = torch.tensor(o.mask) == 0 if explicit else blocked
        rows = max(1, CHUNK_CELLS // (o.heads * case.n))  # queries at a time: every head's weights for them fit
        out = []
        for i in range(0, case.n, rows):
            rows_i = None if blocked is None else blocked[i : i + rows]
            out.append(mha(x[:, i : i + rows], x_kv, x_kv, need_weights=False, attn_mask=rows_i)[0])
    return torch.cat(out, dim=1)[0]


def check(trace: Trace) -> Check:
    """Compare a trace's exact outputs (one without the override) with PyTorch's attention for the same case, each
    number within the one rule's tolerance (base/tolerance.py)."""
    case = trace.case
    if any(getattr(case.options, name) is not None for name in MODERN):
        oracle, reference = "flex_attention", flex_outputs(case)
    else:
        reference = mha_outputs(case) if case.options.heads > 1 else None
        oracle = "nn.MultiheadAttention" if reference is not None else "scaled_dot_product_attention"
        reference = fused_outputs(case) if reference is None else reference
    # nn.MultiheadAttention projects x its own way (one in_proj matrix, W_Q pre-scaled); SDPA is given x @ W's
    projected = oracle == "nn.MultiheadAttention"
    return compare(oracle, trace.outputs, reference, tolerance(case, trace.__getitem__, projected=projected))
