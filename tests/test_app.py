"""The app through Streamlit's AppTest: every page from app.py, widgets by key, seeded edits, bad edits, devices."""

import json

import numpy as np
import pytest
import torch

from attention import attend, case_to_dict, parse_case
from attention.base.presets import article
from tests.apptest import ARTICLE_OUTPUTS, PAGES, charts, current_trace, edit, session


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_from_app_py(at, page):
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    assert not at.error
    assert at.selectbox(key="preset").value == "article"  # the shared sidebar from app.py is there too
    if page == "whole":  # the article is no real model: the page says so and offers to open one
        assert at.button(key="whole_open_model")
    else:
        assert at.get("plotly_chart") or page in ("devices", "exercise")  # (their tables and lists have no chart)


def test_default_is_the_article_with_its_rounded_softmax(at):
    at.switch_page("pages/inputs.py").run()
    np.testing.assert_allclose(charts(at)["outputs"], ARTICLE_OUTPUTS, atol=1e-6)
    assert at.toggle(key="use_rounded").value is True and not at.toggle(key="use_rounded").disabled


def test_numbers_without_rounded_weights_keep_the_switch_in_place_and_say_why(at):
    """A random case has no rounded weights: the switch stays where it was (the widgets below do not move), off,
    disabled, with a help text that says why."""
    at.selectbox(key="preset").set_value("random").run()
    switch = at.toggle(key="use_rounded")
    assert switch.value is False and switch.disabled and "only its own 3 × 3 weights" in switch.help
    assert session(at).case.options.weights_override is None


def test_exact_softmax_switch_and_the_difference_shown(at):
    at.toggle(key="use_rounded").set_value(False).run()
    at.switch_page("pages/inputs.py").run()
    exact = attend(parse_case({**case_to_dict(article()), "options": {}})).outputs.numpy()
    np.testing.assert_allclose(charts(at)["outputs"], exact, atol=1e-6)
    at.toggle(key="use_rounded").set_value(True).run()
    at.switch_page("pages/walkthrough.py").run()
    session(at).step = "outputs"
    at.run()
    shown = charts(at)
    np.testing.assert_allclose(shown["outputs: rounded − exact"], np.array(ARTICLE_OUTPUTS) - exact, atol=1e-5)


def test_a_seeded_edit_changes_every_step(at):
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 1, "2", 5.0)  # Input 2's second feature: 2 -> 5 (Input 1 has weight 0, so edit row 2)
    d = case_to_dict(article())
    d["x"][1][1] = 5.0
    x, w_query, w_key, w_value = (np.array(d[k]) for k in ("x", "w_query", "w_key", "w_value"))
    scores = (x @ w_query) @ (x @ w_key).T  # the article's steps, by hand in numpy
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    outputs = weights / weights.sum(axis=1, keepdims=True) @ (x @ w_value)  # the exact softmax: see below
    assert not at.error
    np.testing.assert_allclose(charts(at)["outputs"], outputs, atol=1e-5)
    # The article rounded its own softmax: for these numbers it would be off, so the exact one is used, said once
    assert [i.value for i in at.info if "rounded softmax was made for its own numbers" in i.value]
    assert not np.allclose(outputs, ARTICLE_OUTPUTS)
    at.switch_page("pages/walkthrough.py").run()  # the edit travels to the other pages
    session(at).step = "scores"
    at.run()
    np.testing.assert_allclose(charts(at)["scores"], (x @ w_query) @ (x @ w_key).T, atol=1e-5)


def test_a_token_label_edit_relabels_the_axes(at):
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 2, "token", "<b>cat</b>")
    assert current_trace(at).case.tokens == ("Input 1", "Input 2", "<b>cat</b>")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["y"][-1] == "&lt;b&gt;cat&lt;/b&gt;"  # shown as text, not as bold HTML


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nan", "x, row 2 (Input 2), column 3: 'nan' is not a number"),
        ("", "x, row 2 (Input 2), column 3: is empty"),
        ("1e400", "x, row 2 (Input 2), column 3: '1e400' is larger than the limit 1e+06"),
        ("1e9", "x, row 2 (Input 2), column 3: '1e9' is larger than the limit 1e+06"),
        ("abc", "x, row 2 (Input 2), column 3: 'abc' is not a number"),
        ("−1", "x, row 2 (Input 2), column 3: '−1' is not a number: type the minus sign as -"),
    ],
)
def test_an_invalid_edit_names_the_cell_and_keeps_the_last_valid_result(at, value, message):
    at.switch_page("pages/inputs.py").run()
    edit(at, "w_value", 0, "1", 4.0)  # a valid edit first: it must survive the bad one
    valid = charts(at)["outputs"]
    edit(at, "x", 1, "3", value)
    assert not at.exception
    assert len(at.error) == 1
    assert message in at.error[0].value
    np.testing.assert_allclose(charts(at)["outputs"], valid)  # the last valid result stays
    assert session(at).inputs.w_value[0][0] == 4.0  # nothing else is lost
    edit(at, "x", 1, "3", 1.0)  # fixed: the message goes
    assert not at.error


