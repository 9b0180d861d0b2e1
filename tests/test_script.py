"""Tests of the generated PyTorch script: it runs alone and prints the core's outputs, for every option."""

import ast
import contextlib
import io
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
import torch

from attention import STEP_NAMES, attend
from attention.base.case import MODERN, case_to_dict, parse_case, with_options
from attention.base.presets import article, random_case
from attention.base.record import compare
from attention.forward.compute import tolerance
from attention.forward.script import shown, to_script
from attention.forward.steps import TITLES, step_names
from tests.cases import QK_NORM, olmo_head, with_keys_sentence, with_latent
from tests.test_cross import cross_case

ARTICLE_OUTPUTS = [[2.0, 7.0, 1.5], [2.0, 8.0, 0.0], [2.0, 7.8, 0.3]]
ARTICLE_BROADCAST = "weighted = values[:, None] * weights.T[:, :, None]"
BLOCKED_ROW = [[1, 0, 1], [0, 0, 0], [1, 1, 1]]  # query 2 may attend to nothing: its output is 0
W_OUT = [[0.5, -1.0, 0.25], [1.5, 0.0, -0.5], [-2.0, 1.0, 0.75], [0.1, 0.2, -0.3]]  # (d_v = 4, d_out = 3)
HOSTILE = (
    'x\nimport os; os.system("echo pwned")',
    '"""',
    "\\",
    '\rprint("pwned")',
    'a\u2028print("pwned")\x00',
    "# -*- coding: rot13 -*-",
)

CASES = {
    "article": article(),
    "article, exact softmax": replace(article(), options=replace(article().options, weights_override=None)),
    "sqrt_dk, causal": random_case(n=4, seed=1, scale="sqrt_dk", mask="causal"),
    "scale 0.3, temperature 0.5, a fully masked row": random_case(seed=2, scale=0.3, temperature=0.5, mask=BLOCKED_ROW),
    "2 heads, w_out, sqrt_dk, causal": random_case(
        n=5, d_k=4, d_v=4, seed=3, heads=2, w_out=W_OUT, scale="sqrt_dk", mask="causal"
    ),
    "float64, 2 heads, w_out, scale, temperature, a fully masked row": random_case(
        d_k=2, d_v=4, seed=4, dtype="float64", heads=2, w_out=W_OUT, scale=0.3, temperature=0.5, mask=BLOCKED_ROW
    ),
    "RoPE, grouped-query attention (4 query heads, 2 key/value heads), sqrt_dk, causal": random_case(
        n=5, d_in=6, d_k=8, d_v=6, seed=6, heads=4, kv_heads=2, rope_base=10_000.0, scale="sqrt_dk", mask="causal"
    ),
    "RoPE with given positions, float64": random_case(
        n=4, d_k=4, d_v=2, seed=7, rope_base=100.0, positions=[5, 3, -2, 7], dtype="float64"
    ),
    "scaled RoPE (a model's own frequency per pair), 2 heads, a scale": random_case(
        n=5, d_k=8, d_v=4, seed=9, heads=2, rope_base=500.0, rope_frequencies=[0.7, 0.02], scale=0.3
    ),
    "Qwen3's q/k norm, RoPE, grouped, causal": random_case(
        n=5,
        d_k=8,
        d_v=4,
        seed=10,
        heads=2,
        kv_heads=1,
        rope_base=500.0,
        mask="causal",
        **QK_NORM,
    ),
    "OLMo 2's head (norm_rest), RoPE, causal": random_case(
        n=5, d_k=4, d_v=4, seed=12, rope_base=500.0, mask="causal", **olmo_head(5)
    ),
    # Labels straight into the dataclass: to_script must be safe even for a case that skipped validation
    "hostile labels": replace(random_case(n=len(HOSTILE), seed=5), tokens=HOSTILE),
}


