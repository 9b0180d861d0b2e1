"""The eight steps of self-attention, as in the article, computed and recorded into a trace (steps.py names them)."""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import torch

from ..base.case import Case
from ..base.device import resolve_device, warm_up
from ..base.i18n import msg
from ..base.record import Check, Record, Recorder, Step, compare
from ..base.tolerance import attention_tolerance, mean_square, norm_axes
from .steps import AXES, KEY_ROWS, PER_HEAD, step, step_names

# Past these sizes the trace keeps what is looked at, not everything (bench/core.md measured why). Step 6's
# (n_k, n_q, d_v) broadcast is made whole up to 1 MiB of float32 (n = 64 at d_v = 64):
WHOLE_MAX_NUMBERS = 1 << 18
REPEAT_MAX_N = 16  # step 8 runs its Python loop for the first 16 queries; one_query() runs any other on demand
ROUNDED_WITHIN = 0.1  # a weights override further than this from the exact softmax was made for other numbers
# (the article's own rounding moves a weight by up to 0.063)


@dataclass(frozen=True)
class Trace(Record):
    """The record of one run of the eight steps: the case as used, its steps, and the final outputs."""

    AXES: ClassVar = AXES
    PER_HEAD: ClassVar = frozenset(PER_HEAD)
    KEY_ROWS: ClassVar = frozenset(KEY_ROWS)
    TITLE: ClassVar = "Attention trace"
    case: Case
    device: str
    steps: tuple[Step, ...]
    outputs: torch.Tensor  # the final result (after w_out when given)
    hidden: tuple = ()  # an exercise's hidden cells, ((tensor, indices), …) sorted, where it hides some (NaN)

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.notes

    @property
    def numbers(self) -> int:
        """How many numbers the trace holds (step 6's Broadcast, made on demand, holds none)."""
        kept = (tensor for step in self.steps for tensor in step.tensors.values())
        return sum(tensor.numel() for tensor in kept if isinstance(tensor, torch.Tensor))

    def heading(self) -> str:
        return f"{super().heading()} · {self.device}"

    def tail(self) -> tuple[str, list[str], list[list[str]]]:
        rows = self.outputs.cpu().tolist()
        cells = [[f"{v:.4g}" for v in row] for row in rows]
        shape = f"({' × '.join(map(str, self.outputs.shape))}) {str(self.outputs.dtype).removeprefix('torch.')}"
        return f"outputs {shape}", list(self.case.tokens), cells


