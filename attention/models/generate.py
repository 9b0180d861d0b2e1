"""Greedy generation through a causal model (any Llama- or GPT-2-family model) with the app's own forward
pass and a real per-layer KV cache, or without one (the whole sentence again for every new token); timed, and kept
as a Run to step through."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..base.case import CaseError
from ..base.i18n import msg
from .model import MAX_SENTENCE_TOKENS, KVCache, Model, Run
from .tokens import labels

MAX_NEW_TOKENS = 16  # the page's choice; a sentence and its new tokens stay within MAX_SENTENCE_TOKENS in all


@dataclass(frozen=True)
class Generation:
    """A sentence and the tokens generated after it, greedily; the whole as a Run (every layer's attention input)
    to step through decoding layer by layer and head by head; the seconds each new token took."""

    sentence: str
    prompt: int  # how many of the run's tokens are the sentence's
    run: Run  # the sentence and the new tokens, through the model
    text: str  # the new tokens, decoded
    seconds: tuple[float, ...]  # per new token
    cached: bool
    cache_bytes: int  # measured: what the cache held at the end (0 without one)
    stopped: bool = False  # stopped before all the tokens asked for were made

    @property
    def new_ids(self) -> tuple[int, ...]:
        return self.run.ids[self.prompt :]


def check_length(prompt: int, new_tokens: int) -> None:
    """CaseError when a generation would pass MAX_SENTENCE_TOKENS in all, or asks for no token or more than 16."""
    if not 1 <= new_tokens <= MAX_NEW_TOKENS:
        raise CaseError(msg("decoding.where_generate"), msg("decoding.error_new_tokens", limit=MAX_NEW_TOKENS))
    if prompt + new_tokens > MAX_SENTENCE_TOKENS:
        raise CaseError(msg("decoding.where_generate"), msg("decoding.error_total", prompt=prompt, new=new_tokens,
                                                   limit=MAX_SENTENCE_TOKENS))  # fmt: skip


def generate(
    model: Model,
    sentence: str,
    new_tokens: int = MAX_NEW_TOKENS,
    cached: bool = True,
    on_token: Callable[[int, str], bool | None] | None = None,
) -> Generation:
    """Greedy generation of up to `new_tokens` after the sentence (fewer at the end-of-text token). on_token(id,
    text) hears each new token as it comes and stops the generation by returning True."""
    ids, _ = model.tokenize(sentence)
    check_length(len(ids), new_tokens)
    spec, device = model.spec, model.device
    stop_ids = _stop_ids(model)
    cache = KVCache.empty(spec, len(ids) + new_tokens, device) if cached else None
    inputs, heads, seconds, stopped = [], [], [], False
    chunk = torch.tensor(ids, device=device)  # the first pass reads the whole sentence (the prefill)
    with torch.inference_mode():
        for made in range(new_tokens):
            start = time.perf_counter()
            if cached:
                x, out, logits = forward_cached(model, chunk, cache)
                inputs.append(x), heads.append(out)
            else:
                logits = spec.family.forward(model, torch.tensor(ids, device=device)).logits
            token = int(logits[-1].argmax())  # greedy: the most likely next token
            seconds.append(time.perf_counter() - start)
            ids.append(token)
            chunk = torch.tensor([token], device=device)  # with the cache, the next pass reads this token alone
            if token in stop_ids or (on_token is not None and on_token(token, model.tokenizer.decode([token]))):
                stopped = token not in stop_ids and made + 1 < new_tokens
                break
    prompt = len(ids) - len(seconds)
    run = _run(model, sentence, ids, cache, inputs, heads)
    text = model.tokenizer.decode(ids[prompt:])
    nbytes = 0 if cache is None else cache.nbytes
    return Generation(sentence, prompt, run, text, tuple(seconds), cached, nbytes, stopped)


def forward_cached(model: Model, ids: torch.Tensor, cache: KVCache) -> tuple[torch.Tensor, ...]:
    """The new tokens `ids` (m of them, at positions cache.length …) through every layer: their queries, keys and
    values alone, each layer's k and v appended to its cache, their queries scored against every cached key. Returns
    (each layer's attention input (L, m, d), each head's output (L, h, m, head_dim), the logits of the last one)."""
    x, out, _, logits = model.spec.family.forward(model, ids, cache)
    return x, out, logits


def _stop_ids(model: Model) -> set[int]:
    """The end-of-text tokens a generation stops at (GPT-2's <|endoftext|>, a chat model's <|im_end|>, </s>)."""
    found = (model.tokenizer.token_to_id(t) for t in ("<|endoftext|>", "<|im_end|>", "</s>", "<|end_of_text|>"))
    return {i for i in found if i is not None}


def _run(model: Model, sentence: str, ids: list[int], cache, inputs: list, heads: list) -> Run:
    """The sentence and its new tokens as a Run: with the cache, the layers' inputs its passes computed (the last
    token, never read by a pass, once more); without, one pass of the whole."""
    tokens = labels([model.tokenizer.id_to_token(i) for i in ids], model.readable)
    if cache is None or not inputs:
        with torch.inference_mode():
            x, out, _, _ = model.spec.family.forward(model, torch.tensor(ids, device=model.device))
    else:
        with torch.inference_mode():
            last_x, last_out, _ = forward_cached(model, torch.tensor(ids[-1:], device=model.device), cache)
        x, out = torch.cat([*inputs, last_x], dim=1), torch.cat([*heads, last_out], dim=2)
    return Run(model.spec.name, sentence, tuple(ids), tokens, x.cpu(), out.cpu(), None)