def steps_run(case) -> dict:
    """The names the walkthrough's code blocks of the case make, run in order as a reader pastes them (quietly)."""
    scope = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec("import math\nimport torch", scope)
        for name in step_names(case):
            exec(shown(case, name), scope)
    return scope


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every case's script, run once with a bare Python (in parallel: each run imports torch, ~1.5 s)."""
    folder = tmp_path_factory.mktemp("scripts")

    def run(i: int, case) -> subprocess.CompletedProcess:
        path = folder / f"case_{i}.py"
        path.write_text(to_script(case), encoding="utf-8")
        return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor() as pool:
        done = pool.map(run, range(len(CASES)), CASES.values())
        return dict(zip(CASES, done, strict=True))


def printed_outputs(result: subprocess.CompletedProcess) -> list[list[float]]:
    assert result.returncode == 0, result.stderr
    # step 8's last line (the FlexAttention part, where the case has one, prints after it)
    return ast.literal_eval(next(line for line in reversed(result.stdout.splitlines()) if line.startswith("[[")))


@pytest.mark.parametrize("name", CASES)
def test_script_prints_the_cores_outputs(runs, name):
    case, result = CASES[name], runs[name]
    expected = attend(case).outputs
    printed = torch.tensor(printed_outputs(result), dtype=expected.dtype)
    tolerances = {"rtol": 1.3e-6, "atol": 1e-5} if expected.dtype == torch.float32 else {}
    torch.testing.assert_close(printed, expected, **tolerances)
    # Step 8's loop, one query at a time, agrees with the matrix form it printed
    step_8 = next(line for line in result.stdout.splitlines() if line.startswith("step 8"))
    assert float(step_8.split()[-1]) <= 1e-5 * (1 + expected.abs().max().item())


def test_article_script_reads_and_prints_like_the_article(runs):
    source = to_script(CASES["article"])
    assert ARTICLE_BROADCAST + "  #" in source
    assert "For readability, approximate the above" in source  # why step 5's exact weights are replaced
    for line in ("keys = x @ w_key", "queries = x @ w_query", "values = x @ w_value", "outputs = weighted.sum(dim=0)"):
        assert line in source
    for title_number, title in enumerate((TITLES[name] for name in STEP_NAMES), start=1):
        assert f"# Step {title_number}: {title}" in source
    # Only the lines an option needs: the article's steps use none of these (the check after them is the one rule's)
    steps, check = source.split("# The one rule of every check", 1)
    for absent in ("math", "mask", "heads", "nan_to_num", "w_out", "temperature", "scale"):
        assert absent not in steps
    assert "assert within(outputs_by_query, outputs, tolerance)" in check
    assert '"outputs:\\n", outputs' in source
    torch.testing.assert_close(
        torch.tensor(printed_outputs(runs["article"]), dtype=torch.float64),
        torch.tensor(ARTICLE_OUTPUTS, dtype=torch.float64),
        rtol=0,
        atol=1e-6,
    )
    assert "outputs:\n" in runs["article"].stdout


def test_options_add_their_lines():
    heads = to_script(CASES["2 heads, w_out, sqrt_dk, causal"])
    assert "t.unflatten(-1, (heads, -1)).transpose(0, 1)" in heads
    assert "weighted = values[..., :, None, :] * weights.mT[..., :, :, None]" in heads
    assert "head_outputs.transpose(0, 1).flatten(1)" in heads
    assert "outputs = outputs @ w_out" in heads
    assert "mask = torch.ones(n, n).tril()" in heads
    assert "(1 / math.sqrt(2))" in heads  # d_k = 4 split into 2 heads
    assert "nan_to_num" not in heads.split("# The one rule")[0]  # a causal mask never blocks a whole row
    blocked = to_script(CASES["float64, 2 heads, w_out, scale, temperature, a fully masked row"])
    for line in ("dtype=torch.float64", "scores = scores * 0.3", "scores = scores / 0.5", ".nan_to_num(nan=0.0)"):
        assert line in blocked
    assert "[0.0, 0.0, 0.0]," in blocked  # the explicit mask, as a literal


