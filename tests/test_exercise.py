"""Exercises: the link (forged ones refused), what is hidden with what, the judge, and the app through AppTest: a
ready-made exercise hidden on the pages, answered wrong then right, kept in the URL, and one made by a teacher."""

from __future__ import annotations

import base64
import json
import math
import zlib

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention import attend
from attention.base.case import CaseError
from attention.base.files import case_to_link
from attention.base.presets import article, random_case
from attention.exercise import compute as exercise
from attention.exercise.compute import Blank, Exercise
from attention.exercise.state import Attempt, Classroom, label
from attention.forward.teach import with_options
from tests.apptest import APP, charts, current_trace, open_share_panel, session


def token(raw) -> str:
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(raw).encode())).decode().rstrip("=")


@pytest.fixture(scope="module")
def trace():
    return attend(article())


def test_a_link_carries_the_places_and_prompts_not_the_numbers(trace):
    made = Exercise((Blank("scores", (1, 2), "q₂ · k₃ <b>?</b>"), Blank("outputs", (2, 1))))
    link = made.to_link()
    assert exercise.from_link(link, trace) == made
    text = zlib.decompress(base64.urlsafe_b64decode(link + "=" * (-len(link) % 4))).decode()
    assert "12" not in text and "7.8" not in text  # score (2, 3) and output (3, 2) are not in it


