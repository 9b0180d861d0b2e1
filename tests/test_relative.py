"""T5's relative position bias (a bucket per near distance, logarithmic ones far away, a learned number per head and
bucket) in every capability: the buckets equal transformers' T5 function, a T5 attention layer's outputs equal the
trace's, the table's gradient equals autograd's, the cache and the tiles agree, a cell's arithmetic names its
bucket, and the exported scripts assert all of it."""

import subprocess
import sys

import pytest
import torch

from attention.backward import compute as backward_compute
from attention.backward.compute import backward, check
from attention.backward.loss import Loss
from attention.backward.script import to_backward_script
from attention.base import presets
from attention.base.case import with_options
from attention.base.explain import explain
from attention.base.record import compare
from attention.decoding.compute import decode
from attention.decoding.script import decoding_script
from attention.forward.compute import attend, relative_buckets, tolerance
from attention.forward.oracle import check as forward_check
from attention.forward.script import to_script
from attention.tiles.compute import tiled
from attention.tiles.script import to_script as tiles_script

T5 = pytest.importorskip("transformers.models.t5.modeling_t5")
TABLE = [[0.0, -0.5, -1.0, -1.5, 0.25, 1.0, -2.0, 0.5], [1.0, 0.0, -0.5, 0.25, 2.0, -1.0, 0.0, -0.25]]