def test_hostile_labels_stay_in_comments(runs):
    source = to_script(CASES["hostile labels"])
    result = runs["hostile labels"]
    assert "pwned" not in result.stdout
    assert "pwned" not in result.stderr
    # The labels live only in comments: the code is what it would be with plain labels
    plain = to_script(replace(CASES["hostile labels"], tokens=tuple(f"t{i}" for i in range(len(HOSTILE)))))
    assert ast.dump(ast.parse(source)) == ast.dump(ast.parse(plain))
    assert "\\n" in source and "\\r" in source and "\\u2028" in source and "\\x00" in source  # visible, escaped


@pytest.mark.parametrize("seed", range(8))
def test_the_code_each_step_shows_runs_and_gives_the_traces_numbers(seed):
    """The walkthrough shows the script's block for each step: run in order, they make the trace's tensors."""
    rng = random.Random(seed)
    h = rng.choice([1, 2])
    options = {"heads": h, "scale": rng.choice(["none", "sqrt_dk", 0.5]), "temperature": rng.choice([1.0, 0.5, 2.0])}
    options |= {"mask": rng.choice([None, "causal"]), "dtype": rng.choice(["float32", "float64"])}
    if seed % 2:  # RoPE, and with two heads grouped-query attention (one key/value head for both)
        options |= {"rope_base": rng.choice([100.0, 10_000.0])} | ({"kv_heads": 1} if h == 2 else {})
    case = random_case(rng.randint(1, 6), rng.randint(1, 4), 2 * h, 2 * h, seed=seed, **options)
    if seed % 3 == 0:
        case = with_options(case, w_out=[[rng.uniform(-1, 1) for _ in range(3)] for _ in range(2 * h)])
    scope = steps_run(case)
    trace = attend(case)
    for name in ("x", "queries", "keys", "values", "scores", "weights", "weighted", "outputs"):
        torch.testing.assert_close(scope[name], trace[name] if name != "outputs" else trace.outputs, msg=name)


def test_a_wide_matrix_is_cut_to_its_first_and_last_numbers_on_the_page_and_whole_in_the_script():
    """A real model's x has 577 numbers a row: the page's block shows a few of each row, the script every one."""
    case = random_case(n=20, d_in=40, d_k=4, d_v=4, seed=3)
    rows = [line for line in shown(case, "inputs").splitlines() if line.startswith("    [")]
    assert len(rows) == 16  # SHOWN_ROWS
    first = case.x[0]
    assert rows[0] == f"    [{', '.join(repr(v) for v in first[:6])}, ..., {first[-1]!r}],  # Input 1 (40 numbers)"
    assert all(len(row) < 120 for row in rows)
    assert f"    [{', '.join(repr(v) for v in first)}],  # Input 1" in to_script(case)  # the whole row


def test_a_models_long_lists_of_gamma_and_theta_are_cut_on_the_page_and_whole_in_the_script():
    """A real head of Qwen3 has 128 numbers in each of γ_Q and γ_K, and 64 frequencies θ_p."""
    gamma = [round(0.5 + i / 64, 4) for i in range(32)]
    case = random_case(n=3, d_in=4, d_k=32, d_v=4, q_norm=gamma, k_norm=gamma, rope_base=100.0, seed=3)
    line = next(line for line in shown(case, "norm").splitlines() if line.startswith("gamma_q"))
    assert f"[{', '.join(map(repr, gamma[:6]))}, ..., {gamma[-1]!r}]" in line and len(line) < 130
    assert f"[{', '.join(map(repr, gamma))}]" in to_script(case)


# Today's attention: the options in the steps, and the same attention as a FlexAttention call, asserted equal

FLEX_PART = "# The same attention as today's models write it"