def attend(case: Case) -> Trace:
    """Run the eight steps on the case's device and return their trace."""
    o = case.options
    device, dtype = resolve_device(o.device), getattr(torch, o.dtype)
    n, h, g = case.n, o.heads, o.kv_heads or o.heads
    options = score_options(case, device)  # steps 4-5's: the scale, the mask and window, ALiBi, the cap, the sinks
    w_out = option_tensors(case, device)[2]  # (d_v, d_out) or None
    warm_up(str(device))  # the first run of an operation in a process is slow: not a step's time
    recorder = Recorder(step_names(case), device)
    record = recorder.record
    # step 1: inputs
    x = matrix(case, "x", dtype, device)  # (n, d_in)
    x_kv = x if not case.cross else matrix(case, "x_kv", dtype, device)  # cross-attention's other sentence (n_kv, d_in)
    record("inputs", x=x, **({"x_kv": x_kv} if case.cross else {}))
    # step 2: weights
    w_query = matrix(case, "w_query", dtype, device)  # (d_in, d_k)
    w_key = matrix(case, "w_key", dtype, device)  # (d_in, d_k)
    w_value = matrix(case, "w_value", dtype, device)  # (d_in, d_v)
    w_latent = None if o.w_latent is None else torch.tensor(o.w_latent, dtype=dtype, device=device)  # (d_in, d_c)
    record("weights", w_query=w_query, **latent_weights(w_latent), w_key=w_key, w_value=w_value)
    # step 3: qkv
    queries = x @ w_query  # (n, d_k)
    read, latent = latent_of(o, x_kv, w_latent)  # what keys and values are made from: x (or x_kv), or MLA's latent
    keys = read @ w_key  # (n, d_k), or (n, d_k/h · g) with g key/value heads
    values = read @ w_value  # (n, d_v)
    if h > 1:  # head i takes the i-th block of columns: (n, d) -> (h, n, d/h)
        queries = queries.unflatten(-1, (h, -1)).transpose(0, 1)  # (h, n, d_k/h)
        keys, values = (m.unflatten(-1, (g, -1)).transpose(0, 1) for m in (keys, values))  # (g, n, d/h)
        # grouped-query attention (g < h): query head i reads key/value head i // (h/g); else g = h and each its own
        keys, values = keys.repeat_interleave(h // g, dim=0), values.repeat_interleave(h // g, dim=0)  # (h, n, d/h)
    record("qkv", **latent, **named(o, "qkv", queries=queries, keys=keys), values=values)
    if o.q_norm is not None:
        # step 3a: norm (Qwen3's): each head's query and key divided by its root mean square, then scaled by γ;
        # OLMo 2's (norm_width): a token's query (key) of every head divided by one root mean square
        queries, keys = qk_normed(o, queries, keys)
        record("norm", **named(o, "norm", queries=queries, keys=keys))
    if o.rope_base is not None:
        # step 3b: rope
        t, theta = positions(case), rope_theta(o, case.d_rot)  # (n,): each token's position; (d_rot/2,)
        queries = rope(queries, t, theta)  # (h?, n, d_k): pair p of token i turned by the angle t_i · θ_p
        keys = rope(keys, t, theta)  # the same turns: a score then depends on t_i − t_j alone
        record("rope", queries=queries, keys=keys)
    # steps 4-7, for all queries at once (each step's comment is inside steps_4_to_7)
    whole = n * n * case.d_v <= WHOLE_MAX_NUMBERS  # step 6 held whole, or made slice by slice when looked at
    outputs = steps_4_to_7(queries, keys, values, **options, w_out=w_out, record=record, whole=whole)
    # step 8: repeat
    by_query = []
    for i in range(min(n, REPEAT_MAX_N)):
        query_i = queries[..., i : i + 1, :]  # (h?, 1, d_k)
        by_query.append(steps_4_to_7(query_i, keys, values, **at_rows(options, i), w_out=w_out))  # its rows of each
    outputs_by_query = torch.cat(by_query)  # (min(n, REPEAT_MAX_N), d_out): the rows stacked
    record("repeat", outputs_by_query=outputs_by_query)
    return _trace(case, device, recorder.records, outputs)


Tensor = torch.Tensor


def steps_4_to_7(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    scale: float,
    temperature: float,
    allowed: Tensor | None,
    override: Tensor | None,
    w_out: Tensor | None,
    position_bias: Tensor | None = None,
    softcap: float | None = None,
    sinks: Tensor | None = None,
    record: Callable[..., None] = lambda step, **tensors: None,
    whole: bool = True,
) -> Tensor:
    """Steps 4-7 for a block of queries: all of them (the matrix form) or one at a time (step 8). The options of
    today's models, in FlexAttention's terms: position_bias and softcap its score_mod, a window its mask_mod (in
    `allowed`), sinks a logit per head that joins each softmax's denominator."""
    # step 4: scores
    scores_raw = queries @ keys.mT  # (h?, n_q, n_k)
    scores = scores_raw * (scale / temperature)  # a new tensor: changed in place below (at the limits each is 64 MiB)
    parts = {}
    if position_bias is not None:  # ALiBi: − m_h (i − j), the further back a key the lower its score
        scores = scores.add_(position_bias) if scores.shape == position_bias.shape else scores + position_bias
        parts["position_bias"] = position_bias
    if softcap is not None:  # Gemma 2: the scores squashed into (−cap, cap), the same order kept (in place: a copy)
        parts["scores_uncapped"], scores = scores, scores.div(softcap).tanh_().mul_(softcap)
    if allowed is not None:  # a 0 in the mask, or a key outside the window: the query may not attend to it
        scores.masked_fill_(~allowed, float("-inf"))
    record("scores", scores_raw=scores_raw, **parts, scores=scores)
    # step 5: softmax
    if sinks is None:
        weights_exact = torch.softmax(scores, dim=-1)  # (h?, n_q, n_k)
        sink = {}
    else:  # gpt-oss: e^s_h in each row's denominator, so a row's weights may sum to less than 1
        weights_exact, weights_sink = softmax_with_sink(scores, sinks)  # (h?, n_q, n_k), (h?, n_q, 1)
        sink = {"weights_sink": weights_sink}
    if allowed is not None:  # a fully masked row is all NaN: zeros instead, as fused attention gives
        weights_exact.nan_to_num_(nan=0.0)
    weights = weights_exact if override is None else override  # (h?, n_q, n_k)
    record("softmax", weights_exact=weights_exact, **sink, weights=weights)
    # step 6: weighted
    if whole:  # every product at once: (h?, n_k, 1, d_v) * (h?, n_k, n_q, 1) -> (h?, n_k, n_q, d_v)
        weighted = values[..., :, None, :] * weights.mT[..., :, :, None]
    else:  # too many numbers to hold: the same products, made a slice at a time when they are looked at
        weighted = Broadcast(values, weights)
    record("weighted", weighted=weighted)
    # step 7: outputs
    head_outputs = weighted.sum(dim=-3) if whole else weights @ values  # (h?, n_q, d_v/h): summed over the keys
    concat = head_outputs.transpose(0, 1).flatten(1) if head_outputs.dim() == 3 else head_outputs  # (n_q, d_v)
    outputs = concat if w_out is None else concat @ w_out  # (n_q, d_out)
    record("outputs", outputs=outputs, **_step_7_parts(head_outputs, concat, w_out))
    return outputs


def latent_weights(w_latent: Tensor | None) -> dict[str, Tensor]:
    """Step 2's W_DKV under its name, where the case has multi-head latent attention."""
    return {} if w_latent is None else {"w_latent": w_latent}


def latent_of(o, x: Tensor, w_latent: Tensor | None) -> tuple[Tensor, dict[str, Tensor]]:
    """What step 3's keys and values are made from, and what it records for it: x itself, or DeepSeek's latent
    c = x W_DKV (n, d_c), the first len(γ) of its columns RMS-normed and times γ where the case has latent_norm (the
    rotary key's columns after them pass as they are); recorded as latent_unnormed and latent."""
    if w_latent is None:
        return x, {}
    latent = x @ w_latent  # (n, d_c): d_c numbers a token, all that the KV cache keeps
    if o.latent_norm is None:
        return latent, {"latent": latent}
    d = len(o.latent_norm)
    gamma = torch.tensor(o.latent_norm, dtype=latent.dtype, device=latent.device)
    normed = torch.cat((rms_norm(latent[..., :d], gamma, o.norm_eps), latent[..., d:]), dim=-1)
    return normed, {"latent_unnormed": latent, "latent": normed}


def matrix(case: Case, name: str, dtype: torch.dtype, device: torch.device) -> Tensor:
    """One of the case's matrices as a tensor: from its numbers, or a copy of the tensor they came from (a real
    model's case, Case.keep_tensors), laid out as one made from the numbers is."""
    kept = case.__dict__.get("_tensors", {}).get(name)
    if kept is None:
        return torch.tensor(getattr(case, name), dtype=dtype, device=device)
    return torch.empty(kept.shape, dtype=dtype, device=device).copy_(kept)


def rope(m: Tensor, positions: Tensor, theta: Tensor) -> Tensor:
    """Rotary position embedding of (h?, n, d): dims 2p and 2p+1 of the token at position t turned by the angle
    t · θ_p (interleaved pairs, as in the RoPE paper and GGUF files), for the pairs θ has (partial rotary: the first
    d_rot dims; the rest pass unturned). Angles in float64, then m's dtype."""
    d_rot = 2 * theta.numel()
    angles = positions.to(torch.float64)[:, None] * theta  # (n, d_rot/2)
    cos, sin = (f.to(dtype=m.dtype, device=m.device) for f in (angles.cos(), angles.sin()))
    even, odd = m[..., 0:d_rot:2], m[..., 1:d_rot:2]  # (h?, n, d_rot/2) each
    turned = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
    return turned if d_rot == m.shape[-1] else torch.cat((turned, m[..., d_rot:]), dim=-1)


def rope_theta(o, d: int) -> Tensor:
    """θ_p, the angle per position of each pair p of the d dims RoPE turns (float64; a case's d_rot): the paper's
    base^(−2p/d), or the frequencies given (a model's scaled RoPE). `o`: a case's options or a model's spec (both
    name the two)."""
    if o.rope_frequencies is not None:
        return torch.tensor(o.rope_frequencies, dtype=torch.float64)
    return o.rope_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def position_bias(o, i: range, j: range, dtype: torch.dtype, device: torch.device) -> Tensor | None:
    """Step 4's term for where each key is from each query, queries at token indices i and keys at j, each a run of
    consecutive tokens (h, len(i), len(j)): ALiBi's − m_h (i − j) and T5's learned t_h[bucket(j − i)], or None with
    neither. Made once per distance (h, len(i) + len(j) − 1) and spread over the pairs: a pair's bias is its
    distance's (n² lookups were 7 of a 1024-token trace's 57 ms)."""
    if not o.biased:
        return None
    distance = torch.arange(j.start - (i.stop - 1), j.stop - i.start, device=device)  # every j − i, least first
    by_distance = 0
    if o.alibi is not None:  # whole-number distances: exact in either dtype
        by_distance = distance.to(dtype) * torch.tensor(o.alibi, dtype=dtype, device=device)[:, None]
    if o.relative_bias is not None:
        by_distance = by_distance + torch.tensor(o.relative_bias, dtype=dtype, device=device)[:, _buckets(o, distance)]
    return _spread(by_distance, len(j))


def _spread(by_distance: Tensor, keys: int) -> Tensor:
    """(…, D) values by distance j − i, least first, as (…, queries, keys): query r's row is the keys' window of
    distances that starts len(i) − 1 − r from the least (a view per row, then one copy)."""
    return by_distance.unfold(-1, keys, 1).flip(-2)


def relative_buckets(distance: Tensor, buckets: int, max_distance: int, bidirectional: bool) -> Tensor:
    """T5's bucket of each distance j − i: one bucket per distance below half the buckets, then logarithmically
    wider ones up to max_distance (past it, the last); bidirectional, keys ahead take the second half of the buckets.
    In float32, as T5 computes it (a bucket's edge is where the log crosses a whole number)."""
    if bidirectional:
        buckets //= 2
        ahead = (distance > 0).long() * buckets
        distance = distance.abs()
    else:
        ahead, distance = 0, (-distance).clamp(min=0)  # keys ahead: bucket 0 (a causal mask hides them)
    exact = buckets // 2
    spread = torch.log(distance.float() / exact) / math.log(max_distance / exact) * (buckets - exact)
    far = (exact + spread.long()).clamp(max=buckets - 1)  # a distance of 0's −∞ is not taken: exact
    return ahead + torch.where(distance < exact, distance, far)


def buckets_of(o, i: range, j: range) -> Tensor:
    """T5's bucket of each query at token index i and key at j, each a run of consecutive tokens (len(i), len(j)),
    under the case's options: its table's width, its max distance, both directions (T5's encoder) or not (its
    decoder)."""
    return _spread(_buckets(o, torch.arange(j.start - (i.stop - 1), j.stop - i.start)), len(j))


def _buckets(o, distance: Tensor) -> Tensor:
    """T5's bucket of each distance under the case's options (each distinct distance once: a few, not n²)."""
    buckets = relative_buckets(distance.cpu(), len(o.relative_bias[0]), o.relative_max_distance,
                               o.relative_bidirectional)  # fmt: skip
    return buckets.to(distance.device)  # on the CPU, as the oracle: a GPU's float32 log may round an edge apart


def relative_bucket(o, distance: int) -> int:
    """T5's bucket of one distance j − i, as the trace computed it."""
    return int(_buckets(o, torch.tensor([distance]))[0])


def softmax_with_sink(scores: Tensor, sinks: Tensor) -> tuple[Tensor, Tensor]:
    """Step 5 with gpt-oss's sinks (sinks broadcast to (h?, 1, 1)): A_ij = e^S_ij / (e^s_h + Σ_k e^S_ik), and the
    weight the sink took, e^s_h over the same sum: the softmax of each row with the sink as one more key, as
    transformers computes it (torch's fused softmax: a hand-made one's exp of far-below-the-max scores was 10× slower
    on the CPU, bench/variants.md)."""
    sink = sinks.expand(*scores.shape[:-1], 1)  # (h?, n_q, 1): the head's s_h beside each row
    both = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)  # (h?, n_q, n_k + 1)
    return both[..., :-1], both[..., -1:]


