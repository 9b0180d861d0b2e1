"""Encoder-decoder models (BART, mBART, Marian, T5), what their adapters share: a source sentence through the encoder
and a target through the decoder; each head of the three attentions (the encoder's self-attention, the decoder's
causal self-attention, its cross-attention over the source) as a case; and greedy translation a token at a time with
the decoder's caches, each new token's cross-attention rows kept as its alignment to the source."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch

from ..base.case import Case, CaseError
from ..base.i18n import msg
from .generate import MAX_NEW_TOKENS, check_length
from .model import MAX_SENTENCE_TOKENS, KVCache, Model, Pass, Run, _as_case

PARTS = ("encoder", "decoder", "cross")  # the encoder's self-attention, the decoder's, the decoder's cross-attention
# transformers' ACT2FN names of the MLPs' activations these families use
ACTIVATIONS = {
    "gelu": torch.nn.functional.gelu,
    "gelu_new": lambda h: torch.nn.functional.gelu(h, approximate="tanh"),  # T5 v1.1's gated-gelu
    "gelu_pytorch_tanh": lambda h: torch.nn.functional.gelu(h, approximate="tanh"),
    "relu": torch.relu,
    "swish": torch.nn.functional.silu,  # Marian's
    "silu": torch.nn.functional.silu,
}


@dataclass(frozen=True)
class Special:
    """The tokens a translation starts with, is forced to and stops at, as the model's config names them."""

    start: int | None  # the decoder's first token: decoder_start_token_id, else bos_token_id, else pad_token_id
    stop: int | None  # eos_token_id: the translation ends there
    first: int | None = None  # forced_bos_token_id: the first new token whatever the logits say (mBART's language)
    banned: tuple[int, ...] = ()  # bad_words_ids of one token (Marian's pad token): never chosen


def special_tokens(config: dict) -> Special:
    """A config's special tokens (of a list of eos ids, the first); a start of None where it names none (the
    family's sizes say so)."""
    pick = lambda *keys: next((config[k] for k in keys if _token(config.get(k))), None)  # noqa: E731
    stop = config.get("eos_token_id")
    stop = stop[0] if isinstance(stop, list) and stop and _token(stop[0]) else stop if _token(stop) else None
    start = pick("decoder_start_token_id", "bos_token_id", "pad_token_id")
    words = config.get("bad_words_ids") if isinstance(config.get("bad_words_ids"), list) else []
    banned = tuple(each[0] for each in words if isinstance(each, list) and len(each) == 1 and _token(each[0]))
    return Special(start, stop, pick("forced_bos_token_id"), banned)


def _token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def checked(special: Special, vocab: object) -> None:
    """KeyError when the config names no start token; ValueError for a special token past the vocabulary."""
    if special.start is None:
        raise KeyError("decoder_start_token_id")
    for token in (special.start, special.stop, special.first, *special.banned):
        if token is not None and isinstance(vocab, int) and token >= vocab:
            raise ValueError(f"special token {token} past the vocabulary of {vocab}")


def activation(name: str):
    """The MLP's activation by transformers' name; ValueError for one not computed here."""
    if name not in ACTIVATIONS:
        raise ValueError(f"activation {name!r}")
    return ACTIVATIONS[name]


def heads_of(m: torch.Tensor, head_dim: int) -> torch.Tensor:
    """(n, h · head_dim) as each head's (h, n, head_dim)."""
    return m.unflatten(-1, (-1, head_dim)).transpose(0, 1)


def merged(out: torch.Tensor) -> torch.Tensor:
    """The heads' outputs (h, n, head_dim) side by side, (n, h · head_dim), as the output projection reads them."""
    return out.transpose(0, 1).flatten(1)


def record(into: tuple[list, list, list], x: torch.Tensor, out: torch.Tensor, weights: torch.Tensor) -> None:
    """One layer's attention input, heads' outputs and weights, kept for its Pass."""
    for kept, tensor in zip(into, (x, out, weights), strict=True):
        kept.append(tensor)


def stacked(kept: tuple[list, list, list]) -> Pass:
    """The layers' inputs, heads' outputs and weights kept by record, as a Pass (no logits)."""
    return Pass(*(torch.stack(each) for each in kept), None)


class Decoded(NamedTuple):
    """Target tokens through the decoder (a family's decode): what it records of each layer's two attentions."""

    own: Pass  # its causal self-attention over the target, layer by layer (logits None)
    cross: Pass  # its cross-attention: inputs (L, m, d) the target's rows the queries are made of; weights (L, h, m, n)
    logits: torch.Tensor  # (m, vocabulary): each new token's prediction of the one after it


