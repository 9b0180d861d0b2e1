"""The one tolerance rule (attention/base/tolerance.py) through every check and exported script: random float32 and
float64 cases up to the limits agree everywhere; one input number moved by 1e-3 differs everywhere."""

import random
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from attention import attend
from attention.backward.compute import Backward, backward
from attention.backward.compute import check as backward_check
from attention.backward.loss import Loss
from attention.backward.script import to_backward_script
from attention.base import tolerance as rule
from attention.base.case import case_to_dict, parse_case
from attention.base.presets import random_case
from attention.decoding.compute import decodable, decode
from attention.decoding.script import decoding_script
from attention.forward import oracle
from attention.forward.compute import repeat_check
from attention.forward.script import to_script
from attention.tiles.compute import check as tiles_check
from attention.tiles.compute import tiled
from attention.tiles.script import to_script as tiles_script
from tests.cases import with_keys_sentence, with_latent

# A few big cases, not hundreds: n at the limit (1,024) in float32, where the old fixed tolerances failed (tiles'
# 1e-6 of the largest number; decoding's 1e-5 with 4 causal heads and scores around 64), and raw scores in the
# thousands (no ÷√d_k); float64 with grouped key/value heads, RoPE and w_out
W_OUT = [[(i * 7 + j * 3) % 5 - 2.0 for j in range(16)] for i in range(64)]  # (4 heads × 32/2 values, 16)
CASES = {
    "float32, n 1024, 4 causal heads, sqrt_dk": random_case(1024, 64, 64, 64, seed=1, heads=4, mask="causal",
                                                            scale="sqrt_dk"),
    "float32, n 1024, raw scores in the thousands": random_case(1024, 64, 64, 64, seed=2),
    "float64, n 512, grouped heads, RoPE, causal, w_out": random_case(
        512, 32, 32, 32, seed=3, dtype="float64", heads=4, kv_heads=2, rope_base=10_000.0, mask="causal",
        w_out=W_OUT,
    ),
}  # fmt: skip
MOVED = 1e-3  # one input number moved by this much: a real difference every check must call one


def moved(case, name="w_value", row=0, column=0):
    """The case with one input number moved by MOVED (W_V's first: every output row reads it, through v_j)."""
    data = case_to_dict(case)
    data[name][row][column] += MOVED
    return parse_case(data)


@pytest.fixture(scope="module", params=CASES, ids=str)
def runs(request):
    """A case's trace, and the trace of the same case with one number moved (made once: each is seconds at n 1024)."""
    case = CASES[request.param]
    return case, attend(case), attend(moved(case))


def test_the_rule_is_sqrt_k_eps_times_the_sum_of_absolute_terms():
    a, b = torch.randn(5, 400, dtype=torch.float64), torch.randn(400, 3, dtype=torch.float64)
    expected = rule.ROUNDING_SAFETY * 20 * torch.finfo(torch.float32).eps * (a.abs() @ b.abs())
    torch.testing.assert_close(rule.product_error(a, b, torch.float32), expected)
    assert rule.rounding(400, torch.float64) == rule.ROUNDING_SAFETY * 20 * torch.finfo(torch.float64).eps


def test_sdpa_or_multihead_attention(runs):
    case, trace, wrong = runs
    assert oracle.check(trace).agrees, oracle.check(trace)
    assert not oracle.check(replace(wrong, case=case)).agrees  # its outputs, against PyTorch's for the case


def test_step_8_against_step_7(runs):
    case, trace, wrong = runs
    assert not any("DIFFERS" in str(note) for note in trace.notes), trace.notes
    assert repeat_check(case, trace.__getitem__, trace["outputs_by_query"], trace.outputs).agrees
    assert not repeat_check(case, trace.__getitem__, wrong["outputs_by_query"], trace.outputs).agrees


def test_tiles_against_step_7(runs):
    case, trace, wrong = runs
    assert tiles_check(tiled(case, 64, 64, keep=()), trace).agrees  # the false red of issue 29 at n = 1024
    assert not tiles_check(replace(tiled(wrong.case, 64, 64, keep=()), case=case), trace).agrees


def test_decoding_against_the_causal_rows(runs):
    case, trace, wrong = runs
    causal = trace if case == decodable(case) else attend(decodable(case))
    made = decode(case, causal)
    assert made.agrees, made.status()
    moved_case = decodable(wrong.case)  # decoded with the number moved, held to the case's own causal rows
    assert not decode(wrong.case, replace(causal, case=moved_case)).agrees


def test_backward_against_autograd(runs):
    case, trace, _ = runs
    for loss in (Loss(cell=(5, 0)), Loss(target=tuple((0.5,) * trace.outputs.shape[1] for _ in range(case.n)))):
        assert backward_check(backward(trace, loss)).agrees, backward_check(backward(trace, loss))


