"""The Variants page through AppTest: today's models' variants picked on the page set the session's controls (the
sidebar shows them), their scores, weights and outputs shown beside plain attention equal FlexAttention's, the
window's two-click answer, the softcap's curve, both languages."""

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention.base.case import with_options
from attention.base.record import compare
from attention.forward import teach
from attention.forward.compute import attend, tolerance
from attention.forward.oracle import flex_outputs
from tests.apptest import APP, session

PAGE = "pages/variants.py"
# what each variant's switch sets, read back from the sidebar's own widgets (key: value)
SIDEBAR = {
    "window": {"window": 3},
    "softcap": {"softcap": 5.0},
    "alibi": {"alibi": True},
    "relative": {"relative": True},
    "sinks": {"sinks": True},
    "partial": {"rope": True, "rope_fraction": 0.5},
    "nope": {"rope": False},
    "latent": {"latent": 4},  # the article's [W_K | W_V] has rank 4: a latent of 4 loses nothing, and caches 4 not 6
}


def heatmaps(app: AppTest) -> dict[str, np.ndarray]:
    """Every heatmap's z by its title (a chart without z, the softcap's curve, left out)."""
    out = {}
    for chart in app.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        z = spec["data"][0].get("z")
        if isinstance(z, dict):  # Plotly 7's typed array
            z = np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape([int(s) for s in z["shape"].split(",")])
        if z is not None:
            out[spec["layout"]["title"]["text"]] = np.asarray(z, dtype=float)
    return out


def on_the_page(rope: bool = False) -> AppTest:
    """The Variants page; `rope`: on random numbers whose heads RoPE can turn (the page's own button)."""
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.switch_page(PAGE).run()
    if rope:
        at.button(key="variants_rope_case").click().run()
        at.toggle(key="rope").set_value(True).run()  # the sidebar's RoPE, whole
    assert not at.exception, at.exception
    return at


def assert_beside_plain(at: AppTest, plain_case=None) -> None:
    """The variant's outputs shown equal FlexAttention's of the session's case, plain attention's those of the case
    with today's options off (or `plain_case`), each within the one tolerance rule; the scores shown are the trace's
    (a masked one an empty cell)."""
    shown, case = heatmaps(at), session(at).case
    plain_case = plain_case or with_options(case, **teach.PLAIN)
    for title, c in (("your variants · outputs", case), ("plain · outputs", plain_case)):
        np.testing.assert_array_equal(shown[title], attend(c).outputs.double().numpy())  # the app's trace of it
        exact = attend(with_options(c, weights_override=None))  # the article's rounded weights: not FlexAttention's
        checked = compare("flex", exact.outputs, flex_outputs(exact.case), tolerance(exact.case, exact.__getitem__))
        assert checked.agrees, (title, checked)
    assert not teach.modern_chosen(plain_case)
    scores = attend(case)["scores"].double().numpy()
    np.testing.assert_array_equal(shown["your variants · scores"], np.where(np.isneginf(scores), np.nan, scores))


@pytest.mark.parametrize("variant", teach.MODERN_VARIANTS)
def test_each_variant_sets_the_sessions_controls_and_shows_beside_plain_attention(variant):
    at = on_the_page(rope=variant in ("partial", "nope"))
    before = session(at).case
    at.toggle(key=f"variants_{variant}").set_value(True).run()
    assert not at.exception, at.exception
    for key, value in SIDEBAR[variant].items():
        assert getattr(session(at).controls, key) == value
        widget = next(w for kind in ("number_input", "toggle", "selectbox") for w in at.get(kind) if w.key == key)
        assert widget.value == value, (key, widget.value)  # the sidebar's own widget shows it
    assert teach.modern_chosen(session(at).case, nope=variant == "nope") == (variant,)
    assert any(f"{at.toggle(key=f'variants_{variant}').label} (" in m.value for m in at.markdown)  # its sentence
    plain = with_options(session(at).case, **teach.PLAIN, rope_base=10000.0) if variant == "nope" else None
    if variant == "latent":  # plain attention: the numbers before the latent, with the softmax the latent case uses
        plain = with_options(before, **teach.PLAIN, weights_override=session(at).case.options.weights_override)
    assert_beside_plain(at, plain)
    at.toggle(key=f"variants_{variant}").set_value(False).run()
    assert not teach.modern_chosen(session(at).case) and not at.exception
    if variant == "latent":  # off: the person's own keys and values back, nothing lost
        assert session(at).case == before


