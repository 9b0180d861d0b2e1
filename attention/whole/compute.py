"""The whole model at once (issue 31): every head's weights on a sentence from one pass, each head's kind, and what
switching heads off or patching them from another sentence does to the next token, through the families' own
forward pass (an Edit of the heads' outputs before each layer's output projection). Torch only."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import torch

from ..forward.compute import rms_norm, rope, rope_theta
from ..models.kinds import KINDS, PROBE, Kind, induction, kinds, probe

HOWS = ("zero", "mean")  # a head switched off: its output zeroed, or replaced by its mean over the positions
TOP = 5  # next tokens shown before and after


@dataclass(frozen=True)
class Switch:
    """Heads whose outputs change before their layer's output projection (an Edit, models/model.py): zeroed, made
    their mean over the positions, or (patch) replaced by the same head's output on another sentence."""

    heads: frozenset[tuple[int, int]]  # (layer, head), from 0
    how: str = "zero"  # "zero", "mean" or "patch"
    source: torch.Tensor | None = None  # patch: the other sentence's head outputs (layers, heads, n, head_dim)

    def __call__(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        """The layer's heads' outputs (h, m, head_dim) with the switched ones changed."""
        picked = sorted(h for at, h in self.heads if at == layer)
        if not picked:
            return out
        out = out.clone()
        for h in picked:
            if self.how == "zero":
                out[h] = 0
            elif self.how == "mean":
                out[h] = out[h].mean(0, keepdim=True)  # (1, head_dim): one vector for every position
            else:
                out[h] = self.source[layer, h].to(out.device)
        return out


@dataclass(frozen=True)
class Prediction:
    """The next token after a sentence: every token's probability, and the TOP most likely."""

    probabilities: torch.Tensor  # (vocabulary,), float64
    logits: torch.Tensor  # (vocabulary,)
    top: tuple[tuple[int, float], ...]  # (token id, probability), most likely first

    @property
    def first(self) -> int:
        return self.top[0][0]


@dataclass(frozen=True)
class Ablation:
    """The next token before and after a switch: the top one's probability before and after (the top one before)."""

    before: Prediction
    after: Prediction

    @property
    def change(self) -> float:
        """How far the top token's probability moved (negative: it fell)."""
        token = self.before.first
        return self.after.probabilities[token].item() - self.before.probabilities[token].item()


def predict(model, ids: list[int] | tuple[int, ...], edit: Switch | None = None) -> Prediction:
    """The model's next token after `ids`, with heads switched (or not)."""
    with torch.inference_mode():
        logits = model.spec.family.forward(model, torch.tensor(ids, device=model.device), edit=edit).logits
    if logits is None:
        raise ValueError(f"{model.spec.title} predicts no next token (an encoder)")
    logits = logits[-1].double().cpu()
    probabilities = torch.softmax(logits, dim=-1)
    values, indices = probabilities.topk(TOP)
    return Prediction(probabilities, logits, tuple(zip(indices.tolist(), values.tolist(), strict=True)))


def ablate(model, ids, heads: frozenset[tuple[int, int]], how: str = "zero", before: Prediction | None = None):
    """The next token before and after switching `heads` off (zeroed or made their mean)."""
    before = before or predict(model, ids)
    return Ablation(before, predict(model, ids, Switch(heads, how)))


def rank(model, ids, layer: int, how: str = "zero") -> list[tuple[int, Ablation]]:
    """The layer's heads (from 0), each switched off alone, by how much the top token's probability moved (most
    first): one forward pass per head, and one before."""
    before = predict(model, ids)
    each = [(h, ablate(model, ids, frozenset({(layer, h)}), how, before)) for h in range(model.spec.heads)]
    return sorted(each, key=lambda pair: -abs(pair[1].change))


@dataclass(frozen=True)
class Patched:
    """One head's output on the clean sentence put into the corrupt one's pass: the logit difference between the
    clean top token and the corrupt top token, and the part of it the head carries ((patched − corrupt) ÷
    (clean − corrupt): 1, the whole difference; 0, none)."""

    layer: int
    head: int
    difference: float  # logit(clean top) − logit(corrupt top) with the head patched

    def carried(self, clean: float, corrupt: float) -> float:
        return (self.difference - corrupt) / (clean - corrupt) if clean != corrupt else 0.0


@dataclass(frozen=True)
class Patching:
    """Patching every head of a layer from the clean sentence into the corrupt one."""

    clean: Prediction
    corrupt: Prediction
    clean_difference: float  # logit(clean top) − logit(corrupt top) on the clean sentence
    corrupt_difference: float  # the same on the corrupt sentence
    heads: tuple[Patched, ...]

    @property
    def tokens(self) -> tuple[int, int]:
        """The clean sentence's top token and the corrupt one's."""
        return self.clean.first, self.corrupt.first

    def carried(self, patched: Patched) -> float:
        return patched.carried(self.clean_difference, self.corrupt_difference)


def patch(model, clean_ids, corrupt_ids, layer: int) -> Patching:
    """Each head of the layer patched, one at a time, from the clean sentence into the corrupt one (same length):
    how much of the logit difference between their top tokens each carries."""
    if len(clean_ids) != len(corrupt_ids):
        raise ValueError(f"{len(clean_ids)} and {len(corrupt_ids)} tokens: patching needs sentences of one length")
    with torch.inference_mode():
        source = model.spec.family.forward(model, torch.tensor(clean_ids, device=model.device)).head_outputs.cpu()
    clean, corrupt = predict(model, clean_ids), predict(model, corrupt_ids)
    a, b = clean.first, corrupt.first

    def difference(p: Prediction) -> float:
        return (p.logits[a] - p.logits[b]).item()

    heads = []
    for h in range(model.spec.heads):
        after = predict(model, corrupt_ids, Switch(frozenset({(layer, h)}), "patch", source))
        heads.append(Patched(layer, h, difference(after)))
    return Patching(clean, corrupt, difference(clean), difference(corrupt), tuple(heads))


@dataclass(frozen=True)
class Whole:
    """Every head of every layer on a sentence: weights (layers, heads, n, n) and each head's kind (None: one
    token, no kind), with a causal model's induction scores from the probe. An encoder-decoder's cross-attention:
    (layers, heads, n_target, n_source), no kinds (they measure a sentence's rows over its own tokens)."""

    weights: torch.Tensor
    kinds: tuple[tuple[Kind, ...], ...] | None  # [layer][head]
    causal: bool


def weights(model, run) -> torch.Tensor:
    """Every head's weights on the run's sentence (layers, heads, n, n), from each layer's recorded input: its q and
    k projections, a q/k norm, RoPE, the scores and the softmax, without the MLPs and output projections a new
    forward pass would repeat. A model whose attention differs from that (YaRN's factor, ALiBi, partial rotary, a
    sliding window, NoPE layers, Gemma's scale, softcap and local RoPE, gpt-oss's sinks) is run again instead."""
    s = model.spec
    plain = s.rope_attention == 1.0 and not any(w is not None for w in s.windows or ()) and not s.no_rope
    plain &= all(value is None for value in (s.alibi, s.rope_fraction, s.scale, s.softcap, s.local_rope_base))
    plain &= not s.sinks
    if not plain:
        with torch.inference_mode():
            return s.family.forward(model, torch.tensor(run.ids, device=model.device)).weights.cpu()
    n, g = len(run.ids), s.heads // s.kv_heads
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if s.causal else None
    out = []
    with torch.inference_mode():
        for layer in range(s.layers):
            w = s.family.projections(model.weights, layer)  # name: (weight (out, in), bias or None), as stored
            x = run.inputs[layer].to(w["w_query"][0].device)  # (n, d_model)
            # (h, n, hd) and (g, n, hd): no copy of the weights (a case's (d_in, head_dim) would transpose them)
            q = torch.nn.functional.linear(x, *w["w_query"]).unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)
            k = torch.nn.functional.linear(x, *w["w_key"]).unflatten(-1, (s.kv_heads, s.head_dim)).transpose(0, 1)
            if (norms := s.family.norms(model.weights, layer)) is not None:  # Qwen3's q/k norm
                q, k = rms_norm(q, norms[0], s.norm_eps), rms_norm(k, norms[1], s.norm_eps)
            if s.rope_base is not None:
                at, theta = torch.arange(n, device=q.device), rope_theta(s, s.head_dim)
                q, k = rope(q, at, theta), rope(k, at, theta)
            scores = q.view(s.kv_heads, g, n, s.head_dim) @ k[:, None].mT / math.sqrt(s.head_dim)  # (g, h/g, n, n)
            if allowed is not None:
                scores = scores.masked_fill(~allowed.to(scores.device), float("-inf"))
            out.append(torch.softmax(scores, dim=-1).flatten(0, 1).cpu())  # (h, n, n)
    return torch.stack(out)