def score_options(case: Case, device: torch.device) -> dict:
    """Steps 4-5's options as steps_4_to_7 takes them, for every query: the scale and temperature, which keys each
    query may see (the mask and the sliding window), the weights override, ALiBi's position bias, the cap, and the
    sink logits (shaped to broadcast over a head's scores)."""
    o, dtype, h = case.options, getattr(torch, case.options.dtype), case.options.heads
    allowed, override, _ = option_tensors(case, device)

    def per_head(values):  # (h, 1, 1), or a 0-d tensor for one head
        tensor = torch.tensor(values, dtype=dtype, device=device)
        return tensor[:, None, None] if h > 1 else tensor[0]

    bias = position_bias(o, range(case.n), range(case.n), dtype, device)  # (h, n, n) or None
    bias = bias[0] if bias is not None and h == 1 else bias  # (h?, n, n)
    sinks = None if o.sinks is None else per_head(o.sinks)
    return {
        "scale": scale_factor(case), "temperature": o.temperature, "allowed": allowed, "override": override,
        "position_bias": bias, "softcap": o.softcap, "sinks": sinks,
    }  # fmt: skip


def at_rows(options: dict, i: int) -> dict:
    """score_options for query i alone: its rows of the mask, the override and the position bias."""
    return options | {name: _row(options[name], i) for name in ("allowed", "override", "position_bias")}


