"""Today's attention (sliding window, softcap, ALiBi, sinks, partial rotary, NoPE) in the core and the sidebar:
random cases with random combinations equal FlexAttention within the one tolerance rule, transformers' own attention
functions agree where it has them, bad values are messages naming the place, and the sidebar's controls make them."""

import random

import pytest
import torch

from attention.app.choices import alibi_slopes
from attention.base import presets
from attention.base.case import CaseError, case_to_dict, parse_case, with_options
from attention.base.presets import RELATIVE_MAX_DISTANCE, relative_table
from attention.base.record import compare
from attention.forward.compute import attend, tolerance
from attention.forward.oracle import check, flex_outputs
from tests.apptest import PAGES, charts, current_trace, linked, rendered, session


def modern_case(seed: int) -> dict:
    """A random small case with a random combination of today's options (each on in about half the cases)."""
    rng = random.Random(seed)
    n, h = rng.randint(1, 9), rng.choice([1, 2, 4])
    options = {"heads": h, "scale": rng.choice(["sqrt_dk", "none"]), "dtype": rng.choice(["float32", "float64"])}
    if rng.random() < 0.5:
        options["window"] = rng.randint(1, n + 1)
    if rng.random() < 0.5:
        options["softcap"] = rng.choice([0.5, 2.0, 50.0])
    if rng.random() < 0.5:
        options["alibi"] = list(alibi_slopes(h))
    if rng.random() < 0.5:
        options["sinks"] = [rng.uniform(-3, 3) for _ in range(h)]
    if rng.random() < 0.5:
        options["rope_base"] = rng.choice([100.0, 10000.0])
        if rng.random() < 0.5:
            options["rope_fraction"] = 0.5
    if rng.random() < 0.3:
        options["mask"] = "causal"
    if rng.random() < 0.3:
        options["temperature"] = 0.5
    if rng.random() < 0.5:  # T5's bias: 4 to 16 buckets, a max distance past the exact ones
        buckets = rng.choice([4, 8, 16])
        options["relative_bias"] = [[rng.uniform(-3, 3) for _ in range(buckets)] for _ in range(h)]
        options["relative_max_distance"] = rng.randint(buckets // 2 + 1, 12)
    base = presets.random_case(n, rng.randint(2, 5), 4 * h, 4 * h, seed=seed)
    return case_to_dict(with_options(base, **options))


@pytest.mark.parametrize("seed", range(40))
def test_random_cases_with_random_variants_equal_flex_attention(seed):
    case = parse_case(modern_case(seed))
    trace = attend(case)
    checked = check(trace)
    assert checked.oracle == ("flex_attention" if any(k in case_to_dict(case)["options"] for k in (
        "window", "softcap", "alibi", "sinks", "rope_fraction", "relative_bias")) else checked.oracle)  # fmt: skip
    assert checked.agrees, checked
    assert "differs" not in " ".join(trace.step("repeat").notes)  # step 8, a query at a time, equals step 7


@pytest.mark.parametrize(
    ("options", "other"),
    [
        ({"softcap": 2.0}, {"softcap": 2.02}),
        ({"heads": 2, "alibi": [0.5, 0.25]}, {"heads": 2, "alibi": [0.5, 0.26]}),
        ({"sinks": [0.0]}, {"sinks": [0.05]}),
        ({"window": 3}, {"window": 4}),
        ({"rope_base": 100.0, "rope_fraction": 0.5}, {"rope_base": 100.0, "rope_fraction": 0.25}),
        (
            {"relative_bias": [[0.0, -1.0, 0.5, 2.0]], "relative_max_distance": 4},
            {"relative_bias": [[0.0, -1.0, 0.5, 2.02]], "relative_max_distance": 4},
        ),
        (
            {"relative_bias": [[0.0, -1.0, 0.5, 2.0] * 2], "relative_max_distance": 4},  # one bucket's edge moves
            {"relative_bias": [[0.0, -1.0, 0.5, 2.0] * 2], "relative_max_distance": 5},
        ),
    ],
)
def test_the_check_fails_on_a_small_real_difference(options, other):
    """The one rule is tight enough: a trace against FlexAttention for a slightly different option disagrees."""
    base = presets.random_case(8, 4, 8, 8, seed=3)
    ours, theirs = with_options(base, **options), with_options(base, **other)
    trace = attend(ours)
    assert not compare("flex", trace.outputs, flex_outputs(theirs), tolerance(ours, trace.__getitem__)).agrees


def test_what_a_window_of_3_does_to_token_5():
    """Token 5 sees tokens 3, 4 and 5 alone: its weights on tokens 1-2 are 0 and its output is the weighted sum of
    the last three values; the window also makes the attention causal."""
    case = with_options(presets.random_case(6, 4, 4, 4, seed=1), window=3)
    trace = attend(case)
    weights = trace["weights"]
    assert torch.all(weights[4, :2] == 0) and torch.all(weights[4, 5:] == 0)
    assert torch.isclose(weights[4, 2:5].sum(), torch.tensor(1.0))
    torch.testing.assert_close(trace.outputs[4], weights[4, 2:5] @ trace["values"][2:5])


def test_a_softcap_keeps_every_score_within_the_cap_and_their_order():
    """cap · tanh(S / cap) lies within ±cap (in float32 a far score reaches it: tanh rounds to 1) and never swaps two
    scores."""
    case = with_options(presets.random_case(6, 4, 4, 4, seed=2), softcap=0.5)
    trace = attend(case)
    uncapped, scores = trace["scores_uncapped"], trace["scores"]
    assert scores.abs().max() <= 0.5 and uncapped.abs().max() > 1
    below = uncapped[:, :, None] < uncapped[:, None, :]  # (i, j, k): key j's score under key k's
    capped_below = scores[:, :, None] <= scores[:, None, :]
    assert torch.all(capped_below[below])


def test_sinks_take_weight_and_rows_sum_to_less_than_one():
    case = with_options(presets.random_case(5, 4, 4, 4, seed=4), sinks=[1.0])
    trace = attend(case)
    sums = trace["weights"].sum(-1) + trace["weights_sink"][:, 0]
    torch.testing.assert_close(sums, torch.ones(5))
    assert torch.all(trace["weights"].sum(-1) < 1)


def test_partial_rotary_leaves_the_last_dims_unturned():
    case = with_options(presets.random_case(5, 4, 8, 4, seed=5), rope_base=100.0, rope_fraction=0.5)
    trace = attend(case)
    assert torch.equal(trace["queries"][:, 4:], trace["queries_unrotated"][:, 4:])
    assert not torch.equal(trace["queries"][1:, :4], trace["queries_unrotated"][1:, :4])


def test_alibi_bias_is_minus_slope_times_distance():
    case = with_options(presets.random_case(4, 3, 4, 4, seed=6), heads=2, alibi=[0.5, 0.25])
    bias = attend(case)["position_bias"]  # (h, n, n)
    assert bias[0, 3, 1].item() == -1.0 and bias[1, 3, 0].item() == -0.75 and bias[0, 1, 3].item() == 1.0


@pytest.mark.parametrize(
    ("options", "where", "problem"),
    [
        ({"window": 0}, "Sliding window", "from 1 to"),
        ({"window": 2.5}, "Sliding window", "whole number"),
        ({"softcap": -1.0}, "Softcap", "at least"),
        ({"heads": 2, "alibi": [0.5]}, "ALiBi slopes", "one number per head: 2, not 1"),
        ({"sinks": ["a"]}, "Sink logits, head 1", "not a number"),
        ({"rope_fraction": 0.5}, "Rotary fraction", "needs RoPE"),
        ({"rope_base": 100.0, "rope_fraction": 0.3}, "Rotary fraction", "even number"),
        ({"heads": 2, "relative_bias": [[0.0] * 8]}, "T5 relative bias", "one row of buckets per head: 2, not 1"),
        ({"relative_bias": [[0.0, 1.0]]}, "T5 relative bias", "between 4 and 256 columns"),
        ({"relative_bias": [[0.0, 1.0, "x", 2.0]]}, "T5 relative bias, head 1, bucket 2", "not a number"),
        ({"relative_bias": [[0.0] * 8], "relative_max_distance": 2}, "T5 max distance", "from 3 to 1024"),
        (
            {"relative_bias": [[0.0] * 8], "relative_bidirectional": False, "relative_max_distance": 4},
            "T5 max distance",
            "from 5 to 1024",
        ),
        ({"relative_bias": [[0.0] * 4], "relative_bidirectional": "yes"}, "T5 both ways", "not true or false"),
    ],
)
def test_bad_values_are_messages_naming_the_place(options, where, problem):
    case = case_to_dict(presets.random_case(3, 4, 4, 4, seed=0))
    with pytest.raises(CaseError) as e:
        parse_case(case | {"options": options})
    assert where in str(e.value.where) and problem in str(e.value.problem)


def test_the_papers_alibi_slopes():
    """As BLOOM's build_alibi_tensor makes them: 2^(−8k/h), and for 6 heads the 4 of 4 heads then the odd ones of 8."""
    assert alibi_slopes(4) == (2**-2, 2**-4, 2**-6, 2**-8)
    assert alibi_slopes(6) == (2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3)


def test_bloom_alibi_slopes_and_transformers_attention_functions_agree():
    """transformers' own functions: BLOOM's slopes, Gemma 2's eager attention (softcap and sliding window) and
    gpt-oss's (sinks) on the same q, k and v give the trace's outputs within the one rule."""
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    gemma2 = pytest.importorskip("transformers.models.gemma2.modeling_gemma2")
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    for heads in (1, 2, 4, 6):
        alibi = bloom.build_alibi_tensor(torch.ones(1, 3), heads, torch.float32)  # (h, 1, 3): slope_h · j
        torch.testing.assert_close(alibi[:, 0, 1], torch.tensor(alibi_slopes(heads)), rtol=0, atol=0)

    n, h = 7, 2
    base = presets.random_case(n, 4, 4 * h, 4 * h, seed=8)
    for options, module, kwargs in (
        ({"softcap": 2.0, "window": 3}, gemma2, {"softcap": 2.0, "sliding_window": 3}),
        ({"sinks": [0.5, -1.0], "window": 4}, gpt_oss, {"sliding_window": 4}),
    ):
        case = with_options(base, heads=h, scale="sqrt_dk", **options)
        trace = attend(case)
        q, k, v = (trace[name][None] for name in ("queries", "keys", "values"))  # (1, h, n, d)
        i = torch.arange(n)
        inside = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < case.options.window)
        mask = torch.zeros(n, n).masked_fill(~inside, float("-inf"))[None, None]  # additive, as transformers takes it
        module_state = torch.nn.Module()
        module_state.num_key_value_groups, module_state.training = 1, False
        if "sinks" in options:
            module_state.sinks = torch.tensor(options["sinks"])
        out, _ = module.eager_attention_forward(
            module_state, q, k, v, mask, scaling=case.d_head**-0.5, dropout=0.0, **kwargs
        )
        out = out[0].flatten(1)  # (n, h · d): transformers returns (b, n, h, d)
        checked = compare("transformers", trace.outputs, out, tolerance(case, trace.__getitem__))
        assert checked.agrees, (options, checked)


