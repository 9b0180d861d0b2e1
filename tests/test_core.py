"""The eight steps against the seed's printed numbers and PyTorch's own attention (the trusted oracles)."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from attention import STEP_NAMES, CaseError, attend, case_to_dict, parse_case
from attention.base.case import with_options
from attention.base.presets import ARTICLE_ROUNDED_WEIGHTS, article, random_case, resize
from attention.forward.compute import REPEAT_MAX_N, Broadcast, one_query, scale_factor
from attention.forward.files import trace_to_dict
from attention.forward.oracle import check
from attention.forward.script import blocks, shown
from attention.forward.steps import LABELS, step_names, step_of
from tests.cases import QK_NORM

# The seed's printed numbers (../shared/seed/): PyTorch code and its output, verbatim.
SEED_KEYS = [[0.0, 1.0, 1.0], [4.0, 4.0, 0.0], [2.0, 3.0, 1.0]]
SEED_QUERIES = [[1.0, 0.0, 2.0], [2.0, 2.0, 2.0], [2.0, 1.0, 3.0]]
SEED_VALUES = [[1.0, 2.0, 3.0], [2.0, 8.0, 0.0], [2.0, 6.0, 3.0]]
SEED_SCORES = [[2.0, 4.0, 4.0], [4.0, 16.0, 12.0], [4.0, 12.0, 10.0]]
SEED_SOFTMAX = [
    [6.3379e-02, 4.6831e-01, 4.6831e-01],
    [6.0337e-06, 9.8201e-01, 1.7986e-02],
    [2.9539e-04, 8.8054e-01, 1.1917e-01],
]
SEED_WEIGHTED = [
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    [[1.0, 4.0, 0.0], [2.0, 8.0, 0.0], [1.8, 7.2, 0.0]],
    [[1.0, 3.0, 1.5], [0.0, 0.0, 0.0], [0.2, 0.6, 0.3]],
]
SEED_OUTPUTS = [[2.0, 7.0, 1.5], [2.0, 8.0, 0.0], [2.0, 7.8, 0.3]]
EXACT_OUTPUTS = [[1.9366, 6.6831, 1.5951], [2.0000, 7.9640, 0.0540], [1.9997, 7.7599, 0.3584]]  # the issue, 4 decimals
FP32 = {"rtol": 1.3e-6, "atol": 1e-5}


def tensor(rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_article_every_step_matches_the_seed():
    trace = attend(article())
    assert [s.name for s in trace.steps] == list(STEP_NAMES)
    assert [s.number for s in trace.steps] == list(range(1, 9))
    torch.testing.assert_close(trace["keys"], tensor(SEED_KEYS))
    torch.testing.assert_close(trace["queries"], tensor(SEED_QUERIES))
    torch.testing.assert_close(trace["values"], tensor(SEED_VALUES))
    torch.testing.assert_close(trace["scores"], tensor(SEED_SCORES))
    torch.testing.assert_close(trace["weights_exact"], tensor(SEED_SOFTMAX), rtol=0, atol=5e-5)  # printed to 4 places
    torch.testing.assert_close(trace["weights"], tensor(ARTICLE_ROUNDED_WEIGHTS))
    torch.testing.assert_close(trace["weighted"], tensor(SEED_WEIGHTED))
    torch.testing.assert_close(trace["outputs"], tensor(SEED_OUTPUTS))
    torch.testing.assert_close(trace.outputs, tensor(SEED_OUTPUTS))
    torch.testing.assert_close(trace["outputs_by_query"], tensor(SEED_OUTPUTS))


def test_article_exact_softmax_outputs():
    trace = attend(with_options(article(), weights_override=None))
    torch.testing.assert_close(trace.outputs, tensor(EXACT_OUTPUTS), rtol=0, atol=5e-5)
    assert torch.equal(trace["weights"], trace["weights_exact"])


def test_step_records_what_the_issue_names():
    trace = attend(article())
    expected = {
        "inputs": {"x"},
        "weights": {"w_query", "w_key", "w_value"},
        "qkv": {"queries", "keys", "values"},
        "scores": {"scores_raw", "scores"},
        "softmax": {"weights_exact", "weights"},
        "weighted": {"weighted"},
        "outputs": {"outputs"},
        "repeat": {"outputs_by_query"},
    }
    for step in trace.steps:
        assert set(step.tensors) == expected[step.name]
        assert step.title and step.explanation and step.formula
        assert step.device == "cpu" and step.seconds >= 0
        assert all(t.device.type == "cpu" for t in step.tensors.values())
    assert trace.step("weighted").tensors["weighted"].shape == (3, 3, 3)  # (n_keys, n_queries, d_v)


def test_a_trace_files_code_is_the_scripts_and_runs_in_order():
    """The code of each step in a trace file is the exported script's block (the one source a page shows too),
    and the blocks run in order compute the trace's outputs."""
    for case in (article(), random_case(5, 6, 8, 6, seed=3, heads=4, kv_heads=2, rope_base=100.0, mask="causal")):
        trace = attend(case)
        written = trace_to_dict(trace)["steps"]
        assert [s["code"] for s in written] == [shown(case, s.name) for s in trace.steps]
        scope = {}
        exec("import math\nimport torch", scope)
        for step in trace.steps:
            exec("\n".join(blocks(case)[step.name]), scope)
        torch.testing.assert_close(scope["outputs"], trace.outputs)


