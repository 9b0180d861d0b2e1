"""The matrix editor and the clickable heatmaps in a real browser: typed numbers, a pasted block, the keyboard alone,
twenty quick edits, edits that outlive page switches and a language change, dragging a number, clicks by pixel."""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from attention import attend
from attention.app.session import Session
from attention.base import presets
from attention.base.case import case_to_dict, parse_case, with_options
from attention.base.files import case_to_link
from tests.e2e.test_browser import (
    ARTICLE_OUTPUTS,
    assert_no_exception,
    cell,
    edit_cell,
    open_page,
    wait_for_heatmap,
    wait_ready,
)

pytestmark = pytest.mark.e2e
expect.set_options(timeout=60_000)

PLACE = "x, row 2 (Input 2), column 3"
# The active element, through the shadow root a component's inputs live in.
FOCUSED = """() => { let e = document.activeElement;
    while (e?.shadowRoot?.activeElement) e = e.shadowRoot.activeElement;
    return e?.getAttribute('aria-label') ?? e?.tagName; }"""
# The outputs heatmap's numbers as Plotly holds them (a string to compare)
OUTPUTS = """() => { const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => (g.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === 'outputs');
    const z = gd?.data?.[0]?.z; return z ? (z.bdata ?? JSON.stringify(z)) : null; }"""
# The first text of a matrix editor's own message line (under its table), or "".
MESSAGES = """() => [...document.querySelectorAll('[data-testid=stBidiComponentIsolated]')]
    .map(h => h.shadowRoot?.querySelector('.message')?.textContent ?? '').filter(Boolean)"""


def outputs_after(edits: dict[tuple[str, int, int], float]) -> np.ndarray:
    """The article's outputs with some cells changed ((matrix, row, column) from 1), by the core, with the softmax
    the session model's rule picks (the article's rounded one only where it still fits)."""
    session = Session.start()
    for (name, row, column), value in edits.items():
        session.edit(name, row - 1, column - 1, value)
    return attend(session.case).outputs.numpy()


def outputs_for(**cells: float) -> np.ndarray:
    """The article's outputs with some of x's cells changed ("r2c3": row 2, column 3, from 1)."""
    return outputs_after({("x", *(int(v) for v in where[1:].split("c"))): value for where, value in cells.items()})


def expect_outputs(page: Page, expected) -> None:
    atol = max(1e-3, 1e-5 * float(np.abs(expected).max()))  # float32 carries about 7 digits
    z = wait_for_heatmap(page, "outputs", expected, atol=atol)
    np.testing.assert_allclose(z, expected, rtol=0, atol=atol)


def focused(page: Page) -> str:
    return page.evaluate(FOCUSED)


def test_typed_numbers_are_taken_exactly_and_anything_else_is_kept_and_named(page: Page) -> None:
    """Each text typed into x[2][3] (a cell with weight in the outputs): a number changes the outputs; anything
    else stays in the cell as typed, outlined, with one message naming the cell, and the outputs stay."""
    open_page(page, "/inputs")
    box, last = cell(page, "x", 2, 3), ARTICLE_OUTPUTS
    for text, value, problem in [
        ("1e400", None, "'1e400' is larger than the limit 1e+06 in magnitude"),
        ("1e5", 1e5, None),
        ("abc", None, "'abc' is not a number"),
        ("", None, "is empty"),
        ("−1", None, "'−1' is not a number: type the minus sign as -"),
        ("1,5", None, "'1,5' is not a number: write the decimal point as a full stop (.)"),
        (" 2 ", 2.0, None),
        (".5", 0.5, None),
    ]:
        edit_cell(page, "x", 2, 3, text)
        expect(box).to_have_value(text)  # nothing changed behind the typist's back
        alerts = page.locator("[data-testid=stAlert]", has_text=PLACE)
        if problem is None:
            last = outputs_for(r2c3=value)
            expect(alerts).to_have_count(0)
            expect(box).to_have_attribute("aria-invalid", "false")
        else:
            expect(alerts).to_have_count(1)
            expect(alerts.first).to_contain_text(f"{PLACE}: {problem}")
            expect(box).to_have_attribute("aria-invalid", "true")
            assert any(problem in m for m in page.evaluate(MESSAGES)), "no message under the matrix"
        expect_outputs(page, last)  # a bad text keeps the last valid result
    assert_no_exception(page)