def test_heads_that_do_not_divide_are_refused_with_a_message(at):
    at.number_input(key="heads").set_value(4).run()  # typed, not a step: refused, in words, with the counts that fit
    assert not at.exception
    error = at.error[0].value
    assert "Heads: 4 heads cannot split the 3 columns of the queries and keys (d_k)" in error, error
    assert "the heads can be 1, 3" in error and "options." not in error
    np.testing.assert_allclose(current_trace(at).outputs, ARTICLE_OUTPUTS)


def test_heads_step_between_the_counts_the_sizes_allow(at):
    """The widget's + from 1 on the article (d_k = d_v = 3) goes to 3, its − back to 1; + past 3 keeps 3, said."""
    at.number_input(key="heads").set_value(2).run()  # what + sends
    assert not at.error and not at.exception
    assert at.number_input(key="heads").value == 3 and current_trace(at).case.options.heads == 3
    at.number_input(key="heads").set_value(4).run()  # + again: no count above 3 splits 3 columns
    assert not at.error and at.number_input(key="heads").value == 3
    assert any("with these sizes the heads can be 1, 3" in w.value for w in at.warning), [w.value for w in at.warning]
    at.number_input(key="heads").set_value(2).run()  # −
    assert not at.error and at.number_input(key="heads").value == 1 and current_trace(at).case.options.heads == 1


def test_resize_keeps_numbers_and_presets_reset(at):
    at.number_input(key="n").set_value(4).run()
    assert not at.error
    trace = current_trace(at)
    assert trace.case.n == 4 and trace.case.x[:3] == article().x
    assert trace.case.options.weights_override is None  # the 3×3 rounded weights no longer fit
    at.selectbox(key="preset").set_value("random").run()
    assert current_trace(at).case.n == 4
    at.button(key="reset").click().run()  # the preset again, edits dropped
    assert current_trace(at).case.n == 4
    at.selectbox(key="preset").set_value("article").run()
    np.testing.assert_allclose(current_trace(at).outputs, ARTICLE_OUTPUTS)


def test_options_recompute_with_textbook_scaling_and_a_causal_mask(at):
    at.toggle(key="use_rounded").set_value(False).run()
    at.selectbox(key="scale").set_value("sqrt_dk").run()
    at.selectbox(key="mask").set_value("causal").run()
    case = current_trace(at).case
    assert case.options.scale == "sqrt_dk" and case.options.mask == "causal"
    x = torch.tensor(case.x)
    q, k, v = (x @ torch.tensor(w) for w in (case.w_query, case.w_key, case.w_value))
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(current_trace(at).outputs, expected)


def test_walkthrough_steps_forward_and_back_by_key(at):
    at.switch_page("pages/walkthrough.py").run()
    assert "Step 1 · Prepare inputs" in at.header[0].value
    at.button(key="next").click().run()
    at.button(key="next").click().run()
    assert "Step 3" in at.header[0].value
    at.button(key="previous").click().run()
    assert "Step 2" in at.header[0].value
    at.radio(key="step_picker").set_value("weighted").run()
    assert "Step 6" in at.header[0].value
    at.switch_page("pages/inputs.py").run()
    at.switch_page("pages/walkthrough.py").run()
    assert "Step 6" in at.header[0].value  # the step survives a visit to another page


def test_device_choice_without_a_gpu(at):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert [o.split(" — ")[0] for o in at.selectbox(key="device").options] == ["cpu"]
    assert any("GPU: unavailable" in c.value for c in at.sidebar.caption)
    at.switch_page("pages/devices.py").run()
    assert not at.exception
    assert any("GPU: unavailable" in i.value for i in at.info)


def test_two_heads_render_on_every_page_with_a_head_picker(at):
    at.number_input(key="d_k").set_value(4).run()
    at.number_input(key="d_v").set_value(4).run()
    at.toggle(key="use_rounded").set_value(False).run()
    at.number_input(key="heads").set_value(2).run()
    assert not at.error
    assert current_trace(at)["weighted"].shape == (2, 3, 3, 2)
    for page in PAGES:
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert not at.error
    at.switch_page("pages/walkthrough.py").run()
    at.radio(key="step_picker").set_value("scores").run()
    at.radio(key="walkthrough_head").set_value(1).run()
    np.testing.assert_allclose(charts(at)["scores"], current_trace(at)["scores"][1].numpy())


