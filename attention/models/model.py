"""A loaded model (its parameters, tokenizer and forward pass, through its family's adapter), a sentence's run
through it, and a head or a whole layer of that run as a case: shared by every family."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base.case import MAX_ABS, MAX_WIDE_N, Case, CaseError, Options, max_d, with_options
from ..base.i18n import clip, msg
from .tokens import labels

MAX_SENTENCE_CHARS = 400  # characters a sentence may have before it is tokenized (it is user input)
# tokens: a head's case is then at most 64 × 577 numbers for x (case.MAX_WIDE_N), and one pass of SmolLM2 keeps every
# layer's n × d_model input for a quick switch of layer and head (30 × 64 × 576 float32: 4.4 MB)
MAX_SENTENCE_TOKENS = 64


class Model:
    """A model's parameters as float32 tensors (on the CPU, or moved to a device), its tokenizer, its forward pass."""

    def __init__(self, spec, weights: dict[str, torch.Tensor], tokenizer, device: str = "cpu"):
        self.spec, self.weights, self.tokenizer, self.device = spec, weights, tokenizer, device

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
        return ids, labels([self.tokenizer.id_to_token(i) for i in ids], self.spec.family.readable)

    def run(self, sentence: str) -> Run:
        """The sentence through the whole model: every layer's attention input and every head's output."""
        ids, tokens = self.tokenize(sentence)
        with torch.inference_mode():
            inputs, head_outputs, logits = self.spec.family.forward(self, torch.tensor(ids, device=self.device))
        top = None
        if logits is not None:  # a decoder predicts the next token: its five most likely
            probabilities = torch.softmax(logits[-1].double(), dim=-1)
            values, indices = probabilities.topk(5)
            top = tuple((self.tokenizer.decode([i]), p) for i, p in zip(indices.tolist(), values.tolist(), strict=True))
        return Run(self.spec.name, sentence, tuple(ids), tokens, inputs.cpu(), head_outputs.cpu(), top)


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
    for name, (weight, bias) in s.family.projections(model.weights, layer).items():
        first = None if head is None else (head if name == "w_query" else kv) * d
        rows = slice(None) if first is None else slice(first, first + d)
        columns = weight[rows].T  # (out, in) -> the case's (d_in, d_head)
        out[name] = columns if bias is None else torch.cat([columns, bias[rows][None]])
    return out


def _x(model: Model, run: Run, layer: int) -> torch.Tensor:
    x = run.inputs[layer]
    return torch.cat([x, torch.ones(len(x), 1)], dim=1) if model.spec.family.bias else x


def _options(spec, heads: int = 1) -> dict:
    """The model's attention, as the case's options: 1/√head_dim, its mask, RoPE, its grouped heads."""
    options = {"scale": "sqrt_dk", "heads": heads, "bias": spec.family.bias}  # the ones column travels with the case
    if spec.causal:
        options["mask"] = "causal"
    if spec.rope_base is not None:
        options["rope_base"] = spec.rope_base
    if heads > 1 and spec.kv_heads != spec.heads:
        options["kv_heads"] = spec.kv_heads
    return options


def head_case(model: Model, run: Run, layer: int, head: int) -> Case:
    """One head of one layer (0-based) on the run's sentence, as a case: x, the head's weights, the model's options."""
    return _as_case(run.tokens, _x(model, run, layer), head_weights(model, layer, head), _options(model.spec))


def layer_case(model: Model, run: Run, layer: int) -> Case:
    """Every head of one layer (0-based) as one multi-head case: the query heads' weights side by side, and the
    key/value heads' (fewer, with grouped-query attention)."""
    s = model.spec
    return _as_case(run.tokens, _x(model, run, layer), head_weights(model, layer), _options(s, heads=s.heads))


def _as_case(tokens: tuple[str, ...], x: torch.Tensor, weights: dict[str, torch.Tensor], options: dict) -> Case:
    """A case of the model's own numbers. They are checked as tensors (finite, within MAX_ABS, shapes within the
    limits) instead of number by number as parse_case checks a user's: 110,000 numbers in 30 ms, not 250 ms (a
    switch of head must stay quick); the options go through the usual checks. tests/test_models.py holds the two
    ways equal."""
    matrices = {"x": x, **weights}
    n, d_in = x.shape
    for name, m in matrices.items():
        if not bool(torch.isfinite(m).all()) or m.abs().max().item() > MAX_ABS or m.shape[-1] > max_d(n):
            raise ValueError(f"{name} of the model is outside the case's limits")  # a broken file, not a user
        if name != "x" and m.shape[0] != d_in:
            raise ValueError(f"{name} has {m.shape[0]} rows, not d_in = {d_in}")
    rows = {name: tuple(map(tuple, m.cpu().tolist())) for name, m in matrices.items()}
    if n > MAX_WIDE_N or len(tokens) != n:
        raise ValueError(f"{n} tokens: at most {MAX_WIDE_N}, one label each")
    return with_options(Case(**rows, tokens=tuple(tokens), options=Options()), **options)