# A gradient is a longer chain of sums: at n = 1,024 and d = 64 in float32 its rounding reaches 1e-4 to 1e-3 of the
# gradients (a decided row's d_scores is dA − Σ A dA, a difference of near equals, then × keys × W_Q), as large as
# a 1e-3 move of an input makes; so the move is caught on float32 at smaller sizes, and on float64 at any
CAUGHT = {
    "float32, n 256, 2 causal heads, sqrt_dk": random_case(256, 16, 16, 16, seed=6, heads=2, mask="causal",
                                                           scale="sqrt_dk"),
    "float64, n 512, grouped heads, RoPE, causal, w_out": CASES["float64, n 512, grouped heads, RoPE, causal, w_out"],
    # multi-head latent attention: the chain back through the latent (its norm, W_DKV) widens the rule, not past this
    "float32, n 256, MLA: a normed latent, 2 causal heads": parse_case(with_latent(case_to_dict(random_case(
        256, 16, 16, 16, seed=6, heads=2, mask="causal", scale="sqrt_dk")), random.Random(6), norm=True)),
    "float64, n 128, MLA: a normed latent, the rotary key, grouped heads": parse_case(with_latent(case_to_dict(
        random_case(128, 16, 32, 16, seed=7, dtype="float64", heads=4, kv_heads=2, rope_base=10_000.0,
                    rope_fraction=0.5, mask="causal")), random.Random(7), norm=True)),
}  # fmt: skip


@pytest.mark.parametrize("name", CAUGHT)
def test_backward_calls_a_moved_number_different(name):
    case = CAUGHT[name]
    wrong = attend(moved(case))
    for loss in (Loss(cell=(5, 0)), Loss(target=tuple((0.5,) * wrong.outputs.shape[1] for _ in range(case.n)))):
        result = backward(wrong, loss)  # the hand-written gradients with the number moved, autograd's without
        assert not backward_check(Backward(replace(wrong, case=case), loss, result.value, result.steps)).agrees


def cross(case, seed: int, n_kv: int):
    """The case made cross-attention: keys and values from a random other sentence x_kv of n_kv rows."""
    return parse_case(with_keys_sentence(case_to_dict(case), random.Random(seed), n_kv=n_kv))


# Cross-attention: the keys' sums read x_kv's magnitudes (n_kv of them, not n), and x_kv's gradient is a leaf of its own
CROSS = {
    "float32, 256 queries, 384 keys of x_kv, 2 heads, sqrt_dk": cross(random_case(
        256, 16, 16, 16, seed=8, heads=2, scale="sqrt_dk"), seed=8, n_kv=384),
    "float64, 96 queries, 40 keys, MLA's normed latent of x_kv, grouped heads": cross(parse_case(with_latent(
        case_to_dict(random_case(96, 16, 32, 16, seed=9, dtype="float64", heads=4, kv_heads=2)), random.Random(9),
        norm=True)), seed=9, n_kv=40),
}  # fmt: skip


@pytest.mark.parametrize("name", CROSS)
def test_backward_of_a_cross_case_agrees_and_calls_a_moved_number_of_x_kv_different(name):
    case = CROSS[name]
    trace, wrong = attend(case), attend(moved(case, "x_kv", row=3))
    for loss in (Loss(cell=(5, 0)), Loss(target=tuple((0.5,) * trace.outputs.shape[1] for _ in range(case.n)))):
        assert backward_check(backward(trace, loss)).agrees, backward_check(backward(trace, loss))
        result = backward(wrong, loss)  # the hand-written gradients with x_kv's number moved, autograd's without
        assert not backward_check(Backward(replace(wrong, case=case), loss, result.value, result.steps)).agrees


# The exported scripts, each run alone: its assert holds it to the same rule (inlined from attention/base/)
SCRIPT_CASES = {
    "float32, 4 causal heads, sqrt_dk": random_case(96, 32, 32, 32, seed=4, heads=4, mask="causal", scale="sqrt_dk"),
    "float64, grouped heads, RoPE, causal, w_out": random_case(
        48, 32, 32, 32, seed=5, dtype="float64", heads=4, kv_heads=2, rope_base=10_000.0, mask="causal", w_out=W_OUT
    ),
}


def scripts(case):
    return {
        "forward": to_script(case),
        "tiles": tiles_script(case, 16, 16),
        "decoding": decoding_script(case),
        "backward": to_backward_script(case, Loss(cell=(3, 1))),
    }


def run(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", SCRIPT_CASES)
def test_every_exported_script_passes_its_assert_and_inlines_the_one_rule(tmp_path, name):
    for kind, source in scripts(SCRIPT_CASES[name]).items():
        assert "def attention_tolerance(" in source and "ROUNDING_SAFETY = " in source, kind
        done = run(tmp_path, kind, source)
        assert done.returncode == 0, (kind, done.stderr[-2000:])


def test_a_scripts_assert_fails_on_a_real_difference(tmp_path):
    source = scripts(SCRIPT_CASES["float32, 4 causal heads, sqrt_dk"])["tiles"]
    line = "difference = (tiled_outputs - outputs).abs().max().item()"
    done = run(tmp_path, "tiles", source.replace(line, f"tiled_outputs[7, 3] += {MOVED}\n{line}"))
    assert done.returncode != 0 and "AssertionError" in done.stderr