@pytest.mark.parametrize(
    "raw, says",
    [
        ("not base64 at all!", "not an exercise link"),
        ([], "hides no number"),
        ([["scores", [0, 0], ""]] * 2, "the same number twice"),
        ([["scores", [i % 3, i // 3 % 3], ""] for i in range(2000)], "more than 24"),
        ([["scores", [1, 2], "x" * 281]], "longer than 280"),
        ([["w_query", [0, 0], ""]], "not a hideable tensor"),
        ([["scores", [3, 0], ""]], "not a cell of scores, which is 3 × 3"),
        ([["scores", [True, 0], ""]], "not a cell of scores"),
        ([["scores", [0], ""]], "not a cell of scores"),
        ([["scores", "1,2"]], "not a tensor, an index and a prompt"),
    ],
)
def test_a_forged_link_is_refused_with_what_is_wrong(trace, raw, says):
    with pytest.raises(CaseError, match=says) as refused:
        exercise.from_link(raw if isinstance(raw, str) else token(raw), trace)
    assert "the exercise link" in str(refused.value)


def test_a_prompt_of_100000_characters_is_refused_before_it_is_unpacked(trace):
    with pytest.raises(CaseError, match="more than the 8,000 a link may hold"):
        exercise.from_link(base64.urlsafe_b64encode(bytes(range(256)) * 400).decode(), trace)


def test_a_hidden_score_hides_its_twin_and_an_output_its_copies(trace):
    made = Exercise((Blank("scores", (1, 2)), Blank("outputs", (2, 1))))
    hidden = exercise.hidden(trace, made, frozenset())
    assert hidden == {
        "scores": {(1, 2)},
        "scores_raw": {(1, 2)},
        "outputs": {(2, 1)},
        "outputs_by_query": {(2, 1)},
    }
    assert exercise.hidden(trace, made, frozenset({0})) == {"outputs": {(2, 1)}, "outputs_by_query": {(2, 1)}}
    shown = exercise.redacted(trace, hidden)
    assert math.isnan(shown["scores"][1, 2]) and math.isnan(shown.outputs[2, 1])
    assert shown["scores"][2, 1] == trace["scores"][2, 1] == 12  # the same number, another cell: not hidden
    assert int(np.isnan(shown["outputs_by_query"].numpy()).sum()) == 1
    assert not np.isnan(trace.outputs.numpy()).any()  # the trace itself is untouched


def test_grouped_key_heads_hide_a_key_in_every_query_head_that_reads_it():
    case = random_case(4, 8, 8, 8, seed=1, heads=4, kv_heads=2)  # heads 0, 1 read key head 0; 2, 3 key head 1
    trace = attend(case)
    cells = exercise.shown_with(trace, Blank("keys", (3, 1, 0)))
    assert sorted(cells) == [("keys", (2, 1, 0)), ("keys", (3, 1, 0))]
    assert trace["keys"][2, 1, 0] == trace["keys"][3, 1, 0]


def test_an_answer_is_judged_exactly_for_the_articles_integers_and_within_one_percent_else(trace):
    attempt = Attempt(Exercise((Blank("scores", (1, 2)), Blank("weights_exact", (0, 1)))), trace.case)
    attempt.try_answer(trace, 0, "12.05")
    assert attempt.said[0].key == "exercise.not_yet" and 0 not in attempt.found
    attempt.try_answer(trace, 0, "twelve")  # not a number: said so, not counted as a try
    assert attempt.said[0].key == "exercise.not_a_number" and attempt.tries[0] == 1
    attempt.try_answer(trace, 0, " 12 ")
    assert 0 in attempt.found and attempt.said[0].key == "exercise.right"
    weight = float(trace["weights_exact"][0, 1])  # 0.4683: not an integer, so within 1 %
    attempt.try_answer(trace, 1, str(weight * 1.02))
    assert not attempt.hint(1)
    attempt.try_answer(trace, 1, str(weight * 0.97))
    assert attempt.hint(1) and 1 not in attempt.open
    attempt.try_answer(trace, 1, str(weight * 0.95))
    assert 1 in attempt.shown and 1 not in attempt.found and attempt.done  # three tries: shown, not found
    assert exercise.right(weight * 1.009, weight, exact=False) and exercise.right(-0.0, 0.0, exact=False)


# The app


def opened(params: dict) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        app.query_params[k] = v
    app.run()
    assert not app.exception, app.exception
    return app


def test_a_ready_made_exercise_hides_its_numbers_on_the_pages_then_is_answered():
    app = opened({"exercise": "output"})  # output 3 of the article: [2, 7.8, 0.3]
    assert [i.value for i in app.sidebar.info] == ["Exercise: 0 of 3 done"]
    app.switch_page("pages/walkthrough.py").run()
    assert session(app).step == "outputs"  # opened at its step
    shown = charts(app)["outputs"]
    assert np.isnan(shown[2]).all() and not np.isnan(shown[:2]).any()
    assert [list(t.value.iloc[2]) for t in app.dataframe] == [["?", "?", "?"]]
    assert not [h for h in app.subheader if "rounding" in h.value]  # the exact twin would show output 3
    app.switch_page("pages/one_query.py").run()  # recomputes the outputs: waits till the exercise is done
    assert not app.get("plotly_chart") and "opens once the exercise is done" in app.main.info[-1].value
    app.switch_page("pages/explain.py").run()
    app.selectbox(key="explain_tensor").set_value("outputs_by_query").run()
    app.selectbox(key="explain_outputs_by_query_0").set_value(2).run()
    said = app.main.info[-1].value  # the cells in words, not internal names
    assert "hides (number 1 of step 8's output Input 3, number 1 of output Input 3)" in said
    assert not app.code or "= 2" not in app.code[-1].value

    app.switch_page("pages/exercise.py").run()
    app.text_input(key="exercise_answer_0").set_value("3")
    app.button(key="FormSubmitter:exercise_form_0-Check").click().run()
    assert "Not yet (try 1)." in [i.value for i in app.info]
    app.text_input(key="exercise_answer_0").set_value("2")
    app.button(key="FormSubmitter:exercise_form_0-Check").click().run()
    assert any("Right (try 2). Found: 2" in s.value for s in app.success)
    assert any("= 2" in c.value for c in app.code)  # its arithmetic, once found
    assert app.query_params["found"] == "1" and app.query_params["exercise"] == "output"
    assert [i.value for i in app.sidebar.info] == ["Exercise: 1 of 3 done"]

    again = opened({"exercise": "output", "found": "1"})  # a reload, or a lost replica: the link keeps it
    assert session(again).view(Classroom).exercise.found == {0}
    again.switch_page("pages/walkthrough.py").run()
    assert np.isnan(charts(again)["outputs"][2]).tolist() == [False, True, True]


def test_two_wrong_answers_bring_the_hint_and_show_me_the_arithmetic():
    app = opened({"exercise": "score"})
    app.switch_page("pages/exercise.py").run()
    for wrong in ("10", "11"):
        app.text_input(key="exercise_answer_0").set_value(wrong)
        app.button(key="FormSubmitter:exercise_form_0-Check").click().run()
    assert any("numbers that take part are outlined" in c.value for c in app.caption)
    outlined = charts(app)
    assert set(outlined) == {"queries", "keys"}  # q₂ and k₃ take part, drawn with their cells outlined
    app.button(key="FormSubmitter:exercise_form_0-Show me").click().run()
    assert any("q₂ · k₃" in c.value and "= 12" in c.value for c in app.code)
    assert session(app).view(Classroom).exercise.shown == {0} and app.query_params["shown"] == "1"


def test_a_forged_exercise_link_says_why_and_the_case_still_opens():
    case = random_case(3, 4, 3, 3, seed=4)
    forged = token([["scores", [9, 9], "<script>alert(1)</script>"]])
    app = opened({"case": case_to_link(case), "exercise": forged})
    assert session(app).view(Classroom).exercise is None and current_trace(app).case == case
    said = [e.value for e in (*app.warning, *app.info)]
    assert any("The exercise in the link was not opened" in s and "not a cell of scores" in s for s in said), said
    assert "exercise" not in app.query_params


def test_junk_in_an_exercise_link_is_said_and_left_out():
    """found= and shown= that are not the blanks' numbers are said, as every other bad part of a link (issue 29)."""
    app = opened({"exercise": "output", "found": "99.-1.abc.2", "shown": "1e999", "present": "yes"})
    attempt = session(app).view(Classroom).exercise
    assert attempt.found == {1} and attempt.shown == set()  # blank 2 is one of the three: kept
    said = [w.value for w in app.warning]
    assert any("found= is '99.-1.abc.2'" in s and "1 to 3" in s for s in said), said
    assert any("shown= is '1e999'" in s for s in said) and any("present= is 'yes'" in s for s in said), said
    assert app.query_params["found"] == "2" and "shown" not in app.query_params and "present" not in app.query_params
    app.run()
    assert not app.warning  # said once
    quiet = opened({"exercise": "output", "found": "1.3", "present": "1"})
    assert not quiet.warning and session(quiet).view(Classroom).exercise.found == {0, 2}


def test_a_teacher_makes_an_exercise_and_its_link_opens_it_elsewhere():
    case = with_options(random_case(3, 4, 3, 3, seed=2), dtype="float64")
    app = opened({"case": case_to_link(case)})
    open_share_panel(app)
    app.toggle(key="exercise_making").set_value(True).run()
    assert session(app).view(Classroom).making == ()
    app.switch_page("pages/exercise.py").run()
    app.selectbox(key="exercise_tensor").set_value("outputs").run()
    app.selectbox(key="exercise_axis_outputs_0").set_value(2).run()
    app.text_input(key="exercise_prompt").set_value("<b>Output 3</b>, first number")
    app.button(key="exercise_hide").click().run()
    assert session(app).view(Classroom).making == (Blank("outputs", (2, 0), "<b>Output 3</b>, first number"),)
    link = app.code[-1].value
    value = current_trace(app).outputs[2, 0].item()
    assert "exercise=" in link and f"{value:.4g}" not in link and app.get("image")
    query = dict(part.split("=", 1) for part in link.split("?", 1)[1].split("&"))

    learner = opened({k: v for k, v in query.items()})
    assert session(learner).view(Classroom).exercise.exercise.blanks[0].prompt == "<b>Output 3</b>, first number"
    learner.switch_page("pages/exercise.py").run()
    assert "<b>Output 3</b>, first number" in [t.value for t in learner.text]  # shown as text
    learner.text_input(key="exercise_answer_0").set_value(repr(value))
    learner.button(key="FormSubmitter:exercise_form_0-Check").click().run()
    assert session(learner).view(Classroom).exercise.found == {0}


def test_the_presenter_view_hides_the_sidebar_until_left():
    app = opened({"present": "1"})
    hides = lambda h: "[data-testid=stSidebar], " in h.proto.body and "display: none" in h.proto.body  # noqa: E731
    assert any(hides(h) for h in app.get("html"))
    app.button(key="leave_present").click().run()
    assert not session(app).view(Classroom).present and "present" not in app.query_params
    assert not any(hides(h) for h in app.get("html"))


def test_the_exercises_page_makes_one_itself_and_names_cells_in_words():
    app = opened({})
    app.switch_page("pages/exercise.py").run()
    assert any("make your own" in c.value for c in app.caption)
    app.button(key="exercise_make_one").click().run()  # on the page: no sidebar switch to find first
    assert session(app).view(Classroom).making == () and app.header[0].value == "Make an exercise"
    tensor = app.selectbox(key="exercise_tensor")
    assert tensor.label == "Number to hide" and "a score, q · k (scores_raw)" in tensor.options
    tensor.set_value("scores_raw").run()
    app.selectbox(key="exercise_axis_scores_raw_0").set_value(1).run()
    app.selectbox(key="exercise_axis_scores_raw_1").set_value(2).run()
    app.button(key="exercise_hide").click().run()
    said = [m.value for m in (*app.warning, *app.markdown)]
    assert any("Hidden in the exercise: the score of query Input 2 on key Input 3 (1 hidden)" in m for m in said), said
    assert any(m.value == "1. the score of query Input 2 on key Input 3" for m in app.markdown)
    assert not any("scores_raw[" in m for m in said)
    app.button(key="exercise_stop_making").click().run()  # back to the list
    assert session(app).view(Classroom).making is None and app.button(key="exercise_make_one")


def test_make_one_and_back_work_with_the_share_panels_switch_drawn():
    """The Share panel's "Make an exercise" switch follows the page's buttons (a widget keeps its own value: drawn
    with the old one, it undid "Make one" in the same run)."""
    app = opened({})
    open_share_panel(app.switch_page("pages/exercise.py"))
    assert not app.toggle(key="exercise_making").value
    app.button(key="exercise_make_one").click().run().run()
    assert session(app).view(Classroom).making == () and app.session_state["exercise_making"]
    app.button(key="exercise_stop_making").click().run().run()
    assert session(app).view(Classroom).making is None and not app.session_state["exercise_making"]


def test_a_cells_words_in_both_languages_with_heads():
    trace = attend(random_case(n=4, seed=1, heads=2, d_k=4, d_v=4))
    assert label(trace, Blank("scores_raw", (1, 0, 2))) == "head 2: the score of query Input 1 on key Input 3"
    assert label(trace, Blank("scores_raw", (1, 0, 2)), "zh") == "头 2：查询 Input 1 对键 Input 3 的分数"
    article_trace = attend(article())
    words = {name: label(article_trace, Blank(name, index)) for name, index in [
        ("keys", (1, 0)), ("weights", (0, 2)), ("weighted", (1, 2, 0)), ("outputs", (2, 1))]}  # fmt: skip
    assert words == {"keys": "number 1 of Input 2's key", "weights": "the weight of query Input 1 on key Input 3",
                     "weighted": "number 1 of key Input 2's weighted value for query Input 3",
                     "outputs": "number 2 of output Input 3"}  # fmt: skip
    assert label(article_trace, Blank("outputs", (2, 1)), "zh") == "输出 Input 3 的第 2 个数"