def modern_case(seed: int):
    """A random small case with a random combination of today's options (at least one of them on)."""
    rng = random.Random(seed)
    n, h = rng.randint(2, 7), rng.choice([1, 2])
    options = {"heads": h, "scale": rng.choice(["sqrt_dk", "none", 0.5]), "dtype": rng.choice(["float32", "float64"])}
    on = rng.sample(["window", "softcap", "alibi", "sinks", "rope_fraction"], rng.randint(1, 3))
    options |= {"window": rng.randint(1, n - 1)} if "window" in on else {}
    options |= {"softcap": rng.choice([0.5, 2.0, 50.0])} if "softcap" in on else {}
    options |= {"alibi": [0.5 / 2**i for i in range(h)]} if "alibi" in on else {}
    options |= {"sinks": [round(rng.uniform(-2, 2), 2) for _ in range(h)]} if "sinks" in on else {}
    if "rope_fraction" in on or rng.random() < 0.3:
        options |= {"rope_base": 100.0} | ({"rope_fraction": 0.5} if "rope_fraction" in on else {})
    options |= {"mask": rng.choice([None, "causal", [[int(rng.random() < 0.6) for _ in range(n)] for _ in range(n)]])}
    options |= {"temperature": 0.5} if rng.random() < 0.3 else {}
    case = random_case(n, rng.randint(2, 4), 4 * h, 2 * h, seed=seed, **options)
    if rng.random() < 0.3:
        case = with_options(case, w_out=[[rng.uniform(-1, 1) for _ in range(3)] for _ in range(2 * h)])
    if rng.random() < 0.35:  # DeepSeek's multi-head latent attention: keys and values from a latent
        case = parse_case(with_latent(case_to_dict(case), rng))
    if h == 1 and rng.random() < 0.3:  # rounded weights (one head): FlexAttention is held to the exact ones' outputs
        rounded = [[round(w, 2) for w in row] for row in attend(case)["weights_exact"].tolist()]
        case = with_options(case, weights_override=rounded)
    return case


MODERN_SEEDS = range(12)


def wrong(source: str, case) -> str:
    """The script with its FlexAttention part computing another case: each option's number in it moved (one alone
    may change nothing: a window of 1 leaves ALiBi and a cap no other key to tell apart)."""
    steps, flex = source.split(FLEX_PART)
    o = case.options
    if o.alibi is not None:
        flex = flex.replace("slopes[h]", "1.05 * slopes[h]")
    if o.softcap is not None:
        flex = flex.replace(f"{o.softcap!r} * torch.tanh", f"{o.softcap * 1.05!r} * torch.tanh")
    if o.sinks is not None:
        flex = flex.replace("sinks[:, None]", "(sinks[:, None] + 0.1)")
    if o.window is not None:
        flex = flex.replace("< window)", "< window + 1)")
    if flex == source.split(FLEX_PART)[1]:  # partial rotary alone (turned in the steps): a scale moved by 5 %
        flex = re.sub(r"scale=([-0-9.e]+)", lambda m: f"scale={float(m.group(1)) * 1.05!r}", flex)
    assert flex != source.split(FLEX_PART)[1]
    return steps + FLEX_PART + flex


@pytest.fixture(scope="module")
def modern_runs(tmp_path_factory) -> dict[tuple[int, bool], subprocess.CompletedProcess]:
    """Each random case's script, and its wrong twin, run with a bare Python."""
    folder = tmp_path_factory.mktemp("modern")

    def run(seed: int, moved: bool) -> subprocess.CompletedProcess:
        case = modern_case(seed)
        source = to_script(case)
        path = folder / f"case_{seed}_{moved}.py"
        path.write_text(wrong(source, case) if moved else source, encoding="utf-8")
        return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300)

    keys = [(seed, moved) for seed in MODERN_SEEDS for moved in (False, True)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(keys, pool.map(lambda key: run(*key), keys), strict=True))


