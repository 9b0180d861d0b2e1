"""The session model without Streamlit: loading, resizing, editing, choosing, links and files, driven directly."""

import math

import pytest
import torch

from attention import attend, case_to_dict, parse_case
from attention.app import session as state
from attention.app.choices import LABELS, Controls
from attention.app.links import open_link
from attention.app.origins import Article, Edited, File, Link, Random, make
from attention.app.session import Session
from attention.base import i18n
from attention.base.case import with_options
from attention.base.files import case_to_link, dump_case
from attention.base.presets import article, random_case
from tests.apptest import ARTICLE_OUTPUTS, MASKED_CASE


@pytest.fixture
def session() -> Session:
    return Session.start()


def test_a_new_session_is_the_article_with_its_rounded_softmax(session):
    assert session.case == article() and session.error is None
    assert session.controls == Controls() and session.controls.use_rounded
    torch.testing.assert_close(attend(session.case).outputs, torch.tensor(ARTICLE_OUTPUTS))


def test_an_edit_changes_the_case_and_a_bad_one_keeps_the_last_valid_case_and_says_where(session):
    session.edit("x", 1, 1, 5.0)
    assert session.case.x[1][1] == 5.0 and session.error is None
    valid = session.case
    session.edit("x", 1, 2, "abc")
    assert session.case == valid  # the last valid case stays
    assert str(session.error) == "x, row 2 (Input 2), column 3: 'abc' is not a number"
    assert session.inputs.x[1][2] == "abc"  # the input as typed is kept, to be fixed
    session.edit("w_value", 0, 0, 4.0)  # another edit while one cell is wrong: kept, still named
    assert session.inputs.w_value[0][0] == 4.0 and "column 3" in str(session.error)
    session.edit("x", 1, 2, 1.0)
    assert session.error is None and session.case.w_value[0][0] == 4.0 and session.case.x[1][1] == 5.0


@pytest.mark.parametrize(("row", "column"), [(3, 0), (0, 4), (-1, 0), (0, -1)])
def test_an_edit_of_a_cell_the_matrix_does_not_have_changes_nothing(session, row, column):
    before = session.inputs
    session.edit("x", row, column, 9.0)
    assert session.inputs is before and session.error is None


def test_a_forged_value_is_kept_as_its_text_and_refused(session):
    session.edit("x", 0, 0, [1, 2])
    assert session.inputs.x[0][0] == "[1, 2]" and "'[1, 2]' is not a number" in str(session.error)


def test_a_label_edit_relabels_and_a_repeated_one_is_refused(session):
    session.relabel(2, "cat")
    assert session.case.tokens == ("Input 1", "Input 2", "cat")
    session.relabel(0, "cat")
    assert "'cat' appears twice" in str(session.error) and session.case.tokens[0] == "Input 1"


def test_new_options_are_checked_alone(session, monkeypatch):
    calls = []
    monkeypatch.setattr(state, "parse_case", lambda c: calls.append(1) or parse_case(c))
    make.choose(session, temperature=0.5, use_rounded=False, scale="sqrt_dk", mask="causal")
    assert not calls
    o = session.case.options
    assert (o.temperature, o.weights_override, o.scale, o.mask) == (0.5, None, "sqrt_dk", "causal")
    make.choose(session, heads=4)  # typed: d_k = 3 does not divide by 4
    assert "Heads: 4 heads cannot split the 3 columns" in str(session.error)
    assert session.case.options.heads == 1 and not calls
    session.edit("x", 0, 0, 2.0)  # a number: the matrices are checked again
    assert calls


def test_a_resize_keeps_the_numbers_and_drops_the_matrices_that_no_longer_fit(session):
    session.edit("x", 1, 1, 5.0)
    generation = session.generation
    make.choose(session, n=4)
    assert session.case.n == 4 and session.case.x[:3] == ((1, 0, 1, 0), (0, 5.0, 0, 2), (1, 1, 1, 1))
    assert session.case.x[3] == (0, 0, 0, 0) and session.case.tokens[3] == "Input 4"
    assert session.inputs.rounded is None and not session.controls.use_rounded  # the 3×3 rounded weights
    assert session.generation == generation + 1  # editors made for the old grids are stale
    make.choose(session, fill="random", seed=7, d_v=5)
    assert session.case.d_v == 5 and session.case.w_value[0][:3] == article().w_value[0]
    assert any(v != 0 for row in session.case.w_value for v in row[3:])  # new cells: seeded random numbers


