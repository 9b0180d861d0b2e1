"""Teaching, in the real browser: every option visibly does what it says on the article's numbers, masked scores read
−∞ (never None), and every chart's title fits."""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from attention import attend
from attention.app.registry import PAGES
from attention.base.case import with_options
from attention.base.files import case_to_link
from attention.base.presets import article
from tests.apptest import MASKED_CASE
from tests.e2e.test_browser import assert_no_exception, heatmaps, open_page, wait_for_heatmap, wait_ready

pytestmark = pytest.mark.e2e
CAUSAL_OUTPUT_1 = [1.0, 2.0, 3.0]  # query 1 sees only itself under a causal mask: its weight on itself is 1, so v₁


def choose(page: Page, label: str, option: str) -> None:
    """Pick `option` in the sidebar's selectbox named `label`."""
    box = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]", has_text=label)
    box.evaluate("e => e.scrollIntoView({block: 'center'})")  # at the window's lower edge its list cannot open
    box.click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_ready(page)


def set_number(page: Page, label: str, value: int) -> None:
    field = page.locator("[data-testid=stSidebar]").get_by_label(label, exact=True)
    field.fill(str(value))
    field.press("Enter")
    wait_ready(page)


def go(page: Page, name: str) -> None:
    """To a page by its link in the sidebar's navigation, as a visitor clicks (the session stays)."""
    page.locator("[data-testid=stSidebarNav] a", has_text=name).click()
    wait_ready(page)


def test_a_causal_mask_on_the_article_gives_output_1_as_v1_on_every_page(page: Page) -> None:
    open_page(page, "/")
    choose(page, "Mask", "causal")  # nothing else touched: the article's rounded softmax is still switched on
    expect(page.get_by_text("so the exact softmax is used").first).to_be_visible()  # one plain line says why
    exact = attend(with_options(article(), mask="causal", weights_override=None)).outputs.numpy()
    shown = {}
    for name in ("Overview", "Inputs", "Multi-head"):
        go(page, name)
        shown[name] = wait_for_heatmap(page, "outputs", exact, atol=1e-5)
    go(page, "Walkthrough")
    page.locator("[data-testid=stRadio] label", has_text="7 outputs").click()
    wait_ready(page)
    shown["Walkthrough"] = wait_for_heatmap(page, "outputs", exact, atol=1e-5)
    go(page, "One query at a time")
    page.locator("[data-testid=stSelectbox]", has_text="Query i").click()
    page.get_by_role("option", name="Input 1", exact=True).click()
    wait_ready(page)
    shown["One query at a time"] = heatmaps(page, "row i of the outputs")[0]
    for name, z in shown.items():
        np.testing.assert_allclose(z[0], CAUSAL_OUTPUT_1, atol=1e-6, err_msg=name)
    page.get_by_role("button", name="Back to the article's numbers").click()  # one click back
    wait_ready(page)
    expect(page.get_by_role("combobox", name="Mask")).to_have_value("none")


def test_three_heads_from_the_article_in_one_step(page: Page) -> None:
    open_page(page, "/multi-head")
    set_number(page, "Heads", 3)
    for head in (1, 2, 3):
        expect(page.locator(".gtitle", has_text=f"head {head}: weights").first).to_be_visible()
    assert page.locator("[data-testid=stAlertContentError]").count() == 0
    expect(page.get_by_text("with 3 heads every head uses the exact softmax").first).to_be_visible()
    assert_no_exception(page)


def test_a_masked_case_shows_minus_infinity_and_never_none(page: Page) -> None:
    from attention import parse_case

    open_page(page, f"/walkthrough?step=4&case={case_to_link(parse_case(MASKED_CASE))}")
    # The tables draw on a canvas; their accessible copy holds the same text as the canvas: −∞ (minus infinity)
    page.locator("[role=gridcell]", has_text="−∞").first.wait_for(state="attached")
    texts = page.locator("[role=gridcell]").all_text_contents()
    assert "−∞" in texts and "None" not in texts and "-Infinity" not in texts, texts
    chart = page.locator(".js-plotly-plot").nth(1)  # scores: the masked one
    assert "−∞" in chart.locator("text").all_text_contents()
    for registered in PAGES:
        page.goto(f"/{registered.url_path}?case={case_to_link(parse_case(MASKED_CASE))}")
        wait_ready(page)
        visible = page.evaluate(PROSE) + " ".join(page.locator("[role=gridcell]").all_text_contents())
        assert "None" not in visible, registered.name


PROSE = """() => { const main = document.querySelector('[data-testid=stMain]').cloneNode(true);
    main.querySelectorAll('pre, code').forEach(c => c.remove());  // Python's None in code is code
    return main.innerText; }"""
CLIPPED = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(gd => {
    const box = gd.getBoundingClientRect();
    return [...gd.querySelectorAll('.gtitle')].filter(t => {
        const r = t.getBoundingClientRect();
        return r.width > 0 && (r.left < box.left - 1 || r.right > box.right + 1);
    }).map(t => t.textContent);
})"""


@pytest.mark.parametrize("registered", PAGES, ids=lambda p: p.name)
def test_every_chart_title_fits_its_chart(page: Page, registered) -> None:
    case = with_options(article(), heads=1, mask="causal", weights_override=None)
    open_page(page, f"/{registered.url_path}?step=6&case={case_to_link(case)}")
    assert page.evaluate(CLIPPED) == []
