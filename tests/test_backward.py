"""The backward pass against torch.autograd (the oracle) for every option, by hand on the seed, and its files."""

import json
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from attention import CaseError, attend
from attention.backward.compute import Backward, autograd, backward, check, softmax_back, tolerances
from attention.backward.files import backward_to_dict
from attention.backward.loss import Loss, default_loss, loss_to_dict, loss_value, parse_loss
from attention.backward.script import to_backward_script
from attention.backward.steps import BACKWARD_NAMES
from attention.backward.training import TrainingError, train_step
from attention.base.case import case_to_dict, parse_case
from attention.base.explain import explain
from attention.base.files import dump_case
from attention.base.numbers import brief
from attention.base.presets import article, random_case
from attention.base.tolerance import within
from attention.forward.compute import softmax_with_sink
from attention.forward.files import trace_to_dict
from attention.forward.teach import with_options
from tests.cases import QK_NORM, olmo_head, with_keys_sentence, with_latent

W_OUT = [[0.5, -1.0, 0.25], [1.5, 0.0, -0.5], [-2.0, 1.0, 0.75], [0.1, 0.2, -0.3]]  # (d_v = 4, d_out = 3)
BLOCKED_ROW = [[1, 0, 1], [0, 0, 0], [1, 1, 1]]  # query 2 may attend to nothing
CROSS_MASK = [[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]]  # 3 queries × 5 keys of x_kv; query 2 sees none


def latent(case, seed: int, norm: bool | None = None):
    """The case made multi-head latent attention (DeepSeek's MLA: tests/cases.with_latent), seeded."""
    return parse_case(with_latent(case_to_dict(case), random.Random(seed), norm=norm))


def cross(case, seed: int, n_kv: int, mask=None):
    """The case made cross-attention (tests/cases.with_keys_sentence: a random x_kv of n_kv rows), seeded, with an
    explicit n × n_kv mask where given."""
    data = with_keys_sentence(case_to_dict(case), random.Random(seed), n_kv=n_kv)
    if mask is not None:
        data["options"]["mask"] = mask
    return parse_case(data)


CASES = {
    "article (rounded softmax)": article(),
    "article, exact softmax": with_options(article(), weights_override=None),
    "sqrt_dk, causal": random_case(n=4, seed=1, scale="sqrt_dk", mask="causal"),
    "scale 0.3, temperature 0.5, a fully masked row": random_case(seed=2, scale=0.3, temperature=0.5, mask=BLOCKED_ROW),
    "2 heads, w_out, causal": random_case(n=5, d_k=4, d_v=4, seed=3, heads=2, w_out=W_OUT, mask="causal"),
    "float64, 2 heads, w_out, a fully masked row": random_case(
        d_k=2, d_v=4, seed=4, dtype="float64", heads=2, w_out=W_OUT, scale=0.3, temperature=0.5, mask=BLOCKED_ROW
    ),
    "RoPE, grouped-query (4 query heads, 2 key/value heads), sqrt_dk, causal": random_case(
        n=5, d_in=6, d_k=8, d_v=6, seed=6, heads=4, kv_heads=2, rope_base=10_000.0, scale="sqrt_dk", mask="causal"
    ),
    "RoPE with given positions, float64": random_case(
        n=4, d_k=4, d_v=2, seed=7, rope_base=100.0, positions=[5, 3, -2, 7], dtype="float64"
    ),
    "scaled RoPE (a model's own frequency per pair), 2 heads, a scale": random_case(
        n=5, d_k=8, d_v=4, seed=9, heads=2, rope_base=500.0, rope_frequencies=[0.7, 0.02], scale=0.3
    ),
    "Qwen3's q/k norm before RoPE, 2 heads, causal": random_case(
        n=5,
        d_k=8,
        d_v=4,
        seed=10,
        heads=2,
        rope_base=500.0,
        mask="causal",
        **QK_NORM,
    ),
    "q/k norm without RoPE, float64, a cell's loss": random_case(
        n=4,
        d_k=4,
        d_v=2,
        seed=11,
        dtype="float64",
        **QK_NORM,
        norm_eps=0.01,
    ),
    "OLMo 2's head with the other heads' share of its norm (norm_rest), RoPE, causal": random_case(
        n=5, d_k=4, d_v=4, seed=14, rope_base=500.0, mask="causal", **olmo_head(5)
    ),
    "n = 24, bigger": random_case(n=24, d_in=8, d_k=8, d_v=8, seed=8, heads=2, temperature=2.0),
    # today's options (issue 38): each changes step 4 or 5 (or RoPE's dims), and the backward pass with them
    "a window, a softcap, ALiBi, sinks and partial RoPE, 2 heads, causal": random_case(
        n=6, d_k=8, d_v=4, seed=12, heads=2, window=3, softcap=2.0, alibi=(0.5, 0.25), sinks=(0.5, -1.0),
        rope_base=100.0, rope_fraction=0.5, mask="causal", w_out=W_OUT,
    ),
    "float64, sinks and a softcap with a fully masked row": random_case(
        d_k=2, d_v=4, seed=13, dtype="float64", sinks=(1.5,), softcap=1.0, mask=BLOCKED_ROW, temperature=0.5
    ),
    # multi-head latent attention (DeepSeek's MLA): keys and values from a latent, its norm, the decoupled rotary key
    "MLA: a normed latent and the decoupled rotary key, 2 heads, causal, w_out": latent(random_case(
        n=5, d_k=8, d_v=4, seed=15, heads=2, rope_base=100.0, rope_fraction=0.5, mask="causal", w_out=W_OUT,
    ), seed=0, norm=True),
    "MLA: a latent without a norm, float64, grouped heads, Qwen3's q/k norm": latent(random_case(
        n=4, d_k=8, d_v=4, seed=16, dtype="float64", heads=4, kv_heads=2, q_norm=(1.5, 0.5), k_norm=(0.8, -1.2),
    ), seed=1, norm=False),
    # cross-attention: keys and values from another sentence x_kv (n_kv rows), scores n × n_kv
    "cross: 5 keys for 3 queries, 2 heads, w_out, an n × n_kv mask with a fully masked row": cross(random_case(
        d_k=4, d_v=4, seed=18, heads=2, w_out=W_OUT, scale="sqrt_dk"), seed=0, n_kv=5, mask=CROSS_MASK),
    "cross: 2 keys for 6 queries, float64, a softcap, sinks, q/k norm": cross(random_case(
        n=6, d_k=4, d_v=2, seed=19, dtype="float64", softcap=2.0, sinks=(0.5,), **QK_NORM), seed=1, n_kv=2),
    "cross: MLA's normed latent of x_kv, grouped heads, 7 keys for 4 queries": cross(latent(random_case(
        n=4, d_k=8, d_v=4, seed=20, heads=4, kv_heads=2), seed=3, norm=True), seed=2, n_kv=7),
}  # fmt: skip


def losses(trace):
    n, d = trace.outputs.shape
    return {"target": default_loss(trace), "cell": Loss(cell=(n - 1, d - 1)), "cell 0,0": Loss(cell=(0, 0))}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("kind", ["target", "cell", "cell 0,0"])
def test_every_gradient_equals_autograd(name, kind):
    trace = attend(CASES[name])
    loss = losses(trace)[kind]
    result = backward(trace, loss)
    theirs, allowed = autograd(trace.case, loss), tolerances(result)
    assert set(theirs) <= set(result.gradients)
    for leaf, expected in theirs.items():  # each number within the one rule's tolerance (base/tolerance.py)
        assert within(result.gradients[leaf], expected, allowed[leaf]), leaf
    assert check(result).agrees
    for step in result.steps:  # never a NaN anywhere
        for tensor_name, tensor in step.tensors.items():
            assert torch.isfinite(tensor).all(), (step.name, tensor_name)


