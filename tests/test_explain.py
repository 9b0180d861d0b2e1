"""Explaining one number: against the article's printed arithmetic, against the trace itself on random cases, and
the parts' coordinates against the figures that draw them."""

import ast
import inspect
import itertools
import math
import random
import re
from pathlib import Path

import pytest
import torch

from attention.base import explain as engine
from attention.base import numbers as numbers_module
from attention.base.case import case_to_dict, parse_case, with_options
from attention.base.explain import EXPLAINERS, explain, explainable, explains, pair
from attention.base.presets import article, random_case
from attention.forward import explain as forward_explain
from attention.forward import figures
from attention.forward.compute import AXES, Trace, attend
from tests.cases import QK_NORM, with_keys_sentence, with_latent
from tests.test_cross import cross_case

EXPLAIN_MODULES = (engine, forward_explain)  # the engine and the forward pass's explainers (one module before)

# The seed's printed step-6 tensor, weighted[j, i] = (query i's weight on key j) × value row j.
SEED_WEIGHTED = [
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    [[1.0, 4.0, 0.0], [2.0, 8.0, 0.0], [1.8, 7.2, 0.0]],
    [[1.0, 3.0, 1.5], [0.0, 0.0, 0.0], [0.2, 0.6, 0.3]],
]
W_OUT = [[0.5, -1.0], [1.2, 0.3], [-0.7, 2.0], [0.1, -0.4]]  # (d_v = 4, d_out = 2)
NUMBER_AT_END = re.compile(r"(−?∞|−?\d+(?:\.\d+)?(?:e−?\d+)?)$")


def number(text: str) -> float:
    return float(text.replace("−", "-").replace("∞", "inf"))


def last_number(explanation) -> float:
    match = NUMBER_AT_END.search(explanation.lines[-1])
    assert match, f"the last line does not end with a number: {explanation.lines[-1]!r}"
    return number(match.group(1))


def float32(v: float) -> float:
    """The float32 a printed number reads back as (they are printed as short as round-trips)."""
    return torch.tensor(v, dtype=torch.float32).item()


def numbers(text: str) -> list[float]:
    return [number(m) for m in re.findall(r"−?\d+(?:\.\d+)?(?:e−?\d+)?", text)]


def text(explanation) -> str:
    return "\n".join(explanation.lines)


@pytest.fixture(scope="module")
def seed():
    return attend(article())


# The article's numbers ------------------------------------------------------------------------------------------


def test_article_scores_raw(seed):
    e = explain(seed, "scores_raw", (1, 2))
    assert "q₂ · k₃ = 2·2 + 2·3 + 2·1 = 12" in text(e)
    assert e.value == 12 and e.title == "scores_raw[Input 2, Input 3]: query Input 2 · key Input 3"
    assert e.parts["queries"] == ((1,), None) and e.parts["keys"] == ((2,), None)
    assert "= 2·4 + 2·4 + 2·0 = 16" in text(explain(seed, "scores_raw", (1, 1)))


def test_article_scores_are_the_raw_scores(seed):
    e = explain(seed, "scores", (1, 2))
    assert "raw score" in text(e) and last_number(e) == e.value == 12


def test_article_exact_softmax(seed):
    e = explain(seed, "weights_exact", (1, 2))
    assert "exp(12) / (exp(4) + exp(16) + exp(12))" in text(e)
    assert f"{e.value:.4e}" == "1.7986e-02" and f"{last_number(e):.4e}" == "1.7986e-02"
    assert e.parts["scores"] == ((1,), None)


def test_article_rounded_weight_beside_the_exact_one(seed):
    e = explain(seed, "weights", (2, 1))
    assert "rounded" in text(e) and "0.9" in text(e)
    assert e.value == pytest.approx(0.9) and last_number(e) == pytest.approx(0.9)
    assert any(round(v, 5) == 0.88054 for v in numbers(text(e)))  # the exact softmax, beside it


def test_article_output_is_the_weighted_sum(seed):
    e = explain(seed, "outputs", (2, 1))
    assert "0·2 + 0.9·8 + 0.1·6" in text(e) and "= 7.8" in text(e)
    assert float32(last_number(e)) == e.value == seed["outputs"][2, 1].item()  # float32's 7.7999997, beside 7.8
    assert e.parts["weighted"] == (None, (2,), (1,))  # every key j, query Input 3, column 2: weighted[:, 2, 1]
    assert figures.flat_cells(seed, "weighted", e.parts["weighted"]) == ((2, 5, 8), (1,))  # rows j·n_q + i


