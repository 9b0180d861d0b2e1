"""OLMo 2's q/k norm over the width (norm_width): a token's whole query (key) projection, every head's dims at once,
RMS-normed before the split into heads. Random cases equal an oracle written here by hand (the norm of the unsplit
projection, then SDPA); the gradients equal autograd's; decoding and the tiles equal the trace; a cell's arithmetic
says its mean runs over every head; the four exported scripts run and assert; and Qwen3's per-head norm in its place
is caught."""

import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from attention.backward.compute import backward
from attention.backward.compute import check as backward_check
from attention.backward.loss import Loss
from attention.backward.script import to_backward_script
from attention.base.case import CaseError, case_to_dict, parse_case, with_options
from attention.base.explain import explain
from attention.base.presets import random_case
from attention.base.record import compare
from attention.decoding.compute import decode
from attention.decoding.script import decoding_script
from attention.forward.compute import attend, tolerance
from attention.forward.oracle import check as oracle_check
from attention.forward.script import to_script
from attention.tiles.compute import tiled
from attention.tiles.script import to_script as tiles_script

# (n, d_in, d_head, heads, kv_heads, options): one head (the width is the head), every head its own key, grouped keys
SHAPES = {
    "one head": (5, 4, 4, 1, 1, {}),
    "2 heads, RoPE": (6, 5, 4, 2, 2, {"rope_base": 100.0}),
    "4 heads, 2 kv heads, causal, sqrt_dk": (7, 6, 2, 4, 2, {"mask": "causal", "scale": "sqrt_dk"}),
    "4 heads, 1 kv head, RoPE, float64": (5, 4, 4, 4, 1, {"rope_base": 500.0, "dtype": "float64"}),
    "3 heads, ALiBi, softcap, window": (6, 4, 2, 3, 3, {"alibi": (0.5, 0.25, 0.125), "softcap": 2.0, "window": 3}),
}


def width_case(name: str, seed: int = 0, **changes):
    """A seeded random case of a SHAPES entry with random γ over the width: d_k numbers for q, w_key's for k."""
    n, d_in, d, h, g, options = SHAPES[name]
    generator = torch.Generator().manual_seed(seed)
    gamma = lambda count: tuple(torch.empty(count).uniform_(-2, 2, generator=generator).round(decimals=2).tolist())  # noqa: E731
    options = {"heads": h, "q_norm": gamma(h * d), "k_norm": gamma(g * d), "norm_width": True, **options, **changes}
    if g != h:
        options["kv_heads"] = g
    return random_case(n, d_in, h * d, g * d, seed=seed, **options)


