"""Decoding with a KV cache: attention one token at a time, as a chat model generates (or, with cross-attention, as
an encoder-decoder translates), recorded and checked against the whole computation (the trace of the same case:
with a causal mask, or with cross-attention as it is)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import ClassVar

import torch

from ..base.case import Case, CaseError, with_options
from ..base.device import resolve_device
from ..base.i18n import Message, msg
from ..base.record import Check, Record, Recorder, Step, compare, worst
from ..forward.compute import (
    Trace,
    attend,
    latent_of,
    norm_rests,
    option_tensors,
    position_bias,
    positions,
    qk_normed,
    rms_norm,
    rope,
    rope_theta,
    scale_factor,
    softmax_with_sink,
    tolerance,
)

Tensor = torch.Tensor
CAUSAL = "the causal trace"  # the oracle of every step: the whole causal computation of the same case
WHOLE = "the whole trace"  # cross-attention's: the same case's trace, every target token at once (no causal mask)
# Decoded steps: a sentence's worth (the generation's limit, models.MAX_SENTENCE_TOKENS). Past it the first ones are
# decoded, as step 8 repeats the first 16 queries: a Python loop of 1,024 steps took 8.6 s at the limits (16 heads)
MAX_DECODE_N = 64

# What each axis of a decoding step's tensors is; with heads > 1 the per-head ones have the head axis first (the
# cache's is the key/value head: with grouped-query attention, fewer than the query heads). With multi-head latent
# attention the cache holds each token's latent (latent_cache) and the keys and values are made from it each step.
# With cross-attention the cache holds the source's keys and values (or latents), made once from x_kv
AXES = {
    "x_t": ("token", "feature"),
    "x_kv": ("key", "feature"),
    "q_t": ("token", "query dim"),
    "k_t": ("token", "key dim"),
    "v_t": ("token", "value dim"),
    "k_cache": ("key", "key dim"),
    "v_cache": ("key", "value dim"),
    "latent_unnormed_t": ("token", "latent dim"),
    "latent_t": ("token", "latent dim"),
    "latent_cache": ("key", "latent dim"),
    "k_from_latent": ("key", "key dim"),
    "v_from_latent": ("key", "value dim"),
    "position_bias_t": ("query", "key"),
    "scores_uncapped_t": ("query", "key"),
    "scores_t": ("query", "key"),
    "weights_t": ("query", "key"),
    "weights_sink_t": ("query", "sink"),
    "output_t": ("query", "output dim"),
}
PER_HEAD = {"q_t", "k_t", "v_t", "k_cache", "v_cache", "k_from_latent", "v_from_latent", "position_bias_t",
            "scores_uncapped_t", "scores_t", "weights_t", "weights_sink_t"}  # fmt: skip


# What each decoding step's tensor is made from: token t's alone, the cache, then its row of attention (with
# cross-attention the cache is made once from the source's x_kv, before the first step)
MADE_FROM = {
    "q_t": ("x_t",),
    "k_t": ("x_t",),
    "v_t": ("x_t",),
    "k_cache": ("k_t", "x_kv"),
    "v_cache": ("v_t", "x_kv"),
    "latent_unnormed_t": ("x_t",),
    "latent_t": ("x_t",),  # with the latent's norm: from latent_unnormed_t (_reads)
    "latent_cache": ("latent_t", "x_kv"),
    "k_from_latent": ("latent_cache",),
    "v_from_latent": ("latent_cache",),
    # with a cap: the scores before it (and ALiBi's bias); the keys: the cache's, or those made from the latent cache
    "scores_uncapped_t": ("q_t", "k_cache", "k_from_latent", "position_bias_t"),
    "scores_t": ("q_t", "k_cache", "k_from_latent", "position_bias_t"),  # with a cap: from scores_uncapped_t (_reads)
    "weights_t": ("scores_t",),
    "weights_sink_t": ("scores_t",),
    "output_t": ("weights_t", "v_cache", "v_from_latent"),
}
CACHED = {"k_cache": "k_t", "v_cache": "v_t", "latent_cache": "latent_t"}  # what the cache holds: each token's row of
# its key and value, or (multi-head latent attention) of its latent


@dataclass(frozen=True, kw_only=True)
class DecodeStep(Step):
    """Decoding step t (from 0): token t's query, key and value, the cache after k_t and v_t were appended, q_t's
    scores and weights against it, and output t; checked against row t of the causal trace. With cross-attention:
    target token t's query alone, against the source's cache (made once), checked against row t of the trace."""

    t: int
    check: Check  # output t against row t of the causal trace (cross-attention's: of the whole trace)
    first: int = 0  # the oldest token in the cache (from 0): under a sliding window, tokens before it were evicted
    source: int | None = None  # cross-attention: the n_kv source tokens the cache holds from the start; None: self

    @property
    def cached(self) -> range:
        """The tokens (from 0) whose keys and values (or latents) the cache holds after this step: first … t; with
        cross-attention the source's tokens 0 … n_kv − 1, every step the same."""
        return range(self.source) if self.source is not None else range(self.first, self.t + 1)

    @property
    def evicted(self) -> int:
        """How many tokens' keys and values (or latents) the window has evicted so far (tokens 0 … first − 1)."""
        return self.first

    @property
    def keys(self) -> Tensor:
        """The keys q_t was scored against: the cache's, or those made from the latent cache at this step."""
        return self.tensors["k_cache" if "k_cache" in self.tensors else "k_from_latent"]

    @property
    def values(self) -> Tensor:
        """The values output t was summed from: the cache's, or those made from the latent cache."""
        return self.tensors["v_cache" if "v_cache" in self.tensors else "v_from_latent"]

    @property
    def difference(self) -> float:
        return self.check.difference

    @property
    def agrees(self) -> bool:
        return self.check.agrees

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(tensor.shape) for name, tensor in self.tensors.items()}