def test_a_combination_and_the_sidebar_the_page_follows():
    at = on_the_page()
    at.toggle(key="variants_window").set_value(True).run()
    at.button(key="variants_longer").click().run()
    for variant in ("softcap", "alibi", "sinks"):
        at.toggle(key=f"variants_{variant}").set_value(True).run()
    at.number_input(key="variants_window_value").set_value(2).run()
    at.number_input(key="variants_sink_value").set_value(1.5).run()
    o = session(at).case.options
    assert (o.window, o.softcap, o.sinks) == (2, 5.0, (1.5,)) and o.alibi is not None
    assert_beside_plain(at)
    at.number_input(key="window").set_value(4).run()  # the sidebar's: the page's widgets follow it
    assert at.number_input(key="variants_window_value").value == 4 and at.toggle(key="variants_window").value
    at.number_input(key="window").set_value(0).run()
    assert not at.toggle(key="variants_window").value and not at.exception


def test_two_clicks_tell_what_a_window_of_3_does_to_token_5():
    at = on_the_page()  # click 1: the page
    at.toggle(key="variants_window").set_value(True).run()  # click 2: the window, 3 by default
    assert "Token 5" not in " ".join(m.value for m in at.markdown)  # the article has 3 tokens
    at.button(key="variants_longer").click().run()  # a longer sentence: the random preset at n = 8
    c = session(at).controls
    assert (c.preset, c.n, c.window) == ("random", 8, 3) and not at.exception
    trace, plain = attend(session(at).case), attend(with_options(session(at).case, **teach.PLAIN))
    moved = (trace.outputs[4] - plain.outputs[4]).abs().max().item()
    said = f"Token 5 (Input 5) sees tokens 3–5; its output moved by up to {moved:.3g} from plain attention's."
    assert any(said in m.value for m in at.markdown), [m.value for m in at.markdown]


def test_the_softcap_says_why_and_draws_its_curve_with_the_heads_scores():
    at = on_the_page()
    at.toggle(key="variants_softcap").set_value(True).run()  # two clicks: why Gemma caps scores
    assert any(m.value.startswith("Softcap (Gemma 2)") for m in at.markdown)
    specs = [json.loads(c.proto.spec)["data"] for c in at.get("plotly_chart")]
    curve = next(data for data in specs if data[0]["type"] == "scatter")
    dots = curve[2]
    x, y = (np.frombuffer(base64.b64decode(d["bdata"]), d["dtype"]) for d in (dots["x"], dots["y"]))
    trace = attend(session(at).case)
    np.testing.assert_array_equal(x, trace["scores_uncapped"].flatten().double().numpy())
    np.testing.assert_allclose(y, 5.0 * np.tanh(x / 5.0), rtol=1e-15)
    assert np.abs(y).max() < 5.0 <= np.abs(x).max()  # the cap bites on these scores


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_variant_at_once_in_both_languages(language):
    at = on_the_page(rope=True)
    at.selectbox(key="lang").set_value(language).run()
    for variant in ("window", "softcap", "alibi", "sinks", "partial", "latent"):
        at.toggle(key=f"variants_{variant}").set_value(True).run()
    assert not at.exception, at.exception  # a key missing from a catalogue raises
    o = session(at).case.options  # the latent made last, with DeepSeek's decoupled rotary key for partial rotary
    assert o.w_latent is not None and o.rope_fraction == 0.5 and session(at).error is None
    headers = {"en": "Attention's variants on your numbers", "zh": "注意力的变体，用你的数字"}
    assert at.header[0].value == headers[language]
    assert len(heatmaps(at)) >= 6 + 3  # three pairs beside plain attention, and the article's