def test_presets_load_and_reset_drops_edits(session):
    make.choose(session, n=5)
    make.choose(session, preset="random")
    random5 = random_case(5, 4, 3, 3, seed=0)
    assert session.case == random5
    make.choose(session, seed=3)  # a new seed: new random numbers
    assert session.case == random_case(5, 4, 3, 3, seed=3)
    session.edit("x", 0, 0, 9.0)
    make.reset(session)
    assert session.case == random_case(5, 4, 3, 3, seed=3)
    make.choose(session, preset="article")
    assert session.case == article()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("n", 5000),
        ("n", 0),
        ("n", 3.5),
        ("d_k", True),
        ("heads", 10**9),
        ("seed", -1),
        ("preset", "evil"),
        ("scale", "cube"),
        ("temperature", math.inf),
        ("temperature", 0.0),
        ("use_rounded", "yes"),
        ("mask", "own"),
        ("device", "javascript:alert(1)"),
        ("dtype", "int8"),
    ],
)
def test_a_value_no_widget_can_hold_is_refused_with_a_notice(session, name, value):
    make.choose(session, **{name: value})
    assert session.controls == Controls() and session.case == article()
    shown = i18n.text("en", f"sidebar.{LABELS.get(name, name)}")  # the widget's label, not its key (use_rounded)
    assert len(session.notices) == 1 and session.notices[0].startswith(f"{shown}: ")


def test_a_link_restores_case_step_and_language_and_bad_parts_are_refused(session):
    case = with_options(random_case(4, 3, 2, 2, seed=1), temperature=2.0)
    open_link(session, {"case": case_to_link(case), "step": "6", "lang": "zh"})
    assert (session.case, session.step, session.lang, session.notices) == (case, "weighted", "zh", [])  # an old 6
    assert session.controls.temperature == 2.0 and session.controls.n == 4
    fresh = Session.start()
    open_link(fresh, {"case": "garbage", "step": "9", "lang": "xx"})
    assert fresh.case == article() and fresh.step == "inputs" and fresh.lang == "en"
    # the case and the language first (session.open_origin), then each capability's part (the walkthrough's step)
    assert [n.key for n in fresh.notices] == ["notice.link_refused", "notice.bad_lang", "notice.bad_step"]


def test_a_case_with_a_mask_offers_it_as_custom(session):
    session.load(parse_case(MASKED_CASE))
    assert session.controls.mask == "custom" and session.inputs.mask == ((1, 0, 0), (1, 1, 0), (0, 0, 0))
    make.choose(session, mask="causal")
    assert session.case.options.mask == "causal"
    make.choose(session, mask="custom")
    assert session.case.options.mask == parse_case(MASKED_CASE).options.mask


def test_a_file_opens_or_changes_nothing(session):
    edited = parse_case({**case_to_dict(article()), "x": [[1, 0, 1, 0], [0, 5, 0, 2], [1, 1, 1, 1]], "options": {}})
    make.import_file(session, "mine.json", dump_case(edited).encode())
    assert session.case == edited and session.notices[-1] == "Opened mine.json."
    make.import_file(session, "x" * 500 + ".json", b"{}")
    assert session.case == edited
    assert session.notices[-1].startswith("x" * 59 + "… was not opened, nothing changed: format: must be")


def test_a_case_for_an_absent_device_runs_on_the_cpu_with_a_notice(session):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    session.load(with_options(article(), device="cuda"))
    assert session.controls.device == "cpu" and session.case.options.device == "cpu"
    assert "not available here" in session.notices[0]


def test_w_out_comes_and_goes(session):
    session.use_w_out(True)
    assert session.case.options.w_out == ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    session.edit("w_out", 0, 1, 2.0)
    assert session.case.options.w_out[0] == (1, 2.0, 0)
    session.use_w_out(False)
    assert session.case.options.w_out is None


