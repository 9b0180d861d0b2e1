"""The matrix editor's Python side: typed text in, case out; bad text kept and named; the state a browser (or a forged
client) sends; the data the editor is drawn from; big grids as an image with a picked cell; clicks on heatmaps."""

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention import attend
from attention.app import editors, typed
from attention.app import session as state
from attention.app.session import Session
from attention.base.presets import article
from tests.apptest import ARTICLE_OUTPUTS, charts, component_data, current_trace, edit, forge, session

PLACE = "x, row 2 (Input 2), column 3"


@pytest.mark.parametrize(
    ("text", "number"),
    [("-0.5", -0.5), (".5", 0.5), ("1e5", 1e5), ("1E-3", 1e-3), ("+2", 2.0), (" 2 ", 2.0), ("5.", 5.0), ("0.1", 0.1)],
)
def test_numbers_as_people_write_them_are_taken_exactly(text, number):
    s = Session.start()
    s.edit("x", 1, 2, text)
    assert s.error is None and s.case.x[1][2] == number and type(s.case.x[1][2]) is float
    assert s.inputs.x[1][2] == number  # the number is what the session holds; the editor keeps what was typed


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1e400", "'1e400' is larger than the limit 1e+06 in magnitude"),
        ("2000000", "'2000000' is larger than the limit 1e+06 in magnitude"),
        ("-1e7", "'-1e7' is larger than the limit 1e+06 in magnitude"),
        ("abc", "'abc' is not a number"),
        ("", "is empty"),
        ("   ", "is empty"),
        ("−1", "'−1' is not a number: type the minus sign as - (the hyphen key)"),
        ("1,5", "'1,5' is not a number: write the decimal point as a full stop (.)"),
        ("1 000", "'1 000' is not a number"),
        ("inf", "'inf' is not a number"),
        ("nan", "'nan' is not a number"),
        ("1_0", "'1_0' is not a number"),  # float() takes it; a person never means it
        ("0x10", "'0x10' is not a number"),
    ],
)
def test_anything_else_stays_as_typed_with_one_message_naming_the_cell(text, problem):
    s = Session.start()
    s.edit("w_value", 0, 0, 4.0)
    s.edit("x", 1, 2, text)
    assert str(s.error) == f"{PLACE}: {problem}"
    assert s.inputs.x[1][2] == text  # kept exactly as typed, to be fixed
    assert s.case.w_value[0][0] == 4.0 and s.case.x[1][2] == 0  # the last valid case, with the edit before it
    assert state.place(s.error) == ("x", 1, 2)


def test_the_problem_of_a_text_reads_as_typed():
    assert typed.number("1E-3") == 1e-3 and typed.number("1e400") == float("inf") and typed.number("1,5") is None
    assert typed.cell("1e400") == "1e400" and typed.cell(" -0.5 ") == -0.5 and typed.cell(3) == 3
    assert [typed.shown(v) for v in (2.0, -0.0, 0.1, 1e-7, 1e16, None, "abc", 3)] == [
        "2", "-0", "0.1", "1e-07", "1e+16", "", "abc", "3",
    ]  # fmt: skip


def test_an_editors_state_lands_whole_and_checked_once_and_again_changes_nothing(monkeypatch):
    s, calls = Session.start(), []
    real = state.parse_case
    monkeypatch.setattr(state, "parse_case", lambda c: calls.append(1) or real(c))
    value = {"cells": {"1,1": "5", "2,0": "-1", "0,3": ".5"}, "labels": {"2": "cat"}}
    editors.apply(s, "x", value)
    assert s.case.x[1][1] == 5 and s.case.x[2][0] == -1 and s.case.x[0][3] == 0.5
    assert s.case.tokens == ("Input 1", "Input 2", "cat")
    assert len(calls) == 2  # one check for the cells, one for the label
    before = s.inputs
    editors.apply(s, "x", value)  # every run hands the whole state again: nothing new, nothing checked
    assert s.inputs is before and len(calls) == 2