def test_the_sidebar_makes_every_variant_and_nope(at):
    at.toggle(key="use_rounded").set_value(False).run()
    at.toggle(key="rope").set_value(True).run()  # the article's heads are 3 wide: RoPE turns pairs
    assert "even" in str(session(at).error.problem)
    at.number_input(key="d_k").set_value(4).run()
    at.number_input(key="d_v").set_value(4).run()
    at.number_input(key="window").set_value(2).run()
    at.number_input(key="softcap").set_value(5.0).run()
    at.toggle(key="alibi").set_value(True).run()
    at.toggle(key="sinks").set_value(True).run()
    at.number_input(key="sink").set_value(1.5).run()
    at.toggle(key="relative").set_value(True).run()
    assert not at.exception and session(at).error is None
    o = current_trace(at).case.options
    assert (o.window, o.softcap, o.alibi, o.sinks, o.rope_base) == (2, 5.0, (2**-8,), (1.5,), 10000.0)
    assert o.relative_bias == relative_table(1) and o.relative_max_distance == RELATIVE_MAX_DISTANCE
    assert check(current_trace(at)).agrees
    at.number_input(key="heads").set_value(2).run()  # per-head options follow the heads
    o = current_trace(at).case.options
    assert o.alibi == alibi_slopes(2) and o.sinks == (1.5,) * 2 and o.relative_bias == relative_table(2)
    at.selectbox(key="rope_fraction").set_value(0.5).run()  # d_head 2: one pair, a half is 1 dim
    assert "even" in str(session(at).error.problem) and current_trace(at).case.options.rope_fraction is None
    at.toggle(key="rope").set_value(False).run()  # NoPE
    assert current_trace(at).case.options.rope_base is None and "rope" not in [s.name for s in current_trace(at).steps]