def test_a_button_that_changes_the_controls_is_not_undone_by_the_widgets_old_values(at):
    at.selectbox(key="mask").set_value("causal").run()
    at.number_input(key="temperature").set_value(2.0).run()
    assert session(at).rounding is not None
    at.button(key="back_to_article").click().run()  # the widgets still hold causal and 2 when the button runs
    assert at.selectbox(key="mask").value == "none" and at.number_input(key="temperature").value == 1
    np.testing.assert_allclose(current_trace(at).outputs, ARTICLE_OUTPUTS)
    at.selectbox(key="mask").set_value("causal").run()
    at.button(key="reset").click().run()
    assert at.selectbox(key="mask").value == "none"


def test_the_causal_question_turns_the_mask_on_alone_and_shows_its_effect_alone(at):
    """Issue 29, point 4: "What does a causal mask do to Input 1's output?" changes the mask and nothing else; the
    sidebar shows the softmax in use (the rounded one cannot go with a mask: its switch reads off, greyed, and says
    why), and step 7 shows each output before and after the mask with everything else equal, so the last output,
    which sees every key, does not move."""
    at.query_params["ask"] = "causal"
    at.switch_page("pages/walkthrough.py").run()
    s = session(at)
    assert s.step == "outputs" and s.controls.mask == "causal" and s.case.options.weights_override is None
    switch = at.toggle(key="use_rounded")
    assert switch.value is False and switch.disabled
    assert any("In use: the exact softmax" in c.value for c in at.sidebar.caption)
    table = next(d.value for d in at.dataframe if "Without the mask" in d.value.columns)
    exact = attend(parse_case({**case_to_dict(article()), "options": {}})).outputs  # the same softmax, no mask
    masked = attend(parse_case({**case_to_dict(article()), "options": {"mask": "causal"}})).outputs
    for i, token in enumerate(article().tokens):
        assert table.loc[token, "Without the mask"] == "[" + ", ".join(f"{v:.4g}" for v in exact[i].tolist()) + "]"
        assert table.loc[token, "With the causal mask"] == "[" + ", ".join(f"{v:.4g}" for v in masked[i].tolist()) + "]"
    assert table.loc["Input 3", "Moved"] == "" and table.loc["Input 1", "Moved"] == "yes"
    at.selectbox(key="mask").set_value("none").run()  # the choice comes back with the options it fits
    switch = at.toggle(key="use_rounded")
    assert switch.value is True and not switch.disabled and session(at).case.options.weights_override is not None


@pytest.mark.parametrize("seed", range(4))
def test_the_masks_effect_moves_no_row_that_sees_every_key(seed):
    """Before and after the mask are made one way (a broadcast and a matrix product round differently): the last
    token sees every key, so its row never reads "moved", on numbers that are not whole too."""
    from streamlit.testing.v1 import AppTest

    from attention.base.files import case_to_link
    from attention.base.presets import random_case
    from tests.apptest import APP

    at = AppTest.from_file(APP, default_timeout=60)  # the link is read on the session's first run
    at.query_params["case"] = case_to_link(random_case(16, 8, 8, 8, seed=seed, scale="sqrt_dk"))
    at.query_params["ask"] = "causal"
    at.run().switch_page("pages/walkthrough.py").run()
    table = next(d.value for d in at.dataframe if "Without the mask" in d.value.columns)
    moved = table["Moved"]
    assert session(at).case.n == 16 and moved.iloc[-1] == "" and (moved.iloc[:-1] == "yes").any(), table


def test_every_sidebar_widget_comes_back_with_the_sessions_value_if_the_browser_forgets_it(at):
    """A widget the browser draws afresh without its state (Streamlit's browser drops a widget's state across some
    runs: page switches and reruns that end early, under load) starts from its default and sends it back: the
    default must be the session's value, or the sizes fall to 1 (a CI run saw the article become 1 × 1)."""
    at.number_input(key="n").set_value(4).run()
    at.selectbox(key="mask").set_value("causal").run()
    at.number_input(key="temperature").set_value(2.0).run()
    at.selectbox(key="lang").set_value("zh").run()
    widgets = [w for kind in ("number_input", "selectbox", "radio", "toggle") for w in at.get(kind) if w.key]
    assert {"n", "d_in", "seed", "heads", "temperature", "mask", "lang", "preset", "fill", "dtype"} <= {
        w.key for w in widgets
    }
    for w in widgets:
        now = w.index if w.type in ("selectbox", "radio") else w.value
        assert w.proto.default == now, f"{w.key}: the browser would send {w.proto.default}, the session has {now}"
    controls = session(at).controls
    at.number_input(key="n").set_value(at.number_input(key="n").proto.default).run()
    assert session(at).controls == controls
    at.switch_page("pages/walkthrough.py").run()  # the page's widgets that hold the session's state, too
    at.radio(key="step_picker").set_value("softmax").run()
    assert at.radio(key="step_picker").proto.default == at.radio(key="step_picker").index
    at.switch_page("pages/multi_head.py").run()
    at.toggle(key="use_w_out").set_value(True).run()
    assert at.toggle(key="use_w_out").proto.default is True