# The probe's scores of each loaded model, per server process: the model's own (no user's data), whatever the
# sentence or session; weakly held, so that a model the server lets go takes its scores with it
_PROBED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def induction_scores(model) -> torch.Tensor | None:
    """A causal model's heads' induction scores (layers, heads) from one pass of the probe, kept while the model is
    loaded; None for an encoder."""
    s = model.spec
    if not s.causal:
        return None
    if (kept := _PROBED.get(model)) is not None:
        return kept
    on_probe = probe(s.vocab or model.tokenizer.get_vocab_size()).to(model.device)
    with torch.inference_mode():
        seen = s.family.forward(model, on_probe).weights.cpu()  # (layers, heads, 2·PROBE, 2·PROBE)
    _PROBED[model] = scores = torch.stack([induction(seen[layer], PROBE) for layer in range(s.layers)])
    return scores


def whole(model, run, scores: torch.Tensor | None = None) -> Whole:
    """Every head on the run's sentence, each with its kind (its induction score on the probe where given)."""
    every = weights(model, run)
    causal = model.spec.causal
    found = [kinds(every[layer], causal, None if scores is None else scores[layer]) for layer in range(len(every))]
    return Whole(every, None if found[0] is None else tuple(map(tuple, found)), causal)


def parts(model, pair) -> dict[str, Whole]:
    """An encoder-decoder's three attentions on a pair's sentences (seq2seq.PairRun), each its own Whole: the
    encoder's self-attention (source × source), the decoder's causal self-attention (target × target), its
    cross-attention (target × source), from one pass of each stack."""
    family, device = model.spec.family, model.device
    with torch.inference_mode():
        encoded, memory = family.encode(model, torch.tensor(pair.source.ids, device=device))
        decoded = family.decode(model, memory, torch.tensor(pair.target.ids, device=device))
    out = {}
    for part, every, causal in (("encoder", encoded.weights, False), ("decoder", decoded.own.weights, True)):
        every = every.cpu()
        found = [kinds(every[layer], causal) for layer in range(len(every))]
        out[part] = Whole(every, None if found[0] is None else tuple(map(tuple, found)), causal)
    out["cross"] = Whole(decoded.cross.weights.cpu(), None, False)
    return out


