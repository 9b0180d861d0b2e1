"""Tests of the generated PyTorch script: it runs alone and prints the core's outputs, for every option."""

import ast
import contextlib
import io
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
import torch

from attention import STEP_NAMES, attend
from attention.base.case import with_options
from attention.base.presets import article, random_case
from attention.forward.script import shown, to_script
from attention.forward.steps import TITLES, step_names
from tests.cases import QK_NORM

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
    # Labels straight into the dataclass: to_script must be safe even for a case that skipped validation
    "hostile labels": replace(random_case(n=len(HOSTILE), seed=5), tokens=HOSTILE),
}


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
    return ast.literal_eval(result.stdout.strip().splitlines()[-1])


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
    assert "nan_to_num" not in heads  # a causal mask never blocks a whole row
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
    scope = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec("import math\nimport torch", scope)
        for name in step_names(case):
            exec(shown(case, name), scope)
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