@pytest.mark.parametrize("seed", MODERN_SEEDS)
def test_a_script_of_todays_attention_equals_flex_attention_and_the_core(modern_runs, seed):
    case, result = modern_case(seed), modern_runs[seed, False]
    expected = attend(case).outputs
    tolerances = {"rtol": 1.3e-6, "atol": 1e-5} if expected.dtype == torch.float32 else {}
    torch.testing.assert_close(torch.tensor(printed_outputs(result), dtype=expected.dtype), expected, **tolerances)
    assert "FlexAttention's outputs" in result.stdout  # and its assert held: printed_outputs saw it exit with 0
    assert "UserWarning" not in result.stderr  # flex's "without torch.compile" is silenced, and said why
    source = to_script(case)
    o, flex = case.options, source.split(FLEX_PART)[1]
    assert ("score_mod=score_mod" in flex) == (o.alibi is not None or o.softcap is not None)
    assert ("block_mask=block_mask" in flex) == (o.mask is not None or o.window is not None)
    assert ("aux.lse" in flex) == (o.sinks is not None)
    assert ("scores=scores" in source) == (o.alibi is not None or o.softcap is not None)  # the rule reads them
    assert ("latent=(w_latent, " in source) == (o.w_latent is not None)  # the rule carries the latent's error
    assert ("latent_unnormed" in source) == (o.latent_norm is not None)


@pytest.mark.parametrize("seed", MODERN_SEEDS)
def test_a_script_whose_flex_attention_computes_another_case_fails(modern_runs, seed):
    result = modern_runs[seed, True]
    assert result.returncode != 0 and "FlexAttention differs from the steps" in result.stderr, result.stderr[-500:]


def test_each_option_shows_in_its_step():
    case = random_case(6, 4, 8, 4, seed=1, heads=2, window=3, softcap=50.0, alibi=[0.5, 0.25], sinks=[0.0, -1.0],
                       rope_base=100.0, rope_fraction=0.5, mask="causal")  # fmt: skip
    rope, scores, softmax = shown(case, "rope"), shown(case, "scores"), shown(case, "softmax")
    assert "d_rot = 2" in rope and "torch.cat((turned, t[..., d_rot:]), dim=-1)" in rope and "Phi" in rope
    assert "position_bias = -slopes[:, None, None] * distance" in scores and "scores = scores + position_bias" in scores
    assert "scores = 50.0 * torch.tanh(scores / 50.0)" in scores
    assert "triu(1 - window)" in scores and "seen = mask * in_window" in scores and "masked_fill(seen == 0" in scores
    order = [scores.index(code) for code in ("+ position_bias", "torch.tanh", "masked_fill")]
    assert order == sorted(order)  # the core's order: the bias, the cap, then the mask and window
    assert "softmax(torch.cat((scores, sink), dim=-1), dim=-1)" in softmax and "weights_sink" in softmax
    plain = to_script(random_case(6, 4, 8, 4, seed=1, heads=2, rope_base=100.0, mask="causal"))
    assert FLEX_PART not in plain and "flex_attention" not in plain  # plain attention: the eight steps alone


@pytest.mark.parametrize("seed", range(6))
def test_the_code_each_step_shows_makes_the_traces_new_tensors(seed):
    """The walkthrough's blocks of a case with today's options, run in order, make the trace's tensors."""
    case = with_options(modern_case(seed), weights_override=None)
    scope = steps_run(case)
    trace = attend(case)
    new = ("position_bias", "weights_sink", "w_latent", "latent_unnormed", "latent")  # today's options' tensors
    names = [name for name in new if name in trace]
    for name in ("queries", "keys", "values", "scores", "weights", *names):
        torch.testing.assert_close(scope[name], trace[name], msg=name)


# Multi-head latent attention (DeepSeek V2/V3): keys and values made from a latent of d_c numbers a token


def test_the_random_cases_hold_latent_attention_with_and_without_its_norm():
    cases = [modern_case(seed) for seed in MODERN_SEEDS]
    latent = [case for case in cases if case.options.w_latent is not None]
    assert 0 < len(latent) < len(cases)
    assert {case.options.latent_norm is None for case in latent} == {True, False}