@dataclass
class PairCache:
    """The decoder's caches: its self-attention's keys and values of the target so far, and each layer's
    cross-attention keys and values of the source (h, n_src, head_dim), made once from the encoder's output."""

    own: KVCache
    cross: tuple[tuple[torch.Tensor, torch.Tensor], ...]

    @classmethod
    def empty(cls, model: Model, memory: torch.Tensor, room: int) -> PairCache:
        s = model.spec
        shape = (s.decoder_layers, s.heads, room, s.head_dim)
        own = KVCache(torch.zeros(shape, device=model.device), torch.zeros(shape, device=model.device))
        return cls(own, tuple(s.family.cross_kv(model, memory, layer) for layer in range(s.decoder_layers)))

    @property
    def nbytes(self) -> int:
        return self.own.nbytes + sum(2 * k.numel() * k.element_size() for k, _ in self.cross)


@dataclass(frozen=True)
class PairRun:
    """A source sentence through the encoder and a target through the decoder: each attention's input and head
    outputs as a Run over its queries' tokens, and the encoder's output, which every cross-attention head's keys and
    values are made of."""

    source: Run  # the encoder's self-attention over the source's tokens
    target: Run  # the decoder's causal self-attention over the target's (its start token first); next_tokens: its
    # five most likely tokens after the last
    cross: Run  # the decoder's cross-attention: the target's rows as each layer's cross-attention reads them
    memory: torch.Tensor  # (n_src, d_model): the encoder's output as the decoder reads it
    cross_weights: torch.Tensor  # (decoder layers, heads, n_target, n_src): which source token each target token reads

    def run(self, part: str) -> Run:
        """The Run whose rows a part's queries are made of."""
        return {"encoder": self.source, "decoder": self.target, "cross": self.cross}[part]


def pair_run(model: Model, source: str, target: str) -> PairRun:
    """The source through the encoder, and the target (after the decoder's start token) through the decoder, as a
    translation that has reached it would read it; CaseError for a sentence the model cannot take."""
    ids, _ = model.tokenize(source)
    target_ids = [model.spec.family.special.start, *model.tokenize(target)[0]]
    if len(target_ids) > MAX_SENTENCE_TOKENS:
        limit = MAX_SENTENCE_TOKENS - 1  # the start token is one of them
        raise CaseError(msg("where.sentence"), msg("error.sentence_tokens", count=len(target_ids) - 1, limit=limit))
    return _pair(model, source, ids, target_ids, target)


def _pair(model: Model, source: str, ids: list[int], target_ids: list[int], target: str) -> PairRun:
    family, device = model.spec.family, model.device
    with torch.inference_mode():
        encoded, memory = family.encode(model, torch.tensor(ids, device=device))
        decoded = family.decode(model, memory, torch.tensor(target_ids, device=device))
    source_run = Run(model.spec.name, source, tuple(ids), model.labels(ids), encoded.inputs.cpu(),
                     encoded.head_outputs.cpu(), None)  # fmt: skip
    target_run = Run(model.spec.name, target, tuple(target_ids), model.labels(target_ids), decoded.own.inputs.cpu(),
                     decoded.own.head_outputs.cpu(), _top(model, decoded.logits[-1]))  # fmt: skip
    cross_run = replace(target_run, inputs=decoded.cross.inputs.cpu(), head_outputs=decoded.cross.head_outputs.cpu())
    return PairRun(source_run, target_run, cross_run, memory.cpu(), decoded.cross.weights.cpu())


def _top(model: Model, logits: torch.Tensor) -> tuple[tuple[str, float], ...]:
    """The five most likely next tokens and their probabilities."""
    values, indices = torch.softmax(logits.double(), dim=-1).topk(5)
    return tuple((model.tokenizer.decode([i]), p) for i, p in zip(indices.tolist(), values.tolist(), strict=True))


def part_weights(model: Model, part: str, layer: int, head: int | None = None) -> dict[str, torch.Tensor]:
    """One head's W_Q, W_K, W_V (d_in, head_dim) of a part's layer (0-based), or with head None the layer's; biases
    (BART's) as a last row, for the last column of x (and of x_kv), which is 1."""
    d = model.spec.head_dim
    rows = slice(None) if head is None else slice(head * d, (head + 1) * d)
    out = {}
    for name, (weight, bias) in model.spec.family.projections(model.weights, layer, part).items():
        columns = weight[rows].T  # (out, in) -> the case's (d_in, d_head)
        out[name] = columns if bias is None else torch.cat([columns, bias[rows][None]])
    return out


