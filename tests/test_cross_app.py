"""Cross-attention in the app: the sidebar makes a cross case from a person's numbers (x_kv's rows zeros or seeded
random numbers, labelled Source 1, …) and turning it off gives them back (x_kv kept to come back), options that need
one sentence are messages that keep the last valid case, x_kv and its token labels are edited cell by cell (a bad cell
named), a resize keeps it valid, the heads allowed count n × n_kv scores, a link and a case file carry it (version 2;
version 1 files still open), and every page renders one."""

import json
import random

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention.app import grid, heads, links
from attention.app import session as state
from attention.app.choices import Controls, Inputs
from attention.app.origins import make
from attention.app.session import Session
from attention.base import files, presets
from attention.base.case import MAX_N, CaseError, Widths, case_to_dict, head_counts, parse_case, with_options
from attention.base.files import case_to_link
from attention.exercise.compute import Blank
from attention.exercise.state import label
from attention.forward.compute import attend
from attention.forward.oracle import check
from tests.apptest import APP, MASKED_CASE, PAGES, component_data, current_trace, edit, linked, rendered, session
from tests.cases import with_keys_sentence

ARTICLE = presets.article()
EXACT = with_options(ARTICLE, weights_override=None)  # cross-attention's: the article's rounded softmax is for its x
RANDOM = presets.random_case(3, 4, 4, 4, seed=1, heads=2)
CROSS = parse_case(with_keys_sentence(case_to_dict(RANDOM), random.Random(0), 5))  # 3 target tokens, 5 source


def crossed(s: Session, n_kv: int = 4, **controls) -> Session:
    make.choose(s, **controls)
    make.choose(s, n_kv=n_kv)
    assert s.error is None and s.case.cross, (s.error, s.notices)
    return s


def test_the_sidebar_makes_a_cross_case_from_your_numbers_and_turning_it_off_gives_them_back():
    s = crossed(Session.start())
    c = s.case
    assert (c.n, c.n_kv, c.tokens_kv) == (3, 4, ("Source 1", "Source 2", "Source 3", "Source 4"))
    assert c.x_kv == ((0.0,) * 4,) * 4 and (c.x, c.w_key) == (EXACT.x, EXACT.w_key)  # the person's own numbers
    assert c.options.weights_override is None and s.controls.use_rounded  # the article's softmax waits, asked for
    assert attend(c)["scores"].shape == (3, 4) and check(attend(c)).agrees
    s.edit("x_kv", 1, 2, 1.5)
    s.relabel(0, "le", "tokens_kv")
    make.choose(s, n_kv=0)  # off: self-attention on the same numbers, the article's rounded softmax back
    assert s.case == ARTICLE and s.controls.n_kv == 0 and not s.notices
    make.choose(s, n_kv=4)  # on again: x_kv's rows and labels as they were left
    assert s.case.x_kv[1][2] == 1.5 and s.case.tokens_kv[0] == "le" and s.case.x_kv[0] == (0.0,) * 4
    make.choose(s, n_kv=2)  # fewer source tokens: the first rows kept
    assert s.case.x_kv == ((0.0,) * 4, (0.0, 0.0, 1.5, 0.0)) and s.case.tokens_kv == ("le", "Source 2")


def test_new_source_rows_are_seeded_random_numbers_of_their_own_when_the_fill_says_random():
    s = crossed(Session.start(), n_kv=3, use_rounded=False, fill="random", seed=7)
    assert [list(row) for row in s.case.x_kv] == presets.source_rows(None, 3, 4, "random", 7)
    assert any(v != 0 for row in s.case.x_kv for v in row) and s.case.x_kv != s.case.x
    random_x = presets.random_case(3, 4, 3, 3, seed=7).x  # the random preset's x of the same seed: not repeated
    assert s.case.x_kv != random_x and crossed(Session.start(), 3, fill="random", seed=8).case.x_kv != s.case.x_kv


@pytest.mark.parametrize(
    ("option", "said"),
    [({"mask": "causal"}, "the causal mask"), ({"window": 2}, "the sliding window"), ({"alibi": True}, "ALiBi"),
     ({"relative": True}, "T5's relative bias"), ({"rope": True}, "RoPE")],
)  # fmt: skip
def test_an_option_that_needs_one_sentence_keeps_cross_attention_off_and_says_which(option, said):
    s = Session.start()
    make.choose(s, d_k=4, use_rounded=False)  # a head as wide as RoPE can turn
    make.choose(s, **option)
    before = s.case
    make.choose(s, n_kv=3)
    assert s.controls.n_kv == 0 and s.case == before and s.error is None and s.inputs.x_kv is None
    assert s.notices[-1].startswith("Cross-attention was not turned on.") and f"sentence: {said}. Turn" in s.notices[-1]