@pytest.mark.parametrize(("buckets", "max_distance"), [(32, 128), (8, 20), (16, 32), (4, 3), (6, 7), (33, 50)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_the_buckets_are_t5s(buckets, max_distance, bidirectional):
    distance = torch.arange(-300, 300)[None, :]
    theirs = T5.T5Attention._relative_position_bucket(distance, bidirectional, buckets, max_distance)
    assert torch.equal(relative_buckets(distance, buckets, max_distance, bidirectional), theirs)


@pytest.mark.parametrize("decoder", [False, True], ids=["encoder", "decoder"])
def test_a_t5_attention_layer_equals_the_trace(decoder):
    """A random T5 attention layer (its q, k, v, o, its learned table; no 1/√d, as T5) on random hidden states: the
    trace of the same numbers as a case (the encoder's bidirectional buckets, the decoder's causal ones) gives its
    outputs within the one rule."""
    config = T5.T5Config(d_model=8, d_kv=4, num_heads=2, relative_attention_num_buckets=8,
                         relative_attention_max_distance=6, is_decoder=decoder, dropout_rate=0.0)  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    layer = T5.T5Attention(config, has_relative_attention_bias=True).eval()
    n = 9
    hidden = torch.randn(1, n, 8)
    mask = None
    if decoder:  # additive: −∞ above the diagonal
        mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        out = layer(hidden, mask=mask)[0][0]  # (n, d_model)
    weights = {name: getattr(layer, name).weight.T.tolist() for name in ("q", "k", "v", "o")}
    table = layer.relative_attention_bias.weight.T.tolist()  # (heads, buckets)
    case = with_options(presets.random_case(n, 8, 8, 8, seed=0), heads=2, w_out=weights["o"],
                        mask="causal" if decoder else None, relative_bias=table, relative_max_distance=6,
                        relative_bidirectional=not decoder)  # fmt: skip
    case = type(case)(hidden[0].tolist(), weights["q"], weights["k"], weights["v"], case.tokens, case.options)
    trace = attend(case)
    checked = compare("transformers' T5Attention", trace.outputs, out, tolerance(case, trace.__getitem__))
    assert checked.agrees, checked
    assert forward_check(trace).agrees
    # one bucket's number a little off, and the layer's outputs are not the trace's
    off = [list(row) for row in case.options.relative_bias]
    off[1][2] += 0.05
    moved = attend(with_options(case, relative_bias=off))
    assert not compare("T5", moved.outputs, out, tolerance(case, trace.__getitem__)).agrees


def relative_case(mask: str | None = None, heads: int = 2, **options):
    return presets.random_case(9, 4, 4 * heads, 4 * heads, seed=5, heads=heads, mask=mask,
                               relative_bias=TABLE[:heads], relative_max_distance=6, **options)  # fmt: skip


@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("options", [{}, {"softcap": 2.0, "mask": "causal"}, {"alibi": [0.5, 0.25], "window": 4}])
def test_the_tables_gradient_equals_autograds_and_a_wrong_one_is_caught(heads, options, monkeypatch):
    options = dict(options)
    if "alibi" in options:
        options["alibi"] = options["alibi"][:heads]
    trace = attend(relative_case(heads=heads, **options))
    made = backward(trace, Loss(target=torch.randn(9, 4 * heads, generator=torch.Generator().manual_seed(1)).tolist()))
    assert made["d_relative_bias"].shape == (heads, 8) and made.step("scores").tensors["d_relative_bias"] is not None
    assert check(made).agrees, check(made)
    # the table's gradient handed to the wrong buckets (each one's to the next) is caught
    real = backward_compute.bucket_sums
    monkeypatch.setattr(backward_compute, "bucket_sums", lambda case, d: real(case, d).roll(1, dims=-1))
    assert not check(backward(trace, made.loss)).agrees


@pytest.mark.parametrize("options", [{"mask": "causal", "softcap": 3.0}, {"window": 4}, {"mask": "causal",
                                     "relative_bidirectional": False}])  # fmt: skip
def test_decoding_a_causal_case_gives_its_own_traces_bias_and_tiles_equal_the_trace(options):
    """Decoding keeps the case's buckets (both ways or not): a case already causal (a causal mask, or a window with
    no mask) decodes to its own trace, each step's bias row the trace's."""
    case = relative_case(**options)
    made, trace = decode(case), attend(case)
    last = made.steps[-1]
    assert made.agrees and last["position_bias_t"].shape == (2, 1, last.t + 1 - last.first)  # the cached keys'

    for step in made.steps:
        cached = trace["position_bias"][:, step.t, step.first : step.t + 1]
        torch.testing.assert_close(step["position_bias_t"][:, 0], cached, rtol=0, atol=0)
    assert compare("decoding", made.outputs, trace.outputs, tolerance(case, trace.__getitem__)).agrees
    run = tiled(relative_case(), 4, 3)
    whole = attend(run.case)
    assert compare("tiles", run.outputs, whole.outputs, tolerance(run.case, whole.__getitem__)).agrees
    said = "\n".join(explain(run, "l", (1, 0), step=run.visit(1, 2).name).lines)  # query 5 against keys 7-9
    assert "keys 7 … 9" in said and "buckets 6, 7" in said  # ahead: 2 and 3 share bucket 6 (logarithmic), 4 is 7


def test_a_bias_cell_names_its_bucket_and_why():
    trace = attend(relative_case())
    near = explain(trace, "position_bias", (0, 5, 4))  # head 1, query 6, key 5: one back, bucket 1
    assert "j − i = -1" in near.lines[0] and "bucket 1" in near.lines[0] and "own" in near.lines[0]
    assert near.lines[-1].endswith("t[1] = (−0.5) = −0.5")
    far = explain(trace, "position_bias", (1, 0, 8))  # head 2, query 1, key 9: 8 ahead, past max distance 6
    assert "the last bucket" in far.lines[0] and "ahead" in far.lines[0] and "bucket 7" in far.lines[0]
    assert far.lines[-1].endswith("= −0.25")
    said = "\n".join(explain(trace, "scores", (0, 5, 4)).lines)
    assert "T5's bias b₆₅ = −0.5" in said and "+ b₆₅ =" in said
    cached = "\n".join(explain(decode(relative_case(mask="causal")), "scores_t", (0, 0, 4), step="6").lines)
    assert "bucket(-1)" in cached and "t[1] = −0.5" in cached
    decoder = attend(relative_case(mask="causal", relative_bidirectional=False))
    ahead = explain(decoder, "position_bias", (0, 2, 5)).lines[0]  # a key ahead of a decoder's query: bucket 0
    assert "ahead of it" in ahead and "bucket 0" in ahead


def test_the_gradient_of_a_bucket_is_its_scores_gradients_summed():
    made = backward(attend(relative_case(softcap=2.0)), Loss(target=torch.zeros(9, 8).tolist()))
    said = explain(made, "d_relative_bias", (1, 2))
    assert said.title.startswith("∂L/∂relative_bias₂[2]") and "13 query–key pairs" in said.lines[0]
    buckets = relative_buckets(torch.arange(9)[None, :] - torch.arange(9)[:, None], 8, 6, True)
    by_hand = made["d_scores_uncapped"][1][buckets == 2].sum()
    torch.testing.assert_close(made["d_relative_bias"][1, 2], by_hand)


def test_without_a_table_the_other_two_are_the_defaults():
    case = relative_case(relative_bidirectional=False)
    plain = with_options(case, relative_bias=None).options
    assert (plain.relative_max_distance, plain.relative_bidirectional) == (128, True)


def run(text: str, tmp_path, name: str) -> subprocess.CompletedProcess:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=180)


def test_the_exported_scripts_assert_t5s_bias_everywhere(tmp_path):
    """The eight steps (and FlexAttention's score_mod), decoding with the cache, the tiles and the backward pass
    (the table as autograd's leaf): each script runs and asserts; with a bucket's number changed in its table only
    where the steps use it, the forward script's FlexAttention assert fails."""
    case = relative_case(mask="causal", alibi=[0.5, 0.25])
    loss = Loss(target=torch.zeros(9, 8).tolist())
    for name, text in (("forward", to_script(case)), ("decoding", decoding_script(case)),
                       ("tiles", tiles_script(case, 4, 4)), ("backward", to_backward_script(case, loss))):  # fmt: skip
        done = run(text, tmp_path, name)
        assert done.returncode == 0, (name, done.stderr[-2000:])
    broken = to_script(case).replace("position_bias = position_bias + relative_bias[:, buckets]",
                                     "position_bias = position_bias + relative_bias[:, buckets] * 1.01")  # fmt: skip
    assert broken != to_script(case)
    done = run(broken, tmp_path, "broken")
    assert done.returncode != 0 and "FlexAttention differs" in done.stderr


def test_the_tables_numbers_are_edited_on_the_inputs_page_and_a_bad_one_is_named_by_head_and_bucket():
    from streamlit.testing.v1 import AppTest

    from attention.app.session import place
    from attention.base.presets import relative_table
    from tests.apptest import APP, current_trace, session

    app = AppTest.from_file(APP, default_timeout=60).run()
    app.toggle(key="use_rounded").set_value(False).run()
    app.toggle(key="relative").set_value(True).run()
    s = session(app)
    assert s.inputs.relative_bias == relative_table(1) == current_trace(app).case.options.relative_bias
    s.edit_cells("relative_bias", {(0, 1): 0.5})  # bucket 1: one key back (or ahead)
    assert s.case.options.relative_bias[0][:3] == (0.0, 0.5, -0.25) and s.error is None
    s.edit_cells("relative_bias", {(0, 2): "x"})
    assert str(s.error) == "T5 relative bias, head 1, bucket 2: 'x' is not a number" and place(s.error) == (
        "relative_bias", 0, 2)  # fmt: skip
    assert s.case.options.relative_bias[0][1] == 0.5  # the last valid case kept
    app.switch_page("pages/inputs.py").run()
    assert not app.exception and any("bucket 2" in e.value for e in app.error)
    app.number_input(key="heads").set_value(2).run()  # the article's 3 dims: 3 heads, and a row for each
    assert session(app).controls.heads == 3 and session(app).inputs.relative_bias == relative_table(3)
