"""Teach and share, through AppTest: links, import and export, variants, explain-a-number, multi-head, the player."""

import ast
import json
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import attend, case_to_dict, parse_case
from attention.base.case import with_options
from attention.base.files import MAX_LINK_CHARS, case_from_link, case_to_link, dump_case
from attention.base.presets import article, random_case, resize
from attention.forward import room
from attention.forward.oracle import fused_outputs
from attention.forward.script import to_script
from attention.forward.teach import variant_name, variants
from tests.apptest import APP, ARTICLE_OUTPUTS, MASKED_CASE, PAGES, charts, current_trace, open_share_panel, session

# The article with one number changed: its rounded softmax no longer fits, so the case has the exact one
EDITED = parse_case({**case_to_dict(article()), "x": [[1, 0, 1, 0], [0, 5, 0, 2], [1, 1, 1, 1]], "options": {}})


def open_link(query: dict[str, str]) -> AppTest:
    """A fresh session opening the app at a URL with these query parameters."""
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


@pytest.mark.parametrize("page", PAGES)
def test_a_link_restores_the_case_and_step_on_every_page(page):
    case = with_options(EDITED, temperature=0.5)
    at = open_link({"case": case_to_link(case), "step": "5"})
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception and not at.error
    assert current_trace(at).case == case
    assert session(at).step == "softmax"  # an old link's 5: step 5
    assert at.query_params["case"] == case_to_link(case)  # the URL stays a link to this view, its step by name
    assert at.query_params["step"] == "softmax"
    if page == "walkthrough":
        assert "Step 5" in at.header[0].value


def test_a_link_carries_options_tokens_and_an_explicit_mask():
    case = parse_case(MASKED_CASE)
    at = open_link({"case": case_to_link(case)})
    assert not at.exception and not at.error
    assert current_trace(at).case == case
    assert at.selectbox(key="mask").value == "custom"
    torch.testing.assert_close(current_trace(at).outputs, fused_outputs(case))


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"case": "not-a-case!!"}, "link: is not a case link"),
        ({"case": "A" * (MAX_LINK_CHARS + 1)}, "link: is 16,001 characters"),
        ({"case": case_to_link(random_case(3, 2, 2, 2))[:-12]}, "link: is not a case link"),
        ({"step": "99"}, "step is not a number from 1 to 8"),
        ({"step": "²"}, "step is not a number from 1 to 8"),  # isdigit() says yes, int() raises
        ({"step": "9" * 5000}, "step is not a number from 1 to 8"),
        ({"step": "http://evil.example/login"}, "step is not a number from 1 to 8"),  # not echoed: no live link
    ],
)
def test_a_bad_link_is_refused_with_a_message_and_the_defaults(query, message):
    at = open_link(query)
    assert not at.exception
    assert any(message in w.value for w in at.warning), [w.value for w in at.warning]
    np.testing.assert_allclose(current_trace(at).outputs, ARTICLE_OUTPUTS)


def test_a_link_naming_impossible_sizes_is_refused():
    import base64
    import json
    import zlib

    huge = {"format": "attention-case/1", "x": [[1.0]] * 2000, "w_query": [[1]], "w_key": [[1]], "w_value": [[1]]}
    token = base64.urlsafe_b64encode(zlib.compress(json.dumps(huge).encode())).decode().rstrip("=")
    at = open_link({"case": token})
    assert any("x: has 2000 rows, expected between 1 and 1024" in w.value for w in at.warning)
    np.testing.assert_allclose(current_trace(at).outputs, ARTICLE_OUTPUTS)


def test_a_link_to_an_absent_gpu_runs_on_the_cpu_and_says_so():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    at = open_link({"case": case_to_link(with_options(EDITED, device="cuda"))})
    assert not at.exception and not at.error
    assert current_trace(at).device == "cpu"
    assert any("not available here" in w.value for w in at.warning)


def test_import_a_good_file_and_refuse_a_bad_one():
    at = open_share_panel(AppTest.from_file(APP, default_timeout=60).run())
    at.file_uploader(key="upload").set_value(("mine.json", dump_case(EDITED).encode(), "application/json")).run()
    assert current_trace(at).case == EDITED
    assert any("Opened mine.json" in w.value for w in at.warning)
    at.file_uploader(key="upload").set_value(("bad.json", b'{"format": "attention-case/1"}', "application/json"))
    at.run()
    assert any("bad.json was not opened, nothing changed: x: is missing" in w.value for w in at.warning)
    assert current_trace(at).case == EDITED  # nothing changed


