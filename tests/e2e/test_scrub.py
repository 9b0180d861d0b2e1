"""The browser's arithmetic (attention/forward/web/steps.js) in a real Chromium against the torch trace: random cases
with every option (today's too, in random combinations), every tensor within the one tolerance rule at float32, and a
wrong option caught (a blank page, no server); then a drag on /inputs, drawn by the browser step by step, and sent to
the server only on release."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from attention import attend
from attention.app.session import Session
from attention.base import tolerance as rule
from attention.base.case import MODERN, Case, case_to_dict, parse_case, with_options
from attention.base.files import case_to_link
from attention.base.presets import ARTICLE_ROUNDED_WEIGHTS, random_case
from attention.forward.compute import ROUNDED_WITHIN, Trace, norm_rests, scale_factor
from tests.cases import QK_NORM, with_latent
from tests.e2e.test_browser import cell, heatmaps, open_page, wait_ready
from tests.test_cross import cross_case

pytestmark = pytest.mark.e2e

STEPS_JS = Path(__file__).resolve().parents[2] / "attention" / "forward" / "web" / "steps.js"
F32 = torch.float32
EPS, TINY = torch.finfo(F32).eps, torch.finfo(F32).tiny
# The module imported into a blank page as an ES module (a blob URL: no server, no file access needed)
LOAD = """async (source) => {
    const url = URL.createObjectURL(new Blob([source], {type: 'text/javascript'}));
    window.steps = await import(url);
}"""
# Every tensor of one run, as plain arrays with their shapes (Infinity and NaN as strings: JSON has neither)
RUN = """(kase) => {
    const out = window.steps.attend(kase), plain = {};
    for (const [name, value] of Object.entries(out))
        plain[name] = value.data ? {shape: value.shape, data: Array.from(value.data, String)} : value;
    return plain;
}"""
MASK = [[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 1], [0, 1, 1, 1]]  # the second query sees no key: a row of zeros
LATENT = "DeepSeek's latent with its norm, rotary key, 2 heads"
OLMO_HEAD = "OLMo 2's head cut from its layer (norm_rest), RoPE"
OLMO_REST = {"q": (3.5, 0.0, 12.25, 1.0, 7.5, 0.5), "k": (1.0, 2.0, 0.25, 9.0, 4.0, 0.0), "q_width": 16, "k_width": 8}
# Every option the app has, alone and together: (n, d_in, d_k, d_v, options); d_k a multiple of the heads
OPTIONS = {
    "article's defaults": (3, 4, 3, 3, {}),
    "sqrt_dk": (7, 5, 6, 4, {"scale": "sqrt_dk"}),
    "custom scale, temperature 0.3": (5, 3, 4, 4, {"scale": 0.7, "temperature": 0.3}),
    "temperature 4": (6, 4, 4, 3, {"temperature": 4.0}),
    "causal": (9, 6, 6, 6, {"mask": "causal"}),
    "custom mask with a masked row": (4, 3, 3, 3, {"mask": MASK}),
    "2 heads, w_out": (8, 8, 8, 6, {"heads": 2, "w_out": "random"}),
    "4 heads, 2 kv heads, sqrt_dk": (10, 8, 8, 8, {"heads": 4, "kv_heads": 2, "scale": "sqrt_dk"}),
    "RoPE, positions": (6, 4, 4, 4, {"rope_base": 100.0, "positions": (5, 1, 2, 9, 3, 0)}),
    "scaled RoPE (a model's frequencies)": (5, 4, 8, 4, {"heads": 2, "rope_base": 500.0,
                                                         "rope_frequencies": (0.7, 0.02)}),
    "Qwen3's q/k norm, RoPE": (5, 4, 8, 4, {"heads": 2, "rope_base": 500.0, **QK_NORM}),
    "OLMo 2's q/k norm over the width, 4 heads, 2 kv heads, RoPE": (6, 4, 8, 8, {
        "heads": 4, "kv_heads": 2, "rope_base": 500.0, "norm_width": True,
        "q_norm": (*QK_NORM["q_norm"], 0.5, -1.5, 1.0, 0.25), "k_norm": QK_NORM["k_norm"]}),
    OLMO_HEAD: (6, 4, 4, 4, {
        "rope_base": 500.0, "norm_width": True, **QK_NORM, "norm_rest": OLMO_REST}),
    "w_out, one head": (5, 4, 4, 3, {"w_out": "random"}),
    "weights override": (3, 4, 3, 3, {"weights_override": ARTICLE_ROUNDED_WEIGHTS}),
    "16 × 16, every option": (16, 16, 16, 16, {"heads": 4, "kv_heads": 1, "rope_base": 10_000.0, "mask": "causal",
                                              "scale": "sqrt_dk", "temperature": 0.7, "w_out": "random"}),
    # today's options (base/case.py's MODERN), alone and together
    "sliding window 3": (7, 4, 4, 4, {"window": 3}),
    "window 2 and a custom mask": (4, 3, 3, 3, {"window": 2, "mask": MASK}),
    "softcap 1.5": (6, 4, 4, 4, {"softcap": 1.5}),
    "ALiBi, 2 heads": (6, 4, 6, 4, {"heads": 2, "alibi": (0.5, 0.125), "scale": "sqrt_dk"}),
    "sinks, a masked row": (4, 3, 3, 3, {"mask": MASK, "sinks": (0.7,)}),
    "sinks, 4 heads, 2 kv heads": (6, 4, 8, 4, {"heads": 4, "kv_heads": 2, "sinks": (2.0, -1.0, 0.0, 3.5)}),
    "partial rotary, positions": (5, 4, 8, 4, {"heads": 2, "rope_base": 100.0, "rope_fraction": 0.5,
                                               "positions": (3, 0, 7, 1, 2)}),
    "partial rotary of a model's frequencies": (5, 4, 6, 4, {"rope_base": 500.0, "rope_fraction": 0.4,
                                                              "rope_frequencies": (0.3,)}),
    "NoPE beside ALiBi and a cap": (5, 4, 4, 4, {"alibi": (0.25,), "softcap": 2.0, "temperature": 0.5}),
    "T5's bias both ways, 2 heads": (9, 4, 4, 4, {"heads": 2, "relative_bias": (tuple(range(-4, 4)), (1,) * 8),
                                                  "relative_max_distance": 5}),
    "T5's decoder bias, beside ALiBi": (12, 4, 4, 4, {"mask": "causal", "alibi": (0.25,), "relative_max_distance": 9,
                                                      "relative_bias": ((0.5, -1.0, 2.0, 0.0, 1.5, -0.5),),
                                                      "relative_bidirectional": False}),
    "16 × 16, every modern option": (16, 16, 16, 16, {"heads": 4, "kv_heads": 2, "rope_base": 10_000.0,
                                                     "rope_fraction": 0.5, "window": 5, "softcap": 3.0,
                                                     "alibi": (0.5, 0.25, 0.125, 0.0625),
                                                     "sinks": (1.0, -0.5, 0.0, 2.0), "scale": "sqrt_dk",
                                                     "relative_bias": ((0.0, -0.5, -1.0, -1.5) * 4,) * 4,
                                                     "relative_max_distance": 12, "w_out": "random"}),
    # DeepSeek's multi-head latent attention ("latent": made by tests/cases.py's with_latent, its norm on or off)
    LATENT: (6, 4, 8, 4, {"heads": 2, "rope_base": 100.0, "rope_fraction": 0.5, "mask": "causal", "latent": True}),
    "latent without its norm, 4 heads, 2 kv heads": (5, 5, 8, 4, {"heads": 4, "kv_heads": 2, "latent": False}),
}  # fmt: skip
SEEDS = (0, 1, 2)
MODERN_SEEDS = range(28)  # random combinations of today's options: seed s always has MODERN[s % len(MODERN)]


def case_of(name: str, seed: int) -> Case:
    """A seeded random case with the named options (w_out "random": drawn from its own seeded generator; "latent":
    made multi-head latent attention by tests/cases.py's with_latent, with its norm or without)."""
    n, d_in, d_k, d_v, options = OPTIONS[name]
    options = dict(options)
    latent = options.pop("latent", None)  # with its norm (True) or without (False)
    if options.get("w_out") == "random":
        heads, kv = options.get("heads", 1), options.get("kv_heads") or options.get("heads", 1)
        rows = d_v * heads // kv  # the concatenated heads' width (each of g value heads shared by h/g query heads)
        generator = torch.Generator().manual_seed(100 + seed)
        w_out = torch.randn(rows, 5, generator=generator, dtype=torch.float64).round(decimals=1)
        options["w_out"] = tuple(map(tuple, w_out.tolist()))
    case = random_case(n, d_in, d_k, d_v, seed=seed, **options)
    return case if latent is None else parse_case(with_latent(case_to_dict(case), random.Random(seed), norm=latent))


def modern_case(seed: int) -> Case:
    """A seeded random case with a random combination of today's options (MODERN: each on with chance 1/2, and
    MODERN[seed % len(MODERN)] always), at random sizes, heads, key/value heads, masks, scales and temperatures;
    multi-head latent attention (w_latent) made by tests/cases.py's with_latent, its norm in half the cases."""
    generator = torch.Generator().manual_seed(1000 + seed)
    draw = lambda: float(torch.rand((), generator=generator, dtype=torch.float64))  # noqa: E731
    pick = lambda choices: choices[int(draw() * len(choices))]  # noqa: E731
    on = {name for name in MODERN if draw() < 0.5} | {MODERN[seed % len(MODERN)]}
    heads = pick((1, 2, 4))
    kv_heads = pick([g for g in (1, 2, 4) if heads % g == 0])
    n, d_head = 2 + int(draw() * 9), pick((4, 6, 8) if "rope_fraction" in on else (2, 4, 6))
    mask = pick((None, "causal", tuple(tuple(int(draw() < 0.7) for _ in range(n)) for _ in range(n))))
    options = {"heads": heads, "mask": mask, "scale": pick(("none", "sqrt_dk")), "temperature": pick((0.5, 1.0, 2.0))}
    if kv_heads != heads:
        options["kv_heads"] = kv_heads
    if "window" in on:
        options["window"] = 1 + int(draw() * n)
    if "softcap" in on:
        options["softcap"] = round(0.5 + 4.5 * draw(), 2)
    if "alibi" in on:  # the paper's slopes are 2^(−8k/h): between 0 and 1/2
        options["alibi"] = tuple(round(draw(), 3) for _ in range(heads))
    if "sinks" in on:
        options["sinks"] = tuple(round(6 * draw() - 3, 2) for _ in range(heads))
    if "relative_bias" in on:  # T5's: 4, 8 or 16 buckets, a max distance past the exact ones (at most 8 of them)
        buckets = pick((4, 8, 16))
        options["relative_bias"] = tuple(tuple(round(4 * draw() - 2, 2) for _ in range(buckets)) for _ in range(heads))
        options["relative_max_distance"] = buckets // 2 + 1 + int(draw() * 12)
        options["relative_bidirectional"] = draw() < 0.5
    if "rope_fraction" in on or draw() < 0.3:  # partial rotary needs RoPE; NoPE the rest of the time
        options["rope_base"] = pick((100.0, 10_000.0))
    if "rope_fraction" in on:  # turning an even number of dims, 2 or more, fewer than all
        turning = [f for f in (0.25, 0.5, 0.75) if int(d_head * f) in range(2, d_head, 2)]
        options["rope_fraction"] = pick(turning)
    d_in, d_v = 2 + int(draw() * 7), kv_heads * pick((1, 2, 3))
    case = random_case(n, d_in, heads * d_head, d_v, seed=seed, **options)
    return parse_case(with_latent(case_to_dict(case), random.Random(seed))) if "w_latent" in on else case


@pytest.fixture(scope="module")
def steps_page(browser):
    page = browser.new_page()
    page.evaluate(LOAD, STEPS_JS.read_text())
    yield page
    page.close()


def run_js(page, case: Case, rounded_within: float | None = None) -> dict:
    """The module's tensors for the case (float64 tensors of its float32 numbers), by the trace's names."""
    kase = case_to_dict(case)
    if rounded_within is not None:
        kase["options"]["rounded_within"] = rounded_within
    out = page.evaluate(RUN, json.loads(json.dumps(kase)))
    tensors = {}
    for name, value in out.items():
        if isinstance(value, dict):
            tensors[name] = torch.tensor([float(v) for v in value["data"]], dtype=torch.float64).reshape(value["shape"])
        else:
            tensors[name] = value
    return tensors


def tolerances(trace: Trace) -> dict[str, torch.Tensor]:
    """How far another float32 computation may be from each of the trace's tensors: the one rule (√K · eps · Σ|terms|,
    base/tolerance.py) carried step by step, as attention_tolerance carries it to the outputs."""
    case, o = trace.case, trace.case.options
    h = o.heads
    with_head = (lambda t: t.double()) if h > 1 else (lambda t: t.double()[None])  # (h, …) always
    x, w_query, w_key, w_value = (trace[name].double() for name in ("x", "w_query", "w_key", "w_value"))
    q, k, v = (with_head(trace[name]) for name in ("queries", "keys", "values"))
    width_k, width_v = q.shape[-1], v.shape[-1]
    typed = [name for name in ("x", "w_query", "w_latent", "w_key", "w_value") if name in trace]
    out = {name: torch.zeros_like(trace[name].double()) for name in typed}
    # step 3: each a sum of d_in products; keys and values from x (cross-attention: x_kv), or from the latent (its
    # own sum, and its norm)
    x_kv = trace["x_kv"].double() if case.cross else None
    if x_kv is not None:
        out["x_kv"] = torch.zeros_like(x_kv)  # typed: exact on both sides
    latent = None
    if o.w_latent is not None:
        unnormed = trace["latent" if o.latent_norm is None else "latent_unnormed"]
        latent = (trace["w_latent"], unnormed, o.latent_norm, o.norm_eps)
        out["latent_unnormed"] = rule.product_error(x if x_kv is None else x_kv, trace["w_latent"], F32)
    read, e_read = rule.latent_error(x if x_kv is None else x_kv, latent, F32)
    if latent is not None:
        out["latent"] = e_read
    e_q = rule.heads_of(rule.product_error(x, w_query, F32), h, width_k)
    e_k = rule.heads_of(rule.product_error(read, w_key, F32) + e_read @ w_key.abs(), h, width_k)
    e_v = rule.heads_of(rule.product_error(read, w_value, F32) + e_read @ w_value.abs(), h, width_v)
    norm = None
    if o.q_norm is not None:  # step 3a: the q/k norm
        norm = (trace["queries_unnormed"], trace["keys_unnormed"], o.q_norm, o.k_norm, o.norm_eps, norm_rests(o))
        out |= {"queries_unnormed": e_q, "keys_unnormed": e_k}
        e_q, e_k = (
            rule.normed_error(e, m, gamma, o.norm_eps, F32, rest)
            for e, m, gamma, rest in zip((e_q, e_k), norm[:2], norm[2:4], norm[5], strict=True)
        )
    if o.rope_base is not None:  # partial rotary: the first d_rot dims turned, the rest as they were
        out |= {"queries_unrotated": e_q, "keys_unrotated": e_k}
        e_q, e_k = (
            torch.cat((rule.turned_error(e[..., : case.d_rot], m[..., : case.d_rot], F32), e[..., case.d_rot :]), -1)
            for e, m in ((e_q, q), (e_k, k))
        )
    out |= {"queries": e_q, "keys": e_k, "values": e_v}
    # step 4: a sum of d_head products, and q's and k's errors
    multiplier = scale_factor(case) / o.temperature
    raw = rule.rounding(width_k, F32) * (q.abs() @ k.abs().mT) + e_q @ k.abs().mT + q.abs() @ e_k.mT
    out |= score_errors(trace, with_head, raw, multiplier)
    # step 5: the softmax (with a sink's share)
    out |= softmax_errors(trace, with_head, out["scores"])
    e_a = out["weights_exact"]
    override = o.weights_override is not None and not trace["weights"].equal(trace["weights_exact"])
    e_w = 2 * EPS * with_head(trace["weights"]).abs() if override else e_a
    out["weights"] = e_w
    # step 6: one product each
    w, vv = with_head(trace["weights"]), v
    out["weighted"] = (
        vv.abs()[..., :, None, :] * e_w.mT[..., :, :, None]
        + e_v[..., :, None, :] * w.abs().mT[..., :, :, None]
        + EPS * (vv[..., :, None, :] * w.mT[..., :, :, None]).abs()
    )
    # step 7: the rule's own carry to the outputs, and to the heads' outputs before w_out
    reads = (x, w_query, w_key, w_value, trace["queries"], trace["keys"], trace["values"], trace["weights"])
    rope = o.rope_base is not None
    w_out = None if o.w_out is None else torch.tensor(o.w_out, dtype=torch.float64)
    # a bias or a cap rounds each score once more: the rule reads the final scores then (forward/compute.py's too)
    scores = trace["scores"] if o.alibi is not None or o.softcap is not None else None
    said = {"scores": scores, "latent": latent, "x_kv": x_kv}
    concat = rule.attention_tolerance(*reads, multiplier, rope, None, True, norm, **said)
    out["concat"] = concat  # (n, d_v·h/g)
    out["head_outputs"] = concat.unflatten(-1, (h, -1)).transpose(0, 1)
    out["outputs"] = rule.attention_tolerance(*reads, multiplier, rope, w_out, True, norm, **said)
    return {name: e + 16 * TINY for name, e in out.items()}  # (h, …): one head's lose the axis in differences


def score_errors(trace: Trace, with_head, raw: torch.Tensor, multiplier: float) -> dict[str, torch.Tensor]:
    """Step 4's tensors' tolerances (h, n_q, n_k), from the raw scores' (raw): the multiplier's own rounding, ALiBi's
    bias (its product m_h (i − j)) and the sum, a softcap's c · tanh(S / c) (its slope, 1 − tanh², carries the
    error; its division, tanh and product round: ≤ 4 eps of the capped score, as (1 − tanh² x) |x| ≤ |tanh x|)."""
    o, out = trace.case.options, {"scores_raw": raw}
    scaled = (with_head(trace["scores_raw"]) * multiplier).abs()
    sigma = abs(multiplier) * raw + 2 * EPS * scaled
    if o.alibi is not None:
        bias = with_head(trace["position_bias"]).abs()
        out["position_bias"] = 2 * EPS * bias
        sigma = sigma + 3 * EPS * (scaled + bias)  # the bias's rounding and the sum's
    if o.softcap is not None:
        out["scores_uncapped"] = sigma
        capped = with_head(trace["scores"]).abs().nan_to_num(posinf=0.0)  # masked (−inf): exactly −inf on both sides
        slope = (1 - (capped / o.softcap) ** 2).clamp(min=0)
        sigma = slope * sigma + 4 * EPS * capped
    out["scores"] = sigma
    return out


def softmax_errors(trace: Trace, with_head, sigma: torch.Tensor) -> dict[str, torch.Tensor]:
    """Step 5's tolerances from the scores' (sigma): δs moves weight j by A_ij (δs_ij − Σ_k A_ik δs_ik), each exponent
    rounds s − top (top: the row's largest logit, a sink's included), and the exp, division and sum of the n_k terms
    (and the sink's e^s_h) round. With sinks, the sink's weight moves by the same rule (its logit exact)."""
    o = trace.case.options
    scores, a = with_head(trace["scores"]), with_head(trace["weights_exact"])  # (h, n_q, n_k)
    sinks = None if o.sinks is None else torch.tensor(o.sinks, dtype=F32).double()[:, None, None]  # (h, 1, 1)
    top = scores.amax(-1, keepdim=True)  # (h, n_q, 1)
    top = top if sinks is None else torch.maximum(top, sinks)
    masked = torch.isinf(scores)
    sigma = torch.where(masked, 0.0, sigma + 4 * EPS + EPS * (scores - top).abs().where(~masked, 0.0))
    row = (a * sigma).sum(-1, keepdim=True)  # (h, n_q, 1)
    terms = a.shape[-1] + (sinks is not None)
    out = {}
    if sinks is not None:
        w_sink, sigma_sink = with_head(trace["weights_sink"]), 4 * EPS + EPS * (sinks - top).abs()
        row = row + w_sink * sigma_sink
        out["weights_sink"] = w_sink * (sigma_sink + row) + rule.rounding(terms, F32) * w_sink
    out["weights_exact"] = a * (sigma + row) + rule.rounding(terms, F32) * a
    return out


def differences(trace: Trace, got: dict) -> dict[str, float]:
    """Each tensor the trace and the module both name: how many times its tolerance the worst number is off (≤ 1:
    within), where −inf (a masked score) must be −inf on both sides."""
    bounds, worst = tolerances(trace), {}
    for name, bound in bounds.items():
        if name not in trace:
            continue
        if name not in got:  # a tensor the module did not make (a wrong case's: a norm left out)
            worst[name] = float("inf")
            continue
        expected, actual = trace[name].double(), got[name]
        assert actual.shape == expected.shape, (name, actual.shape, expected.shape)
        if trace.case.options.heads == 1 and bound.dim() == expected.dim() + 1:
            bound = bound[0]
        infinite = torch.isinf(expected)
        if not torch.equal(infinite, torch.isinf(actual)):
            worst[name] = float("inf")
            continue
        gap = (actual - expected).abs().where(~infinite, 0.0)
        worst[name] = float((gap / bound).max()) if gap.numel() else 0.0
    return worst


def test_the_module_names_every_tensor_the_trace_records(steps_page):
    for name in OPTIONS:
        case = case_of(name, 0)
        trace, got = attend(case), run_js(steps_page, case)
        # every tensor but step 8's rows (steps 4-7 again, a query at a time)
        recorded = {t for step in trace.steps for t in step.tensors if t != "outputs_by_query"}
        assert recorded <= set(got), (name, recorded - set(got))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", OPTIONS)
def test_every_tensor_equals_the_trace_within_the_rule(steps_page, name, seed):
    case = case_of(name, seed)
    worst = differences(attend(case), run_js(steps_page, case))
    assert all(ratio <= 1 for ratio in worst.values()), worst


def test_the_random_combinations_turn_each_modern_option_on_and_off():
    cases = [modern_case(seed) for seed in MODERN_SEEDS]
    for name in MODERN:
        on = sum(getattr(case.options, name) is not None for case in cases)
        assert 0 < on < len(cases), (name, on)
    latent = [case for case in cases if case.options.w_latent is not None]
    assert {case.options.latent_norm is None for case in latent} == {True, False}  # the latent's norm on and off


@pytest.mark.parametrize("seed", MODERN_SEEDS)
def test_every_tensor_of_random_modern_cases_equals_the_trace_within_the_rule(steps_page, seed):
    """Today's options (window, softcap, ALiBi, sinks, partial rotary, T5's bias, a latent) in random combinations
    with the others: the module names every tensor the trace records (position_bias, scores_uncapped, weights_sink,
    w_latent, latent_unnormed, latent), each within the rule."""
    case = modern_case(seed)
    trace, got = attend(case), run_js(steps_page, case)
    recorded = {t for step in trace.steps for t in step.tensors if t != "outputs_by_query"}
    assert recorded <= set(got), recorded - set(got)
    worst = differences(trace, got)
    assert all(ratio <= 1 for ratio in worst.values()), (case_to_dict(case)["options"], worst)


def cross(seed: int) -> Case:
    """tests/test_cross.py's random cross-attention case of the seed (n_q ≠ n_kv, heads, grouped heads, masks, caps,
    sinks), in float32 as the browser computes."""
    return with_options(parse_case(cross_case(seed)), dtype="float32")


CROSS_SEEDS = range(10)


@pytest.mark.parametrize("seed", CROSS_SEEDS)
def test_every_tensor_of_random_cross_cases_equals_the_trace_within_the_rule(steps_page, seed):
    """Cross-attention: the module makes keys and values from the case's x_kv (n_kv rows), and every tensor, x_kv's
    and the n × n_kv scores and weights among them, is the trace's within the rule."""
    case = cross(seed)
    trace, got = attend(case), run_js(steps_page, case)
    recorded = {t for step in trace.steps for t in step.tensors if t != "outputs_by_query"}
    assert "x_kv" in recorded and recorded <= set(got), recorded - set(got)
    assert got["weights"].shape[-2:] == (case.n, case.n_kv)
    worst = differences(trace, got)
    assert all(ratio <= 1 for ratio in worst.values()), (case_to_dict(case)["options"], worst)


def test_a_moved_source_row_is_caught(steps_page):
    """x_kv's first number moved by 1e-3: the keys, values and outputs the module makes differ from the trace's (and
    a module that made them from x would differ everywhere)."""
    case = cross(3)
    data = case_to_dict(case)
    data["x_kv"][0][0] += 1e-3
    worst = differences(attend(case), run_js(steps_page, parse_case(data)))
    assert worst["keys"] > 1 and worst["values"] > 1 and worst["outputs"] > 1, worst


MODERN_16 = "16 × 16, every modern option"


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("16 × 16, every option", {"temperature": 1.01}),  # the temperature a hundredth off
        ("16 × 16, every option", {"scale": "none"}),  # the article's scale where the case asks 1/√d_k
        ("16 × 16, every option", {"mask": None}),  # the mask forgotten
        ("16 × 16, every option", {"rope_base": 1000.0}),  # another RoPE base
        (MODERN_16, {"window": 6}),  # one key more in each window
        (MODERN_16, {"softcap": 3.03}),  # the cap a hundredth off
        (MODERN_16, {"alibi": (0.5, 0.25, 0.125, 0.0)}),  # one head's slope forgotten
        (MODERN_16, {"sinks": (1.0, -0.5, 0.0, 2.02)}),  # one head's sink a hundredth off
        (MODERN_16, {"rope_fraction": None}),  # every dim turned
        (MODERN_16, {"relative_max_distance": 13}),  # T5's buckets a token wider
        (MODERN_16, {"relative_bias": ((0.0, -0.5, -1.0, -1.51) * 4,) * 4}),  # one bucket's bias a hundredth off
        (OLMO_HEAD, {"norm_rest": None}),  # the other heads' share forgotten
        (OLMO_HEAD, {"norm_rest": OLMO_REST | {"q_width": 20}}),  # the mean over another width
    ],
    ids=str,
)
def test_a_wrong_option_is_caught(steps_page, name, wrong):
    case = case_of(name, 0)
    worst = differences(attend(case), run_js(steps_page, with_options(case, **wrong)))
    assert any(ratio > 1 for ratio in worst.values()), worst