def test_the_step_stays_within_the_walkthrough_by_name(session):
    session.go_to("repeat", by=3)
    assert session.step == "repeat"
    session.go_to("inputs", by=-1)
    assert session.step == "inputs"
    session.go_to("repeat", by=1, wrap=True)  # the player: after the last, the first
    assert session.step == "inputs"
    session.go_to("rope")  # a step the article lacks: the step it is part of
    assert session.step == "qkv"
    open_link(session, {"step": "scores"})
    assert session.step == "scores" and not session.notices
    session.load(random_case(3, 4, 4, 4, seed=1, rope_base=100.0))
    session.go_to("qkv", by=1)
    assert session.step == "rope"


def test_the_rounded_softmax_is_used_only_where_it_fits_and_one_step_leads_back(session):
    make.choose(session, mask="causal")  # the rounded weights let query 1 see keys 2 and 3: no longer fit
    assert session.case.options.weights_override is None and session.controls.use_rounded
    assert attend(session.case).outputs[0].tolist() == [1.0, 2.0, 3.0]  # query 1 sees only itself: v₁
    assert "off by up to 1" in session.rounding
    make.back_to_article(session)
    assert session.case == article() and session.rounding is None and session.controls.mask == "none"
    session.edit("x", 1, 1, 2.1)  # a small change: the rounding still fits, and the outputs move
    assert session.case.options.weights_override is not None and session.rounding is None
    make.choose(session, scale="sqrt_dk")
    assert session.case.options.weights_override is None and "exact softmax is used" in session.rounding


def test_any_number_of_heads_works_in_one_step_from_the_article(session):
    make.choose(session, heads=3)
    assert session.error is None and session.case.options.heads == 3
    assert session.case.options.weights_override is None and "3 heads" in session.rounding
    make.choose(session, heads=1)
    assert session.case == article() and session.rounding is None


def test_a_loaded_case_with_rope_and_grouped_heads_keeps_them_through_edits_and_a_link(session):
    """RoPE and grouped key/value heads (a real model's head, attention/models/) have no widget: a loaded case
    keeps them through an edit, a new option and a link, and an edit's outputs follow."""
    case = random_case(5, 6, 8, 6, seed=2, heads=4, kv_heads=2, rope_base=100.0, positions=[3, 4, 5, 6, 7])
    session.load(case)
    assert session.case == case and session.error is None
    session.edit("x", 1, 2, 9.5)
    make.choose(session, temperature=0.5)
    o = session.case.options
    assert (o.rope_base, o.positions, o.kv_heads, o.temperature) == (100.0, (3, 4, 5, 6, 7), 2, 0.5)
    assert not torch.equal(attend(session.case).outputs, attend(case).outputs)
    linked = Session.start()
    open_link(linked, {"case": case_to_link(session.case)})
    assert linked.case == session.case
    session.load(random_case(5, 6, 8, 6, seed=2, rope_base=100.0, positions=[3, 4, 5, 6, 7]))  # one head
    make.choose(session, n=4)  # fewer tokens: the positions no longer fit and are dropped; RoPE stays
    assert session.error is None
    assert (session.case.options.rope_base, session.case.options.positions) == (100.0, None)


def test_the_origin_says_where_the_case_came_from_and_an_edit_makes_it_edited_from_it(session):
    assert isinstance(session.origin, Article) and session.origin.link() == {} and session.origin.title() is None
    session.edit("x", 1, 1, 5.0)
    edited = session.origin
    assert isinstance(edited, Edited) and edited.source is session.source and edited.link() is None
    session.edit("x", 1, 1, 2.0)  # the article's number again: its own case, as it made it
    assert session.origin is session.source
    make.choose(session, preset="random", seed=3)
    assert isinstance(session.origin, Random) and session.origin.seed == 3 and session.origin.link() is None
    make.import_file(session, "mine.json", dump_case(random_case(seed=4)).encode())
    assert isinstance(session.origin, File) and session.origin.name == "mine.json"
    open_link(session, {"case": case_to_link(random_case(seed=5))})
    assert isinstance(session.origin, Link) and session.origin.case == random_case(seed=5)
    assert "# Step 1" in session.origin.script(session.case) and session.origin.check(attend(session.case)) is None
