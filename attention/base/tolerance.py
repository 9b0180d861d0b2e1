"""The one tolerance of every agreement check and every exported script's assert: a float sum of K terms lies within
about √K · eps · Σ|terms| of the exact sum (eps: the dtype's machine epsilon), carried through attention's steps to
each output number. Torch and math alone: the exported scripts inline its constant and functions (their source)."""

import math

import torch

# √K · eps · Σ|terms| bounds a sum's rounding in practice (each term's error has a random sign: Higham and Mary, "A
# New Approach to Probabilistic Rounding Error Analysis", 2019; eps is twice the unit roundoff, and the worst case,
# K · eps, never happens); 2×: a comparison's two sides each round their own way.
ROUNDING_SAFETY = 2.0


def rounding(terms: int, dtype: torch.dtype) -> float:
    """A float sum of `terms` terms: how far it may be from the exact sum, per unit of Σ|terms|."""
    return ROUNDING_SAFETY * math.sqrt(max(terms, 1)) * torch.finfo(dtype).eps


def product_error(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The rounding of a @ b: each number a sum of a.shape[-1] products, √K · eps · Σ|a_ik b_kj| (float64)."""
    return rounding(a.shape[-1], dtype) * (a.double().abs() @ b.double().abs())


def heads_of(m: torch.Tensor, heads: int, width: int) -> torch.Tensor:
    """(n, g · width) columns as heads (h, n, width): head i takes the i-th block; g < h key/value heads repeated."""
    split = m.unflatten(-1, (-1, width)).transpose(0, 1)  # (g, n, width)
    return split.repeat_interleave(heads // split.shape[0], dim=0)  # (h, n, width): query head i reads i // (h/g)


def turned_error(error: torch.Tensor, m: torch.Tensor, dtype: torch.dtype, d_rot: int | None = None) -> torch.Tensor:
    """RoPE's turn of pairs (a, b) → (a cos − b sin, a sin + b cos): each carries both errors, and its own rounding;
    with partial rotary only the first d_rot dims are turned, the rest keep theirs."""
    d_rot = m.shape[-1] if d_rot is None or d_rot is True else d_rot
    a, b = (t[..., :d_rot] for t in (error, m))
    pair = a[..., 0::2] + a[..., 1::2] + 4 * torch.finfo(dtype).eps * (b[..., 0::2].abs() + b[..., 1::2].abs())
    return torch.cat((torch.stack((pair, pair), dim=-1).flatten(-2), error[..., d_rot:]), dim=-1).double()


def norm_axes(m: torch.Tensor, gamma: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """A q/k norm's γ shaped for rows m (…, d), and the axes each root mean square runs over: a row's own d (Qwen3's,
    γ of d numbers) or, with γ of every head's dims (OLMo 2's over the width), a token's rows of every head of m
    (h, n, d) at once, γ as (h, 1, d): a key/value head's block beside each query head that reads it."""
    d = m.shape[-1]
    if gamma.numel() == d:
        return gamma, (-1,)
    gamma = gamma.reshape(-1, 1, d)  # (g, 1, d): the width's block of each head
    return gamma.repeat_interleave(m.shape[0] // gamma.shape[0], dim=0), (0, -1)


def mean_square(u: torch.Tensor, axes: tuple[int, ...], own: int, rest=None) -> torch.Tensor:
    """A q/k norm's mean of squares over axes (norm_axes); with the layer's other heads (rest: each token's sum of
    their squares (n,) and the layer's width, norm_rest's), (Σ the own `own` numbers' squares + rest) / width."""
    mean = u.pow(2).mean(axes, keepdim=True)
    if rest is None:
        return mean
    sums, width = rest
    return (mean * own + torch.as_tensor(sums, dtype=u.dtype, device=u.device).reshape(-1, 1)) / width


def normed_error(error: torch.Tensor, m: torch.Tensor, gamma, norm_eps: float, dtype: torch.dtype, rest=None):
    """A q/k norm's y = γ ⊙ u / r, r = √(mean(u²) + ε), of rows u (…, d) (or a token's rows of every head, norm_axes)
    with errors `error`: u's error carried to first order (each number's own, and through r every other's), and the
    norm's own rounding (a mean of K squares, K = the numbers in it, a repeated key head's too; the root and two
    products). rest: the layer's other heads' share (mean_square): one more term, held exact, and a mean over the
    layer's width (each own number's pull on r shrinks by own / width)."""
    u, g = m.detach().cpu().double(), torch.as_tensor(gamma, dtype=torch.float64).abs()
    own = g.numel()
    g, axes = norm_axes(u, g)
    r = (mean_square(u, axes, own, rest) + norm_eps).sqrt()
    count = math.prod(u.shape[a] for a in axes)  # the numbers in each mean (a key/value head's repeats too)
    share = 1.0 if rest is None else own / rest[1]
    through = g * (error / r + share * u.abs() * (u.abs() * error).sum(axes, keepdim=True) / (count * r**3))
    return through + (rounding(count + (rest is not None), dtype) + 4 * torch.finfo(dtype).eps) * g * u.abs() / r


def latent_error(x, latent, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """What keys and values are made from (float64) and its error: x (none), or multi-head latent attention's latent
    c = x W_DKV (a sum of d_in products), its first len(γ) columns then RMS-normed (latent: W_DKV, c before the norm,
    γ or None, ε)."""
    if latent is None:
        return x, torch.zeros_like(x)
    w_latent, unnormed, gamma, norm_eps = latent
    w_latent, c = (t.detach().cpu().double() for t in (w_latent, unnormed))
    error = product_error(x, w_latent, dtype)  # (n, d_c)
    if gamma is None:
        return c, error
    d = len(gamma)
    gamma = torch.as_tensor(gamma, dtype=torch.float64)
    normed = c[:, :d] * torch.rsqrt(c[:, :d].pow(2).mean(-1, keepdim=True) + norm_eps) * gamma
    error = torch.cat((normed_error(error[:, :d], c[:, :d], gamma, norm_eps, dtype), error[:, d:]), dim=-1)
    return torch.cat((normed, c[:, d:]), dim=-1), error


def attention_tolerance(
    x, w_query, w_key, w_value, queries, keys, values, weights, multiplier, rope, w_out, projected, norm=None,
    scores=None, latent=None, x_kv=None,
):  # fmt: skip
    """How far two float computations of attention's outputs (n_q, d_out) may be apart, number by number: the
    weighted sum over the n keys, the scores' rounding shifting the weights, and where the two sides project x
    their own ways (projected), the projections' rounding.

    queries, keys, values and weights as the eight steps make them ((h, n, d) or one head's (n, d)); the first n_q
    queries of x; rope: how many of a head's dims RoPE turned (True: all; 0: none); norm: a q/k norm's (queries, keys
    before it, γ_Q, γ_K, ε, norm_rest's shares), or None; scores: step 4's scores where something came after the scale
    (ALiBi's bias added, a softcap's tanh: each rounds a score once more, a few eps of it; the tanh's slope ≤ 1 carries
    the rest), else None; latent: multi-head latent attention's (W_DKV, the latent before its norm, γ or None, ε), keys
    and values then made from the latent; x_kv: cross-attention's other sentence (None: x). Float64, on the CPU."""
    dtype, eps = queries.dtype, torch.finfo(queries.dtype).eps
    q, k, v = (t.detach().cpu().double() for t in (queries, keys, values))
    q, k, v, w = (t if t.dim() == 3 else t[None] for t in (q, k, v, weights.detach().cpu()))  # (h, n, d): a head axis
    n_q, h, n = q.shape[1], q.shape[0], k.shape[1]
    x, w_query, w_key, w_value = (t.detach().cpu().double() for t in (x, w_query, w_key, w_value))
    s = None if scores is None else scores.detach().cpu().double().abs().nan_to_num(posinf=0.0)  # masked: −∞, unused
    s = s if s is None or s.dim() == 3 else s[None]
    # step 3: q = x W_Q rounds a sum of d_in products; split into heads (and turned by RoPE) as the steps do
    e_q = heads_of(product_error(x[:n_q], w_query, dtype), h, q.shape[-1]) * projected  # (h, n_q, d_k/h)
    read, e_read = latent_error(x if x_kv is None else x_kv.cpu().double(), latent, dtype)  # x (x_kv), or latent
    e_k = heads_of(product_error(read, w_key, dtype) + e_read @ w_key.abs(), h, k.shape[-1]) * projected
    e_v = heads_of(product_error(read, w_value, dtype) + e_read @ w_value.abs(), h, v.shape[-1]) * projected
    if norm is not None:  # step 3a: each row over its root mean square, times γ
        unnormed_q, unnormed_k, gamma_q, gamma_k, norm_eps, (rest_q, rest_k) = norm  # rest: the others' (norm_rest)
        unnormed_q, unnormed_k = (t if t.dim() == 3 else t[None] for t in (unnormed_q, unnormed_k))
        e_q, e_k = (
            normed_error(e_q, unnormed_q, gamma_q, norm_eps, dtype, rest_q),
            normed_error(e_k, unnormed_k, gamma_k, norm_eps, dtype, rest_k),
        )
    if rope:
        e_q, e_k = turned_error(e_q, q, dtype, rope), turned_error(e_k, k, dtype, rope)
    # step 4: a score s_ij = m · q_i · k_j is off by σ_ij ≤ u_i ‖k_j‖ + |m| ‖q_i‖ ‖e_k,j‖ + 4 eps: its own sum of d
    # products (|q_i|·|k_j| ≤ ‖q_i‖ ‖k_j‖), q's and k's errors, and the softmax's exp and division (a few eps each)
    q_norm, k_norm = q.norm(dim=-1), k.norm(dim=-1)  # (h, n_q), (h, n)
    u = abs(multiplier) * ((rounding(q.shape[-1], dtype) + 2 * eps) * q_norm + e_q.norm(dim=-1))  # (h, n_q)
    # step 5: an error δs_ij moves output i by Σ_j w_ij δs_ij (v_j − o_i): at most √(Σ_j w_ij σ_ij²) times the
    # weighted spread √(Σ_j w_ij (v_j − o_i)²) (Cauchy–Schwarz), with (a + b + c + e)² ≤ 4 (a² + b² + c² + e²); with
    # sinks a row's weights sum to less than 1, and Σ_j w_ij v_j² − o_i² only grows
    error, o = (torch.empty(h, n_q, v.shape[-1], dtype=torch.float64) for _ in range(2))  # (h, n_q, d_v/h)
    for i in range(h):  # a head at a time: one n_q × n matrix in float64, never every head's
        w_i = w[i].double()
        spread_s = 4 * (u[i] ** 2 * (w_i @ k_norm[i] ** 2) + 16 * eps**2)  # (n_q,)
        spread_s += 4 * multiplier**2 * q_norm[i] ** 2 * (w_i @ e_k[i].norm(dim=-1) ** 2)
        if s is not None:  # the bias's sum and the cap's tanh, division and product: a few eps of each score
            spread_s += 4 * (w_i * (4 * eps * s[i]) ** 2).sum(-1)
        o[i] = w_i @ v[i]  # (n_q, d_v/h)
        spread_v = ((w_i @ v[i] ** 2) - o[i] ** 2).clamp(min=0)  # Σ_j w_ij (v_jc − o_ic)², in float64
        # steps 6-7: the sum over n keys of w_ij v_jc (twice: the softmax's own sum over n scales a row as a
        # whole), and v's errors weighted
        w_i = w_i.abs()  # a copy: in float64, w_i is the trace's own weights
        error[i] = 2 * rounding(n, dtype) * (w_i @ v[i].abs()) + (spread_s[:, None] * spread_v).sqrt() + w_i @ e_v[i]
    error, concat = error.transpose(0, 1).flatten(1), o.transpose(0, 1).flatten(1)  # (n_q, d_v): heads side by side
    if w_out is not None:  # a sum of d_v products more, and the heads' errors through w_out
        w_out = w_out.detach().cpu().double().abs()
        error = product_error(concat, w_out, dtype) + error @ w_out
    return error + 16 * torch.finfo(dtype).tiny  # never 0: a difference below float's smallest number is none


def gradient_tolerance(
    x, w_query, w_key, w_value, queries, keys, values, weights, softmax, d_outputs, multiplier, rope, w_out, target,
    norm=None, scores=None, softcap=None, sink=None, buckets=None, latent=None, x_kv=None,
):  # fmt: skip
    """How far two float computations of the leaves' gradients may be apart, number by number: the backward pass run on
    absolute values (each sum's Σ|terms|, carried through the chain) times √K · eps, K every term summed on the way, and
    the weights' error from the scores' rounding carried the same way. target: the loss compares every output with a
    target, so d_outputs = outputs − target carries the outputs' rounding; rope: how many of a head's dims RoPE turned
    (True: all; 0 or False: none); norm: a q/k norm's (queries, keys before it, γ_Q, γ_K, ε, norm_rest's shares), or
    None; scores: step 4's scores before any cap (scores_uncapped with a softcap, else the scores) where ALiBi's bias or
    a softcap came after the scale, else None; softcap: the cap; sink: step 5's weights_sink (h?, n_q, 1) where the case
    has sink logits; buckets: T5's bucket of each pair (n, n) and its table's width, where the case has its bias (its
    gradient sums each bucket's dU); latent: multi-head latent attention's (W_DKV, the latent before its norm, γ or
    None, ε), keys and values then made from the latent (w_key, w_value its W_UK, W_UV), and W_DKV's and γ's gradients
    too (latent_back_errors); x_kv: cross-attention's other sentence (n_k, d_in), which keys and values (or the latent)
    were made from, and its own gradient d_x_kv (None: x made them, and d_x has their share). {d_x: …, d_w_query: …,
    d_sinks: …}."""
    dtype = queries.dtype
    q, k, v, a, s = (t.detach().cpu().to(dtype) for t in (queries, keys, values, weights, softmax))
    q, k, v, a, s = (t if t.dim() == 3 else t[None] for t in (q, k, v, a, s))  # (h, n, d): in the run's dtype
    h, n_q, d_head = q.shape
    n_k = k.shape[1]  # the keys: x_kv's rows in cross-attention, else n_q
    u, a_sink = (None if t is None else t.detach().cpu().double() for t in (scores, sink))
    u, a_sink = (t if t is None or t.dim() == 3 else t[None] for t in (u, a_sink))  # (h, n, n), (h, n, 1)
    x, w_query, w_key, w_value = (t.detach().cpu().double().abs() for t in (x, w_query, w_key, w_value))
    x_kv = None if x_kv is None else x_kv.detach().cpu().double().abs()  # cross-attention's keys' sentence
    d_o = d_outputs.detach().cpu().double()  # signed: d_scores' own sum cancels
    # the chain's sums, end to end: over the keys (the softmax's, dQ's, dW_K's) and over the queries (dK's, dV's,
    # dW_Q's), each at most the larger count; with a norm, its mean of K squares there and back too (γ_Q's width)
    normed = 0 if norm is None else 2 * len(norm[2])
    if latent is not None:  # the latent's sums back: dC over keys' and values' columns, its norm's, dX's over d_c
        normed += w_key.shape[-1] + w_value.shape[-1] + w_key.shape[0]
        normed += 0 if latent[2] is None else 2 * len(latent[2])
    r = rounding(2 * max(n_q, n_k) + d_head + normed + v.shape[-1] + x.shape[-1] + d_o.shape[-1], dtype)
    concat = torch.stack([a[i].abs() @ v[i].abs() for i in range(h)]).double()  # (h, n, d_v/h): at least |outputs|
    concat = concat.transpose(0, 1).flatten(1)  # (n, d_v): before w_out, the heads side by side
    w_out = None if w_out is None else w_out.detach().cpu().double()
    error_o = rounding(n_k, dtype) * (concat if w_out is None else concat @ w_out.abs()) if target else 0 * d_o
    d_c, out = d_o, {}
    if w_out is not None:  # outputs = concat @ w_out
        out["d_w_out"] = r * concat.T @ d_o.abs() + concat.T @ error_o
        d_c, error_o = d_o @ w_out.T, error_o @ w_out.abs().T
    d_h, error_h = (m.unflatten(-1, (h, -1)).transpose(0, 1).to(dtype) for m in (d_c, error_o))  # (h, n, d_v/h)
    d_q, d_k, d_v, e_sinks, d_u = scores_back_errors(q, k, v, a, s, d_h, error_h, multiplier, r, u, softcap, a_sink)
    if buckets is not None:  # dt[b] = Σ dU_ij over bucket b's pairs: their errors, and the sum's own rounding
        index, width = buckets[0].flatten(), buckets[1]
        sums = [torch.zeros(h, width, dtype=torch.float64).index_add_(1, index, m.reshape(h, -1)) for m in d_u]
        out["d_relative_bias"] = sums[0] + rounding(int(index.bincount().max()), dtype) * sums[1]
    if rope:  # each of a pair's two gradients reaches both of its numbers (rope: the dims turned, or True: all)
        d_q, d_k = (both_of_pair(m, rope) for m in (d_q, d_k))
    if norm is not None:  # back through the norm: dQ's and dK's errors carried, and its own sums' rounding
        d_q, d_k = normed_back_errors(d_q, d_k, q, k, v, s, d_h, multiplier, rope, norm, r)
    out |= inputs_back_errors(d_q, d_k, d_v, x, x_kv, w_query, w_key, w_value, latent, dtype)
    if a_sink is not None:
        out["d_sinks"] = e_sinks.reshape(1, -1)  # (1, h)
    return {name: m + 16 * torch.finfo(dtype).tiny for name, m in out.items()}


def inputs_back_errors(d_q, d_k, d_v, x, x_kv, w_query, w_key, w_value, latent, dtype) -> dict[str, torch.Tensor]:
    """Step 3 back, from dQ's, dK's and dV's errors (h, n, d/h) to the weights' and the inputs' (x and the weights
    absolute, float64): a key/value head sums its query heads'; dW = Rᵀ dM, R what made M (x the queries; x,
    cross-attention's x_kv or MLA's latent the keys and values); then x's share dQ W_Qᵀ, and the keys' and values'
    dK W_Kᵀ + dV W_Vᵀ (or back through the latent: latent_back_errors): x's too, or x_kv's own (x_kv None: x)."""
    h, d_head = d_q.shape[0], d_q.shape[-1]
    g = w_key.shape[-1] // d_head  # key/value heads: each sums its query heads' gradients
    d_k, d_v = (m.unflatten(0, (g, h // g)).sum(1) for m in (d_k, d_v))
    d_q, d_k, d_v = (m.transpose(0, 1).flatten(1) for m in (d_q, d_k, d_v))  # (n, d): heads side by side
    made = x if x_kv is None else x_kv  # the keys' and values' sentence
    read = latent_error(made, latent, dtype)[0].abs()  # what keys and values were made from: it, or the latent C
    out = {"d_w_query": x.T @ d_q, "d_w_key": read.T @ d_k, "d_w_value": read.T @ d_v}
    latent_out, d_read = latent_back_errors(made, d_k, d_v, w_key, w_value, latent)  # and what they read
    if x_kv is None:  # x made the queries, the keys and the values
        return out | latent_out | {"d_x": d_q @ w_query.T + d_read}
    return out | latent_out | {"d_x": d_q @ w_query.T, "d_x_kv": d_read}  # cross-attention: x the queries alone


def scores_back_errors(q, k, v, a, s, d_h, error_h, multiplier, r, u=None, softcap=None, a_sink=None):
    """The errors of dQ (h, n_q, d_k/h), dK (h, n_k, d_k/h), dV (h, n_k, d_v/h) and the sink logits' gradients
    (h,), float64, a head at a time (its n_q × n_k matrices alone): steps 6 to 4 back (weights_back), then the cap's
    slope and the scale; and dU's (the scores' before the scale) errors and sizes (h, n_q, n_k) each.
    u: the scores before any cap (h, n_q, n_k) or None; a_sink: the sinks' weights (h, n_q, 1) or None."""
    eps = torch.finfo(q.dtype).eps
    # a score's rounding σ_ij (its sum of d_head products, the scale, the softmax's exp and division), per unit of
    # Σ_k |q_ik k_jk|: it moves weight j by A_ij Σ_k A_ik (δs_ij − δs_ik); ALiBi's sum and a cap's tanh, division
    # and product round it a few eps of |U| more (|S| ≤ |U|, and the cap's slope ≤ 1 carries the rest)
    unit = abs(multiplier) * (rounding(q.shape[-1], q.dtype) + 2 * eps)
    d_q, d_k = torch.zeros_like(q, dtype=torch.float64), torch.zeros_like(k, dtype=torch.float64)
    d_v, e_sinks, e_u, size_u = [], [], [], []
    for i in range(q.shape[0]):
        sigma = unit * (q[i].abs().double() @ k[i].abs().double().T) + 4 * eps  # (n_q, n_k)
        if u is not None:  # a masked score's −∞ counts 0: its weight is 0
            sigma += 4 * eps * u[i].abs().nan_to_num(posinf=0.0)
        sink = None if a_sink is None else a_sink[i]
        e_s, e_v, d_s, e_sink = weights_back(a[i], s[i], v[i], d_h[i], error_h[i], sigma, r, sink)
        if softcap is not None:  # dU = (1 − tanh²(U / cap)) dS: dS's error carried, and the slope's own
            e_s = capped_back(e_s, d_s, u[i], softcap, sigma, eps)
        e_u.append(e_s)
        size_u.append(d_s.abs())  # |dU| ≤ |dS|: the cap's slope is at most 1
        e_s = e_s * abs(multiplier)
        d_q[i], d_k[i] = e_s @ k[i].abs().double(), e_s.T @ q[i].abs().double()
        d_v.append(e_v)
        e_sinks.append(e_sink)
    e_sinks = None if a_sink is None else torch.stack(e_sinks)
    return d_q, d_k, torch.stack(d_v), e_sinks, (torch.stack(e_u), torch.stack(size_u))


def capped_back(e_s, d_s, u, cap, sigma, eps):
    """dU = slope · dS, slope = 1 − tanh²(U / cap) ≤ 1 (n_q, n_k): dS's error e_s times the slope, and |dS| times the
    slope's error, its rounding (a few eps) and U's error σ moving it (|d slope / dU| = 2 |tanh| slope / cap)."""
    t = torch.tanh(u / cap)
    slope = 1 - t**2
    return slope * e_s + d_s.abs() * (4 * eps + 2 * t.abs() * slope * sigma / cap)


def both_of_pair(m: torch.Tensor, d_rot: int | bool | None = None) -> torch.Tensor:
    """RoPE's turn back, for errors and sizes: each of a pair's two numbers gets both of theirs, in the first d_rot
    dims (True or None: every pair); partial rotary's other dims keep their own."""
    d_rot = m.shape[-1] // 2 * 2 if d_rot is None or d_rot is True else d_rot
    paired = (m[..., 0:d_rot:2] + m[..., 1:d_rot:2]).repeat_interleave(2, dim=-1)
    return torch.cat((paired, m[..., d_rot:]), dim=-1)


def normed_back_errors(d_q, d_k, q, k, v, s, d_h, multiplier, rope, norm, r):
    """dQ's and dK's errors (h, n, d) back through a q/k norm (norm: queries and keys before it, γ_Q, γ_K, ε, shares).
    Its backward du = (g − û · mean(g ⊙ û)) / r_u, g = γ ⊙ dy, û = u / r_u, carries dy's error, and rounds its sums: r
    (the chain's rounding per unit) times its terms' size, from |dS| = |A (dA − Σ_k A_ik dA_ik)| times the scale."""
    sizes = []
    for i in range(q.shape[0]):  # a head at a time
        d_a = d_h[i].double() @ v[i].double().mT
        size_s = (s[i].double() * (d_a - (s[i].double() * d_a).sum(-1, keepdim=True))).abs() * abs(multiplier)
        sizes.append((size_s @ k[i].abs().double(), size_s.T @ q[i].abs().double()))
    out, rests = [], norm[5]  # the other heads' share of each token's norm (norm_rest), held fixed
    for error, size, m, gamma, rest in zip(
        (d_q, d_k), map(torch.stack, zip(*sizes, strict=True)), norm[:2], norm[2:4], rests, strict=True
    ):
        u = m.detach().cpu().double()
        u = u if u.dim() == 3 else u[None]
        size = both_of_pair(size, rope) if rope else size
        carried, own = normed_back(error, u, gamma, norm[4], rest), normed_back(size, u, gamma, norm[4], rest)
        out.append(carried + r * own)
    return out


def normed_back(d: torch.Tensor, u: torch.Tensor, gamma, norm_eps: float, rest=None) -> torch.Tensor:
    """An RMS norm's backward du = (g − û · mean(g ⊙ û)) / r_u, g = γ ⊙ dy, û = u / r_u, on absolute values: dy's
    error (or size) d carried to du, float64; the means over a row, or a token's rows of every head (norm_axes); with
    the other heads' share (rest, held fixed) r_u takes it in and the mean's pull shrinks by own / width."""
    gamma = torch.as_tensor(gamma, dtype=torch.float64).abs()
    own = gamma.numel()
    g, axes = norm_axes(u, gamma)
    root = (mean_square(u, axes, own, rest) + norm_eps).sqrt()
    unit = u.abs() / root
    share = 1.0 if rest is None else own / rest[1]
    return (g * d + share * unit * (g * d * unit).mean(axes, keepdim=True)) / root


def latent_back_errors(x, d_k, d_v, w_key, w_value, latent) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Back from dK's and dV's errors (n, d) to what keys and values read, x, W_K and W_V absolute, float64: x's share
    dK W_Kᵀ + dV W_Vᵀ where they read x (latent None); or multi-head latent attention's latent (latent: W_DKV, the
    latent before its norm, γ or None, ε), W_K and W_V its W_UK and W_UV: dC = dK W_UKᵀ + dV W_UVᵀ; the norm of its
    first len(γ) columns (γ's gradient Σ_t dC ⊙ ĉ, and dC back to before it as a q/k norm's); dW_DKV = Xᵀ dC. The
    errors of W_DKV's (and γ's) gradients, and x's share dC W_DKVᵀ. The norm's own sums round r per unit of their
    terms, as normed_back_errors's, and these errors are already at least r times those (dK's and dV's are at
    least r |dK|, r |dV|): twice the carried error bounds both."""
    d_c = d_k @ w_key.T + d_v @ w_value.T  # (n, d_in or d_c): what they read made both keys and values
    if latent is None:
        return {}, d_c
    w_latent, u, gamma, norm_eps = latent
    w_latent, u = (t.detach().cpu().double() for t in (w_latent, u))
    out = {}
    if gamma is not None:  # its first len(γ) columns normed; the rotary key's after them pass
        d = len(gamma)
        unit = u[:, :d].abs() * torch.rsqrt(u[:, :d].pow(2).mean(-1, keepdim=True) + norm_eps)  # |ĉ| = |u| / r_u
        out["d_latent_norm"] = 2 * (d_c[:, :d] * unit).sum(0, keepdim=True)  # (1, d): dγ = Σ_t dC ⊙ ĉ
        d_c = torch.cat((2 * normed_back(d_c[:, :d], u[:, :d], gamma, norm_eps), d_c[:, d:]), dim=-1)
    out["d_w_latent"] = x.T @ d_c  # (d_in, d_c)
    return out, d_c @ w_latent.abs().T


def weights_back(a, s, v, d_h, error_h, sigma, r, a_sink=None):
    """One head's errors of d_scores (n_q, n_k) and d_values (n_k, d_v), float64: the rounding of their sums (r
    times their terms' magnitudes), d_outputs' own error, and the weights' error from the scores' σ (n_q, n_k);
    then d_scores itself (signed, its size for the cap's slope) and, with a sink (a_sink: its weights (n_q, 1)), the
    error of its logit's gradient −Σ_i A_i,sink Σ_k A_ik dA_ik (else None).
    a: the weights used in step 6; s: the exact softmax; d_h: the head's d_outputs (signed)."""
    d_a = d_h @ v.mT  # (n_q, n_k): signed, d_A_ij = Σ_c dO_ic v_jc
    size_a, error_a = (m @ v.abs().mT for m in (d_h.abs(), error_h))  # its terms' magnitude; dO's error in it
    mean = (s * d_a).sum(-1, keepdim=True)  # (n, 1): Σ_k A_ik dA_ik
    s, d_a, mean = s.double(), d_a.double(), mean.double()
    # |δA_ij| ≤ A_ij Σ_k A_ik (σ_ij + σ_ik), k ≠ j: none where one key takes all the weight (a sink only makes the
    # row's weights smaller, and its logit is exact)
    delta = s * (sigma * (1 - s) + (s * sigma).sum(-1, keepdim=True) - s * sigma)
    e_a = r * size_a.double() + error_a.double()  # dA's error: its sum's rounding, and dO's error carried
    e_s = s * (e_a + (s * e_a).sum(-1, keepdim=True))  # d_S = A (dA − mean): dA's errors carried
    e_s += delta * (d_a - mean).abs() + s * (delta * d_a.abs()).sum(-1, keepdim=True)
    e_v = a.abs().double().T @ (r * d_h.abs().double() + error_h.double()) + delta.T @ d_h.abs().double()
    e_sink = None
    if a_sink is not None:  # the mean's error (dA's, the weights'), and the sink's weight's: A_sink Σ_k A_ik σ_ik
        e_mean = (s * e_a + delta * d_a.abs()).sum(-1, keepdim=True)  # (n, 1)
        moved = (s * sigma).sum(-1, keepdim=True) + 4 * torch.finfo(v.dtype).eps
        e_sink = (a_sink * (e_mean + mean.abs() * moved)).sum()
    return e_s, e_v, s * (d_a - mean), e_sink


def within(got: torch.Tensor, reference: torch.Tensor, tolerance: torch.Tensor) -> bool:
    """Whether every number of got is within its tolerance of the reference's (NaN never is)."""
    return bool(((got.double() - reference.double()).abs() <= tolerance).all())