def moved_first(matrix, by: float) -> tuple:
    """A matrix (or a list of numbers) with its first number moved."""
    rows = [list(row) if isinstance(row, tuple | list) else row for row in matrix]
    if isinstance(rows[0], list):
        rows[0][0] += by
    else:
        rows[0] += by
    return tuple(tuple(row) if isinstance(row, list) else row for row in rows)


@pytest.mark.parametrize(
    "wrong",
    [
        lambda o: {"w_latent": moved_first(o.w_latent, 0.01)},  # W_DKV's first number a hundredth off
        lambda o: {"latent_norm": moved_first(o.latent_norm, 0.01)},  # γ's first number a hundredth off
        lambda o: {"latent_norm": None},  # the latent's norm forgotten
    ],
    ids=["w_latent", "latent_norm", "no norm"],
)
def test_a_wrong_latent_is_caught(steps_page, wrong):
    case = case_of(LATENT, 0)
    assert case.options.w_latent is not None and case.options.latent_norm is not None
    worst = differences(attend(case), run_js(steps_page, with_options(case, **wrong(case.options))))
    assert worst["latent"] > 1 and worst["outputs"] > 1, worst


# (not the 16 × 16 case: its scores reach 100 at temperature 0.7, and float32 there is only good to ~0.07 of 75)
@pytest.mark.parametrize("name", ["causal", "4 heads, 2 kv heads, sqrt_dk", "RoPE, positions"])
def test_a_moved_number_is_caught(steps_page, name):
    """W_V's first number moved by 1e-3 (every output reads it, through v_j): the outputs differ, as in
    tests/test_tolerance.py."""
    case = case_of(name, 1)
    data = case_to_dict(case)
    data["w_value"][0][0] += 1e-3
    worst = differences(attend(case), run_js(steps_page, parse_case(data)))
    assert worst["outputs"] > 1, worst