def test_a_pasted_block_fills_from_the_cell_and_one_that_does_not_fit_changes_nothing(page: Page) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_page(page, "/inputs")
    page.evaluate("navigator.clipboard.writeText('5\\t6\\n7\\t8\\n')")  # two rows of two, as a spreadsheet copies
    cell(page, "x", 2, 3).click()
    page.keyboard.press("Control+V")
    wait_ready(page)
    for (row, column), text in zip([(2, 3), (2, 4), (3, 3), (3, 4)], "5678", strict=True):
        expect(cell(page, "x", row, column)).to_have_value(text)
    expect_outputs(page, outputs_for(r2c3=5, r2c4=6, r3c3=7, r3c4=8))
    page.evaluate("navigator.clipboard.writeText('1\\t2\\n3\\t4')")
    cell(page, "x", 3, 4).click()  # the last cell: a 2 × 2 block does not fit
    page.keyboard.press("Control+V")
    expect(page.get_by_text("A block of 2 × 2 pasted at x, row 3, column 4 does not fit")).to_be_visible()
    expect(cell(page, "x", 3, 4)).to_have_value("8")
    expect_outputs(page, outputs_for(r2c3=5, r2c4=6, r3c3=7, r3c4=8))  # nothing changed


def test_the_editor_by_keyboard_alone(page: Page) -> None:
    """Tab into the editor, arrows between cells, type, Escape restores, Enter commits, Alt+↑ steps the number."""
    open_page(page, "/inputs")
    page.locator("[data-testid=stMain] h2").first.click()  # a start on the page, not on a control
    for _ in range(12):
        page.keyboard.press("Tab")
        if focused(page) == "x, token label of row 1":
            break
    assert focused(page) == "x, token label of row 1"
    page.keyboard.press("Tab")
    assert focused(page) == "x, row 1 (Input 1), column 1"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    assert focused(page) == "x, row 2 (Input 2), column 2"
    page.keyboard.type("9")
    page.keyboard.press("Escape")  # restored: nothing sent
    expect(cell(page, "x", 2, 2)).to_have_value("2")
    page.keyboard.type("5")
    page.keyboard.press("Enter")  # committed; the focus goes down a row
    wait_ready(page)
    assert focused(page) == "x, row 3 (Input 3), column 2"
    expect_outputs(page, outputs_for(r2c2=5))
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Alt+ArrowUp")  # a step as fine as the last typed digit (at least tenths)
    page.keyboard.press("Alt+ArrowUp")
    expect(cell(page, "x", 2, 2)).to_have_value("5.2")
    wait_ready(page)
    expect_outputs(page, outputs_for(r2c2=5.2))
    assert_no_exception(page)


def test_twenty_quick_edits_in_different_cells_all_land(page: Page) -> None:
    """Typed without waiting, Tab from cell to cell within a grid (past x's token labels); every one lands, and
    stays."""
    open_page(page, "/inputs")
    targets = [(r, c) for r in (1, 2, 3) for c in (1, 2, 3, 4)]
    targets = [("x", r, c) for r, c in targets] + [("w_query", r, c) for r in (1, 2, 3, 4) for c in (1, 2)]
    names = [cell(page, *t).get_attribute("aria-label") for t in targets]
    values = {}
    for k, name in enumerate(names):
        if k == 0 or targets[k][0] != targets[k - 1][0]:
            # into a grid by a click: between two grids lie the page's links and a chart's toolbar, and a rerun
            # that lands meanwhile may send the focus back to the page, so Tab's path there is not the editor's
            cell(page, *targets[k]).click()
        for _ in range(4):  # past a token label, or w_query's third column
            if focused(page) == name:
                break
            page.keyboard.press("Tab")
        assert focused(page) == name
        values[targets[k]] = str(k + 1)
        page.keyboard.type(str(k + 1))  # the cell's number was selected: the typed one replaces it
        page.keyboard.press("Tab")
    wait_ready(page)
    expected = outputs_after({at: float(text) for at, text in values.items()})
    expect_outputs(page, expected)
    page.locator("[data-testid=stSidebarNav] a", has_text="Walkthrough").click()  # away, and back
    wait_ready(page)
    page.locator("[data-testid=stSidebarNav] a", has_text="Inputs").click()
    wait_ready(page)
    for target, text in values.items():
        expect(cell(page, *target)).to_have_value(text)
    expect_outputs(page, expected)