def by_hand(case) -> torch.Tensor:
    """The oracle: q = x W_Q RMS-normed over its whole width (torch by hand, float64), then split into heads, RoPE
    on interleaved pairs, and PyTorch's SDPA (no option of today's models)."""
    o = case.options
    h, g = o.heads, o.kv_heads or o.heads
    x, w_q, w_k, w_v = (torch.tensor(m, dtype=torch.float64) for m in (case.x, case.w_query, case.w_key, case.w_value))
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (n, h·d), (n, g·d), (n, g·d_v)
    q, k = _over_width(q, o.q_norm, o.norm_eps), _over_width(k, o.k_norm, o.norm_eps)  # before the split
    q = q.unflatten(-1, (h, -1)).transpose(0, 1)
    k, v = (m.unflatten(-1, (g, -1)).transpose(0, 1).repeat_interleave(h // g, dim=0) for m in (k, v))
    if o.rope_base is not None:  # pairs (2p, 2p + 1) turned by t · base^(−2p/d)
        d, t = q.shape[-1], torch.arange(case.n, dtype=torch.float64)
        angle = t[:, None] * o.rope_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (n, d/2)
        cos, sin = angle.cos(), angle.sin()
        q, k = _turned(q, cos, sin), _turned(k, cos, sin)
    scale = {"none": 1.0, "sqrt_dk": q.shape[-1] ** -0.5}[o.scale]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=o.mask == "causal", scale=scale)
    return out.transpose(0, 1).flatten(1)


def _over_width(m: torch.Tensor, gamma: tuple, eps: float) -> torch.Tensor:
    """Each row (n, width): every head's dims of a token share one mean of squares, times γ (width,)."""
    return m / (m.pow(2).mean(-1, keepdim=True) + eps).sqrt() * torch.tensor(gamma, dtype=torch.float64)


def _turned(m: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    even, odd = m[..., 0::2], m[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", [s for s in SHAPES if "ALiBi" not in s])
def test_random_cases_equal_the_norm_of_the_whole_projection_by_hand(name, seed):
    case = width_case(name, seed)
    trace = attend(case)
    theirs = by_hand(case).to(trace.outputs.dtype)
    checked = compare("by hand", trace.outputs, theirs, tolerance(case, trace.__getitem__, projected=True))
    assert checked.agrees, checked
    assert oracle_check(trace).agrees  # SDPA and FlexAttention, the norm by F.rms_norm of the unsplit projection
    if case.options.heads > 1:  # Qwen3's per-head norm in its place (the same γ, a head's block each) is caught
        per_head = attend(with_options(case, norm_width=None, q_norm=case.options.q_norm[: case.d_head],
                                       k_norm=case.options.k_norm[: case.d_head]))  # fmt: skip
        assert not compare("by hand", per_head.outputs, theirs, tolerance(case, trace.__getitem__)).agrees


def test_the_oracle_itself_catches_a_per_head_norm(monkeypatch):
    """The core's norm made per head (each head's block of γ, its own mean) fails the check against SDPA."""
    from attention.forward import compute

    case = width_case("4 heads, 2 kv heads, causal, sqrt_dk", 3)
    assert oracle_check(attend(case)).agrees

    def per_head(m, gamma, eps, rest=None):  # the bug: each head's row over its own root mean square
        gamma = gamma.reshape(-1, 1, m.shape[-1]).repeat_interleave(m.shape[0] * m.shape[-1] // gamma.numel(), dim=0)
        return m * torch.rsqrt(m.pow(2).mean(-1, keepdim=True) + eps) * gamma

    monkeypatch.setattr(compute, "rms_norm", per_head)
    assert not oracle_check(attend(case)).agrees


@pytest.mark.parametrize("name", list(SHAPES))
def test_backward_equals_autograd(name):
    trace = attend(width_case(name, 4))
    target = torch.randn(trace.outputs.shape, generator=torch.Generator().manual_seed(5)).tolist()
    for loss in (Loss(target=target), Loss(cell=(1, 1))):
        made = backward(trace, loss)
        assert backward_check(made).agrees, backward_check(made)
        assert made.step("norm").tensors["d_queries_unnormed"].shape == trace["queries_unnormed"].shape


@pytest.mark.parametrize("name", list(SHAPES))
def test_decoding_and_the_tiles_equal_the_trace(name):
    case = width_case(name, 6, mask="causal")
    assert decode(case).agrees
    run = tiled(width_case(name, 7), 4, 3)
    whole = attend(run.case)
    assert compare("tiles", run.outputs, whole.outputs, tolerance(run.case, whole.__getitem__)).agrees


def test_a_normed_cell_says_its_mean_runs_over_every_head():
    trace = attend(width_case("4 heads, 2 kv heads, causal, sqrt_dk", 8))
    for tensor, head, count in (("queries", 2, 8), ("keys", 3, 4)):  # keys: the 2 key/value heads' dims, once each
        said = explain(trace, tensor, (head, 4, 1))
        assert f"over every head (step 3, {count} numbers: the norm over the width" in said.lines[0]
        assert "differs" not in " ".join(said.lines)  # the arithmetic shown gives the recorded number
    one = attend(width_case("one head", 8))  # the width is the head: Qwen3's words
    assert "in this head (step 3, 4 numbers)" in explain(one, "queries", (2, 1)).lines[0]


def test_the_counts_are_checked_per_mode():
    case = width_case("4 heads, 2 kv heads, causal, sqrt_dk")
    with pytest.raises(CaseError, match="query norm weights: must hold 8 numbers with the norm over the width"):
        with_options(case, q_norm=(1.0,) * 2)
    with pytest.raises(CaseError, match="key norm weights: must hold 4 numbers with the norm over the width"):
        with_options(case, k_norm=(1.0,) * 8)
    with pytest.raises(CaseError, match="query norm weights: must hold 2 numbers, one per dim of a head"):
        with_options(case, norm_width=None)  # back to Qwen3's: a head's d numbers
    with pytest.raises(CaseError, match="q/k norm over the width: is 1, not true or false"):
        with_options(case, norm_width=1)


@pytest.mark.parametrize("name", ["4 heads, 2 kv heads, causal, sqrt_dk", "4 heads, 1 kv head, RoPE, float64"])
def test_the_four_scripts_run_and_assert(name, tmp_path):
    case = width_case(name, 9, mask="causal")
    trace = attend(case)
    target = torch.randn(trace.outputs.shape, generator=torch.Generator().manual_seed(2)).tolist()
    scripts = {"forward": to_script(case), "backward": to_backward_script(case, Loss(target=target)),
               "decoding": decoding_script(case), "tiles": tiles_script(case, 4, 3)}  # fmt: skip
    for kind, source in scripts.items():
        assert "mean((0, -1), keepdim=True)" in source or kind == "tiles", kind  # the norm over the width
        path = tmp_path / f"{kind}.py"
        path.write_text(source, encoding="utf-8")
        done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (kind, done.stderr[-2000:])


def head_of(layer, head: int):
    """One head of a layer case cut out as OLMo 2's head case is made (models.head_case): its columns of W_Q, its
    key/value head's of W_K and W_V, its γ, and each token's sum of squares of q (k) in the other heads (norm_rest,
    float64 from the layer's own q = x W_Q)."""
    o = layer.options
    h, g, d = o.heads, o.kv_heads or o.heads, layer.d_head
    kv, d_v = head // (h // g), layer.d_v // g
    x, w_q, w_k = (torch.tensor(m, dtype=torch.float64) for m in (layer.x, layer.w_query, layer.w_key))
    rests = []
    for m, first in ((x @ w_q, head * d), (x @ w_k, kv * d)):
        others = torch.cat((m[:, :first], m[:, first + d :]), dim=-1)
        rests.append(others.pow(2).sum(-1).tolist())
    options = {k: v for k, v in case_to_dict(layer)["options"].items() if k not in ("heads", "kv_heads", "alibi")}
    widths = {"q_width": layer.d_k, "k_width": len(layer.w_key[0])}
    options |= {"q_norm": o.q_norm[head * d : (head + 1) * d], "k_norm": o.k_norm[kv * d : (kv + 1) * d],
                "norm_rest": {"q": rests[0], "k": rests[1], **widths}}  # fmt: skip
    if o.alibi is not None:
        options["alibi"] = o.alibi[head : head + 1]
    columns = lambda m, first, width: [row[first : first + width] for row in m]  # noqa: E731
    return parse_case({"format": "attention-case/2", "tokens": list(layer.tokens), "x": case_to_dict(layer)["x"],
                       "w_query": columns(layer.w_query, head * d, d), "w_key": columns(layer.w_key, kv * d, d),
                       "w_value": columns(layer.w_value, kv * d_v, d_v), "options": options})  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", [s for s in SHAPES if s != "one head"])
def test_a_head_with_the_rest_equals_that_head_of_its_layer(name, seed):
    """Every head of a random layer (grouped keys too) cut out with norm_rest: its outputs are the layer's head's
    within the one rule, and its own oracle (F.rms_norm of a row as wide as the layer's) agrees."""
    layer = width_case(name, seed)
    whole = attend(layer)
    for head in range(layer.options.heads):
        case = head_of(layer, head)
        assert case.options.heads == 1 and case.d_k == layer.d_head  # one head wide
        trace = attend(case)
        theirs = whole["head_outputs"][head]
        checked = compare("the layer's head", trace.outputs, theirs, tolerance(case, trace.__getitem__))
        assert checked.agrees, (head, checked)
        assert oracle_check(trace).agrees
        # without the rest (the norm over this head alone) the same head is another computation: the check fails
        alone = attend(with_options(case, norm_rest=None))
        assert not compare("the layer's head", alone.outputs, theirs, tolerance(case, trace.__getitem__)).agrees


def test_a_wrong_rest_changes_the_outputs_and_is_caught():
    layer = width_case("4 heads, 2 kv heads, causal, sqrt_dk", 3)
    case, theirs = head_of(layer, 1), attend(layer)["head_outputs"][1]
    r = case.options.norm_rest
    for wrong in ({"q": [2 * v for v in r.q]}, {"k": [0.0] * len(r.k)}, {"q_width": r.q_width + 4}):
        other = attend(with_options(case, norm_rest=r.as_dict() | wrong))
        assert not compare("the layer's head", other.outputs, theirs, tolerance(case, attend(case).__getitem__)).agrees


def test_the_rest_flows_through_every_capability(tmp_path):
    """A head with norm_rest: backward equals autograd (the rest held fixed), decoding and the tiles equal the trace,
    the file and a link carry it, and the four exported scripts compute the norm with it and assert."""
    layer = width_case("4 heads, 2 kv heads, causal, sqrt_dk", 5, rope_base=100.0)
    case = head_of(layer, 2)
    trace = attend(case)
    target = torch.randn(trace.outputs.shape, generator=torch.Generator().manual_seed(5)).tolist()
    for loss in (Loss(target=target), Loss(cell=(1, 1))):
        assert backward_check(backward(trace, loss)).agrees
    assert decode(case).agrees
    run = tiled(case, 4, 3)
    assert compare("tiles", run.outputs, trace.outputs, tolerance(case, trace.__getitem__)).agrees
    assert parse_case(json.loads(json.dumps(case_to_dict(case)))) == case
    scripts = {"forward": to_script(case), "backward": to_backward_script(case, Loss(target=target)),
               "decoding": decoding_script(case), "tiles": tiles_script(case, 4, 3)}  # fmt: skip
    for kind, source in scripts.items():
        assert "rest_q = (torch.tensor(" in source or kind == "tiles", kind
        path = tmp_path / f"{kind}.py"
        path.write_text(source, encoding="utf-8")
        done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (kind, done.stderr[-2000:])


def test_a_cross_case_head_takes_a_rest_per_key_token():
    case = width_case("2 heads, RoPE", 2, rope_base=None)
    head = head_of(case, 1)
    data = case_to_dict(head) | {"x_kv": [[0.5, -1.0, 2.0, 0.0, 1.0]] * 3, "format": "attention-case/2"}
    data["options"]["norm_rest"]["k"] = [1.0, 2.0, 3.0]  # the source's 3 tokens
    cross = parse_case(data)
    trace = attend(cross)
    assert oracle_check(trace).agrees and decode(cross).agrees
    data["options"]["norm_rest"]["k"] = [1.0] * 6  # x's count, not the source's
    with pytest.raises(CaseError, match="must hold 3 numbers, one per token"):
        parse_case(data)


def test_bad_rests_are_messages_naming_the_place():
    case = head_of(width_case("4 heads, 2 kv heads, causal, sqrt_dk", 1), 0)
    good = case.options.norm_rest.as_dict()
    place = "the other heads' share of the q/k norm"
    bad = {
        "must be an object with q": [1.0, 2.0],
        "must be an object with q ": {"q": good["q"], "k": good["k"]},
        f"{place}, q: must hold 7 numbers, one per token \\(6 given\\)": good | {"q": good["q"][:6]},
        f"{place}, k, row 2 \\(Input 2\\): -1 is negative": good | {"k": [1.0, -1.0, *good["k"][2:]]},
        f"{place}, q, row 1 \\(Input 1\\): .*NaN": good | {"q": [float("nan"), *good["q"][1:]]},
        f"{place}, q, row 3 \\(Input 3\\): .*infinite": good | {"q": [1.0, 1.0, float("inf"), *good["q"][3:]]},
        f"{place}, q_width: must be a whole number from 2": good | {"q_width": 1},
        f"{place}, k_width: must be a whole number from 2 .* not 2.5": good | {"k_width": 2.5},
        f"{place}, k, row 1 \\(Input 1\\): is [0-9.]+, but the width 2 is this case's own": good | {"k_width": 2},
        f"{place}, k_width: must be a whole number": good | {"k_width": True},
    }
    for problem, rest in bad.items():
        with pytest.raises(CaseError, match=problem):
            with_options(case, norm_rest=rest)
    with pytest.raises(CaseError, match=f"{place}: needs the q/k norm over the width"):
        with_options(case, norm_width=None, norm_rest=good)
    with pytest.raises(CaseError, match=f"{place}: needs the q/k norm over the width"):
        with_options(case, q_norm=None, k_norm=None, norm_rest=good)