def latent_case(seed: int = 0, **options):
    base = case_to_dict(random_case(5, 4, 8, 8, seed=seed, heads=2, rope_base=100.0, rope_fraction=0.5, **options))
    return parse_case(with_latent(base, random.Random(seed), norm=True))


def test_a_latent_script_reads_like_the_article():
    case = latent_case()
    source, step_3 = to_script(case), shown(case, "qkv")
    assert "latent = x @ w_latent  # (n, d_c) = (5, " in step_3
    assert "keys = latent @ w_key" in step_3 and "values = latent @ w_value" in step_3
    assert "queries = x @ w_query" in step_3  # queries still read x
    assert "DeepSeek V2/V3" in step_3 and "the rotary key" in step_3 and "gamma_c = torch.tensor(" in step_3
    assert "W_DKV, x down to the latent" in shown(case, "weights") and "W_UK, the latent up to keys" in source
    assert "latent=(w_latent, latent_unnormed, gamma_c, latent_eps)" in source
    plain = with_options(case, latent_norm=None)
    assert "latent=(w_latent, latent, None, 0.0)" in to_script(plain) and "gamma_c" not in to_script(plain)


@pytest.mark.parametrize(
    ("line", "moved"),
    [
        ("latent = x @ w_latent", "latent = x @ w_latent + 0.01"),  # the latent a hundredth off
        ("* gamma_c\n", "* (gamma_c * 1.01)\n"),  # γ a percent off
    ],
    ids=["latent", "gamma"],
)
def test_a_script_whose_latent_is_moved_prints_outputs_the_core_rejects(tmp_path, line, moved):
    """The script's own asserts hold on its own numbers; the core's trace, with the one rule, tells them apart."""
    case = latent_case(seed=3, mask="causal")
    source = to_script(case)
    assert source.count(line) == 1
    path = tmp_path / "moved.py"
    path.write_text(source.replace(line, moved), encoding="utf-8")
    result = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300)
    trace = attend(case)
    printed = torch.tensor(printed_outputs(result), dtype=trace.outputs.dtype)
    assert not compare("script", printed, trace.outputs, tolerance(case, trace.__getitem__)).agrees
    unmoved = tmp_path / "unmoved.py"
    unmoved.write_text(source, encoding="utf-8")
    result = subprocess.run([sys.executable, unmoved], capture_output=True, text=True, timeout=300)
    printed = torch.tensor(printed_outputs(result), dtype=trace.outputs.dtype)
    assert compare("script", printed, trace.outputs, tolerance(case, trace.__getitem__)).agrees


# Cross-attention: queries from x, keys and values from another sentence x_kv (n_q ≠ n_kv), asserted equal to
# PyTorch's scaled_dot_product_attention (or FlexAttention, with an option of today's models) by the inlined rule


def cross(seed: int):
    """tests/test_cross.py's random cross case of the seed: heads, grouped heads, masks, caps and sinks at random."""
    return parse_case(cross_case(seed))