def test_edits_outlive_page_switches_reruns_and_a_language_change(page: Page) -> None:
    open_page(page, "/inputs")
    edit_cell(page, "x", 2, 2, "5")
    edit_cell(page, "x", 3, 1, "1e-3")
    page.locator("[data-testid=stSidebarNav] a", has_text="Explain a number").click()
    wait_ready(page)
    page.locator("[data-testid=stSidebarNav] a", has_text="Inputs").click()
    wait_ready(page)
    page.locator("[data-testid=stMain] h2").first.click()
    page.keyboard.press("r")  # Streamlit's own rerun key
    wait_ready(page)
    expect(cell(page, "x", 2, 2)).to_have_value("5")
    expect(cell(page, "x", 3, 1)).to_have_value("0.001")  # the same number, as Python writes it
    sidebar = page.locator("[data-testid=stSidebar]")
    sidebar.locator("[data-testid=stSelectbox]", has_text="Language").click()
    page.get_by_role("option", name="简体中文").click()
    wait_ready(page)
    expect(page.get_by_label("x 第 2 行（Input 2），第 2 列", exact=True)).to_have_value("5")
    expect_outputs(page, outputs_for(r2c2=5, r3c1=1e-3))


def test_dragging_a_number_sideways_moves_every_step_while_it_moves(page: Page) -> None:
    """A drag on x[2][2]: the outputs change while the mouse is still down, and end where the number ends."""
    open_page(page, "/inputs")
    box = cell(page, "x", 2, 2).bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.evaluate(f"() => {{ window.firstOutputs = ({OUTPUTS})(); }}")
    page.mouse.move(x, y)
    page.mouse.down()
    for step in range(1, 31):
        page.mouse.move(x + 4 * step, y)
    page.wait_for_function(f"() => ({OUTPUTS})() !== window.firstOutputs", polling=100)  # the mouse still down
    page.mouse.up()  # the value it ended on goes now if it waits for a run's end, else it went already (no run)
    value = float(cell(page, "x", 2, 2).input_value())
    assert value > 2  # dragged to the right: up, in steps of 0.1
    assert abs(value * 10 - round(value * 10)) < 1e-9
    expect_outputs(page, outputs_for(r2c2=value))  # the end state: the outputs of the number the drag ended on


def plot_area(page: Page, index: int) -> dict:
    """The heatmap's cells' area on screen, scrolled into view (Plotly's drag layer covers exactly the cells)."""
    area = page.locator("[data-testid=stMain] .js-plotly-plot").nth(index).locator(".nsewdrag")
    area.scroll_into_view_if_needed()
    return area.bounding_box()


def click_cell(page: Page, index: int, row: int, column: int, rows: int, columns: int, corner: str = "") -> None:
    """A real mouse click on a heatmap's cell (from 0, rows top to bottom): its centre, or 4 pixels inside a corner
    ("top right", "bottom left"; the cells have a pixel's gap between them)."""
    area = plot_area(page, index)
    w, h = area["width"] / columns, area["height"] / rows
    x, y = area["x"] + (column + 0.5) * w, area["y"] + (row + 0.5) * h
    if corner:
        y += (h / 2 - 4) * (-1 if "top" in corner else 1)
        x += (w / 2 - 4) * (-1 if "left" in corner else 1)
    page.mouse.click(x, y)
    wait_ready(page)


def test_a_heatmap_cell_answers_a_click_at_its_centre_and_near_its_edge(page: Page) -> None:
    open_page(page, "/explain")
    title = page.locator("[data-testid=stMain] h3").first
    expect(title).to_contain_text("scores_raw[Input 2, Input 2]")
    click_cell(page, 0, 2, 0, 3, 3)  # the centre of query Input 3, key Input 1
    expect(title).to_contain_text("scores_raw[Input 3, Input 1]")
    expect(page.locator("[data-testid=stMain] [data-testid=stCode]").first).to_contain_text("q₃ · k₁ = ")
    click_cell(page, 0, 0, 2, 3, 3, corner="top right")  # query Input 1, key Input 3
    expect(title).to_contain_text("scores_raw[Input 1, Input 3]")
    click_cell(page, 0, 1, 1, 3, 3, corner="bottom left")  # query Input 2, key Input 2
    expect(title).to_contain_text("scores_raw[Input 2, Input 2]")
    assert_no_exception(page)