@dataclass(frozen=True)
class Decoding(Record):
    """A case decoded token by token with a KV cache: its steps, and the causal trace each step is checked with."""

    AXES: ClassVar = AXES
    PER_HEAD: ClassVar = frozenset(PER_HEAD)
    TITLE: ClassVar = "Decoding with a KV cache"
    case: Case  # as decoded: causal (cross-attention's: as it is), the exact softmax
    # the whole causal computation's scores, its rows of the decoded tokens (h?, m, n; cross-attention's m × n_kv),
    # not the trace itself, which the session's cache holds and may drop (at the limits a decoding holding it kept a
    # second 192 MiB trace alive)
    causal_scores: Tensor
    steps: tuple[DecodeStep, ...]
    outputs: Tensor  # (n, d_out): the steps' outputs stacked (the first MAX_DECODE_N rows past it)
    notes: tuple[Message, ...] = ()  # what decoding changed of the case as given (no mask, rounded weights)

    def tensors_held(self) -> list[Tensor]:
        """Every tensor it holds, for the session's cache to count (app/cache.py)."""
        return [self.causal_scores, self.outputs, *(tensor for step in self.steps for tensor in step.tensors.values())]

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def check(self) -> Check:
        """Every output t against row t of the causal trace: the worst of them."""
        return worst(step.check for step in self.steps)

    @property
    def difference(self) -> float:
        return max(step.difference for step in self.steps)

    @property
    def agrees(self) -> bool:
        return all(step.agrees for step in self.steps)

    def worst(self) -> int:
        """The step (from 0) whose output is furthest from its row of the causal trace."""
        return max(range(self.n), key=lambda t: self.steps[t].difference)

    def status(self) -> Message:
        """The status row: whether every output t equals row t of the causal trace (cross-attention's: of the whole
        trace), and the largest difference."""
        said = {"n": self.n, "difference": self.difference, "row": self.worst() + 1}
        if self.case.cross:  # against the whole trace, every target token at once
            return msg("decoding.agrees_cross" if self.agrees else "decoding.differs_cross", **said)
        return msg("decoding.agrees" if self.agrees else "decoding.differs", **said)

    def heading(self) -> str:
        return str(self.status())


def decodable(case: Case) -> Case:
    """The case as decoding runs it: causal (decoding can only look back: key j does not exist yet while token i <
    j is decoded) and with the exact softmax; CaseError for a custom mask that is not the causal one. A
    cross-attention case as it is, with the exact softmax: its keys are the source's, which all exist before the
    first target token (an encoder-decoder's), so no causal mask (the case refuses one); an explicit mask (n × n_kv)
    is kept, row t hiding source tokens from target token t."""
    if case.cross:
        return with_options(case, weights_override=None)
    mask = case.options.mask
    if isinstance(mask, tuple):
        for i, row in enumerate(mask):
            for j, allowed in enumerate(row):
                if bool(allowed) != (j <= i):
                    problem = msg("decoding.mask_future" if j > i else "decoding.mask_past")
                    raise CaseError(msg("decoding.where_mask", row=i + 1, column=j + 1), problem)
    return with_options(case, mask="causal", weights_override=None)