def test_article_weighted_is_key_first(seed):
    for j, i, c in [(j, i, c) for j in range(3) for i in range(3) for c in range(3)]:
        e = explain(seed, "weighted", (j, i, c))
        assert e.value == pytest.approx(SEED_WEIGHTED[j][i][c])
        assert f"A{'₁₂₃'[i]}{'₁₂₃'[j]} · v{'₁₂₃'[j]},{'₁₂₃'[c]}" in text(e)
    e = explain(seed, "weighted", (2, 1, 0))  # key Input 3, query Input 2: the rounded weight 0
    assert "key Input 3 · query Input 2" in e.title and "A₂₃ · v₃,₁ = 0 · 2 = 0" in text(e)
    assert e.parts == {"weights": ((1,), (2,)), "values": ((2,), (0,)), "weighted": ((2,), (1,), (0,))}
    assert "A₃₃ · v₃,₁ = 0.1 · 2 = 0.2" in text(explain(seed, "weighted", (2, 2, 0)))
    assert "A₃₂ · v₂,₂ = 0.9 · 8 = 7.2" in text(explain(seed, "weighted", (1, 2, 1)))


def test_article_query_is_row_times_column(seed):
    e = explain(seed, "queries", (1, 0))
    assert "q₂,₁ = x₂ · W_Q[:, 1] = 0·1 + 2·1 + 0·0 + 2·0 = 2" in text(e)
    assert e.parts == {"x": ((1,), None), "w_query": (None, (0,)), "queries": ((1,), (0,))}


def test_article_inputs_and_step_8(seed):
    e = explain(seed, "x", (1, 3))
    assert "typed" in text(e) and last_number(e) == e.value == 2
    e = explain(seed, "outputs_by_query", (2, 1))
    assert "same" in text(e) and float32(last_number(e)) == e.value == seed["outputs"][2, 1].item()


# Every tensor of random cases, against the trace ------------------------------------------------------------------

CASES = {
    "two heads, w_out": lambda: random_case(d_k=4, d_v=4, heads=2, w_out=W_OUT),
    "two heads": lambda: random_case(d_k=4, d_v=4, heads=2, seed=1),
    "one head, w_out": lambda: random_case(d_v=4, w_out=W_OUT, seed=2),
    "causal": lambda: random_case(mask="causal", seed=3),
    "sqrt_dk, temperature 0.5": lambda: random_case(scale="sqrt_dk", temperature=0.5, seed=4),
    "fully masked row": lambda: random_case(mask=[[0, 0, 0], [1, 0, 1], [1, 1, 1]], seed=5),
    "n = 10, scale 0.3": lambda: random_case(n=10, d_in=12, d_k=10, d_v=4, scale=0.3, seed=6),
    "float64": lambda: random_case(dtype="float64", seed=7),
    "RoPE at given positions": lambda: random_case(d_k=4, rope_base=100.0, positions=[5, 1, 2], seed=8),
    "scaled RoPE, 2 heads": lambda: random_case(
        d_k=8, d_v=4, heads=2, rope_base=500.0, rope_frequencies=[0.7, 0.02], seed=9
    ),
    "q/k norm, RoPE, 2 heads": lambda: random_case(d_k=8, d_v=4, heads=2, rope_base=500.0, **QK_NORM, seed=10),
    "q/k norm alone": lambda: random_case(d_k=4, **QK_NORM, norm_eps=0.5, seed=11),
    # today's attention: ALiBi's bias, a softcap, a sliding window, sinks, partial rotary
    "ALiBi, softcap, window, 2 heads": lambda: random_case(
        n=6, d_k=4, d_v=4, heads=2, alibi=[0.5, 0.25], softcap=2.0, window=3, scale="sqrt_dk", seed=12
    ),
    "ALiBi alone, temperature": lambda: random_case(n=5, alibi=[0.5], temperature=0.5, seed=13),
    "sinks, a fully masked row, a window": lambda: random_case(
        mask=[[0, 0, 0], [1, 0, 1], [1, 1, 1]], sinks=[1.5], window=2, seed=14
    ),
    "sinks past exp's direct range, 2 heads": lambda: random_case(
        d_k=4, d_v=4, heads=2, sinks=[90.0, -2.0], scale=60.0, seed=15
    ),
    "partial rotary, softcap, float64": lambda: random_case(
        d_k=8, rope_base=100.0, rope_fraction=0.5, softcap=1.0, dtype="float64", seed=16
    ),
    # DeepSeek's multi-head latent attention: keys and values from a latent (its norm, the decoupled rotary key)
    "latent with its norm, rotary key, 2 heads": lambda: latent_case(
        5, d_k=8, d_v=4, heads=2, rope_base=100.0, rope_fraction=0.5, norm=True, seed=17
    ),
    "latent, q/k norm, grouped, causal": lambda: latent_case(
        4, d_k=8, d_v=4, heads=2, kv_heads=1, rope_base=500.0, mask="causal", **QK_NORM, norm=False, seed=18
    ),
    "latent with its norm, float64": lambda: latent_case(3, d_v=4, dtype="float64", norm=True, seed=19),
    # cross-attention: keys and values from another sentence x_kv (n_kv rows, its own tokens)
    "cross, 2 heads, n_kv = 5": lambda: cross(random_case(3, 4, 4, 4, heads=2, seed=20), n_kv=5),
    "cross, one key": lambda: cross(random_case(4, 3, 3, 3, scale="sqrt_dk", seed=21), n_kv=1),
    "cross, a mask, sinks, softcap": lambda: with_options(
        cross(random_case(3, 4, 4, 2, softcap=2.0, sinks=[0.5], seed=22), n_kv=4),
        mask=[[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0]],  # n_q × n_kv, a query that sees no key
    ),
    "cross, grouped, q/k norm, w_out": lambda: cross(
        random_case(4, 3, 8, 2, heads=2, kv_heads=1, w_out=W_OUT, **QK_NORM, seed=23), n_kv=6
    ),
    "cross latent with its norm, float64": lambda: cross_latent(seed=24, n_kv=5),
}