@pytest.mark.parametrize("option", [{"mask": "causal"}, {"window": 2}, {"alibi": True}, {"relative": True},
                                    {"rope": True}])  # fmt: skip
def test_while_cross_attention_is_on_an_option_that_needs_one_sentence_is_refused(option):
    s = crossed(Session.start())
    before, controls = s.case, s.controls
    make.choose(s, **option)
    assert s.case == before and s.controls == controls and s.error is None
    assert s.notices[-1].startswith("Not turned on while cross-attention is on: ")


def test_several_at_once_are_all_named():
    s = Session.start()
    make.choose(s, mask="causal")
    make.choose(s, rope=True)
    make.choose(s, n_kv=2)
    assert "sentence: the causal mask, RoPE. Turn them off first" in s.notices[-1]


@pytest.mark.parametrize("value", [-1, 2.5, True, "3", MAX_N + 1])
def test_source_rows_no_widget_can_hold_are_refused_naming_the_widget(value):
    s = Session.start()
    make.choose(s, n_kv=value)
    assert s.controls.n_kv == 0 and s.case == ARTICLE
    assert len(s.notices) == 1 and s.notices[0].startswith("n_kv · source tokens (0: off): ")


def test_x_kv_is_edited_cell_by_cell_and_a_bad_cell_is_named_with_its_token():
    s = crossed(Session.start())
    s.edit("x_kv", 3, 0, "-2.5")
    assert s.case.x_kv[3][0] == -2.5 and s.error is None
    s.edit("x_kv", 1, 2, "abc")
    assert str(s.error) == "x_kv, row 2 (Source 2), column 3: 'abc' is not a number"
    assert state.place(s.error) == ("x_kv", 1, 2) and s.case.x_kv[3][0] == -2.5  # the last valid case
    shown = grid.data(s, "x_kv")
    assert shown["error_at"] == [1, 2] and "not a number" in shown["message"] and not grid.data(s, "x")["message"]
    s.edit("x_kv", 1, 2, "1,5")  # a decimal comma: said so, as in x
    assert str(s.error).endswith("write the decimal point as a full stop (.)")
    s.edit("x_kv", 1, 2, "1.5")
    assert s.error is None and s.case.x_kv[1][2] == 1.5


def test_x_kvs_token_labels_are_its_own_and_a_bad_one_is_named():
    s = crossed(Session.start(), n_kv=2)
    shown = grid.data(s, "x_kv")
    assert shown["labels"] == ["Source 1", "Source 2"] and shown["row_tokens"] == ["Source 1", "Source 2"]
    assert shown["text"]["cell"] == "x_kv, row {row} ({token}), column {column}"
    s.relabel(1, "chat", "tokens_kv")
    assert s.case.tokens_kv == ("Source 1", "chat") and s.case.tokens == ARTICLE.tokens  # x's are its own
    s.relabel(1, "Source 1", "tokens_kv")
    assert str(s.error) == "key label 2: 'Source 1' appears twice; labels name the rows and must differ"
    assert state.place(s.error) == ("tokens_kv", 1, None) and grid.data(s, "x_kv")["error_at"] == [1, -1]
    assert s.case.tokens_kv == ("Source 1", "chat") and not grid.data(s, "x")["message"]
    s.relabel(1, "Input 1", "tokens_kv")  # x's label in the other sentence: allowed
    assert s.error is None and s.case.tokens_kv == ("Source 1", "Input 1")