def of_head(options: dict, head: int, heads: int) -> dict:
    """score_options for one head of several: its own slice of the per-head ones (ALiBi's bias, the sinks)."""
    if heads == 1:
        return options
    return options | {
        name: None if options[name] is None else options[name][head] for name in ("position_bias", "sinks")
    }


def named(o, step: str, **tensors: Tensor) -> dict[str, Tensor]:
    """Queries and keys under their names at the end of step 3 or 3a: "queries" and "keys" are what the scores use,
    so with a norm after them step 3's are queries_unnormed, and with RoPE after them queries_unrotated."""
    if step == "qkv" and o.q_norm is not None:
        suffix = "_unnormed"
    else:
        suffix = "" if o.rope_base is None else "_unrotated"
    return {name + suffix: tensor for name, tensor in tensors.items()}


def rms_norm(m: Tensor, gamma: Tensor, eps: float, rest=None) -> Tensor:
    """Each row of (…, d) divided by its root mean square √(mean(m²) + ε), then times γ (d,), as Qwen3's q/k norm;
    with γ of every head's dims, a token's rows of every head (h, n, d) at once, as OLMo 2's (norm_axes); with rest
    (each row's sum of squares in the layer's other heads (n,), and the layer's width), √((Σ m² + rest) / width + ε)."""
    own = gamma.numel()
    gamma, axes = norm_axes(m, gamma)
    return m * torch.rsqrt(mean_square(m, axes, own, rest) + eps) * gamma