def cross_latent(seed: int, n_kv: int):
    """A latent case (latent_case) made cross-attention: the latent made from x_kv's n_kv rows."""
    base = case_to_dict(latent_case(3, d_v=4, dtype="float64", norm=True, seed=seed))
    return parse_case(with_keys_sentence(base, random.Random(seed), n_kv=n_kv))


def cross(case, n_kv: int):
    """A case made cross-attention (tests/cases.py's with_keys_sentence): a random x_kv of n_kv rows."""
    return parse_case(with_keys_sentence(case_to_dict(case), random.Random(n_kv), n_kv))


def latent_case(n: int, seed: int, norm: bool | None = None, d_k: int = 3, d_v: int = 3, **options):
    """A random case made multi-head latent attention (tests/cases.py's with_latent)."""
    base = case_to_dict(random_case(n, 4, d_k, d_v, seed=seed, **options))
    return parse_case(with_latent(base, random.Random(seed), norm=norm))


def own_shape(trace, name: str) -> tuple[int, ...]:
    """The shape `parts` are given in: the tensor's, without its head axis."""
    return tuple(trace.view(name, 0).shape) if trace.axes(name)[0] == "head" else tuple(trace[name].shape)


def view_shape(trace, name: str) -> tuple[int, int]:
    """The 2-D view a figure draws: one head's slice; weighted flattened to (key · query, value column)."""
    shape = own_shape(trace, name)
    return (shape[0] * shape[1], shape[2]) if name == "weighted" else shape


def some_indices(shape: torch.Size, rng: random.Random) -> set[tuple[int, ...]]:
    return {tuple(0 for _ in shape), tuple(s - 1 for s in shape)} | {
        tuple(rng.randrange(s) for s in shape) for _ in range(4)
    }


@pytest.mark.parametrize("name", CASES)
def test_every_tensor_adds_up(name):
    assert_every_tensor_adds_up(attend(CASES[name]()), random.Random(0))


@pytest.mark.parametrize("seed", range(12))
def test_every_tensor_of_random_cross_cases_adds_up(seed):
    """Random cross-attention cases (tests/test_cross.py's: n_q ≠ n_kv, heads, grouped heads, masks, sinks, caps):
    every tensor's numbers explained and equal to the trace's, x_kv's among them."""
    trace = attend(parse_case(cross_case(seed)))
    assert "x_kv" in explainable(trace)
    assert_every_tensor_adds_up(trace, random.Random(seed))


