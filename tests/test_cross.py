"""Cross-attention (an encoder-decoder's) in the core: queries from x (n_q rows), keys and values from x_kv (n_kv
rows), n_q ≠ n_kv: random cases equal scaled_dot_product_attention, nn.MultiheadAttention and FlexAttention within the
one rule; the file format reads old files and writes the new one; what does not apply across two sentences is a
message naming the place."""

import random

import pytest
import torch
import torch.nn.functional as F

from attention.base import presets
from attention.base.case import CASE_FORMAT, CaseError, case_to_dict, parse_case, with_options
from attention.base.record import compare
from attention.forward.compute import attend, tolerance
from attention.forward.oracle import check, fused_outputs
from tests.cases import with_keys_sentence


def cross_case(seed: int) -> dict:
    """A random cross-attention case with random options that apply across two sentences."""
    rng = random.Random(seed)
    n, h = rng.randint(1, 7), rng.choice([1, 2, 4])
    options = {"heads": h, "scale": rng.choice(["sqrt_dk", "none"]), "dtype": rng.choice(["float32", "float64"])}
    if rng.random() < 0.3:
        options["softcap"] = rng.choice([0.5, 2.0])
    if rng.random() < 0.3:
        options["sinks"] = [rng.uniform(-3, 3) for _ in range(h)]
    if rng.random() < 0.3:
        options["temperature"] = 0.5
    if rng.random() < 0.3 and h > 1:
        options["kv_heads"] = 1
    base = presets.random_case(n, rng.randint(2, 5), 4 * h, 4 * h, seed=seed, **options)
    case = with_keys_sentence(case_to_dict(base), rng)
    if rng.random() < 0.3:  # an explicit mask of n_q × n_kv, each query seeing at least its first key
        case["options"]["mask"] = [[1] + [rng.randint(0, 1) for _ in case["x_kv"][1:]] for _ in case["x"]]
    return case


@pytest.mark.parametrize("seed", range(30))
def test_random_cross_cases_equal_pytorchs_attention(seed):
    case = parse_case(cross_case(seed))
    assert case.cross and case_to_dict(case)["format"] == CASE_FORMAT
    trace = attend(case)
    assert trace["scores"].shape[-2:] == (case.n, case.n_kv)
    checked = check(trace)
    assert checked.agrees, checked
    assert "differs" not in " ".join(trace.step("repeat").notes)


def test_sdpa_with_n_q_unlike_n_kv_is_the_oracle_and_a_small_difference_fails():
    case = parse_case(with_keys_sentence(case_to_dict(presets.random_case(3, 4, 4, 4, seed=1)), random.Random(0), 6))
    trace = attend(case)
    q = torch.tensor(case.x) @ torch.tensor(case.w_query)
    k, v = (torch.tensor(case.x_kv) @ torch.tensor(w) for w in (case.w_key, case.w_value))
    assert compare("sdpa", trace.outputs, F.scaled_dot_product_attention(q, k, v, scale=1.0),
                   tolerance(case, trace.__getitem__)).agrees  # fmt: skip
    other = parse_case(case_to_dict(case) | {"x_kv": [[v + 0.01 for v in case.x_kv[0]], *case.x_kv[1:]]})
    assert not compare("sdpa", trace.outputs, fused_outputs(other), tolerance(case, trace.__getitem__)).agrees


def test_a_file_of_the_old_format_reads_and_a_cross_case_round_trips():
    old = case_to_dict(presets.random_case(3, 4, 4, 4, seed=2)) | {"format": "attention-case/1"}
    assert parse_case(old) == presets.random_case(3, 4, 4, 4, seed=2)
    cross = cross_case(3)
    assert parse_case(case_to_dict(parse_case(cross))) == parse_case(cross)
    with pytest.raises(CaseError, match="attention-case/2"):
        parse_case(cross | {"format": "attention-case/1"})


@pytest.mark.parametrize(
    ("options", "where", "problem"),
    [
        ({"mask": "causal"}, "Mask", "another sentence"),
        ({"window": 2}, "Sliding window", "another sentence"),
        ({"rope_base": 100.0}, "RoPE", "another sentence"),
        ({"mask": [[1, 1, 1]] * 3}, "Mask", "expected 4"),  # n_q × n_kv: 3 × 4
    ],
)
def test_what_needs_one_sentence_is_a_message_naming_the_place(options, where, problem):
    case = with_keys_sentence(case_to_dict(presets.random_case(3, 4, 4, 4, seed=0)), random.Random(0), 4)
    with pytest.raises(CaseError) as error:
        parse_case(case | {"options": options})
    assert where.lower() in str(error.value.where).lower() and problem in str(error.value), str(error.value)
    plain = presets.random_case(3, 4, 4, 4, seed=0)
    assert with_options(plain, **options)  # the same options are fine with one sentence


def test_bad_keys_sentences_are_messages():
    case = case_to_dict(presets.random_case(3, 4, 4, 4, seed=0))
    with pytest.raises(CaseError, match="x_kv"):
        parse_case(case | {"x_kv": [[1.0, 2.0]]})  # 2 columns, x has 4
    with pytest.raises(CaseError, match="key labels"):
        parse_case(case | {"x_kv": [[1.0] * 4] * 2, "tokens_kv": ["a"]})
    with pytest.raises(CaseError, match="x_kv"):
        parse_case(case | {"tokens_kv": ["a"]})