def test_a_click_on_a_walkthrough_heatmap_leads_to_its_explanation(page: Page) -> None:
    open_page(page, "/walkthrough?step=5")
    expect(page.locator("[data-testid=stMain] h2").first).to_contain_text("Step 5")
    charts = "[...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')]"
    titles = page.evaluate(f"{charts}.map(g => g.layout.title.text)")
    index = next(i for i, t in enumerate(titles) if t.replace("<b>", "").replace("</b>", "") == "weights")
    click_cell(page, index, 2, 1, 3, 3)  # query Input 3's weight on key Input 2: 0.9 in the article
    expect(page.locator("[data-testid=stMain] h2").first).to_have_text("Explain a number")
    expect(page.locator("[data-testid=stMain] h3").first).to_contain_text("weights[Input 3, Input 2]")
    assert "/explain" in page.url
    assert_no_exception(page)


def test_an_edit_on_a_live_page_reaches_the_open_share_panel_and_the_banners(page: Page) -> None:
    """/inputs reruns alone on an edit; what the frame around shows follows: the open panel's link, the error."""
    open_page(page, "/inputs")
    page.locator("[data-testid=stSidebar] [data-testid=stExpander]", has_text="Share and export").click()
    wait_ready(page)
    link = page.locator("[data-testid=stSidebar] [data-testid=stCode] code").first
    before = link.inner_text()
    edit_cell(page, "x", 2, 2, "5")
    expect(link).not_to_have_text(before)  # the whole app ran again: the panel links to the new numbers
    assert "case=" in link.inner_text()
    edit_cell(page, "x", 2, 2, "five")
    expect(page.locator("[data-testid=stAlert]", has_text="x, row 2 (Input 2), column 2")).to_be_visible()
    edit_cell(page, "x", 2, 2, "5")
    expect(page.locator("[data-testid=stAlert]", has_text="x, row 2 (Input 2), column 2")).to_have_count(0)
    assert_no_exception(page)


def test_a_latents_w_dkv_is_edited_in_the_browser_and_a_bad_cell_is_named(page: Page) -> None:
    """Multi-head latent attention from a link: W_DKV's cells are named for screen readers as its messages name them,
    a bad one is said under its grid, and a number reaches every step (the outputs: the core's)."""
    case = presets.with_latent(with_options(presets.article(), weights_override=None), 2)
    open_page(page, f"/inputs?case={case_to_link(case)}")
    edit_cell(page, "Latent W_DKV", 2, 1, "abc")
    expect(page.get_by_text("Latent W_DKV, row 2, column 1: 'abc' is not a number").first).to_be_visible()
    assert any("Latent W_DKV, row 2, column 1" in m for m in page.evaluate(MESSAGES))
    edit_cell(page, "Latent W_DKV", 2, 1, "2")
    latent = [list(row) for row in case.options.w_latent]
    latent[1][0] = 2.0
    expect_outputs(page, attend(with_options(case, w_latent=latent)).outputs.numpy())
    assert_no_exception(page)


def test_a_cross_cases_x_kv_and_its_labels_are_edited_in_the_browser(page: Page) -> None:
    """Cross-attention from a link: x_kv's cells are named with the source sentence's tokens, a bad one is said under
    its grid, a number reaches the outputs (the core's), and a token label typed beside its row is x_kv's own."""
    numbers = case_to_dict(with_options(presets.article(), weights_override=None))
    numbers |= {"x_kv": [[1, 0, 0, 1], [0, 1, 1, 0]], "tokens_kv": ["le", "chat"]}
    open_page(page, f"/inputs?case={case_to_link(parse_case(numbers))}")
    box = page.get_by_label("x_kv, row 2 (chat), column 2", exact=True)
    box.click()
    page.keyboard.press("Backspace")
    page.keyboard.type("abc")
    page.keyboard.press("Enter")
    wait_ready(page)
    expect(page.get_by_text("x_kv, row 2 (chat), column 2: 'abc' is not a number").first).to_be_visible()
    assert any("x_kv, row 2 (chat), column 2" in m for m in page.evaluate(MESSAGES))
    box.click()
    page.keyboard.press("Backspace")
    page.keyboard.type("3")
    page.keyboard.press("Enter")
    wait_ready(page)
    expect_outputs(page, attend(parse_case(numbers | {"x_kv": [[1, 0, 0, 1], [0, 3, 1, 0]]})).outputs.numpy())
    label = page.get_by_label("x_kv, token label of row 1", exact=True)
    label.fill("the")
    page.keyboard.press("Enter")
    wait_ready(page)
    expect(page.get_by_label("x_kv, row 1 (the), column 1", exact=True)).to_be_visible()
    expect(page.get_by_label("x, row 1 (Input 1), column 1", exact=True)).to_be_visible()  # x's labels are its own
    assert_no_exception(page)