def test_a_step_is_named_by_its_name_its_label_or_its_old_place():
    plain, rotated = article(), random_case(3, 4, 4, 4, seed=1, rope_base=100.0)
    assert step_of(plain, "scores") == "scores" and step_of(rotated, "scores") == "scores"
    assert step_of(plain, "4") == "scores" and step_of(rotated, "4") == "rope"  # as old links opened
    assert step_of(rotated, "3b") == "rope" and step_of(plain, "3b") is None
    assert step_of(plain, "rope") is None and step_of(rotated, "9") == "repeat"
    for bad in ("9", "0", "²", "9" * 5000, "http://evil.example", ""):
        assert step_of(plain, bad) is None, bad
    assert [LABELS[name] for name in step_names(rotated)][2:5] == ["3", "3b", "4"]


def test_rope_and_grouped_heads_show_their_code_and_it_runs_in_order():
    """A case with RoPE has a step "rope" after step 3, numbered 3, and its shown code runs like the rest."""
    case = random_case(5, 6, 8, 6, seed=3, heads=4, kv_heads=2, rope_base=100.0, scale="sqrt_dk", mask="causal")
    trace = attend(case)
    assert [s.name for s in trace.steps] == ["inputs", "weights", "qkv", "rope", *STEP_NAMES[3:]]
    assert [s.number for s in trace.steps] == [1, 2, 3, 3, 4, 5, 6, 7, 8]
    assert [s.label for s in trace.steps] == ["1", "2", "3", "3b", "4", "5", "6", "7", "8"]
    assert set(trace.step("qkv").tensors) == {"queries_unrotated", "keys_unrotated", "values"}
    assert set(trace.step("rope").tensors) == {"queries", "keys"}  # what the scores use
    with pytest.raises(KeyError):
        attend(article()).step("rope")  # the article has no RoPE


def _sdpa_gqa(case):
    """The case by one call of scaled_dot_product_attention with enable_gqa: q (h, n, d), k and v (g, n, d)."""
    o = case.options
    h, g = o.heads, o.kv_heads or o.heads
    x = torch.tensor(case.x)
    q = (x @ torch.tensor(case.w_query)).unflatten(-1, (h, -1)).transpose(0, 1)
    k, v = ((x @ torch.tensor(w)).unflatten(-1, (g, -1)).transpose(0, 1) for w in (case.w_key, case.w_value))
    causal = o.mask == "causal"
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale_factor(case), enable_gqa=True)
    return out.transpose(0, 1).flatten(1)  # (n, h · d_v/g)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (6, 3), (6, 1), (9, 3), (4, 4)])
