"""The why of ÷√d_k in numbers: computed a head at a time, in place, it says what every score at once says."""

import math

import pytest
import torch

from attention import attend
from attention.base.presets import random_case
from attention.forward.teach import sqrt_dk_effect


def whole(raw: torch.Tensor, seen: torch.Tensor, d: int) -> dict[str, float]:
    """The same numbers the straightforward way: every score at once, in float64 (what it cost at the limits)."""

    def top(scores: torch.Tensor) -> float:
        rows = seen.any(dim=-1)
        return torch.softmax(scores.masked_fill(~seen, float("-inf"))[rows], dim=-1).max(dim=-1).values.mean().item()

    raw = raw.double()
    spread = raw[seen].std(correction=0).item()
    return {"spread_raw": spread, "spread_scaled": (raw / math.sqrt(d))[seen].std(correction=0).item(),
            "top_raw": top(raw), "top_scaled": top(raw / math.sqrt(d))}  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [{"heads": 4, "mask": "causal"}, {}, {"heads": 2, "scale": "sqrt_dk", "temperature": 0.5}],
    ids=["4 heads, causal", "1 head", "2 heads, scaled"],
)
def test_the_effect_over_blocks_of_rows_is_the_effect_over_the_whole_matrix(options):
    n = 259  # heads of an odd size
    trace = attend(random_case(n, 8, 8, 8, seed=7, **options))
    d = 8 // trace.case.options.heads
    raw, seen = trace["scores_raw"], torch.isfinite(trace["scores"])
    heads = [None] if trace.case.options.heads == 1 else [None, 1]
    for head in heads:
        got = sqrt_dk_effect(trace, head)
        want = whole(raw if head is None else raw[head], seen if head is None else seen[head], d)
        assert got["d"] == d
        for name, value in want.items():
            assert got[name] == pytest.approx(value, rel=1e-10), (head, name)


def test_the_trace_is_left_as_it_was_in_float64_too():
    trace = attend(random_case(20, 4, 4, 4, seed=8, heads=2, dtype="float64", mask="causal"))
    before = trace["scores_raw"].clone()
    sqrt_dk_effect(trace)
    sqrt_dk_effect(trace, 1)
    assert torch.equal(trace["scores_raw"], before)  # its own float64 numbers: worked on in a copy
