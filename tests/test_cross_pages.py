"""Cross-attention on the forward pages (AppTest): every chart's queries down with x's tokens and keys across with
x_kv's, step 1 showing both sentences, step 3's keys and values and step 6's broadcast labelled by x_kv's tokens, the
step texts saying what cross-attention is, and the Explain, Broadcasting and One query pages naming source tokens;
and the trace file, whose step 1 holds x_kv and its labels."""

import json
import random

import pytest
from streamlit.testing.v1 import AppTest

from attention.base.case import case_to_dict, parse_case
from attention.base.files import case_to_link
from attention.base.presets import random_case
from attention.forward.compute import attend
from attention.forward.files import dump_trace, trace_to_dict
from tests.apptest import APP, session
from tests.cases import with_keys_sentence

TOKENS = ("the", "cat", "sat")  # the target sentence (x: the queries)
SOURCE = ("le", "chat", "s'est", "assis", ".")  # the source sentence (x_kv: the keys and values), n_kv ≠ n


def cross_case(heads: int = 1):
    """A three-token target sentence reading a five-token source sentence, each with its own words."""
    base = case_to_dict(random_case(3, 4, 4, 4, seed=3, heads=heads))
    case = with_keys_sentence(base | {"tokens": list(TOKENS)}, random.Random(3), n_kv=len(SOURCE))
    return parse_case(case | {"tokens_kv": list(SOURCE)})


@pytest.fixture
def cross_at():
    """The app on the cross case, opened by a link (the `case` parameter), on the walkthrough."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["case"] = case_to_link(cross_case(heads=2))
    at.run()
    assert not at.exception and session(at).case == cross_case(heads=2)
    at.switch_page("pages/walkthrough.py").run()
    assert not at.exception and session(at).case.cross
    return at


def specs(at: AppTest) -> dict[str, dict]:
    """Every chart's Plotly spec by its title (tags stripped)."""
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        title = (spec["layout"].get("title") or {}).get("text", "")
        out[title.replace("<b>", "").replace("</b>", "")] = spec
    return out


def axes(spec: dict) -> tuple[list[str], list[str], str, str]:
    """A heatmap's row labels (y), column labels (x) and the two axes' titles."""
    data, layout = spec["data"][0], spec["layout"]
    return list(data["y"]), list(data["x"]), layout["yaxis"]["title"]["text"], layout["xaxis"]["title"]["text"]


def go_to(at: AppTest, step: str) -> dict[str, dict]:
    at.radio(key="step_picker").set_value(step).run()
    assert not at.exception
    return specs(at)


def test_step_1_shows_both_sentences_each_with_its_own_tokens(cross_at):
    charts = go_to(cross_at, "inputs")
    assert axes(charts["x"])[0] == list(TOKENS)
    rows, _, row_title, _ = axes(charts["x_kv"])
    assert rows == list(SOURCE) and row_title == "key token"
    said = " ".join(m.value for m in cross_at.markdown)
    assert "cross-attention" in said and "source sentence (5 tokens)" in said and "3 × 5" in said


def test_step_3_keys_and_values_are_the_source_sentences_rows(cross_at):
    charts = go_to(cross_at, "qkv")
    assert axes(charts["queries"])[0] == list(TOKENS)
    for name in ("keys", "values"):
        rows, _, row_title, _ = axes(charts[name])
        assert rows == list(SOURCE) and row_title == "key token", name
    assert "x_kv's rows" in " ".join(m.value for m in cross_at.markdown)


@pytest.mark.parametrize(("step", "names"), [("scores", ("scores_raw", "scores")), ("softmax", ("weights",))])
def test_scores_and_weights_are_queries_down_and_source_keys_across(cross_at, step, names):
    charts = go_to(cross_at, step)
    for name in names:
        rows, cols, row_title, col_title = axes(charts[name])
        assert rows == list(TOKENS) and cols == list(SOURCE), name  # n × n_kv
        assert (row_title, col_title) == ("query", "key")
    if step == "softmax":  # which source token each target token looks at
        assert "attention over the source sentence" in " ".join(m.value for m in cross_at.markdown)


def test_step_6_broadcast_pairs_a_source_key_with_a_target_query(cross_at):
    charts = go_to(cross_at, "weighted")
    rows = axes(charts["weighted"])[0]
    assert len(rows) == len(SOURCE) * len(TOKENS)  # (n_kv · n_q, d_v)
    assert rows[0] == f"k {SOURCE[0]} · q {TOKENS[0]}" and rows[-1] == f"k {SOURCE[-1]} · q {TOKENS[-1]}"