def decode(case: Case, causal: Trace | None = None) -> Decoding:
    """Decode the case token by token with a KV cache (its first MAX_DECODE_N tokens), each step checked against
    row t of its causal trace (`causal`, when it is already made: the trace of decodable(case)). Under a sliding
    window the cache holds the last `window` tokens' keys and values: an older one is evicted as a new one comes.
    With multi-head latent attention the cache holds each token's latent instead, the keys and values made from it.
    With cross-attention the cache holds the source's keys and values (or latents), made once from x_kv before the
    first target token, and never grows or evicts; each step attends over all of it (checked against the trace)."""
    given, case = case, decodable(case)
    notes = tuple(_notes(given))
    causal = attend(case) if causal is None else causal
    if causal.case != case:
        raise ValueError("the causal trace given is not of the case as decoded")
    o = case.options
    device, dtype = resolve_device(o.device), getattr(torch, o.dtype)
    h = o.heads
    allowed, _, w_out = option_tensors(case, device)  # (d_v, d_out) or None
    allowed = allowed if case.cross else None  # cross-attention's explicit mask (n, n_kv); self's causal: the cache
    x = torch.tensor(case.x, dtype=dtype, device=device)  # (n, d_in)
    w = _weights(case, dtype, device)  # w_query, w_key, w_value (and MLA's w_latent)
    at = positions(case)  # (n,): each token's position for RoPE
    theta = None if o.rope_base is None else rope_theta(o, case.d_rot)  # partial rotary: the first d_rot dims
    # the sinks' logits s_h (h, 1, 1) to broadcast over a head's row, or None
    sinks = None if o.sinks is None else torch.tensor(o.sinks, dtype=dtype, device=device)[:, None, None]
    # what the cache holds, by name: keys and values, or latents; a row appended a step (cross-attention: the
    # source's, all of them, made once here)
    source = {"x_kv": torch.tensor(case.x_kv, dtype=dtype, device=device)} if case.cross else {}  # (n_kv, d_in)
    held = _source_cache(case, source["x_kv"], w) if case.cross else _empty_cache(case, w)
    rows, steps = causal.outputs.cpu(), []
    names = tuple(str(t + 1) for t in range(min(case.n, MAX_DECODE_N)))  # a step by its token, from 1
    recorder = Recorder(names, device)
    # output t against row t, within the one rule's tolerance: the same sums, q, k and v made a row at a time
    within = tolerance(case, causal.__getitem__, rows=len(names), projected=True)  # (m, d_out)
    oracle = WHOLE if case.cross else CAUSAL
    for t, name in enumerate(names):
        x_t = x[t : t + 1]  # (1, d_in): token t alone
        q_t = (x_t @ w["w_query"]).view(h, 1, -1)  # (h, 1, d_head): only token t's query is computed
        q_t, row, held, first = _cache_step(case, x_t, q_t, held, w, at, theta, t)  # appended (and evicted)
        at_rows = (slice(t, t + 1), slice(first, t + 1))  # the query's and the cached keys' tokens (their norm_rest)
        q_t, made = _from_latent(case, q_t, held, w, at[first : t + 1], theta, at_rows)  # MLA: from the cache
        tensors = {"x_t": x_t, "q_t": q_t, **source, **row, **held, **made}
        keys, values = (tensors[k] for k in (("k_from_latent", "v_from_latent") if made else ("k_cache", "v_cache")))
        cached = range(case.n_kv) if case.cross else range(first, t + 1)
        seen = None if allowed is None else allowed[t : t + 1]  # (1, n_kv): cross-attention's mask row t
        tensors |= attend_cached(q_t, keys, values, cached, case, sinks, w_out, seen)
        recorder.record(name, **{k: _shaped(tensor, k, h) for k, tensor in tensors.items()})
        tensors, seconds = recorder.records[name]
        check = compare(oracle, tensors["output_t"], rows[t : t + 1], within[t : t + 1])
        steps.append(DecodeStep(t + 1, name, name, case.tokens[t], "", "", MappingProxyType(tensors),
                                MappingProxyType(_reads(tensors)), str(device), seconds, t=t, check=check,
                                first=first, source=case.n_kv if case.cross else None))  # fmt: skip
    outputs = torch.cat([step["output_t"] for step in steps])  # (n, d_out)
    causal_scores = causal["scores"][..., : len(steps), :].clone()  # (h?, m, n): a copy, not a view of the trace's
    return Decoding(case, causal_scores, tuple(steps), outputs, notes)