def order(whole: Whole, by: str) -> list[list[int]]:
    """Each layer's heads (from 0) in the order drawn: the model's, or grouped by kind (KINDS' order, then the
    kind's number, largest first)."""
    layers, heads = whole.weights.shape[:2]
    if by != "kind" or whole.kinds is None:
        return [list(range(heads)) for _ in range(layers)]
    return [sorted(range(heads), key=lambda h, k=k: (KINDS.index(k[h].name), -k[h].share)) for k in whole.kinds]


@dataclass(frozen=True)
class Variant:
    """One head on the sentence as typed, without its first token, or with another first token: where its rows 2 …
    n put their weight (the mean over those rows, a number per key)."""

    name: str  # "typed", "removed", "replaced"
    ids: tuple[int, ...]
    weights: torch.Tensor  # (n, n): the head's weights on this variant
    on_keys: torch.Tensor  # (n,): the mean weight rows 2 … n give each key

    @property
    def first(self) -> float:
        """The weight parked on the first token."""
        return self.on_keys[0].item()

    @property
    def most_other(self) -> tuple[int, float]:
        """The key after the first that gets the most weight, and its weight."""
        if len(self.on_keys) < 2:  # a single token: no other
            return 0, 0.0
        i = int(self.on_keys[1:].argmax()) + 1
        return i, self.on_keys[i].item()


def first_of(model, word: str) -> int:
    """The first token of `word` as the model cuts it, after the token every sentence begins with (a BOS, an
    encoder's [CLS]) when the model adds one: what takes the sentence's first token's place."""
    ids, _ = model.tokenize(word)
    leading = {model.tokenize(probe)[0][0] for probe in ("a", "b")}  # one id: every sentence begins with it
    return ids[1] if len(leading) == 1 and ids[0] in leading and len(ids) > 1 else ids[0]


def first_token(model, ids, layer: int, head: int, other: int) -> tuple[Variant, ...]:
    """One head (from 0) on the sentence, on it without its first token, and on it with `other` as its first token
    (a sentence of one token has no variant without it)."""
    variants = [("typed", tuple(ids)), ("replaced", (other, *ids[1:]))]
    if len(ids) > 2:
        variants.insert(1, ("removed", tuple(ids[1:])))
    out = []
    for name, these in variants:
        with torch.inference_mode():
            w = model.spec.family.forward(model, torch.tensor(these, device=model.device)).weights[layer, head]
        w = w.double().cpu()
        out.append(Variant(name, these, w, w[1:].mean(0)))
    return tuple(out)