@pytest.mark.parametrize(("value", "dropped"), [(0.5, False), (-1.0, True)])
def test_the_articles_rounded_weights_stop_applying_where_the_session_drops_them(steps_page, value, dropped):
    """x's second row, third column moved: the session keeps the article's rounded softmax while it is within
    ROUNDED_WITHIN of the exact one, else uses the exact one; the module with rounded_within does the same."""
    session = Session.start()
    session.edit("x", 1, 2, value)
    case = session.case  # the session's rule applied: the override kept or dropped
    assert (case.options.weights_override is None) == dropped
    edited = with_options(case, weights_override=ARTICLE_ROUNDED_WEIGHTS)
    got = run_js(steps_page, edited, rounded_within=ROUNDED_WITHIN)
    assert got["rounded_stale"] == (case.options.weights_override is None), got["rounding_gap"]
    worst = differences(attend(case), got)
    assert all(ratio <= 1 for ratio in worst.values()), worst


@pytest.mark.parametrize("name", ["16 × 16, every option", MODERN_16])
def test_a_16_by_16_case_takes_a_small_part_of_a_frame(steps_page, name):
    """A drag's preview must leave most of a 16.7 ms frame to the drawing: the steps at 16 × 16, every option."""
    kase = case_to_dict(case_of(name, 0))
    ms = steps_page.evaluate(
        """(kase) => { const t0 = performance.now(); for (let i = 0; i < 200; i++) window.steps.attend(kase);
        return (performance.now() - t0) / 200; }""",
        kase,
    )
    print(f"steps.js at {name}: {ms:.3f} ms a run")
    assert ms < 4, ms