def norm_rests(o, q_rows: slice | range = slice(None), k_rows: slice | range = slice(None)) -> tuple:
    """The layer's other heads' share of the norm over the width (norm_rest) for these query and key rows, as
    rms_norm takes it: (sums, width) for the queries and the keys; (None, None) for a case without it."""
    r = o.norm_rest
    if r is None:
        return None, None
    return (r.q[q_rows], r.q_width), (r.k[k_rows], r.k_width)


def qk_normed(o, queries: Tensor, keys: Tensor, rows: tuple = (slice(None), slice(None))) -> tuple[Tensor, Tensor]:
    """Step 3a where the case has it: each head's queries and keys (…, d_head) RMS-normed, times γ_Q and γ_K; with
    norm_width, a token's queries (keys) of every head at once, and the other heads' share where the case has it
    (rows: which tokens' the queries and keys are, for decoding's rows)."""
    if o.q_norm is None:
        return queries, keys
    gamma_q, gamma_k = (torch.tensor(w, dtype=queries.dtype, device=queries.device) for w in (o.q_norm, o.k_norm))
    rest_q, rest_k = norm_rests(o, *rows)
    return rms_norm(queries, gamma_q, o.norm_eps, rest_q), rms_norm(keys, gamma_k, o.norm_eps, rest_k)