def test_a_softcap_under_its_limit_is_a_message_and_the_last_case_stays(at):
    at.number_input(key="softcap").set_value(0.05).run()
    s = session(at)
    assert s.error is not None and "Softcap" in str(s.error.where) and s.case.options.softcap is None
    assert any("Softcap" in e.value for e in at.error)


def test_a_link_carries_every_variant_and_opens_with_the_sidebar_showing_them():
    from streamlit.testing.v1 import AppTest

    from attention.app import links
    from tests.apptest import APP

    options = {
        "window": 2,
        "softcap": 3.0,
        "heads": 2,
        "alibi": [0.5, 0.125],
        "sinks": [1.0, -2.0],
        "relative_bias": [[0.5, -1.0, 0.0, 2.0], [1.0, 0.0, -0.5, 0.25]],
        "relative_max_distance": 7,
    }
    case = with_options(presets.random_case(5, 4, 8, 8, seed=9), rope_base=100.0, rope_fraction=0.5, **options)
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params["case"] = links.files.case_to_link(case)
    app.run()
    assert not app.exception
    assert current_trace(app).case == case
    c = session(app).controls
    assert (c.window, c.softcap, c.alibi, c.sinks, c.rope, c.rope_fraction) == (2, 3.0, True, True, True, 0.5)
    assert c.relative and session(app).inputs.relative_max_distance == 7  # the link's own table and distance
    assert links.link_token(session(app)) is not None
    assert links.files.case_from_link(links.link_token(session(app))) == case  # shared again: the same numbers