def test_the_exported_script_prints_the_apps_outputs(tmp_path):
    at = open_link({"case": case_to_link(EDITED)})
    shown = charts(at.switch_page("pages/inputs.py").run())["outputs"]
    path = tmp_path / "attention_case.py"
    path.write_text(to_script(current_trace(at).case))
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(ast.literal_eval(run.stdout.strip().splitlines()[-1]), shown, atol=1e-5)


def test_variants_show_the_cores_outputs():
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/variants.py").run()
    assert not at.exception
    shown = charts(at)
    for v, case in variants(article()).items():
        np.testing.assert_allclose(shown[str(variant_name(v, case))], attend(case).outputs.numpy(), atol=1e-6)
    at.select_slider(key="explore_temperature").set_value(0.25).run()
    sharp = attend(with_options(article(), temperature=0.25, weights_override=None))
    np.testing.assert_allclose(charts(at)["weights at T = 0.25"], sharp["weights"].numpy(), atol=1e-6)


def test_explain_a_score_of_the_article():
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/explain.py").run()
    at.selectbox(key="explain_tensor").set_value("scores_raw").run()
    at.selectbox(key="explain_scores_raw_0").set_value(1).run()
    at.selectbox(key="explain_scores_raw_1").set_value(2).run()
    assert not at.exception
    assert "q₂ · k₃ = 2·2 + 2·3 + 2·1 = 12" in at.code[0].value


def test_a_click_on_the_heatmap_picks_the_cell():
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/explain.py").run()
    at.selectbox(key="explain_tensor").set_value("scores_raw").run()
    # A click on cell (row 3, column 1) as the browser reports it: the [row, column] of Plotly's click on the heatmap
    at.session_state["explain_chart_click"] = {"cell": [2, 0]}
    at.run()
    assert at.selectbox(key="explain_scores_raw_0").value == 2 and at.selectbox(key="explain_scores_raw_1").value == 0
    assert "q₃ · k₁ = 2·0 + 1·1 + 3·1 = 4" in at.code[0].value
    for forged in ([7, 0], [-1, 0], ["2", 0], [True, 0], "2,0", None):  # no such cell, or no cell at all: nothing
        at.session_state["explain_chart_click"] = {"cell": forged}
        at.run()
        assert not at.exception and at.selectbox(key="explain_scores_raw_0").value == 2


def test_the_explain_pages_url_carries_its_number_and_a_link_opens_it():
    """An explanation can be shared (issue 29): the URL names the number explained, and opening it explains it."""
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/explain.py").run()
    assert at.query_params["explain"] == "scores_raw.2.2"  # the page's first: query Input 2 on key Input 2
    at.selectbox(key="explain_tensor").set_value("outputs").run()
    at.selectbox(key="explain_outputs_1").set_value(0).run()
    assert at.query_params["explain"] == "outputs.2.1"
    at.selectbox(key="explain_tensor").set_value("scores_raw").run()
    at.session_state["explain_chart_click"] = {"cell": [2, 0]}  # a click: the URL follows in the same run
    at.run()
    assert at.query_params["explain"] == "scores_raw.3.1"
    shared = open_link({"explain": "scores_raw.3.1"}).switch_page("pages/explain.py").run()
    assert not shared.exception and not shared.warning
    assert "q₃ · k₁ = 2·0 + 1·1 + 3·1 = 4" in shared.code[0].value
    assert shared.query_params["explain"] == "scores_raw.3.1"
    heads = open_link({"case": case_to_link(random_case(3, 4, 4, 4, seed=1, heads=2)), "explain": "weights.2.3.1"})
    heads.switch_page("pages/explain.py").run()
    assert [heads.selectbox(key=f"explain_weights_{a}").value for a in range(3)] == [1, 2, 0]
    for junk in ("scores_raw.4.1", "scores_raw.1", "nothing.1.1", "scores_raw.0.1", "scores_raw.1.1e9", "x.1.1.1"):
        refused = open_link({"explain": junk})  # said on the first page drawn
        assert any("number to explain" in w.value for w in refused.warning), (junk, refused.warning)
        refused.switch_page("pages/explain.py").run()
        assert not refused.exception and refused.query_params["explain"] == "scores_raw.2.2", junk  # the default