def _cache_step(case: Case, x_t: Tensor, q_t: Tensor, held: dict[str, Tensor], w: dict[str, Tensor], at: Tensor,
                theta: Tensor | None, t: int) -> tuple[Tensor, dict[str, Tensor], dict[str, Tensor], int]:  # fmt: skip
    """Step t's query (normed and turned where the case says), what token t adds to the cache, the cache after it
    and the oldest token it holds: token t's key and value (or latent) appended, a window evicting the oldest.
    Cross-attention's cache is the source's, as it was: nothing added, nothing evicted."""
    if case.cross:  # no RoPE (the case refuses it): a query and a source key are not in one sentence
        return _query_normed(case, q_t, w, t), {}, held, 0
    q_t, row = _token_row(case, x_t, q_t, w, at[t : t + 1], theta, t)  # k_t and v_t, or the latent c_t
    held = {k: _appended(cache, row[CACHED[k]], case.options.window) for k, cache in held.items()}
    return q_t, row, held, t + 1 - next(iter(held.values())).shape[-2]  # the oldest cached: 0, or t − window + 1


def _source_cache(case: Case, x_kv: Tensor, w: dict[str, Tensor]) -> dict[str, Tensor]:
    """Cross-attention's cache, made once from the source's x_kv (n_kv, d_in) before the first target token (an
    encoder-decoder makes it from the encoder's output): its keys (normed where the case has a q/k norm) and values,
    (g, n_kv, d) each; or with a latent, the source's latents (n_kv, d_c), the keys and values made from them at
    each step as for a sentence of its own."""
    g = case.options.kv_heads or case.options.heads
    if "w_latent" in w:
        return {"latent_cache": latent_of(case.options, x_kv, w["w_latent"])[0]}  # (n_kv, d_c)
    keys = (x_kv @ w["w_key"]).unflatten(-1, (g, -1)).transpose(0, 1)  # (g, n_kv, d_head)
    values = (x_kv @ w["w_value"]).unflatten(-1, (g, -1)).transpose(0, 1)  # (g, n_kv, d_v/g)
    if case.options.k_norm is not None:  # step 3a, once: a cached key is never normed again
        keys = rms_norm(keys, torch.tensor(case.options.k_norm, dtype=keys.dtype, device=keys.device),
                        case.options.norm_eps, norm_rests(case.options)[1])  # fmt: skip
    return {"k_cache": keys, "v_cache": values}


def _query_normed(case: Case, q_t: Tensor, w: dict[str, Tensor], t: int) -> Tensor:
    """Cross-attention's query t, normed where the case has a q/k norm (with a latent, later, with the keys made
    from the cache: _from_latent)."""
    o = case.options
    if o.q_norm is None or "w_latent" in w:
        return q_t
    rest = norm_rests(o, slice(t, t + 1))[0]  # token t's own row of the other heads' share, where the case has it
    return rms_norm(q_t, torch.tensor(o.q_norm, dtype=q_t.dtype, device=q_t.device), o.norm_eps, rest)


def _weights(case: Case, dtype: torch.dtype, device: torch.device) -> dict[str, Tensor]:
    """The case's projections as tensors by name: W_Q, W_K, W_V, and multi-head latent attention's W_DKV."""
    names = ("w_query", "w_key", "w_value")
    w = {name: torch.tensor(getattr(case, name), dtype=dtype, device=device) for name in names}
    if case.options.w_latent is not None:
        w["w_latent"] = torch.tensor(case.options.w_latent, dtype=dtype, device=device)  # (d_in, d_c)
    return w