def assert_every_tensor_adds_up(trace, rng: random.Random) -> None:
    """Some numbers of every tensor (the first, the last, random ones) explained: the explanation's last number is
    the recorded one, no warning, and its parts lie inside the tensors and the figures' views."""
    names = explainable(trace)
    assert set(names) == {n for step in trace.steps for n in step.tensors}
    tolerance = {"rtol": 1.3e-6, "atol": 1e-5} if trace["x"].dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for tensor in names:
        for index in some_indices(trace[tensor].shape, rng):
            e = explain(trace, tensor, index)
            where = f"{tensor}{list(index)}: {e.lines}"
            assert e.tensor == tensor and e.index == index and e.title.startswith(f"{tensor}[")
            recorded = trace[tensor][index].item()
            assert e.value == recorded, where
            total = last_number(e)
            if math.isinf(recorded):
                assert total == recorded, where
            else:
                assert abs(total - recorded) <= tolerance["atol"] + tolerance["rtol"] * abs(recorded), where
            assert not any("⚠" in line for line in e.lines), where
            assert tensor in e.parts, where
            heads = trace.case.options.heads
            assert e.head is None or 0 <= e.head < heads, where
            for part, cells in e.parts.items():
                assert part in names, where
                shape = own_shape(trace, part)  # one entry per axis, the head left out
                assert len(cells) == len(shape) == len(AXES[part]), where
                for axis, size in zip(cells, shape, strict=True):
                    assert axis is None or all(0 <= k < size for k in axis), where
                rows, cols = figures.flat_cells(trace, part, cells)
                n_rows, n_cols = view_shape(trace, part)
                assert rows is None or all(0 <= r < n_rows for r in rows), where
                assert cols is None or all(0 <= c < n_cols for c in cols), where


def test_a_scaled_rope_turn_names_the_models_own_frequency():
    trace = attend(CASES["scaled RoPE, 2 heads"]())
    lines = " ".join(map(str, explain(trace, "queries", (1, 1, 3)).lines))  # head 2, token 2 (position 1), pair 2
    assert "turns by 1 · θ2 = 1 · 0.02 = 0.02 radians" in lines and "scaled RoPE frequency" in lines, lines
    plain = " ".join(map(str, explain(attend(CASES["RoPE at given positions"]()), "queries", (0, 3)).lines))
    assert "turns by 5 · 100^(−2/4)" in plain, plain


def test_masked_cells_and_rows():
    trace = attend(CASES["fully masked row"]())
    assert "−∞" in explain(trace, "scores", (0, 1)).lines[-1]
    assert "mask" in text(explain(trace, "scores", (1, 1)))
    e = explain(trace, "weights_exact", (0, 2))
    assert "by definition" in text(e) and e.value == 0
    e = explain(trace, "weights_exact", (1, 1))  # a masked key in a row that has others
    assert "exp(−∞)" in text(e) and e.value == 0
    trace = attend(CASES["causal"]())
    assert "causal" in text(explain(trace, "scores", (0, 2)))


def test_scale_and_temperature_are_written_out():
    trace = attend(CASES["sqrt_dk, temperature 0.5"]())
    e = explain(trace, "scores", (1, 2))
    assert "× 1/√3 ÷ 0.5" in text(e)


def test_heads_name_the_head_and_the_full_weight_column():
    trace = attend(CASES["two heads, w_out"]())
    e = explain(trace, "queries", (1, 2, 1))  # head 2, Input 3, column 2 = column 4 of W_Q
    assert e.head == 1 and "head 2" in e.title and "W_Q[:, 4]" in text(e)
    assert e.parts["w_query"] == (None, (3,))
    e = explain(trace, "concat", (0, 3))
    assert e.head == 1 and "head 2" in text(e) and e.parts["head_outputs"] == ((0,), (1,))
    assert "W_O[:, 2]" in text(explain(trace, "outputs", (0, 1)))


def test_long_rows_are_abbreviated_but_summed_in_full():
    trace = attend(CASES["n = 10, scale 0.3"]())
    e = explain(trace, "weights_exact", (4, 6))
    assert "…" in text(e) and "exp(s₅₇)" in text(e)
    assert last_number(e) == pytest.approx(e.value, rel=1e-6)
    assert "…" in text(explain(trace, "queries", (0, 0)))  # 12 products