@pytest.mark.parametrize("seed", range(3))
def test_grouped_query_attention_equals_sdpa_with_enable_gqa(heads, kv_heads, seed):
    d_head = 4
    options = {"heads": heads, "kv_heads": kv_heads, "scale": "sqrt_dk", "mask": "causal" if seed % 2 else None}
    case = random_case(6, 5, heads * d_head, kv_heads * 3, seed=seed, **options)
    trace = attend(case)
    torch.testing.assert_close(trace.outputs, _sdpa_gqa(case), **FP32)
    assert trace["keys"].shape == (heads, 6, d_head)  # each query head with the key head it shares
    for i in range(heads):  # query head i reads key/value head i // (heads / kv_heads)
        torch.testing.assert_close(trace["keys"][i], trace["keys"][i // (heads // kv_heads) * (heads // kv_heads)])
    torch.testing.assert_close(trace["outputs_by_query"], trace.outputs, **FP32)


def test_grouped_heads_are_checked():
    with pytest.raises(CaseError, match="must divide the 4 query heads, not 3"):
        random_case(3, 4, 8, 6, heads=4, kv_heads=3)
    with pytest.raises(CaseError, match="w_key: has 8 columns, expected 4"):
        parse_case(case_to_dict(random_case(3, 4, 8, 8, heads=4)) | {"options": {"heads": 4, "kv_heads": 2}})


def _rotated(case):
    """RoPE as the paper writes it: each pair of a head's dims a complex number, times e^(i·t·θ_p) (float64)."""
    o = case.options
    x = torch.tensor(case.x, dtype=torch.float64)
    q, k = (x @ torch.tensor(w, dtype=torch.float64) for w in (case.w_query, case.w_key))
    d = q.shape[-1]
    t = torch.tensor(o.positions if o.positions is not None else range(case.n), dtype=torch.float64)
    theta = o.rope_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    if o.rope_frequencies is not None:  # a model's scaled RoPE: its θ_p as given
        theta = torch.tensor(o.rope_frequencies, dtype=torch.float64)
    turn = torch.polar(torch.ones(case.n, d // 2, dtype=torch.float64), t[:, None] * theta)
    return [torch.view_as_real(torch.view_as_complex(m.unflatten(-1, (-1, 2)).contiguous()) * turn).flatten(-2)
            for m in (q, k)]  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_rope_turns_pairs_as_complex_numbers_and_equals_fused_attention(seed):
    """Seeds 4 and 5: a model's scaled RoPE, each pair's frequency given (Llama 3's, linear, YaRN)."""
    positions = [3 * i - 4 for i in range(5)] if seed % 2 else None
    scaled = {"rope_frequencies": [1.0, 0.1, 0.004]} if seed >= 4 else {}
    case = random_case(5, 4, 6, 3, seed=seed, rope_base=10_000.0, positions=positions, dtype="float64", **scaled)
    trace = attend(case)
    q, k = _rotated(case)
    torch.testing.assert_close(trace["queries"], q)
    torch.testing.assert_close(trace["keys"], k)
    torch.testing.assert_close(trace["queries_unrotated"], torch.tensor(case.x, dtype=torch.float64)
                               @ torch.tensor(case.w_query, dtype=torch.float64))  # fmt: skip
    expected = F.scaled_dot_product_attention(q[None], k[None], trace["values"][None], scale=1.0)[0]
    torch.testing.assert_close(trace.outputs, expected)


@pytest.mark.parametrize("seed", range(4))
def test_the_q_k_norm_is_torchs_rms_norm_and_the_check_catches_a_missing_one(seed):
    """Qwen3's step 3a: each head's rows over their root mean square times γ, as torch.nn.functional.rms_norm; the
    check against fused attention (which norms with F.rms_norm) fails when the trace's norm is left out."""
    gamma = QK_NORM | {"norm_eps": 10.0 ** -(seed + 3)}
    rope = {"rope_base": 100.0} if seed % 2 else {}
    case = random_case(5, 4, 8, 4, seed=seed, heads=2, dtype="float64", **gamma, **rope)
    trace = attend(case)
    assert step_names(case)[3] == "norm" and trace.step("norm").label == "3a"
    unnormed = trace["queries_unnormed"]
    normed = F.rms_norm(unnormed, (4,), torch.tensor(gamma["q_norm"], dtype=torch.float64), gamma["norm_eps"])
    torch.testing.assert_close(trace["queries_unrotated" if rope else "queries"], normed)
    assert check(trace).agrees
    bare = attend(with_options(case, q_norm=None, k_norm=None))
    mixed = replace(trace, outputs=bare.outputs)  # the trace's records with the outputs of no norm
    assert not check(mixed).agrees


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"q_norm": [1.0, 1.0]}, "key norm weights: q/k norm weights come in pairs"),
        ({"q_norm": [1.0], "k_norm": [1.0, 1.0]}, "query norm weights: must hold 2 numbers, one per dim"),
        ({"q_norm": [1.0, "x"], "k_norm": [1.0, 1.0]}, "query norm weights, dim 2: 'x' is not a number"),
        ({"norm_eps": 0.0}, "q/k norm ε: must be greater than 0"),
    ],
)
def test_q_k_norm_options_are_checked(options, message):
    with pytest.raises(CaseError) as e:
        random_case(3, 4, 2, 2, **options)
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize("shift", [1, 7, -3, 1000, 100_000])
def test_rope_shifting_every_position_by_the_same_amount_leaves_the_scores_unchanged(shift):
    """A score q_i · k_j after RoPE depends on t_i − t_j only: the same shift of every position changes no score,
    though the rotated queries and keys themselves change."""
    base = random_case(6, 5, 8, 4, seed=11, rope_base=100_000.0, heads=2, kv_heads=1, scale="sqrt_dk", dtype="float64")
    shifted = with_options(base, positions=[t + shift for t in range(6)])
    a, b = attend(base), attend(shifted)
    torch.testing.assert_close(b["scores"], a["scores"], rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(b.outputs, a.outputs, rtol=1e-9, atol=1e-9)
    assert not torch.allclose(b["queries"], a["queries"])  # the turns did change
    moved = with_options(base, positions=[0, 1, 2, 3, 4, 6])  # one gap changed: some scores must move
    assert not torch.allclose(attend(moved)["scores"], a["scores"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rope_base": 1.0}, "RoPE base: must be at least 2"),
        ({"rope_base": "abc"}, "RoPE base: 'abc' is not a number"),
        ({"positions": [0, 1, 2]}, "RoPE positions: positions are RoPE's: give a RoPE base too"),
        ({"rope_base": 100.0, "positions": [0, 1]}, "RoPE positions: must hold 3 whole numbers, one per token"),
        ({"rope_base": 100.0, "positions": [0, 1.5, 2]}, "RoPE position 2 (Input 2): must be a whole"),
        ({"rope_base": 100.0, "positions": [0, 1, 2**21]}, "RoPE position 3 (Input 3): must be a whole"),
        ({"rope_frequencies": [1.0, 0.5]}, "RoPE frequencies: RoPE's frequencies are scaled from a base"),
        ({"rope_base": 100.0, "rope_frequencies": [1.0]}, "RoPE frequencies: must hold 2 numbers, one per pair"),
        ({"rope_base": 100.0, "rope_frequencies": [1.0, -0.5]}, "RoPE frequency of pair 2: must be greater than 0"),
        ({"rope_base": 100.0, "rope_frequencies": [1.0, "x"]}, "RoPE frequency of pair 2: 'x' is not a number"),
    ],
)
def test_rope_options_are_checked(options, message):
    with pytest.raises(CaseError) as e:
        random_case(3, 4, 4, 2, **options)
    assert str(e.value).startswith(message), str(e.value)
    with pytest.raises(CaseError, match="its width 3 must be even"):
        random_case(3, 4, 3, 2, rope_base=100.0)


def test_trace_is_immutable():
    trace = attend(article())
    with pytest.raises(AttributeError):
        trace.outputs = None
    with pytest.raises(TypeError):
        trace.steps[0].tensors["x"] = torch.zeros(1)


# Random cases against PyTorch's fused attention: every scale, temperature and mask.
OPTION_GRID = [
    {},
    {"scale": "sqrt_dk"},
    {"scale": 0.25, "temperature": 0.5},
    {"temperature": 3.0},
    {"mask": "causal"},
    {"mask": "causal", "scale": "sqrt_dk", "temperature": 2.0},
    {"dtype": "float64", "scale": "sqrt_dk"},
]


def sdpa_reference(case):
    o = case.options
    dtype = getattr(torch, o.dtype)
    x = torch.tensor(case.x, dtype=dtype)
    q, k, v = (x @ torch.tensor(w, dtype=dtype) for w in (case.w_query, case.w_key, case.w_value))
    h = o.heads
    q, k, v = (t.unflatten(-1, (h, -1)).transpose(0, 1) for t in (q, k, v))  # (h, n, d/h)
    mask = None
    if o.mask == "causal":
        mask = torch.ones(case.n, case.n, dtype=torch.bool).tril()
    elif o.mask is not None:
        mask = torch.tensor(o.mask) != 0
    scale = {"none": 1.0, "sqrt_dk": (case.d_k // h) ** -0.5}.get(o.scale, o.scale) / o.temperature
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)  # (h, n, d_v/h)
    return out.transpose(0, 1).flatten(1)


@pytest.mark.parametrize("options", OPTION_GRID, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "article")
@pytest.mark.parametrize("seed", range(8))
def test_random_cases_equal_fused_attention(options, seed):
    g = torch.Generator().manual_seed(seed)
    n, d_in, d_k, d_v = (int(v) for v in torch.randint(1, 12, (4,), generator=g))
    case = random_case(n, d_in, d_k, d_v, seed=seed, **options)
    trace = attend(case)
    tol = FP32 if case.options.dtype == "float32" else {}
    torch.testing.assert_close(trace.outputs, sdpa_reference(case), **tol)
    torch.testing.assert_close(trace["outputs_by_query"], trace.outputs, **tol)
    torch.testing.assert_close(trace["weighted"].sum(dim=0), trace.outputs, **tol)


@pytest.mark.parametrize("seed", range(6))
def test_explicit_masks_with_fully_masked_rows_give_zeros_not_nan(seed):
    g = torch.Generator().manual_seed(seed)
    n = 6
    mask = (torch.rand(n, n, generator=g) > 0.5).int()
    mask[seed % n] = 0  # one row may attend to nothing
    case = random_case(n, 4, 4, 2, seed=seed, mask=mask.tolist())
    trace = attend(case)
    assert not trace.outputs.isnan().any()
    assert torch.equal(trace.outputs[seed % n], torch.zeros(2))
    torch.testing.assert_close(trace.outputs, sdpa_reference(case), **FP32)
    assert any(f"Row {seed % n + 1} " in w and "fully masked" in w for w in trace.warnings)


@pytest.mark.parametrize("heads", [2, 3, 4])
@pytest.mark.parametrize("seed", range(4))
def test_multi_head_equals_fused_attention_per_head(heads, seed):
    case = random_case(5, 6, 2 * heads * 2, heads * 3, seed=seed, heads=heads, scale="sqrt_dk", mask="causal")
    trace = attend(case)
    torch.testing.assert_close(trace.outputs, sdpa_reference(case), **FP32)
    assert trace["queries"].shape == (heads, 5, 4)
    assert trace["weighted"].shape == (heads, 5, 5, 3)
    assert trace["head_outputs"].shape == (heads, 5, 3)
    torch.testing.assert_close(trace["concat"], trace.outputs)


@pytest.mark.parametrize("with_w_out", [False, True])
@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("seed", range(3))
def test_multi_head_equals_nn_multihead_attention(heads, seed, with_w_out):
    """nn.MultiheadAttention with our projections as its weights (it computes x @ W.T, so ours go in transposed)."""
    e = 8
    g = torch.Generator().manual_seed(100 + seed)
    w_out = torch.randn(e, e, generator=g).round(decimals=1)
    options = {"heads": heads, "scale": "sqrt_dk"} | ({"w_out": w_out.tolist()} if with_w_out else {})
    case = random_case(4, e, e, e, seed=seed, **options)
    mha = torch.nn.MultiheadAttention(e, heads, bias=False, batch_first=True)
    with torch.no_grad():
        w_q, w_k, w_v = (torch.tensor(w) for w in (case.w_query, case.w_key, case.w_value))
        mha.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
        mha.out_proj.weight.copy_(w_out.T if with_w_out else torch.eye(e))
        x = torch.tensor(case.x)[None]
        expected, _ = mha(x, x, x, need_weights=False)
    torch.testing.assert_close(attend(case).outputs, expected[0], **FP32)


def test_w_out_with_one_head_records_concat():
    case = random_case(3, 4, 3, 3, seed=1, w_out=[[1, 0], [0, 1], [1, 1]])
    trace = attend(case)
    assert set(trace.step("outputs").tensors) == {"outputs", "concat"}
    torch.testing.assert_close(trace.outputs, trace["concat"] @ torch.tensor(case.options.w_out), **FP32)


def test_override_is_used_as_given_and_exact_is_still_recorded():
    case = random_case(3, 2, 2, 2, seed=3, weights_override=[[1, 2, 0], [0, 0, 0], [0.5, 0.5, 0.5]])
    trace = attend(case)
    torch.testing.assert_close(trace["weights"], torch.tensor(case.options.weights_override))
    torch.testing.assert_close(trace["weights_exact"].sum(-1), torch.ones(3))
    torch.testing.assert_close(trace.outputs, trace["weights"] @ trace["values"], **FP32)


def test_random_preset_is_seeded_and_leaves_the_global_rng_alone():
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    assert random_case(4, 3, 2, 2, seed=7) == random_case(4, 3, 2, 2, seed=7)
    assert random_case(4, 3, 2, 2, seed=7) != random_case(4, 3, 2, 2, seed=8)
    assert torch.equal(torch.get_rng_state(), before)


def test_resize_keeps_numbers_and_fills_new_cells():
    case = article()
    bigger = resize(case, 4, 5, 3, 2, fill="zeros")
    assert bigger.x[:3] == tuple((*row, 0.0) for row in case.x)
    assert bigger.x[3] == (0.0,) * 5
    assert bigger.w_value == (*tuple(row[:2] for row in case.w_value), (0.0, 0.0))
    assert bigger.tokens == ("Input 1", "Input 2", "Input 3", "Input 4")
    assert bigger.options.weights_override is None  # 3×3 no longer fits 4 tokens
    same_n = resize(case, 3, 4, 3, 3, fill="random", seed=5)
    assert same_n == case  # nothing new to fill, nothing dropped
    random_fill = resize(case, 3, 6, 3, 3, fill="random", seed=5)
    assert any(v != 0 for row in random_fill.x for v in row[4:])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("options", [*OPTION_GRID, {"heads": 2, "mask": "causal"}])
def test_gpu_equals_cpu(options):
    case = random_case(33, 8, 8, 6, seed=0, **options)
    cpu = attend(case)
    gpu = attend(with_options(case, device="cuda"))
    assert gpu.device.startswith("cuda") and all(s.device.startswith("cuda") for s in gpu.steps)
    torch.testing.assert_close(gpu.outputs, cpu.outputs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "options", [{"mask": [[1, 1, 1], [0, 0, 0], [1, 1, 1]]}, {"scale": "sqrt_dk", "temperature": 3.0}]
)
def test_with_the_override_steps_6_to_8_use_it_and_steps_4_5_still_follow_the_case(options):
    """The override is used as given (the article's semantics), and the trace says when it no longer fits."""
    case = with_options(article(), **options, weights_override=[list(r) for r in ARTICLE_ROUNDED_WEIGHTS])
    trace = attend(case)
    torch.testing.assert_close(trace.outputs, tensor(SEED_OUTPUTS))
    torch.testing.assert_close(trace["weights_exact"], attend(with_options(case, weights_override=None))["weights"])
    notes = " ".join(trace.warnings)
    assert "not this case's softmax rounded" in notes
    if "mask" in options:
        assert "Row 2 (Input 2) is fully masked" in notes and "the override's row is used as given" in notes


def test_an_edited_w_query_with_the_override_says_the_override_is_stale():
    d = case_to_dict(article())
    d["w_query"][0][0] = 5.0  # the scores change; the rounded weights do not
    trace = attend(parse_case(d))
    assert any(getattr(w, "key", None) == "note.stale_override" for w in trace.warnings)
    assert not any(getattr(w, "key", None) == "note.stale_override" for w in attend(article()).warnings)


def test_one_query_recomputes_steps_4_to_7_for_that_query():
    case = random_case(5, 4, 4, 4, seed=4, heads=2, mask="causal", w_out=[[1, 0], [0, 1], [1, 1], [0, 0]])
    trace = attend(case)
    for i in range(5):
        alone = one_query(trace, i)
        torch.testing.assert_close(alone["scores"], trace["scores"][..., i : i + 1, :])
        torch.testing.assert_close(alone["outputs"], trace.outputs[i : i + 1], **FP32)


@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("mask", [None, "causal"])
def test_big_cases_make_the_broadcast_on_demand_and_repeat_the_first_queries(heads, mask):
    n, d_v = 70, 64  # 70 · 70 · 64 numbers: past WHOLE_MAX_NUMBERS
    case = random_case(n, 8, 8, d_v, seed=heads, heads=heads, mask=mask, scale="sqrt_dk")
    trace = attend(case)
    weighted = trace["weighted"]
    assert isinstance(weighted, Broadcast)
    assert tuple(weighted.shape) == ((heads,) if heads > 1 else ()) + (n, n, d_v // heads)
    values, weights = trace["values"], trace["weights"]
    whole = values[..., :, None, :] * weights.mT[..., :, :, None]  # what the small-n path records
    for index in [(5,), (slice(2, 9), 3), (..., 7), (slice(None), 4, slice(1, 3)), ([1, 69], slice(None), 0)]:
        index = ((heads - 1,) if heads > 1 else ()) + index
        torch.testing.assert_close(weighted[index], whole[index], rtol=0, atol=0)
    if heads > 1:  # one head alone is that head's Broadcast, made no bigger
        assert isinstance(weighted[1], Broadcast)
        torch.testing.assert_close(weighted[1][3, 4], whole[1, 3, 4], rtol=0, atol=0)
    # The outputs sum n products (some cancel); two float32 sums of them in other orders (SDPA's, the broadcast's)
    # differ by about √n · eps · Σ|terms| each: past FP32's atol in a cell whose terms cancel (seen: 1.07e-5)
    summed, size = whole.sum(dim=-3), whole.abs().sum(dim=-3).max().item()
    atol = max(FP32["atol"], 2 * n**0.5 * torch.finfo(torch.float32).eps * size)
    torch.testing.assert_close(trace.outputs, sdpa_reference(case), rtol=FP32["rtol"], atol=atol)
    torch.testing.assert_close(
        summed.transpose(0, 1).flatten(1) if heads > 1 else summed, trace.outputs, rtol=0, atol=atol
    )
    by_query = trace["outputs_by_query"]
    assert by_query.shape == (REPEAT_MAX_N, d_v)
    torch.testing.assert_close(by_query, trace.outputs[:REPEAT_MAX_N], **FP32)
    torch.testing.assert_close(one_query(trace, n - 1)["outputs"][0], trace.outputs[n - 1], **FP32)
    notes = " ".join(trace.warnings)
    assert f"would hold {n * n * d_v:,} numbers" in notes
    assert f"equals the matrix form for queries 1-{REPEAT_MAX_N} of {n}" in notes


def test_small_cases_keep_the_whole_broadcast_and_repeat_every_query():
    n = 16  # 16 · 16 · 64 numbers: within WHOLE_MAX_NUMBERS, and n = REPEAT_MAX_N
    trace = attend(random_case(n, 8, 8, 64, seed=1))
    assert isinstance(trace["weighted"], torch.Tensor)
    assert trace["outputs_by_query"].shape == (n, 64)
    assert not any("would hold" in w for w in trace.warnings)