def test_the_check_can_fail():
    trace = attend(CASES["sqrt_dk, causal"])
    result = backward(trace, default_loss(trace))
    wrong = dict(result.steps[-1].tensors) | {"d_x": result["d_x"] + 1e-2}
    broken = Backward(trace, result.loss, result.value, (*result.steps[:-1], _with(result.steps[-1], wrong)))
    assert not check(broken).agrees


def _with(step, tensors):
    from dataclasses import replace

    return replace(step, tensors=tensors)


def test_steps_run_in_reverse_by_name_with_formulas():
    trace = attend(CASES["RoPE, grouped-query (4 query heads, 2 key/value heads), sqrt_dk, causal"])
    result = backward(trace, default_loss(trace))
    assert [s.name for s in result.steps] == ["outputs", "weighted", "softmax", "scores", "rope", "weights", "inputs"]
    assert [s.number for s in result.steps] == [7, 6, 5, 4, 3, 2, 1]
    assert all(s.formula and s.title and s.explanation for s in result.steps)
    for name in ("d_outputs", "d_weighted", "d_weights", "d_values", "d_scores", "d_queries", "d_keys", "d_x"):
        twin = result.twin(name)
        assert twin is not None and result[name].shape == trace[twin].shape, name


def test_seed_gradients_by_hand():
    """The article with the loss outputs[2, 1] (output 3's second number = 7.8): worked out on paper."""
    trace = attend(article())
    result = backward(trace, Loss(cell=(2, 1)))
    assert result.value == pytest.approx(7.8)
    # step 7 back: d outputs is 1 at (3, 2); every key gets that gradient
    assert result["d_outputs"].tolist() == [[0, 0, 0], [0, 0, 0], [0, 1, 0]]
    # step 6 back: d A_3j = v_j's second number (2, 8, 6); d v_j = A_3j · e_2 with the rounded A_3 = (0, .9, .1)
    assert result["d_weights"][2].tolist() == [2.0, 8.0, 6.0]
    torch.testing.assert_close(result["d_values"][:, 1], torch.tensor([0.0, 0.9, 0.1]))
    # step 5 back: exact A_3 = softmax(4, 12, 10); dS_3j = A_3j (dA_3j − Σ A_3k dA_3k)
    a = torch.softmax(torch.tensor([4.0, 12.0, 10.0]), -1)
    mean = (a * torch.tensor([2.0, 8.0, 6.0])).sum()
    torch.testing.assert_close(result["d_scores"][2], a * (torch.tensor([2.0, 8.0, 6.0]) - mean))
    assert result["d_scores"][:2].abs().max() == 0  # rows 1 and 2 of the loss have no gradient
    assert result.step("softmax").notes  # the rounded softmax: it says the exact gradient is used


def test_masked_scores_get_exactly_zero_and_a_fully_masked_row_is_defined():
    trace = attend(CASES["scale 0.3, temperature 0.5, a fully masked row"])
    result = backward(trace, Loss(cell=(1, 0)))  # output 2's: the fully masked query's own output
    masked = torch.tensor(BLOCKED_ROW) == 0
    for name in ("d_scores", "d_scores_raw"):
        assert (result[name][masked] == 0).all() and torch.isfinite(result[name]).all()
    assert (result["d_weights"][1] != 0).any()  # the row's weights still have a gradient; its scores have none
    assert (result["d_scores"][1] == 0).all()
    causal = attend(CASES["sqrt_dk, causal"])
    upper = ~torch.ones(4, 4, dtype=torch.bool).tril()
    assert (backward(causal, default_loss(causal))["d_scores_raw"][upper] == 0).all()


def test_loss_choices_are_validated():
    case = article()
    assert parse_loss({"cell": [3, 2]}, case) == Loss(cell=(2, 1))
    assert parse_loss({"target": [[1, 2, 3]] * 3}, case).target == ((1.0, 2.0, 3.0),) * 3
    for bad, where in (
        ({"cell": [4, 1]}, "output cell"),
        ({"cell": [True, 1]}, "output cell"),
        ({"target": [[1, 2]] * 3}, "target"),
        ({"target": [[1, 2, float("nan")]] * 3}, "row 1, column 3"),
        ({"target": [[1, 2, 1e400]] * 3}, "column 3"),
        ({"both": 1}, "loss"),
        ([], "loss"),
    ):
        with pytest.raises(CaseError, match=where):
            parse_loss(bad, case)
    loss = Loss(cell=(1, 2))
    assert parse_loss(loss_to_dict(loss), case) == loss


def test_a_training_step_lowers_the_loss_on_random_cases():
    for seed in range(5):
        trace = attend(random_case(n=5, d_in=4, d_k=4, d_v=4, seed=seed, heads=2, mask="causal"))
        loss = default_loss(trace)
        before = loss_value(trace, loss)
        after = loss_value(attend(train_step(trace, loss, 0.01)), loss)
        assert after < before, seed


def test_a_step_that_makes_numbers_non_finite_is_refused():
    trace = attend(random_case(seed=3))
    far = Loss(target=((1e6, 1e6, 1e6),) * 3)  # the gradient is about 1e6: one step of 10 leaves the bounds
    with pytest.raises(TrainingError, match="refused"):
        train_step(trace, far, 10.0)
    assert train_step(trace, far, 1e-9).w_value != trace.case.w_value  # a small one is taken
    for lr in (0, -1, 11, float("nan"), "0.1"):
        with pytest.raises(TrainingError):
            train_step(trace, default_loss(trace), lr)