def positions(case: Case) -> Tensor:
    """Each token's position for RoPE: the case's, or 0, 1, …, n − 1."""
    given = case.options.positions
    return torch.arange(case.n) if given is None else torch.tensor(given)


class Broadcast:
    """Step 6's product values[..., :, None, :] * weights.mT[..., :, :, None], not held: indexing it makes just the
    products asked for, from two expanded views (no copies). Indexing the head alone gives that head's Broadcast."""

    def __init__(self, values: Tensor, weights: Tensor):
        self.values, self.weights = values, weights
        v, w = values[..., :, None, :], weights.mT[..., :, :, None]  # (h?, n_k, 1, d_v), (h?, n_k, n_q, 1)
        self.shape = torch.broadcast_shapes(v.shape, w.shape)  # (h?, n_k, n_q, d_v)
        self._v, self._w = v.expand(self.shape), w.expand(self.shape)
        self.dtype, self.device = values.dtype, values.device

    def __getitem__(self, index) -> Tensor | Broadcast:
        if len(self.shape) == 4 and not isinstance(index, bool | tuple | slice | list):
            with contextlib.suppress(TypeError):  # one head, by any integer (a Python int, NumPy's, a 0-d tensor)
                head = operator.index(index)
                return Broadcast(self.values[head], self.weights[head])
        return self._v[index] * self._w[index]

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def detach(self) -> Broadcast:
        return self

    def cpu(self) -> Broadcast:
        return Broadcast(self.values.cpu(), self.weights.cpu())


def _step_7_parts(head_outputs: Tensor, concat: Tensor, w_out: Tensor | None) -> dict[str, Tensor]:
    """What step 7 records beside the outputs: the heads and their concatenation, and concat before w_out."""
    multi_head = head_outputs.dim() == 3
    parts = {"head_outputs": head_outputs} if multi_head else {}
    return parts | ({"concat": concat} if multi_head or w_out is not None else {})


def one_query(trace: Trace, i: int) -> dict[str, Tensor]:
    """Steps 4-7 for query i alone, as step 8 runs them, with every tensor recorded (on the CPU)."""
    case, cpu = trace.case, torch.device("cpu")
    options, w_out = at_rows(score_options(case, cpu), i), option_tensors(case, cpu)[2]
    recorded: dict[str, Tensor] = {}
    query_i = trace["queries"][..., i : i + 1, :]
    steps_4_to_7(
        query_i, trace["keys"], trace["values"], **options, w_out=w_out,
        record=lambda step, **tensors: recorded.update(tensors),
    )  # fmt: skip
    return recorded


