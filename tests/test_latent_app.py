"""Multi-head latent attention (DeepSeek's MLA) in the app: presets.with_latent factors a case's own W_K and W_V
(exact at full rank, the best rank-d_c keys and values below it), the sidebar's latent width makes it and 0 gives the
person's numbers back, a width that cannot be is a message, W_DKV is edited cell by cell (a bad cell named), a resize
keeps the case valid, and a link carries it and opens with it."""

import random

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention.app import editors, grid, links
from attention.app import session as state
from attention.app.origins import make
from attention.app.session import Session
from attention.base import presets
from attention.base.case import CaseError, case_to_dict, parse_case, with_options
from attention.base.files import case_to_link
from attention.forward import steps
from attention.forward.compute import attend
from attention.forward.oracle import check
from tests.apptest import APP, PAGES, component_data, current_trace, edit, linked, rendered, session
from tests.cases import with_latent

ARTICLE = with_options(presets.article(), weights_override=None)  # [W_K | W_V] of rank 4 = d_in
ROTARY = presets.random_case(5, 4, 8, 8, seed=2, heads=2, rope_base=100.0, rope_fraction=0.5)  # d_rot 2 a head


def made(case, d_c: int, decimals=presets.LATENT_DECIMALS) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and values (before heads and RoPE) a latent case's x makes, and the plain case's: float64."""
    latent = presets.with_latent(case, d_c, decimals)
    x = torch.tensor(case.x, dtype=torch.float64)
    c = x @ torch.tensor(latent.options.w_latent, dtype=torch.float64)
    kv = torch.cat([c @ torch.tensor(m, dtype=torch.float64) for m in (latent.w_key, latent.w_value)], dim=1)
    return kv, torch.cat([x @ torch.tensor(m, dtype=torch.float64) for m in (case.w_key, case.w_value)], dim=1)


def test_with_latent_is_exact_at_full_rank_and_the_best_rank_d_c_below_it():
    assert presets.latent_widths(ARTICLE) == (1, 4, 4)
    kv, plain = made(ARTICLE, 4, decimals=None)
    torch.testing.assert_close(kv, plain, rtol=1e-12, atol=1e-12)  # the same keys and values
    kv, plain = made(ARTICLE, 4)
    assert 0 < (kv - plain).abs().max() < 0.02  # but for W_DKV, W_UK and W_UV rounded to 3 decimals
    w = torch.tensor([k + v for k, v in zip(ARTICLE.w_key, ARTICLE.w_value, strict=True)], dtype=torch.float64)
    sigma = torch.linalg.svdvals(w)
    for d_c in (1, 2, 3):  # Eckart–Young: W_DKV (W_UK | W_UV) misses [W_K | W_V] by the singular values left out
        latent = presets.with_latent(ARTICLE, d_c, decimals=None)
        down, up = (torch.tensor(m, dtype=torch.float64) for m in (latent.options.w_latent, latent.w_key))
        up = torch.cat([up, torch.tensor(latent.w_value, dtype=torch.float64)], dim=1)
        off = torch.linalg.matrix_norm(down @ up - w)
        torch.testing.assert_close(off, sigma[d_c:].square().sum().sqrt(), rtol=1e-9, atol=1e-12)
        assert off > 0.1 and (made(ARTICLE, d_c, None)[0] - made(ARTICLE, d_c, None)[1]).abs().max() > 0.01
        assert check(attend(latent)).agrees  # a latent case, its own attention, equals FlexAttention's


def test_with_latent_adds_deepseeks_decoupled_rotary_key_with_partial_rotary():
    low, high, exact = presets.latent_widths(ROTARY)
    assert (low, high) == (3, 6)  # 2 columns for the rotary key, then 1 to min(d_in, 12 unturned columns)
    latent = presets.with_latent(ROTARY, exact, decimals=None)
    w_key = torch.tensor(latent.w_key)
    assert torch.equal(w_key[-2:], torch.tensor([[1.0, 0, 0, 0] * 2, [0, 1.0, 0, 0] * 2]))  # copied into each head
    assert torch.equal(torch.tensor(latent.options.w_latent)[:, -2:], torch.tensor(ROTARY.w_key)[:, :2])
    keys = attend(latent)["keys"]  # (2, n, 4): the first 2 dims of each head are the one rotary key, turned
    assert torch.equal(keys[0, :, :2], keys[1, :, :2])
    plain = attend(ROTARY)["keys"]  # the unturned dims exactly the case's; head 1's turned ones too
    torch.testing.assert_close(keys[:, :, 2:], plain[:, :, 2:], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(keys[0], plain[0], rtol=1e-5, atol=1e-5)
    assert check(attend(latent)).agrees


@pytest.mark.parametrize(("case", "d_c", "said"), [(ARTICLE, 0, "from 1 to 4"), (ARTICLE, 5, "from 1 to 4"),
                                                   (ROTARY, 2, "from 3 to 6: its last 2 columns")])  # fmt: skip
def test_a_latent_width_that_cannot_be_is_a_message_naming_it(case, d_c, said):
    with pytest.raises(CaseError) as bad:
        presets.with_latent(case, d_c)
    assert str(bad.value).startswith("Latent width d_c: must be a whole number ") and said in str(bad.value)


def test_the_latent_width_makes_it_from_your_numbers_and_0_gives_them_back():
    s = Session.start()
    make.choose(s, use_rounded=False, latent=2)
    assert s.error is None and s.controls.latent == 2 and s.case.d_c == 2 and len(s.case.options.w_latent[0]) == 2
    assert s.case == presets.with_latent(ARTICLE, 2) and check(attend(s.case)).agrees
    make.choose(s, latent=4)  # wider: made from the article's numbers again, not from the width-2 latent
    assert s.case == presets.with_latent(ARTICLE, 4)
    make.choose(s, latent=0)
    assert s.case == ARTICLE and s.inputs.w_latent is None and s.inputs.plain is None  # nothing lost


def test_a_width_that_cannot_be_is_a_notice_and_the_case_stays():
    s = Session.start()
    make.choose(s, latent=3)
    before = s.case
    make.choose(s, latent=9)
    assert s.controls.latent == 3 and s.case == before and s.error is None
    assert s.notices[-1].startswith("Latent width 9 was not made (Latent width d_c: must be a whole number from 1")


@pytest.mark.parametrize("value", [-1, 2.5, True, "2", 10**6])
def test_a_latent_width_no_widget_can_hold_is_refused_naming_the_widget(value):
    s = Session.start()
    make.choose(s, latent=value)
    assert s.controls.latent == 0 and s.case == presets.article()
    assert len(s.notices) == 1 and s.notices[0].startswith("Latent width d_c (0: none): ")


def test_an_edited_latent_turned_off_gives_its_product_and_a_norm_dropped_is_said():
    s = Session.start()
    make.choose(s, use_rounded=False, latent=2)
    s.edit("w_latent", 0, 0, 1.0)
    assert s.inputs.plain is None and s.case.options.w_latent[0][0] == 1.0  # the latent is the person's own now
    keys = attend(s.case)["keys"]
    make.choose(s, latent=0)
    assert s.case.options.w_latent is None and not s.notices
    torch.testing.assert_close(attend(s.case)["keys"], keys)  # the same keys from W_K = W_DKV W_UK
    deepseek = parse_case(with_latent(case_to_dict(ROTARY), random.Random(0), norm=True))
    s.load(deepseek)
    assert s.controls.latent == deepseek.d_c and s.inputs.latent_norm == (deepseek.options.latent_norm,)
    make.choose(s, latent=0)
    assert "norm" in s.notices[-1] and s.case == presets.without_latent(deepseek)


def test_the_latent_follows_heads_and_rope_while_it_is_as_made():
    s = Session.start()
    make.choose(s, use_rounded=False, d_k=8, d_v=8, n=5)
    make.choose(s, latent=3)
    assert len(s.case.w_key) == 3  # no rotary key yet
    make.choose(s, heads=2, rope=True, rope_fraction=0.5)  # now DeepSeek's rotary key: 2 more columns
    assert s.error is None and s.case.d_c == 3 and presets.latent_layout(s.case) == (4, 2)
    assert s.case.w_key[-1] == (0.0, 1.0, 0.0, 0.0) * 2


def test_w_dkv_is_edited_cell_by_cell_and_a_bad_cell_is_named():
    s = Session.start()
    make.choose(s, use_rounded=False, latent=2)
    s.edit("w_latent", 2, 1, "0.25")
    assert s.case.options.w_latent[2][1] == 0.25 and s.error is None
    s.edit("w_latent", 1, 0, "abc")
    assert str(s.error) == "Latent W_DKV, row 2, column 1: 'abc' is not a number"
    assert state.place(s.error) == ("w_latent", 1, 0) and s.case.options.w_latent[2][1] == 0.25  # the last case
    shown = grid.data(s, "w_latent")
    assert shown["name"] == "Latent W_DKV" and shown["error_at"] == [1, 0] and "not a number" in shown["message"]
    s.load(parse_case(with_latent(case_to_dict(ROTARY), random.Random(0), norm=True)))
    s.edit("latent_norm", 0, 1, "x")  # DeepSeek's norm weights: one row
    assert state.place(s.error) == ("latent_norm", 0, 1) and "latent norm weights, dim 2" in str(s.error)
    s.edit("latent_norm", 0, 1, 2.0)
    assert s.error is None and s.case.options.latent_norm[1] == 2.0


@pytest.mark.parametrize("sizes", [{"d_in": 6}, {"d_in": 2}, {"d_k": 4, "d_v": 2}, {"n": 5}, {"n": 2, "d_in": 5}])
def test_a_resize_keeps_a_latent_case_valid(sizes):
    s = Session.start()
    make.choose(s, use_rounded=False, fill="random", latent=2)
    make.choose(s, **sizes)
    c = s.case
    assert s.error is None and c.options.w_latent is not None, s.error
    assert (len(c.options.w_latent), len(c.options.w_latent[0]), len(c.w_key), len(c.w_value)) == (c.d_in, 2, 2, 2)
    assert (c.d_k, c.d_v) == (sizes.get("d_k", 3), sizes.get("d_v", 3)) and check(attend(c)).agrees
    assert c.options.w_latent[0][:1] == presets.with_latent(ARTICLE, 2).options.w_latent[0][:1]  # numbers kept
    resized = presets.resize(c, 4, 3, 2, 5)  # the core's resize too: W_DKV follows d_in, W_UK keeps d_c rows
    assert (len(resized.options.w_latent), len(resized.w_key), resized.d_v) == (3, 2, 5)


def test_the_sidebar_makes_it_and_the_inputs_page_edits_it(at):
    at.toggle(key="use_rounded").set_value(False).run()
    at.number_input(key="latent").set_value(2).run()
    assert not at.exception and session(at).error is None
    assert current_trace(at).case == presets.with_latent(ARTICLE, 2)
    at.switch_page("pages/inputs.py").run()
    w_latent = component_data(next(e for e in at.get("bidi_component") if e.key.startswith("editor_w_latent")))
    assert w_latent["shape"] == [4, 2] and w_latent["title"].startswith("W_DKV")
    w_key = component_data(next(e for e in at.get("bidi_component") if e.key.startswith("editor_w_key")))
    assert w_key["shape"] == [2, 3] and w_key["title"].startswith("W_UK (w_key)")
    edit(at, "w_latent", 0, "2", "1.5")
    assert current_trace(at).case.options.w_latent[0][1] == 1.5 and not at.exception
    edit(at, "w_latent", 3, "1", "x")
    assert any("Latent W_DKV, row 4, column 1" in e.value for e in at.error)
    at.number_input(key="latent").set_value(7).run()  # wider than the article allows: said, the width stays
    assert at.number_input(key="latent").value == 2 and not at.exception


def test_the_variants_pages_width_narrows_the_latent_and_the_outputs_move():
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/variants.py").run()
    at.toggle(key="use_rounded").set_value(False).run()
    at.toggle(key="variants_latent").set_value(True).run()
    assert at.number_input(key="variants_latent_value").value == 4 == session(at).controls.latent
    said = " ".join(c.value for c in at.caption)
    assert "Each token's cache: 4 numbers (the latent) instead of 6" in said and "has rank 4" in said
    at.number_input(key="variants_latent_value").set_value(1).run()
    assert session(at).controls.latent == 1 == at.number_input(key="latent").value  # the sidebar's shows it
    moved = (attend(session(at).case).outputs - attend(ARTICLE).outputs).abs().max().item()
    assert moved > 0.1 and any(f"moved by up to {moved:.3g}" in c.value for c in at.caption)


def test_a_link_carries_the_latent_and_opens_with_the_sidebar_showing_it():
    case = parse_case(with_latent(case_to_dict(ROTARY), random.Random(3), norm=True))
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params["case"] = case_to_link(case)
    app.run()
    assert not app.exception and current_trace(app).case == case
    assert session(app).controls.latent == case.d_c and app.number_input(key="latent").value == case.d_c
    assert session(app).inputs.latent_norm == (case.options.latent_norm,)
    assert links.files.case_from_link(links.link_token(session(app))) == case  # shared again: the same numbers
    app.switch_page("pages/inputs.py").run()
    keys = [e.key for e in app.get("bidi_component")]
    assert any(k.startswith("editor_w_latent") for k in keys) and any(k.startswith("editor_latent_norm") for k in keys)


@pytest.fixture(scope="module")
def latent_app():
    """The app opened from a link to a 2-head case with DeepSeek's latent, its norm and rotary key."""
    return linked(parse_case(with_latent(case_to_dict(ROTARY), random.Random(0), norm=True)))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_with_a_latent(latent_app, page):
    assert current_trace(rendered(latent_app, page)).case.options.latent_norm is not None


def test_the_editors_name_w_dkv_as_the_sidebar_does():
    assert grid.shown_name("w_latent") == "Latent W_DKV" and grid.shown_name("latent_norm") == "latent norm weights"
    assert "w_latent" in editors.GRIDS and "latent_norm" in editors.GRIDS


def test_a_formula_too_wide_for_the_page_is_broken_into_lines_at_its_separators():
    """Step 3 of a latent case (four parts, one of them words) goes on two lines, each part whole; a short formula and
    a separator inside braces stay as they are."""
    case = parse_case(with_latent(case_to_dict(presets.random_case(4, 6, 6, 6, seed=2)), random.Random(2), norm=True))
    wide = steps.formula("qkv", case)
    broken = steps.lines(wide)
    rows = broken.removeprefix(r"\begin{gathered}").removesuffix(r"\end{gathered}").split(r" \\ ")
    assert broken != wide and len(rows) == 2
    assert all(any(part.strip(" ,") in row for row in rows) for part in wide.split(r",\quad"))
    assert steps.lines(r"Q = X W_Q,\quad K = X W_K") == r"Q = X W_Q,\quad K = X W_K"
    inside = r"\text{" + "x" * 100 + r",\quad y}"
    assert steps.lines(inside) == inside