def test_a_links_number_gives_way_to_a_later_click_and_leaves_the_url_when_the_case_loses_it():
    """A shared link's explain= is set on the Explain page's pickers only when that page is drawn: a click on a
    walkthrough cell before then is the number explained, not the link's; and a number the case no longer has
    (fewer tokens now) leaves the URL, which would otherwise be a link that opens with a notice."""
    at = open_link({"explain": "scores_raw.3.1", "step": "softmax"})
    at.switch_page("pages/walkthrough.py").run()
    at.session_state["chart_weights_click"] = {"cell": [1, 2]}
    at.run()
    assert at.selectbox(key="explain_tensor").value == "weights"
    assert (at.selectbox(key="explain_weights_0").value, at.selectbox(key="explain_weights_1").value) == (1, 2)
    assert at.query_params["explain"] == "weights.2.3"
    at.switch_page("pages/inputs.py").run()
    at.number_input(key="n").set_value(2).run()
    assert not at.exception and "explain" not in at.query_params


def test_multi_head_is_verified_against_nn_multihead_attention():
    case = random_case(4, 4, 4, 4, seed=2, heads=2, scale="sqrt_dk", w_out=[[1, 0, 0, 1]] * 4)
    at = open_link({"case": case_to_link(case)})
    at.switch_page("pages/multi_head.py").run()
    assert not at.exception and not at.error
    assert any("nn.MultiheadAttention with these weights gives the same outputs" in s.value for s in at.success)
    assert any("Agrees with PyTorch's nn.MultiheadAttention" in c.value for c in at.caption)
    assert {f"head {i + 1}: weights" for i in range(2)} <= set(charts(at))


def test_every_page_says_it_agrees_with_fused_attention():
    at = AppTest.from_file(APP, default_timeout=60).run()
    for page in PAGES:
        at.switch_page(f"pages/{page}.py").run()
        assert any("Agrees with PyTorch's scaled_dot_product_attention" in c.value for c in at.caption), page


def test_the_player_moves_on_when_its_time_is_due(monkeypatch):
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/walkthrough.py").run()
    at.toggle(key="playing").set_value(True).run()
    assert "Step 1" in at.header[0].value
    later = time.monotonic() + 60  # the pace has passed
    monkeypatch.setattr(room.time, "monotonic", lambda: later)
    at.run()
    assert "Step 2" in at.header[0].value
    assert at.button(key="next").proto.shortcut.lower() == "right"
    assert at.button(key="previous").proto.shortcut.lower() == "left"


def test_charts_save_as_png_or_svg_from_their_toolbar():
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/inputs.py").run()
    formats = lambda: {json.loads(c.proto.config)["toImageButtonOptions"]["format"] for c in at.get("plotly_chart")}  # noqa: E731
    assert formats() == {"png"}
    open_share_panel(at).radio(key="image_format").set_value("svg").run()
    assert formats() == {"svg"}
    at.session_state["share_panel"] = False  # closed again: the choice stays
    assert formats() == {"svg"} and not at.run().get("download_button")


def test_a_link_past_the_limit_is_refused_early_and_one_within_it_is_the_whole_link():
    noisy = random_case(1024, 64, 64, 64, seed=1)  # random numbers: far past a link's length
    assert case_to_link(noisy, MAX_LINK_CHARS) is None and len(case_to_link(noisy)) > MAX_LINK_CHARS
    sparse = resize(article(), 1024, 64, 64, 64)  # as big, but zeros past the article's numbers: a short link
    token = case_to_link(sparse, MAX_LINK_CHARS)
    assert token == case_to_link(sparse) and case_from_link(token) == sparse


def test_the_share_panel_is_made_only_when_open():
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.get("download_button") and not at.get("file_uploader")
    open_share_panel(at)
    labels = {"Case file", "Trace file", "Python script", "Backward script"}  # the backward pass's: issue 21
    assert {b.proto.label for b in at.get("download_button")} == labels
    assert at.get("file_uploader") and at.get("code")


def test_the_overviews_questions_open_their_answers_in_one_click():
    at = AppTest.from_file(APP, default_timeout=60).run()
    labels = [link.proto.label for link in at.get("page_link")]  # Markdown: the brackets escaped
    assert "Why is the score of query Input 2 on key Input 3 equal to 12?" in labels
    assert "Why is Input 3's output \\[2, 7.8, 0.3\\]?" in labels
    score = open_link({"ask": "score"}).switch_page("pages/explain.py").run()
    assert "q₂ · k₃ = 2·2 + 2·3 + 2·1 = 12" in score.code[0].value and "ask" not in score.query_params
    output = open_link({"ask": "output"}).switch_page("pages/explain.py").run()
    assert output.code[0].value.endswith("= 7.8; float32 arithmetic gives 7.7999997")
    causal = open_link({"ask": "causal"}).switch_page("pages/walkthrough.py").run()
    assert session(causal).step == "outputs" and current_trace(causal).outputs[0].tolist() == [1.0, 2.0, 3.0]