def rounded_cross():
    """One head, a mask with a row that sees no key, w_out, and rounded weights (n_q × n_kv): SDPA is held to steps
    6-7 on the exact weights."""
    base = case_to_dict(random_case(3, 4, 4, 4, seed=8, scale="sqrt_dk", w_out=W_OUT))
    case = parse_case(with_keys_sentence(base, random.Random(8), n_kv=5))
    case = with_options(case, mask=[[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
    rounded = [[round(w, 2) for w in row] for row in attend(case)["weights_exact"].tolist()]
    return with_options(case, weights_override=rounded)


CROSS = {f"seed {seed}": (lambda seed=seed: cross(seed)) for seed in (0, 1, 3, 4, 5, 11)}
CROSS["rounded weights, a masked row, w_out"] = rounded_cross
SDPA_PART = "# The same attention by PyTorch's fused scaled_dot_product_attention"


def moved_sdpa(source: str) -> str:
    """The script with its scaled_dot_product_attention computing another attention: the scale 5 % off."""
    before, sdpa = source.split(SDPA_PART)
    moved = re.sub(r"scale=([-0-9.e]+)", lambda m: f"scale={float(m.group(1)) * 1.05!r}", sdpa, count=1)
    assert moved != sdpa
    return before + SDPA_PART + moved


@pytest.fixture(scope="module")
def cross_runs(tmp_path_factory) -> dict[tuple[str, bool], subprocess.CompletedProcess]:
    """Each cross case's script, and (SDPA's) its moved twin, run with a bare Python."""
    folder = tmp_path_factory.mktemp("cross")

    def run(name: str, moved: bool) -> subprocess.CompletedProcess:
        source = to_script(CROSS[name]())
        path = folder / f"{name.replace(' ', '_').replace(',', '')}_{moved}.py"
        path.write_text(moved_sdpa(source) if moved else source, encoding="utf-8")
        return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300)

    keys = [(name, moved) for name in CROSS for moved in (False, True) if not moved or SDPA_PART in to_script(
        CROSS[name]())]  # fmt: skip
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(keys, pool.map(lambda key: run(*key), keys), strict=True))


@pytest.mark.parametrize("name", CROSS)
def test_a_cross_script_makes_keys_and_values_from_x_kv_and_equals_pytorch_and_the_core(cross_runs, name):
    case, result = CROSS[name](), cross_runs[name, False]
    assert case.cross and case.n_kv != case.n  # two sentences of different lengths
    expected = attend(case).outputs
    tolerances = {"rtol": 1.3e-6, "atol": 1e-5} if expected.dtype == torch.float32 else {}
    torch.testing.assert_close(torch.tensor(printed_outputs(result), dtype=expected.dtype), expected, **tolerances)
    source, step_1, step_3 = to_script(case), shown(case, "inputs"), shown(case, "qkv")
    assert source.startswith('"""Cross-attention in eight steps')
    assert f"x_kv = torch.tensor(x_kv, dtype=torch.{case.options.dtype})  # (n_kv, d_in) = ({case.n_kv}, " in step_1
    assert f"  # {case.key_tokens[-1]}" in step_1  # x_kv's rows labelled with its own tokens
    assert "keys = x_kv @ w_key" in step_3 and "values = x_kv @ w_value" in step_3 and "queries = x @ w_query" in step_3
    assert source.count(", x_kv=x_kv)") == 2  # the one rule, of step 8's check and PyTorch's, reads x_kv
    modern = any(getattr(case.options, o) is not None for o in MODERN)
    oracle = "FlexAttention" if modern else "scaled_dot_product_attention"
    assert f"{oracle}'s outputs" in result.stdout  # and its assert held: printed_outputs saw it exit with 0


@pytest.mark.parametrize("name", [name for name in CROSS if SDPA_PART in to_script(CROSS[name]())])
def test_a_cross_script_whose_sdpa_computes_another_attention_fails(cross_runs, name):
    result = cross_runs[name, True]
    assert result.returncode != 0 and "scaled_dot_product_attention differs from the steps" in result.stderr, (
        result.stderr[-500:]
    )


SHOWN_WHOLE = [name for name in CROSS if max(CROSS[name]().d_k, CROSS[name]().d_v) <= 8]  # (wider: cut with "...")


@pytest.mark.parametrize("name", SHOWN_WHOLE)
def test_the_code_each_step_shows_of_a_cross_case_makes_the_traces_tensors(name):
    case = with_options(CROSS[name](), weights_override=None)
    scope = steps_run(case)
    trace = attend(case)
    for tensor in ("x", "x_kv", "queries", "keys", "values", "scores", "weights", "weighted"):
        torch.testing.assert_close(scope[tensor], trace[tensor], msg=tensor)