def explain_keys(at: AppTest) -> AppTest:
    at.switch_page("pages/explain.py").run()
    at.selectbox(key="explain_tensor").set_value("keys").run()
    return at


def test_explain_names_the_key_from_the_source_sentence(cross_at):
    """A key's number: its row picker lists x_kv's tokens, and its arithmetic reads x_kv's row."""
    at = explain_keys(cross_at)
    rows = next(s for s in at.selectbox if s.label == "key token")  # the keys' axis, by its name
    assert list(rows.options) == list(SOURCE)
    code = " ".join(c.value for c in at.code)
    assert f"x_kv row 2 ({SOURCE[1]})" in code  # the picker starts on the second row (Input 2's, in the article)


def test_the_explain_page_runs_whole_on_a_cross_case(cross_at):
    assert not explain_keys(cross_at).exception


def test_broadcasting_and_one_query_pick_and_label_source_keys(cross_at):
    cross_at.switch_page("pages/broadcasting.py").run()
    assert not cross_at.exception
    assert list(cross_at.selectbox(key="broadcast_key").options) == list(SOURCE)
    assert axes(specs(cross_at)["weighted[:, i=2] · (5, 2)"])[0] == list(SOURCE)
    cross_at.switch_page("pages/one_query.py").run()
    assert not cross_at.exception
    charts = [axes(json.loads(chart.proto.spec)) for chart in cross_at.get("plotly_chart")]
    across = [cols for _, cols, _, col_title in charts if col_title == "key"]  # step 4's and 5's, query i alone
    down = [rows for rows, _, row_title, _ in charts if row_title == "key"]  # step 6's, one row per key
    assert len(across) == 2 and len(down) == 1 and all(keys == list(SOURCE) for keys in across + down)


def test_a_self_attention_case_keeps_its_own_tokens_on_the_key_axis():
    """The negative: without x_kv the keys are x's own rows, named by x's tokens."""
    case = parse_case(case_to_dict(random_case(3, 4, 4, 4, seed=3)) | {"tokens": list(TOKENS)})
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["case"] = case_to_link(case)
    at.run().switch_page("pages/walkthrough.py").run()
    charts = go_to(at, "scores")
    assert axes(charts["scores"])[1] == list(TOKENS) and "x_kv" not in go_to(at, "inputs")
    assert "cross-attention" not in " ".join(m.value for m in at.markdown)


FORWARD_PAGES = ("overview", "inputs", "broadcasting", "one_query", "multi_head", "variants")


def test_every_step_and_every_forward_page_runs_on_a_cross_case(cross_at):
    for step in ("inputs", "weights", "qkv", "scores", "softmax", "weighted", "outputs"):
        assert go_to(cross_at, step), step
    for page in FORWARD_PAGES:
        cross_at.switch_page(f"pages/{page}.py").run()
        assert not cross_at.exception, (page, cross_at.exception)
    cross_at.switch_page("pages/overview.py").run()
    questions = " ".join(link.label for link in cross_at.get("page_link"))
    assert f"key {SOURCE[2]}" in questions and "causal" not in questions  # no causal mask across two sentences


def test_the_trace_file_holds_x_kv_and_its_tokens_in_step_1():
    case = cross_case()
    inputs = trace_to_dict(attend(case))["steps"][0]
    assert inputs["tokens"] == list(TOKENS) and inputs["tokens_kv"] == list(SOURCE)
    assert inputs["tensors"]["x_kv"]["shape"] == [len(SOURCE), 4] and inputs["tensors"]["x_kv"]["data"] == [
        list(row) for row in case.x_kv
    ]
    steps = json.loads(dump_trace(attend(case)))["steps"]
    assert steps[3]["tensors"]["scores"]["shape"] == [len(TOKENS), len(SOURCE)]  # n × n_kv
    assert "n = 3, n_kv = 5," in attend(case).heading()
    own = trace_to_dict(attend(random_case(3, 4, 4, 4, seed=3)))["steps"][0]  # self-attention: x alone
    assert "tokens_kv" not in own and "x_kv" not in own["tensors"]


def test_the_overview_shows_which_source_token_each_target_token_looks_at(cross_at):
    """The first head's weights, target tokens down and source tokens across, and the sentence naming the most looked-at
    source token; a self-attention case's overview has no such chart."""
    cross_at.switch_page("pages/overview.py").run()
    spec = specs(cross_at)["weights · head 1"]
    assert axes(spec)[:2] == (list(TOKENS), list(SOURCE))
    assert any("looks most at" in c.value for c in cross_at.caption)
    plain = AppTest.from_file(APP, default_timeout=60).run()
    assert not [s for s in plain.subheader if "source token" in s.value] and not plain.exception