@pytest.fixture(scope="module")
def every_option_app():
    """The app opened from a link to a 2-head, 6-token case with every option of today's models on at once."""
    options = {
        "window": 3,
        "softcap": 2.0,
        "heads": 2,
        "alibi": [0.5, 0.125],
        "sinks": [0.5, -1.0],
        "relative_bias": [[0.0, -0.5, -1.0, -1.5] * 2, [1.0, 0.0, -0.5, 0.25] * 2],
    }
    return linked(with_options(presets.random_case(6, 4, 8, 8, seed=2), rope_base=100.0, rope_fraction=0.5, **options))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_with_every_option_on(every_option_app, page):
    app = rendered(every_option_app, page)
    assert current_trace(app).case.options.window == 3
    if page == "walkthrough":  # every step, each of its tensors drawn
        drawn = set()
        for step in [s.name for s in current_trace(app).steps]:
            app.radio(key="step_picker").set_value(step).run()
            assert not app.exception and not app.error, (step, app.exception)
            drawn |= set(charts(app))
        assert {"position_bias", "scores_uncapped", "weights_sink", "queries_unrotated"} <= drawn


def test_the_overviews_window_question_opens_the_variants_page_with_a_window_of_3():
    from streamlit.testing.v1 import AppTest

    from attention.forward import teach
    from tests.apptest import APP

    assert "window" in teach.questions(attend(presets.article()))
    app = AppTest.from_file(APP, default_timeout=60).run()
    app.query_params["ask"] = "window"
    app.switch_page("pages/variants.py").run()
    assert not app.exception
    assert session(app).controls.window == 3 and current_trace(app).case.options.window == 3
    assert "window" not in teach.questions(current_trace(app))  # asked and answered