def test_numbers_are_written_compactly():
    assert numbers_module.written(2.0) == "2" and numbers_module.written(0.5) == "0.5"
    assert numbers_module.written(-1.0) == "−1" and numbers_module.written(-0.0) == "0"
    assert numbers_module.written(6.0336647e-06) == "6.0336647e−6"
    assert numbers_module.sub(1, 0) == "₂,₁" and pair(1, 2) == "₂₃"
    trace = attend(random_case(seed=0))
    assert "·(−" in text(explain(trace, "queries", (0, 0)))  # a negative factor is in parentheses


@pytest.mark.parametrize(
    ("tensor", "index", "message"),
    [
        ("nope", (0, 0), "cannot explain 'nope'"),
        ("scores", (3, 0), "query 3 is out of range"),
        ("scores", (0, -1), "key -1 is out of range"),
        ("scores", (0,), "has 1 numbers, not 2"),
        ("weighted", (0, 0), "has 2 numbers, not 3"),
        ("x", ("a", 0), "not a tuple of whole numbers"),
        ("head_outputs", (0, 0, 0), "cannot explain 'head_outputs'"),  # one head: not recorded
    ],
)
def test_bad_tensor_or_index(seed, tensor, index, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        explain(seed, tensor, index)


@pytest.mark.parametrize("module", EXPLAIN_MODULES, ids=lambda m: m.__name__)
def test_core_imports_only_torch_and_the_core(module):
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    assert not imported & {"streamlit", "plotly", "pandas", "numpy"}
    assert ast.get_docstring(tree)


def test_a_sum_that_does_not_add_up_is_said():
    trace = attend(article())
    trace["scores_raw"][1, 2] += 1  # tamper with the record: 13 where the terms give 12
    e = explain(trace, "scores_raw", (1, 2))
    assert "⚠" in e.lines[-1] and "12" in e.lines[-1] and last_number(e) == e.value == 13
    trace["outputs_by_query"][2, 1] += 1
    e = explain(trace, "outputs_by_query", (2, 1))
    assert "DIFFERS" in text(e) and float32(last_number(e)) == e.value


# The parts, as the figures draw them ----------------------------------------------------------------------------

FLAT_CASES = {"article": article, "two heads": CASES["two heads"], "n = 10": CASES["n = 10, scale 0.3"],
              "cross, 2 heads": CASES["cross, 2 heads, n_kv = 5"]}  # fmt: skip


@pytest.mark.parametrize("case", FLAT_CASES)
def test_cell_at_and_flat_cells_are_inverses(case):
    trace = attend(FLAT_CASES[case]())
    for name in explainable(trace):
        n_rows, n_cols = view_shape(trace, name)
        for row, col in [(r, c) for r in range(n_rows) for c in range(n_cols)]:
            index = figures.cell_at(trace, name, row, col)
            assert len(index) == len(AXES[name])
            assert all(0 <= k < s for k, s in zip(index, own_shape(trace, name), strict=True))
            assert figures.flat_cells(trace, name, tuple((k,) for k in index)) == ((row,), (col,)), (name, row, col)
    n_q = own_shape(trace, "weighted")[1]
    assert figures.flat_cells(trace, "weighted", (None, None, (0,))) == (None, (0,))  # all stays all
    assert figures.flat_cells(trace, "weighted", ((1,), None, None)) == (tuple(n_q + i for i in range(n_q)), None)
    assert figures.flat_cells(trace, "scores", ((0, 2), None)) == ((0, 2), None)
    with pytest.raises(ValueError, match="3 axes besides the head, not 2"):
        figures.flat_cells(trace, "weighted", ((0,), (0,)))


@pytest.mark.parametrize("case", FLAT_CASES)
def test_flat_rows_are_the_rows_weighted_heatmap_draws(case):
    trace = attend(FLAT_CASES[case]())
    tokens, keys = trace.case.tokens, trace.case.key_tokens  # cross-attention: the keys' from x_kv
    for head in range(trace.case.options.heads) if trace.axes("weighted")[0] == "head" else [None]:
        heat = figures.weighted_heatmap(trace, head).data[0]
        weighted = trace.view("weighted", head)
        for j, i, c in [(j, i, c) for j in range(len(keys)) for i in range(len(tokens)) for c in range(2)]:
            (row,), (col,) = figures.flat_cells(trace, "weighted", ((j,), (i,), (c,)))
            assert heat.y[row] == f"k {keys[j]} · q {tokens[i]}" and col == c
            assert heat.z[row][col] == weighted[j, i, c].item()


@pytest.mark.parametrize("case", FLAT_CASES)
def test_a_clicked_cell_is_the_cell_explained(case):
    trace = attend(FLAT_CASES[case]())
    for name in explainable(trace):
        head = (1,) if trace.axes(name)[0] == "head" else ()
        row, col = (s - 1 for s in view_shape(trace, name))  # the last cell: its row and column both count
        e = explain(trace, name, (*head, *figures.cell_at(trace, name, row, col)))
        assert figures.flat_cells(trace, name, e.parts[name]) == ((row,), (col,)), name


# The module's shape --------------------------------------------------------------------------------------------


def test_every_recorded_tensor_has_one_explainer():
    assert {name for kind, name in EXPLAINERS if kind is Trace} == set(AXES)
    with pytest.raises(ValueError, match="already explained"):
        explains(Trace, "scores")(lambda c, tensor, head, index: None)


@pytest.mark.parametrize("module", EXPLAIN_MODULES, ids=lambda m: m.__name__)
def test_explain_is_small_functions_and_keeps_no_copies_of_the_number_helpers(module):
    tree = ast.parse(Path(module.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            lines = node.end_lineno - node.lineno + 1
            limit = 150 if isinstance(node, ast.ClassDef) else 60
            assert lines <= limit, f"{node.name} is {lines} lines, more than {limit}"
    defined = {n.name.lstrip("_") for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    helpers = {name for name, f in vars(numbers_module).items() if inspect.isfunction(f)}  # written, approx, …
    assert not defined & (helpers | {"text"}), f"{module.__name__} writes numbers with attention/base/numbers.py"


# Today's attention: ALiBi's bias, a softcap, a window's blocked keys, a sink's share, on random cases ----------


def modern_case(seed: int):
    """A small random case with a random combination of today's options."""
    rng = random.Random(seed)
    n, h = rng.randint(2, 7), rng.choice([1, 2])
    options = {"heads": h, "scale": rng.choice(["sqrt_dk", "none"]), "dtype": rng.choice(["float32", "float64"])}
    options |= {"window": rng.randint(1, n)} if rng.random() < 0.6 else {}
    options |= {"softcap": rng.choice([0.5, 2.0, 50.0])} if rng.random() < 0.6 else {}
    options |= {"alibi": [0.5 / 2**i for i in range(h)]} if rng.random() < 0.6 else {}
    options |= {"sinks": [rng.uniform(-3, 3) for _ in range(h)]} if rng.random() < 0.6 else {}
    options |= {"rope_base": 100.0, "rope_fraction": 0.5} if rng.random() < 0.4 else {}
    options |= {"mask": rng.choice([None, "causal", [[int(rng.random() < 0.6) for _ in range(n)] for _ in range(n)]])}
    case = random_case(n, 3, 4 * h, 2 * h, seed=seed, **options)
    if rng.random() < 0.35:  # DeepSeek's multi-head latent attention: keys and values from a latent
        case = parse_case(with_latent(case_to_dict(case), rng))
    return case


NEW_TENSORS = ("position_bias", "scores_uncapped", "scores", "weights_exact", "weights_sink", "weights", "queries")
NEW_TENSORS += ("w_latent", "w_key", "w_value", "latent_unnormed", "latent", "keys_unrotated", "keys", "values")


@pytest.mark.parametrize("seed", range(12))
def test_every_number_of_todays_tensors_is_the_traces(seed):
    """Every cell of the new tensors (and the scores, weights and turned queries they change), explained: its last
    number is the trace's, with no warning that the terms do not add up."""
    trace = attend(modern_case(seed))
    tolerance = {"rtol": 1.3e-6, "atol": 1e-5} if trace["x"].dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for tensor in (name for name in NEW_TENSORS if name in trace):
        for index in itertools.product(*map(range, trace[tensor].shape)):  # every cell
            e = explain(trace, tensor, index)
            recorded, where = trace[tensor][index].item(), f"{tensor}{list(index)}: {e.lines}"
            assert e.value == recorded, where
            total = last_number(e)
            assert total == recorded if math.isinf(recorded) else abs(total - recorded) <= (
                tolerance["atol"] + tolerance["rtol"] * abs(recorded)), where  # fmt: skip
            assert not any("⚠" in line for line in e.lines), where


def test_alibi_softcap_and_the_window_are_written_out():
    trace = attend(CASES["ALiBi, softcap, window, 2 heads"]())
    e = explain(trace, "position_bias", (0, 4, 1))  # head 1 (slope 0.5), query 5, key 2: 3 back
    assert "b₅₂ = − m · (i − j) = −0.5 · 3 = −1.5" in text(e) and e.value == -1.5
    e = explain(trace, "scores", (0, 4, 2))
    bias = trace["position_bias"][0, 4, 2].item()
    assert bias == -1 and "+ b₅₃ = " in text(e) and "+ (−1) = " in text(e) and e.parts["position_bias"] == ((4,), (2,))
    assert "s₅₃ = c · tanh(u₅₃ / c) = 2 · tanh(" in text(e) and e.parts["scores_uncapped"] == ((4,), (2,))
    u = trace["scores_uncapped"][0, 4, 2].item()
    assert float32(last_number(e)) == pytest.approx(2 * math.tanh(u / 2), rel=1e-6)
    e = explain(trace, "scores", (0, 4, 1))  # key 2 is 3 back from query 5: outside a window of 3
    assert "outside query Input 5's sliding window of 3: j ≤ i − 3 (2 ≤ 5 − 3 = 2)" in text(e)
    assert "comes after query Input 2" in text(explain(trace, "scores", (0, 1, 4)))  # the window is causal too


def test_a_sink_joins_the_denominator_and_takes_its_share():
    trace = attend(CASES["sinks, a fully masked row, a window"]())
    e = explain(trace, "weights_exact", (2, 1))
    assert "A₃₂ = exp(s₃₂) / (exp(s_h) + Σₖ exp(s₃ₖ))" in text(e) and "exp(1.5)" in text(e)
    e = explain(trace, "weights_sink", (2, 0))
    assert e.title.startswith("weights_sink[Input 3]") and "A₃,sink = exp(s_h) /" in text(e)
    row = trace["weights_exact"][2].sum().item() + e.value
    assert row == pytest.approx(1.0) and e.value < 1  # the row's weights and the sink's share make 1
    e = explain(trace, "weights_sink", (0, 0))  # every key masked: the sink takes the whole row, the keys 0
    assert e.value == 1.0 and last_number(e) == 1
    assert explain(trace, "weights", (0, 1)).value == 0 and last_number(explain(trace, "weights", (0, 1))) == 0


def test_partial_rotary_leaves_the_last_dims_unturned():
    trace = attend(CASES["partial rotary, softcap, float64"]())  # d_head 8: the first 4 dims turned
    assert "turns by" in text(explain(trace, "queries", (2, 3)))
    e = explain(trace, "queries", (2, 6))
    assert "not turned" in text(e) and e.value == trace["queries_unrotated"][2, 6].item() == last_number(e)


def test_the_random_cases_hold_latent_attention_with_and_without_its_norm():
    cases = [modern_case(seed) for seed in range(12)]
    latent = [case for case in cases if case.options.w_latent is not None]
    assert 0 < len(latent) < len(cases)
    assert {case.options.latent_norm is None for case in latent} == {True, False}


def test_a_latent_is_written_out_and_keys_and_values_are_made_from_it():
    trace = attend(CASES["latent with its norm, rotary key, 2 heads"]())
    d_c, d = trace.case.d_c, len(trace.case.options.latent_norm)  # the normed columns, then the rotary key's 2
    assert d_c == d + 2
    e = explain(trace, "latent_unnormed", (1, 0))
    assert "c₂,₁ = x₂ · W_DKV[:, 1] = " in text(e) and "all the KV cache keeps" in text(e)
    assert e.parts == {"x": ((1,), None), "w_latent": (None, (0,)), "latent_unnormed": ((1,), (0,))}
    e = explain(trace, "latent", (1, 0))
    assert "root mean square" in text(e) and f"first {d} columns" in text(e)
    assert e.parts["latent_unnormed"] == ((1,), tuple(range(d)))
    e = explain(trace, "latent", (1, d_c - 1))  # the rotary key's column: not normed
    assert "passes as it is: the rotary key" in text(e)
    assert e.value == trace["latent_unnormed"][1, d_c - 1].item() == float32(last_number(e))
    e = explain(trace, "values", (1, 2, 0))  # head 2, Input 3
    assert "v₃,₁ = c₃ · W_UV[:, 3]" in text(e) and "latent c" in text(e) and e.parts["latent"] == ((2,), None)
    e = explain(trace, "keys_unrotated", (0, 1, 3))
    assert "k₂,₄ = c₂ · W_UK[:, 4]" in text(e) and "x" not in e.parts
    assert "W_UK" in text(explain(trace, "w_key", (0, 0))) and "latent dim 1" in explain(trace, "w_key", (0, 0)).title
    assert "W_DKV" in text(explain(trace, "w_latent", (3, 1)))
    assert "q₁,₁ = x₁ · W_Q[:, 1]" in text(explain(trace, "queries_unrotated", (0, 0, 0)))  # queries still read x
    assert "W_K[" in text(explain(attend(CASES["two heads"]()), "keys", (0, 0, 0)))  # without a latent: W_K
    for tensor, index in [("latent_unnormed", (1, 0)), ("latent", (1, 0)), ("latent", (1, d_c - 1))]:
        trace[tensor][index] += 0.5  # tampered with: the terms do not give the recorded number
        assert "⚠" in explain(trace, tensor, index).lines[-1], tensor


def test_a_latent_is_explained_in_chinese_too():
    trace = attend(CASES["latent with its norm, rotary key, 2 heads"]())
    d_c = trace.case.d_c
    said_where = [
        ("latent_unnormed", (0, 0), "KV 缓存"),
        ("latent", (0, 0), "均方根"),
        ("latent", (0, d_c - 1), "旋转键"),
        ("keys_unrotated", (0, 0, 0), "潜向量 c"),
    ]
    for tensor, index, said in said_where:
        e = explain(trace, tensor, index, lang="zh")
        assert said in text(e), (tensor, e.lines)


def test_a_cross_case_reads_x_kv_and_names_each_token_from_its_own_sentence():
    """Cross-attention: a key's and a value's numbers come from x_kv's row ("x_kv row j (token)"), a score names
    query i by x's token and key j by x_kv's, in both languages; a tampered key is caught."""
    trace = attend(CASES["cross, 2 heads, n_kv = 5"]())
    tokens, keys = trace.case.tokens, trace.case.key_tokens
    assert keys == tuple(f"src{j}" for j in range(5)) and not set(keys) & set(tokens)
    e = explain(trace, "keys", (1, 4, 0))  # head 2, key src4, column 1 (W_K's column 3)
    assert f"x_kv row 5 ({keys[4]})" in text(e) and "k₅,₁ = x_kv₅ · W_K[:, 3]" in text(e)
    assert keys[4] in e.title and e.parts["x_kv"] == ((4,), None) and "x" not in e.parts
    e = explain(trace, "values", (0, 3, 1))
    assert f"x_kv row 4 ({keys[3]})" in text(e) and e.parts["x_kv"] == ((3,), None)
    assert "q₂,₁ = x₂ · W_Q[:, 1]" in text(explain(trace, "queries", (0, 1, 0)))  # queries still read x
    e = explain(trace, "scores_raw", (0, 2, 4))  # query Input 3 (x) on key src4 (x_kv)
    assert e.title == f"scores_raw[head 1, {tokens[2]}, {keys[4]}]: query {tokens[2]} · key {keys[4]}"
    assert "x_kv, the source sentence" in text(e)
    e = explain(trace, "x_kv", (4, 3))
    assert e.title == f"x_kv[{keys[4]}, 4]: {keys[4]}, feature 4" and "source sentence" in text(e)
    assert e.value == trace["x_kv"][4, 3].item() == float32(last_number(e))
    assert keys[4] in explain(trace, "weighted", (0, 4, 2, 1)).title
    for tensor, index, said in [("keys", (1, 4, 0), "x_kv 的第 5 行"), ("scores_raw", (0, 2, 4), "源句子"),
                                ("x_kv", (4, 3), "源句子")]:  # fmt: skip
        e = explain(trace, tensor, index, lang="zh")
        assert said in text(e) and keys[4] in e.title, (tensor, e.lines)
    trace["keys"][1, 4, 0] += 0.5  # tampered with: x_kv's row no longer gives it
    assert "⚠" in explain(trace, "keys", (1, 4, 0)).lines[-1]


def test_a_cross_case_with_a_latent_makes_it_from_x_kv():
    trace = attend(CASES["cross latent with its norm, float64"]())
    e = explain(trace, "latent_unnormed", (4, 0))  # the latent has n_kv rows: the source sentence's
    assert "c₅,₁ = x_kv₅ · W_DKV[:, 1]" in text(e) and e.parts["x_kv"] == ((4,), None)
    assert trace.case.key_tokens[4] in e.title
