"""The why of ÷√d_k in numbers: computed a head at a time, in place, it says what every score at once says."""

import math
import random

import pytest
import torch

from attention import attend
from attention.base.case import case_to_dict, parse_case
from attention.base.presets import random_case
from attention.forward.teach import sqrt_dk_effect, whys
from tests.cases import with_latent


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


# Today's options: each one's why at the step it changes, in both languages, only when it is on

ON = {
    "window": 3,
    "softcap": 2.0,
    "alibi": [0.5, 0.25],
    "sinks": [0.5, -1.0],
    "rope_fraction": 0.5,
    "relative_bias": [[0.0, -0.5, -1.0, -1.5] * 2, [0.0, 0.5, 1.0, 1.5] * 2],
}
AT = {
    "window": "scores",
    "softcap": "scores",
    "alibi": "scores",
    "sinks": "softmax",
    "rope_fraction": "rope",
    "relative_bias": "scores",
}
SAYS = {"window": "window (Mistral, Gemma 2/3, gpt-oss)", "softcap": "softcap (Gemma 2", "alibi": "ALiBi (BLOOM, MPT)",
        "sinks": "sink (gpt-oss)", "rope_fraction": "rotary (GPT-NeoX, Pythia, Phi)",
        "relative_bias": "T5's relative bias (T5, Flan-T5)"}  # fmt: skip
SAYS_ZH = {"window": "滑动窗口", "softcap": "软上限", "alibi": "ALiBi", "sinks": "汇点", "rope_fraction": "部分旋转",
           "relative_bias": "T5 的相对位置偏置"}  # fmt: skip
STEPS = ("qkv", "rope", "scores", "softmax", "weighted", "outputs")


@pytest.mark.parametrize("seed", range(6))
def test_each_options_why_shows_at_its_step_when_on_and_nowhere_when_off(seed):
    rng = random.Random(seed)
    on = set(rng.sample(sorted(ON), rng.randint(0, len(ON))))
    options = {name: ON[name] for name in on}
    trace = attend(random_case(6, 4, 8, 4, seed=seed, heads=2, rope_base=100.0, **options))
    for step in STEPS:
        said, said_zh = " ".join(whys(trace, step)), " ".join(whys(trace, step, "zh"))
        for name in ON:
            shown = name in on and AT[name] == step
            assert (SAYS[name] in said) == shown, (step, name, said)
            assert (SAYS_ZH[name] in said_zh) == shown, (step, name, said_zh)


def test_the_whys_tell_the_cases_own_numbers():
    trace = attend(random_case(6, 4, 8, 4, seed=1, heads=2, rope_base=100.0, **ON))
    scores, softmax = " ".join(whys(trace, "scores")), " ".join(whys(trace, "softmax", head=1))
    assert "token 6 sees tokens 4…6" in scores  # a window of 3
    top = max(trace["scores_uncapped"].max().item(), trace["scores_uncapped"].min().item(), key=abs)
    assert f"{top:.4g}, becomes {2 * math.tanh(top / 2):.4g}" in scores
    assert "slope is 0.5: a key 3 tokens back loses 1.5" in scores
    share = trace["weights_sink"][1].mean().item()
    assert f"head 2's sink logit is -1, and the sink takes {share:.0%}" in softmax
    assert "RoPE turns 2 of each head's 4 dims; the other 2" in " ".join(whys(trace, "rope"))
    # T5's (8 buckets both ways, max distance 128): one key back is bucket 1; 5 back, past the 2 exact ones, bucket 2
    assert "head 1 adds -0.5 to the key just before a query and -1 to one 5 tokens back" in scores


@pytest.mark.parametrize("norm", [True, False], ids=["with its norm", "without"])
def test_a_latent_says_at_step_3_what_it_is_and_nowhere_else(norm):
    base = case_to_dict(random_case(5, 4, 8, 4, seed=3, heads=2, rope_base=100.0, rope_fraction=0.5))
    trace = attend(parse_case(with_latent(base, random.Random(3), norm=norm)))
    d_c = trace.case.d_c
    for step in STEPS:
        said, said_zh = " ".join(whys(trace, step)), " ".join(whys(trace, step, "zh"))
        shown = step == "qkv"
        assert ("DeepSeek V2/V3's multi-head latent attention" in said) == shown, (step, said)
        assert ("多头潜在注意力" in said_zh) == shown, (step, said_zh)
        assert ("RMS-norms the latent" in said) == (shown and norm), (step, said)
        assert ("解耦的旋转键" in said_zh) == (shown and norm), (step, said_zh)
    qkv = " ".join(whys(trace, "qkv"))
    assert f"a latent of {d_c} numbers a token, C = X W_DKV, all the KV cache keeps" in qkv
    assert "the 12 numbers of a token's keys and values" in qkv  # w_key's 8 columns and w_value's 4
    plain = " ".join(whys(attend(random_case(5, 4, 8, 4, seed=3, heads=2)), "qkv"))
    assert "latent" not in plain