# The outputs chart's numbers as Plotly holds them now, and how many times the browser has redrawn it (restyled)
OUTPUTS_NOW = """() => { const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => (g.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === 'outputs');
    if (!gd.__counted) {
        gd.__counted = true; window.__restyles = 0; gd.on('plotly_restyle', () => window.__restyles++);
    }
    const z = gd.data[0].z; return {z: Array.isArray(z) ? z : null, restyles: window.__restyles}; }"""


TEXTS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => (g.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === 'outputs').data[0].texttemplate"""
LINKED = random_case(8, 6, 8, 8, seed=4, heads=2, mask="causal", scale="sqrt_dk")  # outputs 8 × 8: past 32 cells
T5 = random_case(6, 4, 4, 4, seed=4, heads=2, relative_max_distance=8,  # T5's table, edited on /inputs
                 relative_bias=((0.0, -0.5, -1.0, -1.5) * 2, (1.0, 0.5, 0.0, -0.5) * 2))  # fmt: skip


def box_of(page, name: str, row: int, column: int):
    """A cell's input (from 1); the rounded softmax's cells are named after their query and key tokens."""
    if name == "rounded":
        return page.get_by_label(f"Rounded softmax, row {row} (Input {row}), column {column} (Input {column})")
    if name == "relative_bias":
        return page.get_by_label(f"T5 relative bias, row {row}, column {column}", exact=True)
    return cell(page, name, row, column)


@pytest.mark.parametrize(
    "cell_at",
    [("x", 2, 2), ("w_value", 3, 1), ("rounded", 3, 3), ("linked x", 2, 2), ("t5 relative_bias", 2, 3)],
    ids=str,
)
def test_a_drag_on_inputs_is_drawn_by_the_browser_and_sent_on_release(page, cell_at):
    """A drag on /inputs: each step's outputs drawn in the browser with no run on the server (the article's rounded
    softmax dropped as the session drops it), each within the rule of the torch trace of that value; on release one
    run, whose outputs are the server's. A chart past 32 cells is previewed without its cells' numbers, which
    come back on release."""
    name, row, column = cell_at
    linked = name.startswith("linked ")
    case = {"linked": LINKED, "t5": T5}.get(name.split()[0]) if " " in name else None
    name = name.split()[-1]
    open_page(page, f"/inputs?case={case_to_link(case)}" if case is not None else "/inputs")
    texts = page.evaluate(TEXTS)
    page.evaluate(OUTPUTS_NOW)  # starts counting the chart's restyles
    box_of(page, name, row, column).scroll_into_view_if_needed()  # the rounded softmax lies below the fold
    box = box_of(page, name, row, column).bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    runs = page.evaluate("window.__e2eRuns.end")
    page.mouse.move(x, y)
    page.mouse.down()
    seen = 0
    for step in (3, 6, 12, 20):  # 6 px a step of 0.1 (the cell's numbers are whole): to the right, up
        page.mouse.move(x + 6 * step + 3, y)
        value = float(box_of(page, name, row, column).input_value())
        page.wait_for_function(f"() => ({OUTPUTS_NOW})().restyles > {seen}")
        now = page.evaluate(OUTPUTS_NOW)
        seen = now["restyles"]
        trace = attend(edited(case, name, row, column, value))
        got = torch.tensor(now["z"], dtype=torch.float64)
        bound = tolerances(trace)["outputs"]
        assert ((got - trace.outputs.double()).abs() <= bound).all(), (value, got, trace.outputs)
        assert page.evaluate(TEXTS) == ("" if linked else texts)  # a big chart's numbers left out while dragged
    assert page.evaluate("window.__e2eRuns.end") == runs  # no run while the mouse is down
    page.mouse.up()
    wait_ready(page)
    assert page.evaluate("window.__e2eRuns.end") > runs
    expected = attend(edited(case, name, row, column, value)).outputs.double()
    got = torch.tensor(wait_for_server_outputs(page), dtype=torch.float64)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    assert page.evaluate(TEXTS) == texts


def edited(case: Case | None, name: str, row: int, column: int, value: float) -> Case:
    """The session's case (the article's, or `case` as a link brings it) with one cell (from 1) set, by its rule."""
    if case is not None:
        data = case_to_dict(case)
        (data["options"] if name == "relative_bias" else data)[name][row - 1][column - 1] = value
        return parse_case(data)
    session = Session.start()
    session.edit(name, row - 1, column - 1, value)
    return session.case


def wait_for_server_outputs(page) -> list:
    """The outputs chart's numbers once the server's figure is drawn (Plotly 7 sends them typed: bdata)."""
    page.wait_for_function("""() => { const gd = [...document.querySelectorAll('.js-plotly-plot')]
        .find(g => (g.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === 'outputs');
        return gd && !Array.isArray(gd.data[0].z); }""")
    return heatmaps(page, "outputs")[0].tolist()


SLIDER = "[data-testid=stSidebar] .st-key-temperature_slider"
# Every chart that shows one of the trace's tensors (charts.chart's `shows`): its tensor, head, numbers as Plotly
# holds them now (an empty cell: null) and cell texts; and how many times they have been redrawn (restyled) since
# first asked (a chart whose numbers a drag does not change is not redrawn)
TAGGED = """() => {
    const charts = [...document.querySelectorAll('.js-plotly-plot')].filter(g => g.layout?.meta?.tensor);
    window.__restyles ??= 0;
    for (const g of charts.filter(g => !g.__counted)) {
        g.__counted = true; g.on('plotly_restyle', () => window.__restyles++);
    }
    const rows = g => g._fullData[0].z.map(row => Array.from(row, v => Number.isFinite(v) ? v : null));
    return {restyles: window.__restyles, charts: charts.map(g => ({tensor: g.layout.meta.tensor,
        head: g.layout.meta.head, z: rows(g), texts: g.data[0].texttemplate}))};
}"""
FADED = """() => [...document.querySelectorAll('[data-testid=stDataFrame]')].map(t => t.style.opacity)"""


def within_rule(trace: Trace, name: str, head: int | None, z: list) -> bool:
    """Whether a chart's numbers are the trace's tensor (one head's) within the rule, an empty cell (None) only
    where the trace's is −inf (a masked score) or 0 (a masked weight, which the server's figure draws empty)."""
    expected, bound = trace[name].double(), tolerances(trace)[name]
    if head is not None:
        expected, bound = expected[head], bound[head]
    elif bound.dim() == expected.dim() + 1:
        bound = bound[0]
    got = torch.tensor([[torch.nan if v is None else v for v in row] for row in z], dtype=torch.float64)
    empty, infinite = torch.isnan(got), torch.isinf(expected)
    if not (infinite <= empty).all() or not ((expected == 0) | infinite)[empty].all():
        return False
    return bool(((got - expected).abs().where(~empty, 0) <= bound).all())


@pytest.mark.parametrize(("start", "step"), [("article", 5), ("linked", 4), ("linked", 5)])
def test_a_temperature_drag_redraws_the_steps_tensors_in_the_browser_and_is_sent_on_release(page, start, step):
    """The sidebar's temperature slider dragged on the walkthrough (the article's case with its rounded softmax, which
    the session drops as it drops it; a case with 2 heads and a causal mask): each frame the step's charts are drawn
    by the browser within the rule of the torch trace at the temperature the slider shows, their masked cells'
    texts and the tables beside them set aside, with no run on the server; on release one run, after which the
    temperature box holds that temperature and the charts are the server's."""
    linked = start == "linked"
    open_page(page, f"/walkthrough?step={step}" + (f"&case={case_to_link(LINKED)}" if linked else ""))
    track = page.locator(f"{SLIDER} input[type=range]")
    track.scroll_into_view_if_needed()
    box = track.bounding_box()
    y = box["y"] + box["height"] / 2
    runs = page.evaluate("window.__e2eRuns.end")
    seen = page.evaluate(TAGGED)["restyles"]
    page.mouse.move(box["x"] + box["width"] / 2, y)
    page.mouse.down()
    for fraction in (0.4, 0.25, 0.6, 0.75):
        page.mouse.move(box["x"] + box["width"] * fraction, y)
        page.wait_for_function(f"() => ({TAGGED})().restyles > {seen}")
        now = page.evaluate(TAGGED)
        seen = now["restyles"]
        temperature = float(page.locator(f"{SLIDER} output").text_content())
        trace = attend(at_temperature(LINKED if linked else None, temperature))
        for chart in now["charts"]:
            assert within_rule(trace, chart["tensor"], chart["head"], chart["z"]), (temperature, chart)
            assert chart["texts"] != "%{text}", chart  # masked cells' own texts: set aside while dragged
        assert set(page.evaluate(FADED)) <= {"0.3"}
    assert page.evaluate("window.__e2eRuns.end") == runs  # no run while the mouse is down
    page.mouse.up()
    wait_ready(page)
    assert page.evaluate("window.__e2eRuns.end") > runs
    assert float(page.locator("[data-testid=stSidebar] .st-key-temperature input").input_value()) == temperature
    assert float(page.locator(f"{SLIDER} output").text_content()) == temperature
    assert set(page.evaluate(FADED)) <= {""}
    trace = attend(at_temperature(LINKED if linked else None, temperature))
    name = "weights" if step == 5 else "scores"
    expected = trace[name][0] if linked else trace[name]  # the head picker's first head
    got = wait_for_server_heatmap(page, name)
    finite = np.isfinite(got)  # a masked score and a masked weight: empty cells
    np.testing.assert_allclose(got[finite], expected.double().numpy()[finite], rtol=0, atol=1e-6)


def at_temperature(case: Case | None, temperature: float) -> Case:
    """The session's case (the article's, or `case` as a link brings it) at a temperature, by the session's rule."""
    if case is not None:
        return with_options(case, temperature=temperature)
    session = Session.start()
    session.choose(temperature=temperature)
    return session.case


def wait_for_server_heatmap(page, title: str) -> np.ndarray:
    """The chart titled `title` once the server's figure is drawn (Plotly 7 sends its numbers typed: bdata)."""
    page.wait_for_function(
        """(title) => { const gd = [...document.querySelectorAll('.js-plotly-plot')]
        .find(g => (g.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === title);
        return gd && !Array.isArray(gd.data[0].z); }""",
        arg=title,
    )
    return heatmaps(page, title)[0]
