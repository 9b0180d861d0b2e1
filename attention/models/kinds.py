"""What kind of head each head is, measured on the sentence in front of the learner (issue 31, point 2): its rows'
share of weight on the first token, on the previous token and on itself, and how evenly its rows spread (their
entropy over the keys each row sees, 1 = even). Row 1 is left out: in a causal model it sees only itself. And, on a
built-in probe (random tokens, repeated once), whether a causal head is an induction head: from each token of the
second copy, its weight on the token that followed the same token in the first copy."""

from __future__ import annotations

from dataclasses import dataclass

import torch

KINDS = ("induction", "first", "previous", "itself", "broad", "mixed")
MOST = 0.5  # a head is "first", "previous" or "itself" when half or more of its rows' weight goes there
EVEN = 0.7  # else "broad" when its rows' entropy is at least this part of the most they could have
PROBE = 20  # tokens in the probe's first copy


@dataclass(frozen=True)
class Kind:
    """A head's measures, each a mean over rows 2 … n, and its kind: the one that names it (KINDS)."""

    first: float  # weight on token 1
    previous: float  # weight on token i − 1
    itself: float  # weight on token i
    broad: float  # entropy ÷ log(keys the row sees)
    name: str
    induction: float | None = None  # on the probe (a causal model's): from the second copy, on the token after

    @property
    def share(self) -> float:
        """The number that names the kind: its share, its evenness, or (mixed) the largest share."""
        if self.name != "mixed":
            return getattr(self, self.name)  # induction's: on the probe
        return max(self.first, self.previous, self.itself)


def kinds(weights: torch.Tensor, causal: bool, induction: torch.Tensor | None = None) -> list[Kind] | None:
    """Each head's kind from its weights (heads, n, n) (`causal`: row i sees keys 1 … i only) and, where measured,
    its induction score (heads,) on the probe, which names it first (a sentence rarely repeats itself, so an
    induction head looks like another kind on it); None for a sentence of one token (no row 2)."""
    w = weights.double()[:, 1:]  # rows 2 … n: (h, n − 1, n)
    if w.shape[1] == 0:
        return None
    rows = torch.arange(1, weights.shape[1])
    first = w[:, :, 0].mean(1)
    previous = w[:, torch.arange(len(rows)), rows - 1].mean(1)
    itself = w[:, torch.arange(len(rows)), rows].mean(1)
    seen = rows + 1 if causal else torch.full_like(rows, weights.shape[-1])  # the keys a row may spread over
    entropy = -(w * w.clamp(min=1e-300).log()).sum(-1) / seen.double().log()
    broad = entropy.mean(1)
    out = []
    for h in range(len(w)):
        measures = {"first": first[h].item(), "previous": previous[h].item(), "itself": itself[h].item()}
        top = max(measures, key=measures.get)
        name = top if measures[top] >= MOST else "broad" if broad[h].item() >= EVEN else "mixed"
        on_probe = None if induction is None else induction[h].item()
        name = "induction" if on_probe is not None and on_probe >= MOST else name
        out.append(Kind(**measures, broad=broad[h].item(), name=name, induction=on_probe))
    return out


def first_heavy(found: list[Kind]) -> int:
    """How many heads put more than half of their weight on the first token (the pattern of attention sinks)."""
    return sum(k.first > MOST for k in found)


def probe(vocab: int, length: int = PROBE, seed: int = 0) -> torch.Tensor:
    """Random token ids, the same `length` of them twice (ids from the middle of the vocabulary: no special ones)."""
    first = torch.randint(vocab // 10, vocab // 2, (length,), generator=torch.Generator().manual_seed(seed))
    return torch.cat([first, first])


def induction(weights: torch.Tensor, length: int = PROBE) -> torch.Tensor:
    """Each head's induction score from its weights on the probe (heads, 2·length, 2·length): the mean weight from
    token i of the second copy on token i − length + 1, the one that followed the same token in the first copy."""
    i = torch.arange(length, 2 * length)
    return weights.double()[:, i, i - length + 1].mean(-1)


def probe_scores(model, layer: int) -> torch.Tensor:
    """A causal model's heads' induction scores at a layer (heads,), from one pass of the probe through it."""
    ids = probe(model.spec.vocab or model.tokenizer.get_vocab_size()).to(model.device)
    with torch.inference_mode():
        weights = model.spec.family.forward(model, ids).weights[layer]  # (heads, 2·PROBE, 2·PROBE)
    return induction(weights.cpu())