def test_a_custom_mask_is_n_by_n_kv_with_the_source_tokens_across():
    s = crossed(Session.start(), n_kv=4, use_rounded=False)
    make.choose(s, mask="custom")
    assert s.case.options.mask == ((1.0,) * 4,) * 3  # every key, to hide some by hand
    shown = grid.data(s, "mask")
    assert shown["column_tokens"] == list(s.case.tokens_kv) and shown["row_tokens"] == list(ARTICLE.tokens)
    s.edit("mask", 0, 3, 0)
    assert attend(s.case)["weights"][0, 3] == 0 and check(attend(s.case)).agrees
    make.choose(s, n_kv=2)  # other keys: the mask made again for them
    assert s.controls.mask == "custom" and s.case.options.mask == ((1.0,) * 2,) * 3
    make.choose(s, n_kv=0)  # self-attention: it starts from the causal one again
    assert s.case.options.mask == ((1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (1.0, 1.0, 1.0))


@pytest.mark.parametrize("sizes", [{"d_in": 6}, {"d_in": 2}, {"n": 5}, {"n": 2}, {"d_k": 4, "d_v": 2}])
def test_a_resize_keeps_a_cross_case_valid_n_resizing_x_alone(sizes):
    s = crossed(Session.start(), n_kv=4, use_rounded=False, fill="random")
    s.edit("x_kv", 0, 0, 9.0)
    make.choose(s, **sizes)
    c = s.case
    assert s.error is None and c.cross and check(attend(c)).agrees, s.error
    assert (c.n, c.n_kv, c.d_in) == (sizes.get("n", 3), 4, sizes.get("d_in", 4)) and len(c.x_kv[0]) == c.d_in
    assert c.x_kv[0][0] == 9.0 and c.tokens_kv == ("Source 1", "Source 2", "Source 3", "Source 4")
    resized = presets.resize(CROSS, 2, 6, 4, 4, n_kv=3)  # the core's resize: x_kv follows d_in, and n_kv if given
    assert (resized.n, resized.n_kv, resized.d_in, resized.x_kv[0][:4]) == (2, 3, 6, CROSS.x_kv[0])
    assert presets.resize(CROSS, 4, 4, 4, 4).n_kv == 5  # n resizes x alone


def test_the_heads_allowed_count_n_times_n_kv_scores():
    inputs = Inputs.of(ARTICLE)
    wide = Controls(n=MAX_N, d_k=64, d_v=64)
    assert heads.head_choices(wide, inputs)[-1] == 16  # 1024 × 1024 scores a head: 16 heads at most
    assert heads.head_choices(Controls(n=MAX_N, d_k=64, d_v=64, n_kv=2), inputs)[-1] == 64  # 1024 × 2: any count
    assert heads.head_choices(Controls(n=MAX_N, d_k=64, d_v=64, n_kv=2), inputs) == head_counts(
        MAX_N, Widths(64, 64, 64), n_kv=2
    )


def test_a_case_file_is_version_2_reads_back_and_opens_and_a_version_1_file_still_opens():
    text = files.dump_case(CROSS)
    assert json.loads(text)["format"] == "attention-case/2" and files.load_case(text.encode()) == CROSS
    s = Session.start()
    make.import_file(s, "cross.json", text.encode())
    assert s.case == CROSS and s.controls.n_kv == 5 and s.inputs.tokens_kv == CROSS.tokens_kv
    assert s.notices[-1] == "Opened cross.json."
    make.import_file(s, "old.json", json.dumps(MASKED_CASE).encode())  # attention-case/1
    assert s.case.tokens == ("the", "cat", "sat") and not s.case.cross and s.controls.n_kv == 0
    bad = json.loads(text) | {"format": "attention-case/1"}  # x_kv came with version 2
    make.import_file(s, "bad.json", json.dumps(bad).encode())
    assert "a case with x_kv (cross-attention) is attention-case/2" in s.notices[-1] and not s.case.cross


def test_a_link_carries_a_cross_case_and_opens_with_the_sidebar_showing_it():
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params["case"] = case_to_link(CROSS)
    app.run()
    assert current_trace(app).case == CROSS and session(app).controls.n_kv == 5
    assert app.toggle(key="cross").value and app.number_input(key="n_kv").value == 5
    assert links.files.case_from_link(links.link_token(session(app))) == CROSS  # shared again: the same numbers
    app.switch_page("pages/inputs.py").run()
    assert not app.exception
    x_kv = component_data(next(e for e in app.get("bidi_component") if e.key.startswith("editor_x_kv")))
    assert x_kv["labels"] == list(CROSS.tokens_kv) and x_kv["shape"] == [5, 4]


def test_the_sidebar_switch_makes_it_and_the_inputs_page_edits_it(at):
    at.switch_page("pages/inputs.py").run()
    at.toggle(key="cross").set_value(True).run()
    s = session(at)
    assert not at.exception and s.error is None and s.case.n_kv == 4 and at.number_input(key="n_kv").value == 4
    assert any("Queries from x (3 tokens), keys and values from x_kv (4 tokens)" in c.value for c in at.caption)
    assert at.selectbox(key="mask").options == ["none", "custom"]  # no causal mask across two sentences
    assert at.toggle(key="rope").disabled and at.toggle(key="alibi").disabled and at.number_input(key="window").disabled
    x_kv = component_data(next(e for e in at.get("bidi_component") if e.key.startswith("editor_x_kv")))
    assert x_kv["title"].startswith("x_kv · the source sentence") and x_kv["labels"][0] == "Source 1"
    x = component_data(next(e for e in at.get("bidi_component") if e.key.startswith("editor_x_")))
    assert x["title"].startswith("x · the target sentence")
    edit(at, "x_kv", 1, "2", "3")
    edit(at, "x_kv", 2, "token", "chat")
    assert current_trace(at).case.x_kv[1][1] == 3.0 and current_trace(at).case.tokens_kv[2] == "chat"
    edit(at, "x_kv", 3, "1", "x")
    assert any("x_kv, row 4 (Source 4), column 1" in e.value for e in at.error) and not at.exception
    at.number_input(key="n_kv").set_value(2).run()
    assert session(at).case.x_kv == ((0.0,) * 4, (0.0, 3.0, 0.0, 0.0))  # the bad cell's row went; the edit stays
    at.toggle(key="cross").set_value(False).run()
    assert session(at).case == ARTICLE and not at.toggle(key="cross").value
    at.toggle(key="cross").set_value(True).run()  # back with the two rows it had
    assert session(at).case.x_kv == ((0.0,) * 4, (0.0, 3.0, 0.0, 0.0)) and at.number_input(key="n_kv").value == 2


def test_the_sidebar_switch_with_a_causal_mask_says_why_and_stays_off(at):
    at.selectbox(key="mask").set_value("causal").run()
    at.toggle(key="cross").set_value(True).run()
    assert not at.toggle(key="cross").value and session(at).controls.n_kv == 0 and not at.exception
    assert any("Cross-attention was not turned on." in w.value for w in at.warning)


@pytest.fixture(scope="module")
def cross_app():
    """The app opened from a link to a 2-head cross case: 3 target tokens, 5 source tokens."""
    return linked(CROSS, timeout=90)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_a_cross_case(cross_app, page):
    assert current_trace(rendered(cross_app, page)).case == CROSS


def test_a_cross_case_in_the_session_without_a_check_of_its_numbers_keeps_them():
    s = Session.start()
    s.load(CROSS)
    s.choose(temperature=2.0)  # options checked alone: x_kv stays
    assert s.case == with_options(CROSS, temperature=2.0)
    s.choose(d_in=5)
    assert s.case.cross and s.case.d_in == 5 and torch.equal(torch.tensor(s.case.x_kv)[:, :4], torch.tensor(CROSS.x_kv))
    with pytest.raises(CaseError):  # (the core's own check, which the app relies on)
        with_options(CROSS, mask="causal")


def test_a_models_bias_column_of_ones_is_in_the_new_source_rows_too():
    s = Session.start()
    numbers = case_to_dict(EXACT)
    numbers["options"] |= {"bias": True}  # x's last column: ones, which bring in the weights' last row
    s.load(parse_case(numbers | {"x": [[1, 0, 1, 1], [0, 2, 0, 1], [1, 1, 1, 1]]}))
    make.choose(s, n_kv=2)
    assert s.error is None and [row[-1] for row in s.case.x_kv] == [1.0, 1.0] and s.case.x_kv[0][:3] == (0.0,) * 3
    make.choose(s, n_kv=0)
    make.choose(s, n_kv=3)  # the rows set aside come back as they were; the new one gets its one
    assert [row[-1] for row in s.case.x_kv] == [1.0, 1.0, 1.0]


def test_the_variants_page_turns_off_the_one_sentence_switches_for_a_cross_case(cross_app):
    """The window, ALiBi, T5's bias, partial rotary and NoPE place a key by its distance within one sentence: their
    switches are disabled, with the reason; the softcap, sinks and the latent still apply."""
    app = cross_app.switch_page("pages/variants.py").run()
    disabled = {v: app.toggle(key=f"variants_{v}").disabled for v in ("window", "alibi", "nope", "softcap", "sinks")}
    assert disabled == {"window": True, "alibi": True, "nope": True, "softcap": False, "sinks": False}
    assert any("Cross-attention is on" in c.value for c in app.caption)


def test_an_exercise_names_a_source_tokens_key_and_score_in_words():
    """A blank in a cross case's keys or scores is named by the source sentence's token (x_kv's labels)."""
    trace, source, target = attend(CROSS), CROSS.tokens_kv, CROSS.tokens
    assert label(trace, Blank("keys", (0, 1, 0))) == f"head 1: number 1 of {source[1]}'s key"
    assert (
        label(trace, Blank("scores", (1, 0, 4))) == f"head 2: the scaled score of query {target[0]} on key {source[4]}"
    )