def part_case(model: Model, pair: PairRun, part: str, layer: int, head: int | None = None) -> Case:
    """One head (head None: every head) of a part's layer (0-based) on the pair's sentences, as a case: the
    encoder's self-attention over the source, the decoder's causal self-attention over the target, or its
    cross-attention (x: the target's rows, x_kv: the encoder's output, tokens and tokens_kv their tokens), with the
    model's own options (T5's scale of 1 and relative bias, its decoder's one way)."""
    if part not in PARTS:
        raise ValueError(f"part {part!r}: one of {', '.join(PARTS)}")
    s, run = model.spec, pair.run(part)
    options = {"scale": "sqrt_dk" if s.scale is None else s.scale, "heads": s.heads if head is None else 1,
               "bias": s.bias} | s.family.case_options(model.weights, part, head)  # fmt: skip
    if part == "decoder":
        options["mask"] = "causal"
    keys = {"x_kv": _with_ones(model, pair.memory), "tokens_kv": pair.source.tokens} if part == "cross" else {}
    x = _with_ones(model, run.inputs[layer])
    return _as_case(run.tokens, x, part_weights(model, part, layer, head), options, **keys)


def _with_ones(model: Model, x: torch.Tensor) -> torch.Tensor:
    """x with its last column of ones where the model has biases (the weights' last row)."""
    return torch.cat([x, torch.ones(len(x), 1)], dim=1) if model.spec.bias else x


@dataclass(frozen=True)
class Translation:
    """A source sentence and the target generated for it, greedily, a token at a time: the pair as a PairRun (to
    step through each attention head by head), and each new token's cross-attention rows (its alignment)."""

    source: str
    pair: PairRun  # the source, and the target so far (the start token, then each new token), through the model
    text: str  # the new tokens, decoded
    # (decoder layers, heads, new tokens, n_src): the cross-attention rows of the pass that chose each new token (the
    # row of the token before it, whose prediction it is): which source tokens the decoder read to choose it
    alignment: torch.Tensor
    seconds: tuple[float, ...]  # per new token (the first with the encoder's pass)
    cached: bool
    cache_bytes: int  # measured: what the caches held at the end (0 without them)
    stopped: bool = False  # stopped (by on_token) before all the tokens asked for were made

    @property
    def new_ids(self) -> tuple[int, ...]:
        return self.pair.target.ids[1:]


def translate(
    model: Model,
    source: str,
    new_tokens: int = MAX_NEW_TOKENS,
    cached: bool = True,
    on_token: Callable[[int, str], bool | None] | None = None,
) -> Translation:
    """Greedy translation (or generation) of up to `new_tokens` for the source: the encoder once, then the decoder a
    token at a time, with its caches (each pass reads the newest token alone) or without (the whole target again).
    on_token(id, text) hears each new token as it comes and stops by returning True."""
    ids, _ = model.tokenize(source)
    check_length(1, new_tokens)
    family, device, special = model.spec.family, model.device, model.spec.family.special
    target, rows, seconds, stopped = [special.start], [], [], False
    clock = time.perf_counter()
    with torch.inference_mode():
        _, memory = family.encode(model, torch.tensor(ids, device=device))
        cache = PairCache.empty(model, memory, 1 + new_tokens) if cached else None
        for made in range(new_tokens):
            chunk = torch.tensor(target[-1:] if cached else target, device=device)
            decoded = family.decode(model, memory, chunk, cache)
            token = _choose(decoded.logits[-1], special, made)
            rows.append(decoded.cross.weights[:, :, -1])  # (L, h, n_src): the row that chose the token
            target.append(token)
            seconds.append(time.perf_counter() - clock)
            clock = time.perf_counter()
            if token == special.stop or (on_token is not None and on_token(token, model.tokenizer.decode([token]))):
                stopped = token != special.stop and made + 1 < new_tokens
                break
    pair = _pair(model, source, ids, target, model.tokenizer.decode(target[1:]))
    nbytes = 0 if cache is None else cache.nbytes
    return Translation(source, pair, pair.target.sentence, torch.stack(rows, dim=2).cpu(), tuple(seconds), cached,
                       nbytes, stopped)  # fmt: skip


def _choose(logits: torch.Tensor, special: Special, made: int) -> int:
    """Greedy: the most likely token, but the forced first one first, and never a banned one."""
    if made == 0 and special.first is not None:
        return special.first
    if special.banned:
        logits = logits.clone()
        logits[list(special.banned)] = float("-inf")
    return int(logits.argmax())