def variant_outputs(trace: Trace, case: Case) -> Tensor:
    """The outputs of `case`, a case with the trace's numbers and other options (a variant), made from the trace's
    queries, keys and values: steps 4-7 one head at a time, nothing recorded. It needs one head's n × n scores at a
    time, where a whole trace holds every head's four (the variants page shows five variants)."""
    queries, keys, values = (_with_head(trace, name) for name in ("queries", "keys", "values"))  # (h, n, d/h)
    options, h = score_options(case, torch.device("cpu")), case.options.heads
    heads = [
        steps_4_to_7(q, k, v, **of_head(options, i, h), w_out=None, whole=False)
        for i, (q, k, v) in enumerate(zip(queries, keys, values, strict=True))
    ]
    concat = torch.cat(heads, dim=-1)  # (n, d_v): the heads side by side
    w_out = case.options.w_out
    return concat if w_out is None else concat @ torch.tensor(w_out, dtype=concat.dtype)


def variant_weights(trace: Trace, case: Case, head: int = 0) -> Tensor:
    """Step 5's weights (n_q, n_k) of one head for a variant `case`, from the trace's queries and keys."""
    q, k, v = (_with_head(trace, name)[head] for name in ("queries", "keys", "values"))
    recorded: dict[str, Tensor] = {}
    record = lambda step, **tensors: recorded.update(tensors)  # noqa: E731
    options = of_head(score_options(case, torch.device("cpu")), head, case.options.heads)
    steps_4_to_7(q, k, v, **options, w_out=None, record=record, whole=False)
    return recorded["weights"]


def _with_head(trace: Trace, name: str) -> Tensor:
    """A recorded tensor with its head axis, one head or several: (h, n, d/h)."""
    return trace[name] if trace.case.options.heads > 1 else trace[name][None]


def option_tensors(case: Case, device: torch.device) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """The options that are matrices, as tensors on the device: which keys each query may attend to (the mask),
    the weights override and w_out; None for each the case does not have."""
    o, dtype = case.options, getattr(torch, case.options.dtype)
    override = None if o.weights_override is None else torch.tensor(o.weights_override, dtype=dtype, device=device)
    w_out = None if o.w_out is None else torch.tensor(o.w_out, dtype=dtype, device=device)
    return _allowed(o.mask, case.n, device, o.window), override, w_out  # cross-attention: an explicit mask alone


def _row(matrix: torch.Tensor | None, i: int) -> torch.Tensor | None:
    return None if matrix is None else matrix[..., i : i + 1, :]


def _allowed(mask, n: int, device: torch.device, window: int | None = None) -> torch.Tensor | None:
    """Which keys each query may see (n, n_kv): the mask's, and within a sliding window the last `window` keys up to
    the query itself; None: every key."""
    allowed = None
    if mask == "causal":  # query i may attend to keys 1..i
        allowed = torch.ones(n, n, dtype=torch.bool, device=device).tril()
    elif mask is not None:
        allowed = torch.tensor(mask, device=device) != 0
    if window is not None:  # keys i − window < j ≤ i: the window ends at the query, so it is causal too
        inside = torch.ones(n, n, dtype=torch.bool, device=device).tril().triu(1 - window)
        allowed = inside if allowed is None else allowed & inside
    return allowed


def scale_factor(case: Case) -> float:
    """The number the raw scores are multiplied by: 1 in the article, 1/√(d_k per head) in textbook attention."""
    scale = case.options.scale
    return {"none": 1.0, "sqrt_dk": 1 / math.sqrt(case.d_head)}.get(scale, scale)