@pytest.mark.parametrize(
    "value",
    [
        None,
        "1,1",
        [1, 2],
        {"cells": "5"},
        {"cells": {"1": "5", "a,b": "5", "-1,0": "5", "²,1": "5", "1,1,1": "5", " 1,1": "5"}},
        {"cells": {"99,0": "5", "0,99": "5", "99999,1": "5"}},  # cells x does not have
        {"labels": {"-1": "a", "9": "b", "x": "c"}},
    ],
)
def test_a_forged_state_changes_nothing(value):
    s = Session.start()
    editors.apply(s, "x", value)
    assert s.case == article() and s.error is None


@pytest.mark.parametrize(("sent", "kept"), [([1, 2], "[1, 2]"), ({"a": 1}, "{'a': 1}"), (True, True)])
def test_a_forged_cell_value_is_kept_as_its_text_and_refused(sent, kept):
    s = Session.start()
    editors.apply(s, "x", {"cells": {"0,1": sent}})  # a 0: True would equal the 1 beside it
    assert s.inputs.x[0][1] == kept and s.error is not None and s.case == article()


def test_token_labels_come_only_from_xs_editor():
    s = Session.start()
    editors.apply(s, "w_query", {"labels": {"0": "cat"}, "cells": {"0,0": "7"}})
    assert s.case.tokens == article().tokens and s.case.w_query[0][0] == 7


def test_a_custom_mask_starts_causal_and_is_edited_cell_by_cell():
    s = Session.start()
    s.choose(use_rounded=False, mask="custom")
    assert s.inputs.mask == ((1, 0, 0), (1, 1, 0), (1, 1, 1)) and s.case.options.mask == s.inputs.mask
    s.edit("mask", 0, 1, "1")
    assert s.case.options.mask[0] == (1, 1, 0)
    s.edit("mask", 2, 2, "2")
    assert str(s.error) == "Mask, row 3 (Input 3), column 3: 2.0 must be 0 (blocked) or 1 (may attend)"
    assert state.place(s.error) == ("mask", 2, 2)
    s.choose(n=4)  # a new n: the mask no longer fits, and is dropped
    assert s.controls.mask == "none" and s.inputs.mask is None


def test_the_rounded_weights_are_edited_and_a_negative_one_is_named():
    s = Session.start()
    s.edit("rounded", 0, 1, "0.25")
    assert s.case.options.weights_override[0] == (0, 0.25, 0.5)
    s.edit("rounded", 1, 0, "-0.5")
    assert str(s.error).startswith("Rounded softmax, row 2 (Input 2), column 1: -0.5 is negative")
    assert state.place(s.error) == ("rounded", 1, 0)


def test_the_place_of_an_error_that_names_no_cell_is_none():
    s = Session.start()
    s.relabel(0, "")
    assert state.place(s.error) == ("tokens", 0, None)
    s.relabel(0, "Input 1")
    s.choose(heads=4)  # typed (not a step of −, +): refused, named in words
    assert s.error is not None and state.place(s.error) is None
    assert state.place(None) is None


# In the app (AppTest: the editor's data as it is drawn, and its state as the browser sends it)


def editor(app: AppTest, key: str) -> dict:
    """The data an editor (or a clickable chart's component) was drawn with in the last run."""
    found = [e for e in app.get("bidi_component") if e.key == key]
    assert found, f"no component {key}"
    return component_data(found[0])


def test_the_editor_is_drawn_from_the_inputs_and_shows_the_message_of_its_own_cell(at):
    at.switch_page("pages/inputs.py").run()
    x = editor(at, editors.editor_key(session(at), "x"))
    assert x["cells"] == [["1", "0", "1", "0"], ["0", "2", "0", "2"], ["1", "1", "1", "1"]]
    assert x["labels"] == ["Input 1", "Input 2", "Input 3"] and x["shape"] == [3, 4] and x["kind"] == "real"
    assert x["text"]["cell"] == "x, row {row} ({token}), column {column}" and x["message"] == ""
    edit(at, "x", 1, "3", "1e400")
    x = editor(at, editors.editor_key(session(at), "x"))
    assert x["cells"][1][2] == "1e400" and x["invalid"] == [[1, 2]] and x["error_at"] == [1, 2]
    assert x["message"] == f"{PLACE}: '1e400' is larger than the limit 1e+06 in magnitude"
    w_key = editor(at, editors.editor_key(session(at), "w_key"))
    assert w_key["message"] == "" and w_key["invalid"] == [] and w_key["labels"] is None
    rounded = editor(at, editors.editor_key(session(at), "rounded"))
    assert rounded["name"] == "Rounded softmax" and rounded["kind"] == "nonnegative"  # as the sidebar names it
    assert rounded["row_names"] == rounded["column_names"] == ["Input 1", "Input 2", "Input 3"]