def _empty_cache(case: Case, w: dict[str, Tensor]) -> dict[str, Tensor]:
    """The cache before the first token: (g, 0, d_head) keys and (g, 0, d_v/g) values; or, with a latent, (0, d_c)
    latents (d_c numbers a token, where keys and values take 2 · g · d_head)."""
    g = case.options.kv_heads or case.options.heads
    if "w_latent" in w:
        return {"latent_cache": w["w_latent"].new_empty(0, case.d_c)}
    return {"k_cache": w["w_key"].new_empty(g, 0, w["w_key"].shape[1] // g),
            "v_cache": w["w_value"].new_empty(g, 0, w["w_value"].shape[1] // g)}  # fmt: skip


def _token_row(case: Case, x_t: Tensor, q_t: Tensor, w: dict[str, Tensor], at_t: Tensor, theta: Tensor | None,
               t: int):  # fmt: skip
    """What token t adds to the cache, with its query: its key and value (normed and turned once, at its own
    position: a cached key is never turned again), or with a latent its c_t = x_t W_DKV (normed where the case has
    the latent's norm; its query is normed and turned with the keys made from the cache, _from_latent)."""
    o, g = case.options, case.options.kv_heads or case.options.heads
    if "w_latent" in w:
        _, latent = latent_of(o, x_t, w["w_latent"])  # (1, d_c): {"latent_unnormed"?, "latent"}
        return q_t, {f"{name}_t": tensor for name, tensor in latent.items()}
    k_t, v_t = (x_t @ w["w_key"]).view(g, 1, -1), (x_t @ w["w_value"]).view(g, 1, -1)  # (g, 1, d): its key and value
    # a q/k norm: each head's row (or, over the width, every head's, with token t's row of norm_rest), as whole
    q_t, k_t = qk_normed(o, q_t, k_t, (slice(t, t + 1), slice(t, t + 1)))
    if theta is not None:
        q_t, k_t = rope(q_t, at_t, theta), rope(k_t, at_t, theta)
    return q_t, {"k_t": k_t, "v_t": v_t}


def _appended(cache: Tensor, row: Tensor, window: int | None) -> Tensor:
    """The cache with token t's row appended (…, tokens, d); under a window, the oldest row evicted once it holds
    more than the window (token t − window left it): never more rows than the window."""
    cache = torch.cat((cache, row), dim=-2)
    return cache[..., 1:, :] if window is not None and cache.shape[-2] > window else cache


def _from_latent(case: Case, q_t: Tensor, held: dict[str, Tensor], w: dict[str, Tensor], at: Tensor,
                 theta: Tensor | None, rows: tuple) -> tuple[Tensor, dict[str, Tensor]]:  # fmt: skip
    """Multi-head latent attention's keys and values of the cached tokens, made from the latent cache C (c, d_c) at
    this step: C W_UK (a q/k norm, then RoPE at each token's own position, with q_t's) and C W_UV, (g, c, d) each;
    q_t as it is and nothing for a plain KV cache. (DeepSeek caches its rotary key already turned; turning the
    latent's copy again at the same position gives the same numbers.)"""
    if "latent_cache" not in held:
        return q_t, {}
    o, g, latent = case.options, case.options.kv_heads or case.options.heads, held["latent_cache"]
    keys = (latent @ w["w_key"]).unflatten(-1, (g, -1)).transpose(0, 1)  # (g, c, d_head)
    values = (latent @ w["w_value"]).unflatten(-1, (g, -1)).transpose(0, 1)  # (g, c, d_v/g)
    q_t, keys = qk_normed(o, q_t, keys, rows)  # rows: token t's query, the cached tokens' keys
    if theta is not None:
        q_t, keys = rope(q_t, at[-1:], theta), rope(keys, at, theta)
    return q_t, {"k_from_latent": keys, "v_from_latent": values}


def attend_cached(q_t: Tensor, keys: Tensor, values: Tensor, cached: range, case: Case, sinks: Tensor | None,
                  w_out: Tensor | None, allowed: Tensor | None = None) -> dict[str, Tensor]:  # fmt: skip
    """Steps 4-7 for token t's one query against the cache (keys and values of the tokens `cached`, t the last):
    its row of scores (ALiBi's or T5's bias for each cached key's distance j − t, the cap), the softmax (a sink's
    logit in its denominator), the weighted sum of the cached values. Every cached key is allowed: the window is the
    cache. Cross-attention's cache is the source's (`cached`: its tokens), with no distance; `allowed` (1, n_kv):
    its explicit mask's row t, or None."""
    o, (h, g) = case.options, (q_t.shape[0], keys.shape[0])
    t, parts, sink = cached[-1], {}, {}
    # grouped-query attention: query heads i·h/g … (i+1)·h/g − 1 read key/value head i (no copy of the cache)
    scores_t = (q_t.view(g, h // g, -1) @ keys.mT * (scale_factor(case) / o.temperature)).view(h, 1, -1)  # (h, 1, c)
    if o.biased:  # ALiBi's − m_h (t − j) or T5's b_h[bucket(j − t)], from each key's token index j
        parts["position_bias_t"] = position_bias(o, range(t, t + 1), cached, scores_t.dtype, keys.device)  # (h, 1, c)
        scores_t = scores_t + parts["position_bias_t"]
    if o.softcap is not None:  # Gemma 2: cap · tanh(s / cap)
        parts["scores_uncapped_t"] = scores_t
        scores_t = o.softcap * torch.tanh(scores_t / o.softcap)
    if allowed is not None:  # a 0 in the mask's row t: target token t may not look at that source token
        scores_t = scores_t.masked_fill(~allowed, float("-inf"))
    if sinks is None:
        weights_t = torch.softmax(scores_t, dim=-1)  # (h, 1, c)
    else:  # gpt-oss: e^s_h joins the denominator; the sink's weight goes to no value
        weights_t, sink["weights_sink_t"] = softmax_with_sink(scores_t, sinks)  # (h, 1, c), (h, 1, 1)
    if allowed is not None:  # a fully masked row is all NaN: zeros instead, as the trace (and fused attention) gives
        weights_t = weights_t.nan_to_num(nan=0.0)
    heads_t = (weights_t.view(g, h // g, -1) @ values).view(h, 1, -1)  # (h, 1, d_v/h)
    output_t = heads_t.transpose(0, 1).flatten(1)  # (1, d_v): the heads side by side
    output_t = output_t if w_out is None else output_t @ w_out  # (1, d_out)
    return parts | {"scores_t": scores_t, "weights_t": weights_t} | sink | {"output_t": output_t}


def _reads(tensors: dict) -> dict[str, tuple[str, ...]]:
    """What each of a step's tensors was made from, of those it recorded (the scores: from the uncapped ones when
    a cap came last)."""
    reads = {k: tuple(p for p in parents if p in tensors) for k, parents in MADE_FROM.items() if k in tensors}
    if "scores_uncapped_t" in tensors:
        reads["scores_t"] = ("scores_uncapped_t",)
    if "latent_unnormed_t" in tensors:  # DeepSeek's norm of the latent
        reads["latent_t"] = ("latent_unnormed_t",)
    return reads


def _shaped(tensor: Tensor, name: str, heads: int) -> Tensor:
    """One head's tensors without the head axis (as the core's trace records a single head)."""
    return tensor[0] if heads == 1 and name in PER_HEAD else tensor


def _notes(case: Case):
    """What decoding changes of the case as given, said beside it."""
    if case.options.mask is None and case.options.window is None and not case.cross:  # a window is causal itself
        yield msg("decoding.note_made_causal")
    if case.options.window is not None:
        yield msg("decoding.note_window", window=case.options.window)
    if case.options.weights_override is not None:
        yield msg("decoding.note_exact")
    if case.n > MAX_DECODE_N:
        yield msg("decoding.note_first", m=MAX_DECODE_N, n=case.n)


# Work and memory, each way -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """What the cost of decoding depends on: one attention layer's widths (or a model's), and the number's bytes."""

    d_in: int
    heads: int
    kv_heads: int
    d_head: int  # a query and key head's width
    d_value_head: int
    d_out: int | None  # w_out's width, None: none
    layers: int = 1
    bytes: int = 4  # float32
    window: int | None = None  # a sliding window: the cache holds at most this many tokens; None: every one
    latent: int | None = None  # multi-head latent attention's d_c: the cache holds a token's latent, d_c numbers,
    # instead of its keys and values (kv_heads · (d_head + d_value_head) numbers); None: keys and values
    source: int | None = None  # cross-attention's n_kv: the cache holds the source's n_kv tokens' keys and values,
    # made once before the first target token, fixed however many target tokens come; None: self-attention

    @classmethod
    def of(cls, case: Case) -> Sizes:
        o, w_out = case.options, case.options.w_out
        g = o.kv_heads or o.heads
        itemsize = torch.empty(0, dtype=getattr(torch, o.dtype)).element_size()
        latent = None if o.w_latent is None else case.d_c
        return cls(case.d_in, o.heads, g, case.d_head, case.d_v // g, None if w_out is None else len(w_out[0]),
                   bytes=itemsize, window=o.window, latent=latent,
                   source=case.n_kv if case.cross else None)  # fmt: skip


def multiply_adds(s: Sizes, t: int, cache: bool) -> int:
    """Multiply-adds of attention for token t (from 0), with the cache (token t's q, k, v, its one row of scores
    against the cached keys, and weighted sum) or without (the whole causal computation of tokens 0..t again:
    every q, k, v and row, each scored against all t + 1 keys before the mask). With a latent, a token's x makes its
    latent, and every key and value attended to is made from a latent (the cached ones too, at each step). With
    cross-attention a target token makes its query alone; the source's n_kv keys and values (or latents) are made
    once with the cache (counted at the first token), and again at every token without it."""
    rows = 1 if cache else t + 1  # queries computed
    keys = cached_tokens(s, t + 1) if cache else (t + 1 if s.source is None else s.source)  # the window's, at most
    key_value = s.kv_heads * (s.d_head + s.d_value_head)  # a token's keys and values, every key/value head's
    made = key_value if s.latent is None else s.latent  # what x makes beside the query: keys and values, or c
    if s.source is None:
        projections = rows * s.d_in * (s.heads * s.d_head + made)
    else:  # the target's queries; the source's keys and values (or latents) once with the cache, else every time
        projections = rows * s.d_in * s.heads * s.d_head + (0 if cache and t else s.source * s.d_in * made)
    projections += 0 if s.latent is None else keys * s.latent * key_value  # C W_UK, C W_UV
    attention = rows * keys * s.heads * (s.d_head + s.d_value_head)  # q·k, then the weights times v
    projection_out = 0 if s.d_out is None else rows * s.heads * s.d_value_head * s.d_out
    return s.layers * (projections + attention + projection_out)


def cache_numbers_per_token(s: Sizes) -> int:
    """The numbers the cache holds per token and layer: a key and a value of every key/value head, kv_heads ×
    (d_head + d_value_head) (2 · kv_heads · d_head), or multi-head latent attention's latent, d_c."""
    return s.kv_heads * (s.d_head + s.d_value_head) if s.latent is None else s.latent


def cache_bytes_per_token(s: Sizes) -> int:
    """The cache's bytes per token: 2 (a key and a value) × layers × kv_heads × d_head × bytes, or where a value
    head is not as wide as a key head, layers × kv_heads × (d_head + its width) × bytes; with a latent,
    layers × d_c × bytes."""
    return s.layers * cache_numbers_per_token(s) * s.bytes


def cached_tokens(s: Sizes, tokens: int) -> int:
    """How many tokens' keys and values the cache holds after `tokens` tokens: all, or the window's last ones;
    with cross-attention the source's n_kv, whatever `tokens` (the target's) is."""
    if s.source is not None:
        return s.source
    return tokens if s.window is None else min(tokens, s.window)


def cache_bytes(s: Sizes, tokens: int) -> int:
    """The cache's bytes after `tokens` tokens: per token, times the tokens it still holds (a window evicts;
    cross-attention's holds the source's tokens, fixed)."""
    return cache_bytes_per_token(s) * cached_tokens(s, tokens)


def measured_cache_bytes(decoding: Decoding) -> int:
    """The bytes of the cache a decoding really filled (its last step's keys and values, or latents)."""
    last = decoding.steps[-1]
    return sum(last[name].numel() * last[name].element_size() for name in CACHED if name in last.tensors)


def model_sizes(spec, bytes: int = 4) -> Sizes:
    """A model's sizes (a models.Spec: layers, heads, kv_heads, head_dim, width), its attention with w_out."""
    return Sizes(spec.width, spec.heads, spec.kv_heads, spec.head_dim, spec.head_dim, spec.width, spec.layers, bytes)


def without_latent(s: Sizes) -> Sizes:
    """The same sizes caching keys and values (each key/value head's), not a latent."""
    return replace(s, latent=None)


def full_heads(s: Sizes) -> Sizes:
    """The same sizes as plain multi-head attention: one key/value head per query head, keys and values cached."""
    return replace(s, kv_heads=s.heads, latent=None)


def mib(count: int) -> float:
    return count / 2**20


def step_of(n: int, said: str | None) -> int | None:
    """The decoding step (from 0) a link or a person names as token t from 1, of n; None when there is none."""
    if not said or not said.isascii() or not said.isdigit() or len(said) > 4:
        return None
    t = int(said) - 1
    return t if 0 <= t < n else None