def tolerance(case: Case, tensor: Callable[[str], Tensor], rows: int | None = None, projected: bool = False) -> Tensor:
    """How far another float computation of the case's outputs (their first `rows`) may be from these: the one
    rule (base/tolerance.py), from the recorded tensors, by name (a trace, or its records as they are made).
    projected: the other computation makes q, k and v its own way (not x @ W as step 3 does)."""
    o, rows = case.options, case.n if rows is None else rows
    x, w_query, w_key, w_value, queries, keys, values, weights = map(tensor, TOLERANCE_READS)
    w_out = None if o.w_out is None else torch.tensor(o.w_out, dtype=torch.float64)
    multiplier = scale_factor(case) / o.temperature
    queries, weights = queries[..., :rows, :], weights[..., :rows, :]
    norm = None
    if o.q_norm is not None:  # step 3's queries and keys, before the norm
        norm = (tensor("queries_unnormed")[..., :rows, :], tensor("keys_unnormed"), o.q_norm, o.k_norm, o.norm_eps,
                norm_rests(o, slice(rows)))  # fmt: skip
    rope = case.d_rot if o.rope_base is not None else 0  # how many of a head's dims RoPE turned
    scores = tensor("scores")[..., :rows, :] if o.biased or o.softcap is not None else None
    latent = None
    if o.w_latent is not None:  # MLA: keys and values from the latent (before its norm, where it has one)
        unnormed = tensor("latent" if o.latent_norm is None else "latent_unnormed")
        latent = (tensor("w_latent"), unnormed, o.latent_norm, o.norm_eps)
    x_kv = tensor("x_kv") if case.cross else None  # cross-attention: keys and values from the other sentence
    return attention_tolerance(x, w_query, w_key, w_value, queries, keys, values, weights, multiplier, rope, w_out,
                               projected, norm, scores, latent, x_kv)  # fmt: skip


TOLERANCE_READS = ("x", "w_query", "w_key", "w_value", "queries", "keys", "values", "weights")


def repeat_check(case: Case, tensor: Callable[[str], Tensor], by_query: Tensor, outputs: Tensor) -> Check:
    """Step 8 against step 7: its rows (the first ones, at big n) each within the one rule's tolerance."""
    rows = len(by_query)
    return compare("step 7", by_query, outputs.cpu()[:rows], tolerance(case, tensor, rows))


def _trace(case: Case, device: torch.device, records: dict, outputs: torch.Tensor) -> Trace:
    steps = []
    for name in step_names(case):
        tensors, seconds = records[name]
        notes = tuple(_notes(name, case, tensors, outputs, records))
        steps.append(step(case, name, MappingProxyType(tensors), str(device), seconds, notes))
    return Trace(case, str(device), tuple(steps), records["outputs"][0]["outputs"])


def _recorded(records: dict, name: str) -> Tensor:
    """A tensor of the records as they are made, by name (each name is recorded by one step: Record.made_by)."""
    return next(tensors[name] for tensors, _ in records.values() if name in tensors)


def _notes(name: str, case: Case, tensors: dict, outputs: torch.Tensor, records: dict):
    """Warnings and checks a reader should see beside the step."""
    o = case.options
    if name == "scores" and isinstance(o.mask, tuple):  # a causal mask leaves every query its own key
        for i in (i for i, row in enumerate(o.mask) if not any(row)):  # every key masked
            then = msg("note.masked_override") if o.weights_override else msg("note.masked_zero")
            yield msg("note.masked_row", row=i + 1, token=case.tokens[i], then=then)
    if name == "softmax" and o.weights_override is not None:
        yield msg("note.override")
        gap = (tensors["weights"] - tensors["weights_exact"]).abs().max().item()
        if gap > ROUNDED_WITHIN:
            yield msg("note.stale_override", gap=gap)
    if name == "weighted" and isinstance(tensors["weighted"], Broadcast):
        w = tensors["weighted"]
        yield msg("note.broadcast_not_kept", numbers=w.numel(), mib=w.numel() * w.dtype.itemsize / 2**20)
    if name == "repeat":
        by_query = tensors["outputs_by_query"]
        checked = repeat_check(case, lambda name: _recorded(records, name), by_query, outputs)
        agrees, difference = checked.agrees, checked.difference
        if len(by_query) < case.n:  # big n: the first queries only
            some = {"difference": difference, "m": len(by_query), "n": case.n}
            yield msg("note.repeat_some_equal", **some) if agrees else msg("note.repeat_some_differ", **some)
        else:
            yield msg("note.repeat_equals" if agrees else "note.repeat_differs", difference=difference)