@pytest.mark.parametrize("name", ["article (rounded softmax)", "float64, 2 heads, w_out, a fully masked row"])
def test_the_exported_script_runs_and_matches(name, tmp_path):
    case = CASES[name]
    trace = attend(case)
    for loss in losses(trace).values():
        out = subprocess.run([sys.executable, "-c", to_backward_script(case, loss)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert "every gradient equals torch.autograd's" in out.stdout
        d_x = torch.tensor(json.loads(out.stdout.strip().splitlines()[-2]), dtype=trace.outputs.dtype)
        torch.testing.assert_close(d_x, backward(trace, loss)["d_x"], rtol=1e-5, atol=1e-6)


def test_the_trace_file_has_a_backward_section():
    trace = attend(CASES["scale 0.3, temperature 0.5, a fully masked row"])
    result = backward(trace, Loss(cell=(0, 1)))
    file = json.loads(json.dumps(trace_to_dict(trace, backward=backward_to_dict(result)), allow_nan=False))
    section = file["backward"]
    assert section["loss"] == {"cell": [1, 2]} and section["check"]["agrees"]
    assert [s["name"] for s in section["steps"]] == list(BACKWARD_NAMES)
    d_x = section["steps"][-1]["tensors"]["d_x"]
    assert d_x["shape"] == [3, 4] and torch.tensor(d_x["data"]).allclose(result["d_x"])
    assert "backward" not in trace_to_dict(trace)


def test_cli(tmp_path):
    case = tmp_path / "case.json"
    case.write_text(dump_case(article()))
    run = [sys.executable, "-m", "attention", "backward", str(case)]
    out = subprocess.run([*run, "--cell", "3,2"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    section = json.loads(out.stdout)["backward"]
    assert section["loss"] == {"cell": [3, 2]} and section["value"] == pytest.approx(7.8)
    bad = subprocess.run([*run, "--cell", "9,1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "output cell" in bad.stderr and "Traceback" not in bad.stderr
    target = tmp_path / "target.json"
    target.write_text("[[1, 2]]")
    bad = subprocess.run([*run, "--target", str(target)], capture_output=True, text=True)
    assert bad.returncode == 2 and "3 rows of 3" in bad.stderr


def test_notebook_repr():
    trace = attend(article())
    html = backward(trace, default_loss(trace))._repr_html_()
    assert "agrees with torch.autograd" in html and "d_x" in html


# The Backward page, through Streamlit's AppTest ------------------------------------------------------------------


def open_backward(query: dict | None = None, switch: bool = True):
    from streamlit.testing.v1 import AppTest

    from tests.apptest import APP

    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    if switch:
        at.switch_page("pages/backward.py").run()
    assert not at.exception, at.exception
    return at


def test_page_checks_against_autograd_and_shows_each_gradient_on_its_own_scale():
    from tests.apptest import charts

    at = open_backward()
    assert any("agrees with torch.autograd" in s.value for s in at.success)
    for step in ("outputs", "weighted", "softmax", "scores", "weights", "inputs"):
        at.radio(key="backward_step").set_value(step).run()
        assert not at.exception
    at.radio(key="backward_step").set_value("softmax").run()
    assert any("exact softmax's gradient" in i.value for i in at.info)  # the rounded softmax, said
    at.radio(key="backward_step").set_value("scores").run()
    shown = charts(at)
    assert "∂L/∂scores_raw" in shown and "scores_raw" in shown
    import json

    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    specs = {spec["layout"]["title"]["text"]: spec for spec in specs}
    grad, twin = specs["∂L/∂scores_raw"]["data"][0], specs["scores_raw"]["data"][0]
    top = shown["∂L/∂scores_raw"].max(initial=0, where=~np.isnan(shown["∂L/∂scores_raw"]))
    top = max(top, -shown["∂L/∂scores_raw"].min(initial=0, where=~np.isnan(shown["∂L/∂scores_raw"])))
    # the gradient's own scale, centred on 0 (red-blue), not the forward scores' (up to 16): it would look white
    assert grad["zmin"] == -grad["zmax"] and grad["zmax"] == pytest.approx(top) and grad["reversescale"]
    assert twin.get("zmax") is None  # the raw scores on their own scale


def test_page_trains_refuses_and_resets_and_the_link_keeps_lr_and_steps():
    from attention.backward.state import Learned
    from tests.apptest import session

    at = open_backward()
    s = session(at)
    before = s.case.w_query
    at.button(key="bw_train").click().run()
    at.button(key="bw_train").click().run()
    assert s.view(Learned).trained == 2 and s.case.w_query != before
    losses = s.view(Learned).losses
    assert len(losses) == 3 and losses[-1] < losses[0]  # the loss falls
    assert at.query_params["train"] == "2" and at.query_params["lr"] == "0.01"
    assert "case" not in at.query_params  # the article: the link names it, not the trained weights
    trained = s.case
    # the same link in a new session replays the steps: the same weights
    again = open_backward({"lr": "0.01", "train": "2"})
    assert session(again).case.w_query == trained.w_query
    # a step too big: refused, the weights stay
    s.view(Learned).target = ((1e6, 1e6, 1e6),) * 3
    s.view(Learned).lr = 10.0
    at.button(key="bw_train").click().run()
    assert s.case.w_query == trained.w_query and any("refused" in w.value for w in at.warning)
    at.button(key="bw_reset").click().run()
    assert s.case.w_query == before and s.view(Learned).trained == 0 and "train" not in at.query_params


def test_page_loss_choices_round_trip_the_link_and_bad_targets_keep_the_last():
    from attention.backward.state import Learned
    from tests.apptest import session

    at = open_backward({"loss": "3.2"})
    s = session(at)
    assert s.view(Learned).loss_cell == (2, 1) and at.query_params["loss"] == "3.2"
    assert any("Loss 7.8" in m.value for m in at.success)
    at.radio(key="backward_loss_kind").set_value("target").run()
    key = f"bw_target_value_2_1_{s.generation}"  # output 3's second number
    at.text_input(key=key).input("1e400").run()
    assert any("past" in e.value or "limit" in e.value for e in at.error)  # the editor's message
    assert s.view(Learned).target is None  # the last valid target stays
    at.text_input(key=key).input("5").run()
    assert s.view(Learned).target[2][1] == 5.0 and "target" in at.query_params
    again = open_backward({"target": at.query_params["target"]})
    assert session(again).view(Learned).target == s.view(Learned).target
    for link in ({"loss": "9.9"}, {"target": "1,2"}, {"lr": "50", "train": "3"}, {"lr": "0.1", "train": "x"}):
        bad = open_backward(link, switch=False)  # the notice is said on the first page drawn
        learned = session(bad).view(Learned)
        assert not learned.loss_cell and not learned.trained and bad.warning, link


def test_a_gradients_arithmetic_with_its_real_numbers():
    trace = attend(article())
    result = backward(trace, default_loss(trace))  # output 3's second number: target 9, output 7.8
    made = explain(result, "d_scores", (2, 1))
    assert made.title == "∂L/∂scores₃₂ = " + number(result["d_scores"][2, 1].item())
    a, da = trace["weights_exact"][2], result["d_weights"][2]  # dA₃ⱼ = dO₃₂ · V_j2 = −1.2 · (2, 8, 6)
    mean = (a * da).sum().item()
    assert da.tolist() == pytest.approx([-2.4, -9.6, -7.2])
    assert mean < 0 and result["d_scores"][2, 1].item() < 0  # negatives, written as factors in brackets
    d_s = number(result["d_scores"][2, 1].item())
    said = f"{number(a[1].item())} · (({number(da[1].item())}) − ({number(mean)}))"  # dA₃₂ is about −9.6
    assert made.lines[2] == f"dS₃₂ = {said} = ({d_s})"
    lines = explain(result, "d_outputs", (2, 1)).lines
    o, d_o = trace.outputs[2, 1].item(), result["d_outputs"][2, 1].item()  # float32's 7.8 and 7.8 − 9
    assert o == pytest.approx(7.8) and d_o == pytest.approx(-1.2)
    assert list(lines) == ["dO₃₂ = O₃₂ − T₃₂ = 7.8 − 9 = (−1.2)"]  # not float32's 7.7999997: its noise is not the point
    masked = attend(with_options(article(), mask="causal", weights_override=None))
    lines = explain(backward(masked, default_loss(masked)), "d_scores", (0, 2)).lines
    assert "exactly 0" in lines[0]
    with pytest.raises(ValueError, match="cannot explain"):  # the backward pass has no gradient of it
        explain(result, "d_outputs_by_query", (0, 0))


def number(v: float) -> str:
    """A gradient's number as its explanation writes it: brief, 4 significant digits (numbers.brief)."""
    return brief(v)


def test_a_real_heads_gradients_equal_autograd_and_its_tokens_sensitivity_is_on_the_page():
    from attention import models
    from tests.apptest import session

    if models.missing("minilm") is not None:
        pytest.skip(f"not installed: {models.missing('minilm')}")
    model = models.loaded("minilm")
    case = models.head_case(model, model.run("The cat sat on the mat"), 0, 0)  # biases as x's column of ones
    trace = attend(case)
    assert check(backward(trace, Loss(cell=(2, 0)))).agrees
    at = open_backward({"model": "minilm", "text": "The cat sat on the mat", "layer": "1", "head": "1"})
    tokens = session(at).case.tokens
    assert tokens == case.tokens and len(tokens) > 3
    import json

    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.proto.id.endswith("token_sensitivity")
                or "depends on each input row" in json.loads(c.proto.spec)["layout"]["title"]["text"])  # fmt: skip
    assert spec["data"][0]["y"] == list(tokens) and spec["data"][0]["x"] == list(tokens)  # the model's own tokens


def test_an_edit_after_training_makes_the_link_name_the_weights():
    from attention.backward.state import Learned
    from tests.apptest import edit, session

    at = open_backward()
    at.button(key="bw_train").click().run()
    assert at.query_params["train"] == "1" and "case" not in at.query_params
    edit(at, "x", 1, "2", 3.0)  # an edit of the trained case: the steps are behind it now
    assert session(at).view(Learned).trained == 0 and "train" not in at.query_params and "case" in at.query_params


def test_a_raw_scores_gradient_is_the_scale_times_the_scores_with_its_arithmetic():
    trace = attend(random_case(seed=0, scale="sqrt_dk", temperature=0.5))
    result = backward(trace, Loss(cell=(2, 1)))
    lines = explain(result, "d_scores_raw", (2, 1)).lines
    factor = (1 / 3**0.5) / 0.5
    assert result["d_scores_raw"][2, 1].item() == pytest.approx(factor * result["d_scores"][2, 1].item())
    assert lines[0].startswith(f"dS^raw₃₂ = {factor:g} · dS₃₂") and "Σ_k A₃ₖ dA₃ₖ" in lines[2]


def test_the_page_has_one_set_of_pickers_that_the_loss_and_the_sensitivity_map_share():
    from attention.backward.state import Learned
    from tests.apptest import session

    at = open_backward()
    s = session(at)
    pickers = [b for b in at.selectbox if b.label in ("Output (token)", "Number")]
    assert [b.key for b in pickers] == ["bw_row", "bw_col"]  # one pair on the page: the sensitivity tab has none
    assert (at.selectbox(key="bw_row").value, at.selectbox(key="bw_col").value) == (2, 1)  # output 3's second
    said = [m.value for m in at.markdown if "moves most with" in m.value]
    assert said == ["Output Input 3's number 2 moves most with: " + said[0].split(": ", 1)[1]]  # the loss's number
    at.selectbox(key="bw_col").set_value(0).run()  # another number: its target is typed, and its map is drawn
    assert at.text_input(key=f"bw_target_value_2_0_{s.generation}").value == "2.0"
    assert any(m.value.startswith("Output Input 3's number 1 moves most") for m in at.markdown)
    at.radio(key="backward_loss_kind").set_value("cell").run()  # the loss becomes the number picked
    assert s.view(Learned).loss_cell == (2, 0) and at.query_params["loss"] == "3.1"
    at.selectbox(key="bw_row").set_value(0).run()
    assert s.view(Learned).loss_cell == (0, 0)
    assert any(m.value.startswith("Output Input 1's number 1 moves most") for m in at.markdown)
    at.radio(key="backward_loss_kind").set_value("target").run()  # back to the target: the same number picked
    assert s.view(Learned).loss_cell is None and at.selectbox(key="bw_row").value == 0


def test_a_masked_scores_gradient_and_a_masked_weight_say_their_zero_is_the_masks():
    from attention.backward.figures import gradient_pair
    from attention.forward.figures import masked_cells, tensor_heatmap
    from attention.show.describe import describe
    from attention.show.tables import table as number_table

    case = with_options(article(), mask="causal", weights_override=None)
    result = backward(attend(case), default_loss(attend(case)))
    grad, twin = gradient_pair(result, "d_scores", None)
    text = grad.data[0].text
    assert [text[0][1], text[0][2], text[1][2]] == ["0 (masked)"] * 3  # the mask's zeros
    assert text[0][0] == "0"  # a zero of the arithmetic (query 1's only key: its weight 1, its gradient 0) stays 0
    assert np.isnan(np.asarray(grad.data[0].z, dtype=float)[0, 1])  # an empty cell, as a masked score's −∞ is
    assert twin.data[0].text[0][1] == "−∞"
    _, weights = gradient_pair(result, "d_weights", None)
    assert weights.data[0].text[0][1] == "0 (masked)" and weights.data[0].customdata[0][1] == "0 (masked)"
    _, summary, table = describe(weights, "en")
    assert "3 cells are 0 (masked): exactly 0 because a mask took them out" in summary
    assert table.iloc[0].tolist() == ["1", "0 (masked)", "0 (masked)"]
    walked = tensor_heatmap(attend(case), "weights")  # the walkthrough's step 5 too
    assert walked.data[0].text[0][2] == "0 (masked)" and walked.data[0].text[2][0] == "0.0002954"
    beside = number_table(attend(case), "weights", mask=masked_cells(attend(case)), rows=[0, 2])  # and its number table
    assert beside.iloc[0].tolist() == ["1", "0 (masked)", "0 (masked)"]
    assert beside.iloc[1, 0] == "0.0002953872"  # not masked: its number
    _, zh = gradient_pair(result, "d_weights", None, "zh")
    assert zh.data[0].text[0][1] == "0（掩码）" and "0（掩码）" in describe(zh, "zh")[1]


# Today's options (issue 38): a window, a softcap, ALiBi, sinks, partial rotary ------------------------------------

MODERN_OPTIONS = ("window", "softcap", "alibi", "sinks", "rope_fraction")
LATENT_SHARE = 0.3  # the random cases made multi-head latent attention (w_latent) on top of the options drawn
CROSS_EVERY = 3  # every third one cross-attention (x_kv): without the options that place a key by its distance
SELF_ONLY = ("window", "alibi", "rope_base", "rope_fraction")


def modern_case(seed: int):
    """A small random case (n ≤ 8, 1-2 heads, float32 or float64) with a random combination of today's options,
    from a seeded local generator, about a third of them multi-head latent attention (DeepSeek's MLA, with its
    latent's norm in half of those) and every third one cross-attention (x_kv of 1-8 rows; no causal mask, window,
    ALiBi or RoPE, an explicit n × n_kv mask in half): (the case, the options it kept, "x_kv" for a cross one)."""
    keys = random.Random(f"cross {seed}")  # its own generator: the self-attention cases' draws stay as they were
    crossed = seed % CROSS_EVERY == CROSS_EVERY - 1
    draw = random.Random(seed)
    heads, n, dtype = draw.choice((1, 2)), draw.randint(1, 8), draw.choice(("float32", "float64"))
    chosen = [name for name in MODERN_OPTIONS if draw.random() < 0.5] or [draw.choice(MODERN_OPTIONS)]
    options = {"heads": heads, "dtype": dtype, "mask": draw.choice((None, "causal"))}
    options |= {"scale": draw.choice(("none", "sqrt_dk")), "temperature": draw.choice((1.0, 0.5))}
    if "window" in chosen:
        options["window"] = draw.randint(1, n)
    if "softcap" in chosen:
        options["softcap"] = draw.choice((0.5, 2.0, 20.0))
    if "alibi" in chosen:
        options["alibi"] = tuple(draw.choice((0.0, 0.25, 1.0)) for _ in range(heads))
    if "sinks" in chosen:
        options["sinks"] = tuple(round(draw.uniform(-3, 3), 2) for _ in range(heads))
    if "rope_fraction" in chosen or draw.random() < 0.3:  # RoPE, whole (NoPE without) or partial
        options["rope_base"] = 100.0
        options["rope_fraction"] = 0.5 if "rope_fraction" in chosen else None
    if crossed:  # each places a key by its distance from the query in one sentence: refused for cross-attention
        options = {name: value for name, value in options.items() if name not in SELF_ONLY} | {"mask": None}
        chosen = [name for name in chosen if name not in SELF_ONLY]
    case = random_case(n=n, d_in=3, d_k=4 * heads, d_v=2 * heads, seed=seed, **options)
    if draw.random() < LATENT_SHARE:  # keys and values from a latent (the decoupled rotary key with partial RoPE)
        case = parse_case(with_latent(case_to_dict(case), draw))
        chosen.append("w_latent")
    if crossed:
        data = with_keys_sentence(case_to_dict(case), keys)
        if keys.random() < 0.5:  # an explicit mask: which of x_kv's tokens each query may see
            data["options"]["mask"] = [[keys.choice((0, 1, 1)) for _ in data["x_kv"]] for _ in range(n)]
        case = parse_case(data)
        chosen.append("x_kv")
    return case, chosen


def test_random_cases_with_todays_options_equal_autograd_within_the_rule():
    seen, latents, normed, crossed, crossed_masked, crossed_latent = set(), 0, 0, 0, 0, 0
    for seed in range(24):
        case, chosen = modern_case(seed)
        seen |= set(chosen)
        latents += "w_latent" in chosen
        normed += case.options.latent_norm is not None
        crossed += case.cross
        crossed_masked += case.cross and case.options.mask is not None
        crossed_latent += case.cross and "w_latent" in chosen
        trace = attend(case)
        for loss in (default_loss(trace), Loss(cell=(case.n - 1, 0))):
            result = backward(trace, loss)
            theirs, allowed = autograd(case, loss), tolerances(result)
            assert ("d_sinks" in theirs) == ("sinks" in chosen) and set(theirs) <= set(result.gradients)
            assert ("d_w_latent" in theirs) == ("w_latent" in chosen)  # MLA's W_DKV (and γ), autograd's leaves too
            assert ("d_latent_norm" in theirs) == (case.options.latent_norm is not None)
            assert ("d_x_kv" in theirs) == ("x_kv" in chosen)  # cross-attention's other sentence: a leaf too
            for leaf, expected in theirs.items():  # every leaf, the sink logits' too, each number within the rule
                assert result[leaf].shape == expected.shape, (seed, chosen, leaf)
                assert within(result[leaf], expected, allowed[leaf]), (seed, chosen, leaf)
            assert check(result).agrees, (seed, chosen)
    assert seen == {*MODERN_OPTIONS, "w_latent", "x_kv"}  # every option drawn, alone or with others
    assert 5 <= latents <= 12 and 0 < normed < latents  # about a third MLA, with and without the latent's norm
    assert crossed == 8 and 0 < crossed_masked < crossed and crossed_latent  # with and without a mask, and MLA


def test_the_softmax_with_a_sink_goes_back_by_the_same_rule_and_the_sink_gets_its_own():
    """dS_ij = A_ij (dA_ij − Σ_k A_ik dA_ik) still holds (the sink has no value) and d s_h = −Σ_i A_i,sink Σ_k A_ik
    dA_ik: against autograd through the core's softmax_with_sink, a masked row included."""
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 4, 5, generator=generator, dtype=torch.float64)
    scores[0, 1] = float("-inf")  # a fully masked row: its weights 0, the sink takes it all
    scores[1, 2, 3:] = float("-inf")
    d_weights = torch.randn(2, 4, 5, generator=generator, dtype=torch.float64)
    leaf_scores = scores.clone().requires_grad_(True)
    sinks = torch.tensor([0.7, -1.2], dtype=torch.float64, requires_grad=True)
    weights, weights_sink = softmax_with_sink(leaf_scores, sinks[:, None, None])
    (weights * d_weights).sum().backward()  # a loss whose gradient on the weights is d_weights
    d_scores, d_sinks = softmax_back(weights.detach(), d_weights, weights_sink.detach())
    torch.testing.assert_close(d_scores, leaf_scores.grad.nan_to_num(0.0))
    torch.testing.assert_close(d_sinks, sinks.grad[None])  # (1, h)
    assert d_scores[0, 1].abs().max() == 0 and (d_scores[1, 2, 3:] == 0).all()


def test_a_softcaps_gradient_is_the_slope_times_the_scores_and_is_recorded_by_name():
    case = CASES["a window, a softcap, ALiBi, sinks and partial RoPE, 2 heads, causal"]
    trace = attend(case)
    result = backward(trace, Loss(cell=(5, 1)))
    slope = 1 - torch.tanh(trace["scores_uncapped"] / 2.0) ** 2  # tanh' at U / cap
    torch.testing.assert_close(result["d_scores_uncapped"], result["d_scores"] * slope)
    assert (result["d_scores_uncapped"].abs() <= result["d_scores"].abs()).all()  # a cap only shrinks a gradient
    assert result.made_from("d_scores_raw") == ("d_scores_uncapped",) and result.twin("d_scores_uncapped")
    scores = result.step("scores")
    assert list(scores.tensors) == ["d_scores_uncapped", "d_scores_raw", "d_queries", "d_keys"]
    assert r"\tanh^2(U / 2)" in scores.formula and r"j \le i - 3" in scores.formula
    assert any("1 − tanh²" in note for note in scores.notes) and any("ALiBi" in note for note in scores.notes)
    assert r"ds = -\textstyle\sum_i A_{i,\mathrm{sink}}" in result.step("softmax").formula
    assert result.step("rope").notes  # partial rotary: only the first d_rot dims are turned back
    lines = explain(result, "d_scores_raw", (1, 5, 4)).lines  # head 2, query 6, key 5 (inside the window)
    assert lines[0].startswith("dS^raw₆₅ = 1 · dU₆₅") and lines[1].startswith("dU₆₅ = (1 − tanh²(U₆₅ / 2))")
    sink = explain(result, "d_sinks", (0, 1))
    assert sink.title.endswith(brief(result["d_sinks"][0, 1].item())) and sink.lines[0].startswith("ds₂ = −Σ_i")


def test_the_check_fails_on_a_moved_sink_gradient():
    trace = attend(CASES["a window, a softcap, ALiBi, sinks and partial RoPE, 2 heads, causal"])
    result = backward(trace, default_loss(trace))
    assert check(result).agrees
    softmax = result.step("softmax")
    moved = dict(softmax.tensors) | {"d_sinks": result["d_sinks"] + 1e-3}
    steps = tuple(_with(s, moved) if s is softmax else s for s in result.steps)
    assert not check(Backward(trace, result.loss, result.value, steps)).agrees


MODERN_SCRIPTS = {
    "float32, 2 heads, every option": CASES["a window, a softcap, ALiBi, sinks and partial RoPE, 2 heads, causal"],
    "float64, one head, every option, a fully masked row": random_case(
        n=5, d_k=4, d_v=2, seed=14, dtype="float64", window=2, softcap=1.0, alibi=(0.5,), sinks=(0.25,),
        rope_base=100.0, rope_fraction=0.5, mask=[[1, 0, 0, 0, 0], [0, 0, 0, 0, 0], *[[1] * 5] * 3],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", MODERN_SCRIPTS)
def test_the_exported_script_with_todays_options_runs_alone_and_asserts_autograd(name, tmp_path):
    case = MODERN_SCRIPTS[name]
    trace = attend(case)
    for loss in (default_loss(trace), Loss(cell=(case.n - 1, 1))):
        out = _run_script(tmp_path, to_backward_script(case, loss))
        assert out.returncode == 0, out.stderr[-2000:]
        assert "every gradient equals torch.autograd's" in out.stdout
        result = backward(trace, loss)  # its d_x and the app's: each within the rule of autograd's, so of each other
        d_x = torch.tensor(json.loads(out.stdout.strip().splitlines()[-2]), dtype=trace.outputs.dtype)
        assert within(d_x, result["d_x"], 2 * tolerances(result)["d_x"])


def test_the_exported_scripts_assert_fails_without_the_caps_slope_or_with_the_sinks_sign_flipped(tmp_path):
    case = MODERN_SCRIPTS["float32, 2 heads, every option"]
    source = to_backward_script(case, Loss(cell=(5, 1)))
    slope = "d_scores_uncapped = d_scores * (1 - torch.tanh(scores_uncapped / 2.0) ** 2)"
    sign = "d_sinks = -(weights_sink * row_mean)"
    for right, wrong in ((slope, "d_scores_uncapped = d_scores"), (sign, "d_sinks = (weights_sink * row_mean)")):
        assert right in source
        out = _run_script(tmp_path, source.replace(right, wrong))
        assert out.returncode != 0 and "AssertionError" in out.stderr, wrong


def _run_script(tmp_path, source: str):
    path = tmp_path / "backward.py"
    path.write_text(source, encoding="utf-8")
    return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300)


def test_training_steps_lower_the_loss_with_todays_options():
    for seed in range(3):
        case, _ = modern_case(100 + seed)
        trace = attend(case)
        loss = default_loss(trace)
        before = loss_value(trace, loss)
        assert loss_value(attend(train_step(trace, loss, 0.01)), loss) < before, seed


def test_the_page_shows_the_caps_and_the_sinks_gradients():
    from attention.base.files import case_to_link
    from tests.apptest import charts

    case = CASES["a window, a softcap, ALiBi, sinks and partial RoPE, 2 heads, causal"]
    at = open_backward({"case": case_to_link(case)})
    assert any("agrees with torch.autograd" in s.value for s in at.success)
    at.radio(key="backward_step").set_value("scores").run()
    assert not at.exception and "∂L/∂scores_uncapped" in charts(at)
    assert any("1 − tanh²" in i.value for i in at.info)
    at.radio(key="backward_step").set_value("softmax").run()
    assert not at.exception and charts(at)["∂L/∂sinks"].shape == (1, 2)  # a number per head


# Multi-head latent attention (DeepSeek's MLA): W_DKV and the latent's γ are leaves, the latent gathers dK and dV ----

LATENT_CASE = "MLA: a normed latent and the decoupled rotary key, 2 heads, causal, w_out"


def test_a_latent_cases_gradients_equal_autograd_for_every_leaf_and_go_back_through_the_latent():
    case = CASES[LATENT_CASE]
    trace = attend(case)
    for loss in (default_loss(trace), Loss(cell=(case.n - 1, 1))):
        result = backward(trace, loss)
        theirs, allowed = autograd(case, loss), tolerances(result)
        assert set(theirs) == {"d_x", "d_w_query", "d_w_key", "d_w_value", "d_w_out", "d_w_latent", "d_latent_norm"}
        for leaf, expected in theirs.items():
            assert result[leaf].shape == expected.shape and within(result[leaf], expected, allowed[leaf]), leaf
        assert check(result).agrees
    weights = result.step("weights")  # step 3 back: the latent's gradient beside the weights'
    assert list(weights.tensors) == ["d_w_query", "d_w_key", "d_w_value", "d_latent", "d_latent_norm",
                                     "d_latent_unnormed", "d_w_latent"]  # fmt: skip
    c, u, d = trace["latent"], trace["latent_unnormed"], len(case.options.latent_norm)
    d_keys = result["d_keys_unrotated"].transpose(0, 1).flatten(1)  # (n, d_k): 2 heads side by side
    d_values = result["d_values"].transpose(0, 1).flatten(1)
    w_key, w_value = trace["w_key"], trace["w_value"]  # W_UK, W_UV: d_c rows
    torch.testing.assert_close(result["d_w_key"], c.T @ d_keys)  # W_UK made keys from the latent, not x
    torch.testing.assert_close(result["d_latent"], d_keys @ w_key.T + d_values @ w_value.T)  # it made both
    unit = u[:, :d] / (u[:, :d].pow(2).mean(-1, keepdim=True) + case.options.norm_eps).sqrt()
    torch.testing.assert_close(result["d_latent_norm"], (result["d_latent"][:, :d] * unit).sum(0, keepdim=True))
    assert torch.equal(result["d_latent_unnormed"][:, d:], result["d_latent"][:, d:])  # the rotary key: not normed
    torch.testing.assert_close(result["d_w_latent"], trace["x"].T @ result["d_latent_unnormed"])
    assert result.made_from("d_w_key") == ("latent", "d_keys") and result.twin("d_latent") == "latent"
    assert result.made_from("d_x") == ("d_queries", "d_latent_unnormed", "w_query", "w_latent")
    assert r"dW_{UK} = C^\top dK" in weights.formula and r"dW_{DKV} = X^\top dU" in weights.formula
    assert r"dU\, W_{DKV}^\top" in result.step("inputs").formula
    from attention.backward.figures import sensitivity

    maps = sensitivity(result)  # every leaf's map, W_DKV's and γ's with them
    assert {"d_w_latent", "d_latent_norm"} <= set(maps) and maps["d_latent_norm"].data[0].z.shape == (1, d)


@pytest.mark.parametrize("wrong", ["d_w_latent moved", "d_latent_norm moved", "the norm's backward left out"])
def test_the_check_fails_on_a_wrong_latent_gradient(wrong):
    trace = attend(CASES[LATENT_CASE])
    result = backward(trace, Loss(cell=(4, 1)))
    weights, inputs = result.step("weights"), result.step("inputs")
    tensors, d_x = dict(weights.tensors), result["d_x"]
    if wrong == "the norm's backward left out":  # dW_DKV and dX from the latent's gradient after the norm
        tensors["d_w_latent"] = trace["x"].T @ result["d_latent"]
        d_x = d_x + (result["d_latent"] - result["d_latent_unnormed"]) @ trace["w_latent"].T
    else:
        name = wrong.split()[0]
        tensors[name] = tensors[name] + 1e-4 * tensors[name].abs().max()
    steps = tuple(
        _with(s, tensors) if s is weights else _with(s, {"d_x": d_x}) if s is inputs else s for s in result.steps
    )
    assert not check(Backward(trace, result.loss, result.value, steps)).agrees


def caught_when_moved(case, data: dict, cell: tuple[int, int]) -> None:
    """The case's gradients agree with autograd's, and those of `data` (the case with a number moved) offered as the
    case's do not, for the default loss and for one output cell's."""
    from dataclasses import replace

    wrong = attend(parse_case(data))
    for loss in (default_loss(attend(case)), Loss(cell=cell)):
        result = backward(wrong, loss)
        assert check(backward(attend(case), loss)).agrees
        assert not check(Backward(replace(wrong, case=case), loss, result.value, result.steps)).agrees


def test_the_check_fails_on_a_moved_latent_weight():
    """The gradients of a case whose W_DKV (float64) has one number moved by 1e-3, against autograd's without."""
    case = CASES["MLA: a latent without a norm, float64, grouped heads, Qwen3's q/k norm"]
    data = case_to_dict(case)
    data["options"]["w_latent"][0][0] += 1e-3
    caught_when_moved(case, data, cell=(3, 0))


def test_a_latent_gradients_arithmetic_with_its_real_numbers():
    result = backward(attend(CASES[LATENT_CASE]), Loss(cell=(4, 1)))
    trace = result.forward
    made = explain(result, "d_w_latent", (1, 2))  # W_DKV's number at (2, 3): Σ_t X_t2 · dU_t3
    value = result["d_w_latent"][1, 2].item()
    assert made.title == "∂L/∂w_latent₂₃ = " + number(value)
    terms = [f"{_factor(number(a))}·{_factor(number(b))}" for a, b in
             zip(trace["x"][:, 1].tolist(), result["d_latent_unnormed"][:, 2].tolist(), strict=True)]  # fmt: skip
    assert made.lines[0] == f"dW_DKV₂₃ = Σ_t Xₜ₂ · dUₜ₃ = {' + '.join(terms)} = {_factor(number(value))}"
    assert made.lines[1].startswith("Why: step 3 made U = X W_DKV")
    key = explain(result, "d_w_key", (0, 3))  # W_UK's: the latent C, not x
    assert key.lines[0].startswith("dW_UK₁₄ = Σ_t Cₜ₁ · dKₜ₄ = " + _factor(number(trace["latent"][0, 0].item())))
    latent = explain(result, "d_latent", (2, 1)).lines  # token 3's latent number 2: back from keys and values
    assert latent[0].startswith("dC₃₂ = Σ_k dK₃ₖ · W_UK₂ₖ + Σ_k dV₃ₖ · W_UV₂ₖ = (")
    assert latent[0].endswith(" = " + _factor(number(result["d_latent"][2, 1].item())))
    gamma = explain(result, "d_latent_norm", (0, 1), "zh")
    assert gamma.title.endswith(number(result["d_latent_norm"][0, 1].item())) and gamma.lines[0].startswith("dγ₂ = ")
    assert gamma.lines[1].startswith("原因")


def _factor(s: str) -> str:
    return f"({s})" if s.startswith("−") else s


MLA_SCRIPTS = {
    "float32, a normed latent, the rotary key, 2 heads, w_out": CASES[LATENT_CASE],
    "float64, a latent without a norm, grouped heads, q/k norm": CASES[
        "MLA: a latent without a norm, float64, grouped heads, Qwen3's q/k norm"
    ],
    "float64, a normed latent with today's options": latent(random_case(
        n=5, d_k=4, d_v=2, seed=17, dtype="float64", window=2, softcap=1.0, sinks=(0.25,), mask="causal",
    ), seed=2, norm=True),
}  # fmt: skip


@pytest.mark.parametrize("name", MLA_SCRIPTS)
def test_the_exported_script_of_a_latent_case_runs_alone_and_asserts_autograd(name, tmp_path):
    case = MLA_SCRIPTS[name]
    trace = attend(case)
    for loss in (default_loss(trace), Loss(cell=(case.n - 1, 1))):
        source = to_backward_script(case, loss)
        assert "d_w_latent = x.T @ d_latent" in source and '"d_w_latent": d_w_latent' in source
        out = _run_script(tmp_path, source)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "every gradient equals torch.autograd's" in out.stdout
        result = backward(trace, loss)
        d_x = torch.tensor(json.loads(out.stdout.strip().splitlines()[-2]), dtype=trace.outputs.dtype)
        assert within(d_x, result["d_x"], 2 * tolerances(result)["d_x"])


def test_the_exported_scripts_assert_fails_without_the_latent_norms_backward(tmp_path):
    source = to_backward_script(CASES[LATENT_CASE], Loss(cell=(4, 1)))
    right = "d_part = r_inv * (g - unit * (g * unit).mean(-1, keepdim=True))"
    for wrong in ("d_part = r_inv * g", right.replace("r_inv * ", "")):
        assert right in source
        out = _run_script(tmp_path, source.replace(right, wrong))
        assert out.returncode != 0 and "AssertionError" in out.stderr, wrong


def test_training_steps_lower_the_loss_of_latent_cases():
    for seed in range(3):
        case = latent(random_case(n=5, d_in=4, d_k=4, d_v=4, seed=seed, heads=2, mask="causal"), seed=seed)
        trace = attend(case)
        loss = default_loss(trace)
        stepped = train_step(trace, loss, 0.01)  # W_Q, W_UK and W_UV: the latent's up-projections
        assert stepped.w_key != case.w_key and len(stepped.w_key) == case.d_c
        assert loss_value(attend(stepped), loss) < loss_value(trace, loss), seed


# Cross-attention: keys and values from another sentence x_kv, a leaf of its own; the scores n × n_kv ----------------

CROSS_CASE = "cross: 5 keys for 3 queries, 2 heads, w_out, an n × n_kv mask with a fully masked row"
CROSS_LATENT = "cross: MLA's normed latent of x_kv, grouped heads, 7 keys for 4 queries"


def test_a_cross_cases_gradients_equal_autograd_for_every_leaf_and_x_kv_gets_the_keys_and_values():
    case = CASES[CROSS_CASE]
    trace = attend(case)
    for loss in (default_loss(trace), Loss(cell=(2, 1)), Loss(cell=(1, 0))):  # query 2 sees no key at all
        result = backward(trace, loss)
        theirs, allowed = autograd(case, loss), tolerances(result)
        assert set(theirs) == {"d_x", "d_x_kv", "d_w_query", "d_w_key", "d_w_value", "d_w_out"}
        for leaf, expected in theirs.items():
            assert result[leaf].shape == expected.shape and within(result[leaf], expected, allowed[leaf]), leaf
        assert check(result).agrees
    x, x_kv, heads = trace["x"], trace["x_kv"], case.options.heads
    d_q, d_k, d_v = (result[name].transpose(0, 1).flatten(1) for name in ("d_queries", "d_keys", "d_values"))
    assert result["d_scores"].shape == (heads, 3, 5) and result["d_weights"].shape == (heads, 3, 5)  # n × n_kv
    assert (result["d_scores_raw"][:, torch.tensor(CROSS_MASK) == 0] == 0).all()  # the mask's pairs: exactly 0
    torch.testing.assert_close(result["d_x"], d_q @ trace["w_query"].T)  # x made the queries alone
    torch.testing.assert_close(result["d_x_kv"], d_k @ trace["w_key"].T + d_v @ trace["w_value"].T)
    torch.testing.assert_close(result["d_w_key"], x_kv.T @ d_k)  # W_K met x_kv, not x
    torch.testing.assert_close(result["d_w_query"], x.T @ d_q)
    assert result.made_from("d_x") == ("d_queries", "w_query") and result.made_from("d_w_value") == ("x_kv", "d_values")
    assert result.twin("d_x_kv") == "x_kv" and result.axes("d_keys") == ("head", "key token", "key dim")
    assert r"dX_{kv} = dK\, W_K^\top + dV\, W_V^\top" in result.step("inputs").formula
    assert r"dW_K = X_{kv}^\top dK" in result.step("weights").formula


def test_a_cross_latent_cases_gradients_go_back_through_the_latent_of_x_kv():
    case = CASES[CROSS_LATENT]
    trace = attend(case)
    result = backward(trace, Loss(cell=(3, 1)))
    assert check(result).agrees and set(autograd(case, result.loss)) == {
        "d_x", "d_x_kv", "d_w_query", "d_w_key", "d_w_value", "d_w_latent", "d_latent_norm"}  # fmt: skip
    torch.testing.assert_close(result["d_w_latent"], trace["x_kv"].T @ result["d_latent_unnormed"])
    torch.testing.assert_close(result["d_x_kv"], result["d_latent_unnormed"] @ trace["w_latent"].T)
    assert result["d_latent"].shape == (7, case.d_c) and result.axes("d_latent") == ("key token", "latent dim")
    assert result.made_from("d_x_kv") == ("d_latent_unnormed", "w_latent")
    assert r"dX_{kv} = dU\, W_{DKV}^\top" in result.step("inputs").formula
    assert r"dW_{DKV} = X_{kv}^\top dU" in result.step("weights").formula


@pytest.mark.parametrize(
    "wrong", ["d_x_kv moved", "d_x with the keys' and values' share", "d_w_key from x", "d_x_kv without values"]
)
def test_the_check_fails_on_a_wrong_cross_gradient(wrong):
    """A cross case with as many keys as queries (so that x's and x_kv's shapes allow each mistake)."""
    case = cross(random_case(n=4, d_k=4, d_v=4, seed=21, heads=2), seed=4, n_kv=4)
    trace = attend(case)
    result = backward(trace, default_loss(trace))  # every output: no head's softmax decided, the keys' gradients big
    assert check(result).agrees
    weights, inputs = result.step("weights"), result.step("inputs")
    w, d = dict(weights.tensors), dict(inputs.tensors)
    d_k = result["d_keys"].transpose(0, 1).flatten(1)  # (n_kv, d_k): the heads side by side
    if wrong == "d_x_kv moved":
        d["d_x_kv"] = d["d_x_kv"] + 1e-4 * d["d_x_kv"].abs().max()
    elif wrong == "d_x with the keys' and values' share":  # self-attention's rule
        d["d_x"] = d["d_x"] + d["d_x_kv"]
    elif wrong == "d_w_key from x":
        w["d_w_key"] = trace["x"].T @ d_k
    else:
        d["d_x_kv"] = d_k @ trace["w_key"].T
    steps = tuple(_with(s, w) if s is weights else _with(s, d) if s is inputs else s for s in result.steps)
    assert not check(Backward(trace, result.loss, result.value, steps)).agrees


def test_the_check_fails_on_a_moved_number_of_x_kv():
    """The gradients of a case whose x_kv (float64) has one number moved by 1e-3, against autograd's without."""
    case = CASES["cross: 2 keys for 6 queries, float64, a softcap, sinks, q/k norm"]
    data = case_to_dict(case)
    data["x_kv"][1][0] += 1e-3
    caught_when_moved(case, data, cell=(5, 0))


def test_a_cross_gradients_arithmetic_with_its_real_numbers_in_both_languages():
    result = backward(attend(CASES[CROSS_CASE]), Loss(cell=(2, 1)))
    trace = result.forward
    d_q, d_k, d_v = (result[name].transpose(0, 1).flatten(1) for name in ("d_queries", "d_keys", "d_values"))

    def terms(d, w, t, c):
        return " + ".join(f"{_factor(number(a))}·{_factor(number(b))}" for a, b in
                          zip(d[t].tolist(), trace[w][c].tolist(), strict=True))  # fmt: skip

    made = explain(result, "d_x_kv", (3, 1))  # x_kv's token 4, number 2: back from its key and its value
    value = _factor(number(result["d_x_kv"][3, 1].item()))
    assert made.title == "∂L/∂x_kv₄₂ = " + number(result["d_x_kv"][3, 1].item())
    assert made.lines[0] == (f"dX_kv₄₂ = Σ_k dK₄ₖ · W_K₂ₖ + Σ_k dV₄ₖ · W_V₂ₖ = ({terms(d_k, 'w_key', 3, 1)}) + "
                             f"({terms(d_v, 'w_value', 3, 1)}) = {value}")  # fmt: skip
    assert "K = X_kv W_K, V = X_kv W_V" in made.lines[1] and "keys' sentence" in made.lines[2]
    query = explain(result, "d_x", (2, 0))  # x's: its query alone
    value = _factor(number(result["d_x"][2, 0].item()))
    assert query.lines[0] == f"dX₃₁ = Σ_k dQ₃ₖ · W_Q₁ₖ = {terms(d_q, 'w_query', 2, 0)} = {value}"
    assert "made the queries alone" in query.lines[2]
    zh = explain(result, "d_x_kv", (3, 1), "zh")
    assert zh.lines[0] == made.lines[0] and zh.lines[1].startswith("原因") and "键句子" in zh.lines[2]
    assert "交叉注意力" in explain(result, "d_x", (2, 0), "zh").lines[2]


def test_a_cross_cases_charts_name_the_keys_tokens():
    from attention.backward.figures import gradient_pair, sensitivity, weighted_gradient

    case = CASES[CROSS_CASE]
    result = backward(attend(case), default_loss(attend(case)))
    keys, queries = list(case.key_tokens), list(case.tokens)
    assert keys == [f"src{j}" for j in range(5)]
    for grad in ("d_scores", "d_weights"):  # n × n_kv: queries down, x_kv's tokens across
        for fig in gradient_pair(result, grad, 1):
            assert list(fig.data[0].y) == queries and list(fig.data[0].x) == keys, grad
    for grad in ("d_x_kv", "d_keys", "d_values"):  # a row per key token
        assert all(list(fig.data[0].y) == keys for fig in gradient_pair(result, grad, 0)), grad
    masked = gradient_pair(result, "d_scores", 0)[0].data[0].text
    assert masked[1][0] == "0 (masked)" and masked[0][1] == "0 (masked)"  # the n × n_kv mask's zeros
    assert list(sensitivity(result)["d_x_kv"].data[0].y) == keys
    assert weighted_gradient(result, 0).data[0].y[1] == f"k {keys[0]} · q {queries[1]}"


CROSS_SCRIPTS = {
    "float32, 2 heads, w_out, an n × n_kv mask": CASES[CROSS_CASE],
    "float64, a softcap, sinks, q/k norm": CASES["cross: 2 keys for 6 queries, float64, a softcap, sinks, q/k norm"],
    "float32, MLA's normed latent of x_kv, grouped heads": CASES[CROSS_LATENT],
}


@pytest.mark.parametrize("name", CROSS_SCRIPTS)
def test_the_exported_script_of_a_cross_case_runs_alone_and_asserts_autograd(name, tmp_path):
    case = CROSS_SCRIPTS[name]
    trace = attend(case)
    for loss in (default_loss(trace), Loss(cell=(case.n - 1, 1))):
        source = to_backward_script(case, loss)
        assert '"d_x_kv": d_x_kv' in source and "x_kv=x_kv" in source
        out = _run_script(tmp_path, source)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "every gradient equals torch.autograd's" in out.stdout
        result, allowed = backward(trace, loss), tolerances(backward(trace, loss))
        parsed = [line for line in out.stdout.splitlines() if line.startswith("[[")][-2:]  # d_x_kv's, then d_x's
        for grad, line in zip(("d_x_kv", "d_x"), parsed, strict=True):
            theirs = torch.tensor(json.loads(line), dtype=trace.outputs.dtype)
            assert theirs.shape == result[grad].shape and within(theirs, result[grad], 2 * allowed[grad]), grad


def test_the_exported_scripts_assert_fails_on_a_cross_cases_wrong_gradient(tmp_path):
    source = to_backward_script(CASES[CROSS_CASE], Loss(cell=(2, 1)))
    right = "d_x_kv = d_keys @ w_key.T + d_values @ w_value.T"
    for wrong in ("d_x_kv = d_keys @ w_key.T", "d_x_kv = d_values @ w_value.T"):
        assert right in source
        out = _run_script(tmp_path, source.replace(right, wrong))
        assert out.returncode != 0 and "AssertionError" in out.stderr, wrong


def test_training_steps_lower_the_loss_of_cross_cases_and_keep_x_kv():
    for seed in range(3):
        case = cross(random_case(n=4, d_in=4, d_k=4, d_v=4, seed=seed, heads=2), seed=seed, n_kv=3 + seed)
        case = latent(case, seed=seed) if seed == 2 else case  # and MLA's latent of x_kv
        trace = attend(case)
        loss = default_loss(trace)
        stepped = train_step(trace, loss, 1e-3)  # W_Q, W_K and W_V step; x_kv, like x, is the case's input
        assert stepped.x_kv == case.x_kv and stepped.w_key != case.w_key
        assert loss_value(attend(stepped), loss) < loss_value(trace, loss), seed


def test_a_cross_cases_token_dependence_is_on_the_keys_sentence():
    """Each output row's dependence on the input rows: x_kv's in cross-attention (an output reads x only through its
    own query, so x's map would be diagonal), a masked key's column 0 for its query."""
    from attention.backward.compute import token_dependence

    trace = attend(CASES[CROSS_CASE])
    z = token_dependence(trace)
    assert z.shape == (3, 5)  # n queries × n_kv keys
    assert (z[torch.tensor(CROSS_MASK) == 0] == 0).all() and (z[torch.tensor(CROSS_MASK) == 1] > 0).all()
    expected = backward(trace, Loss(cell=(2, 0)))["d_x_kv"] + backward(trace, Loss(cell=(2, 1)))["d_x_kv"]
    expected += backward(trace, Loss(cell=(2, 2)))["d_x_kv"]  # d_out = 3: every output number of row 3
    torch.testing.assert_close(z[2], expected.norm(dim=-1))
    own = attend(article())
    assert token_dependence(own).shape == (3, 3)  # self-attention: x's own rows, as before