def test_an_edit_sent_as_the_browser_sends_it_changes_every_step(at):
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 1, "2", "5")
    edit(at, "w_value", 2, "3", "+4")
    typed_in = Session.start()  # the same edits given to the session model directly, by its rule for the softmax
    typed_in.edit("x", 1, 1, 5.0)
    typed_in.edit("w_value", 2, 2, 4.0)
    assert typed_in.case.x[1][1] == 5.0 and typed_in.case.w_value[2][2] == 4.0
    np.testing.assert_allclose(charts(at)["outputs"], attend(typed_in.case).outputs, atol=1e-5)
    at.switch_page("pages/walkthrough.py").run()  # another page, and back: the edits are the session's
    at.switch_page("pages/inputs.py").run()
    assert editor(at, editors.editor_key(session(at), "x"))["cells"][1][1] == "5"
    assert current_trace(at).case.x[1][1] == 5.0


def test_the_mask_editor_comes_with_the_custom_mask(at):
    at.switch_page("pages/inputs.py").run()
    assert not [e for e in at.get("bidi_component") if e.key.startswith("editor_mask")]
    at.selectbox(key="mask").set_value("custom").run()
    mask = editor(at, editors.editor_key(session(at), "mask"))
    assert mask["kind"] == "zero_one" and mask["cells"] == [["1", "0", "0"], ["1", "1", "0"], ["1", "1", "1"]]
    edit(at, "mask", 0, "2", "1")
    assert current_trace(at).case.options.mask[0] == (1, 1, 0)


def test_a_big_grid_is_an_image_with_one_picked_cell_to_edit(at):
    at.number_input(key="d_in").set_value(64).run()
    at.number_input(key="n").set_value(40).run()  # x is 40 × 64 = 2,560 cells: past EDITOR_MAX_CELLS
    at.switch_page("pages/inputs.py").run()
    key = editors.editor_key(session(at), "x")
    x = editor(at, key)
    assert (x["top"], x["left"], x["cells"], x["shape"]) == (0, 0, [["1"]], [40, 64])  # one cell, not 2,560
    assert any("2,560 cells" in c.value for c in at.caption)
    assert at.get("file_uploader")  # a case file, for numbers no one types
    at.session_state[f"chart_{key}_click"] = {"cell": [6, 9]}  # a click on the image, at row 7, column 10
    at.run()
    assert (at.number_input(key=f"{key}_row").value, at.number_input(key=f"{key}_column").value) == (7, 10)
    x = editor(at, key)
    assert (x["top"], x["left"], x["cells"]) == (6, 9, [["0"]])
    edit(at, "x", 6, "10", "3.5")
    assert current_trace(at).case.x[6][9] == 3.5 and editor(at, key)["cells"] == [["3.5"]]


def test_a_click_on_a_walkthrough_heatmap_leads_to_its_explanation(at):
    at.switch_page("pages/walkthrough.py").run()
    at.radio(key="step_picker").set_value("softmax").run()
    at.session_state["chart_weights_click"] = {"cell": [1, 2]}
    at.run()
    assert at.selectbox(key="explain_tensor").value == "weights"  # the Explain page, on that cell
    assert (at.selectbox(key="explain_weights_0").value, at.selectbox(key="explain_weights_1").value) == (1, 2)
    np.testing.assert_allclose(current_trace(at).outputs, ARTICLE_OUTPUTS)


def test_a_forged_editor_state_never_raises(at):
    at.switch_page("pages/inputs.py").run()
    for value in ({"cells": {"0,0": {"a": 1}}}, "garbage", {"cells": {"1,1": float("nan")}}, {"labels": []}):
        forge(at, "x", value)
        assert not at.exception
    np.testing.assert_allclose(charts(at)["outputs"], ARTICLE_OUTPUTS)
