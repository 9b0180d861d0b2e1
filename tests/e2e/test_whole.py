"""Real-browser test of the whole-model page: SmolLM2's 270 maps drawn at once, a hover that names the head under the
pointer, a click that opens it on the walkthrough's weights, at 1400 px and on a phone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from attention import models
from tests.e2e.conftest import new_context
from tests.e2e.test_browser import SCREENSHOTS, assert_no_exception, wait_ready

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(models.missing("smollm2") is not None, reason="the model packages are not installed"),
]
LOADING_MS = 180_000  # SmolLM2 loaded in the first run on this server (tests/e2e/test_real.py)
URL = "/whole?model=smollm2&layer=18&head=4&text=The+capital+of+France+is&lang=en"
PLOT = "[data-testid=stPlotlyChart] .js-plotly-plot"
# the grid's traces: an overlay heatmap of a cell a head, then the image of every map
TRACES = f"() => [...document.querySelectorAll('{PLOT}')].map(gd => gd.data.map(d => d.type).join(','))"


def grid(page: Page):
    """The whole-model chart's plot area, once drawn."""
    page.wait_for_function(f"() => ({TRACES})().includes('heatmap,image')")
    index = page.evaluate(TRACES).index("heatmap,image")
    area = page.locator(PLOT).nth(index).locator(".nsewdrag").first
    area.evaluate("el => el.scrollIntoView({block: 'center'})")  # its middle rows on screen, clear of the header
    return area


@pytest.mark.parametrize(("width", "height"), [(1400, 900), (390, 844)])
def test_every_head_drawn_a_hover_names_one_and_a_click_opens_it(browser, server, width, height) -> None:
    context = new_context(browser, base_url=server, viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(URL)
        wait_ready(page, LOADING_MS)
        expect(page.get_by_text("30 layers × 9 heads = 270 maps", exact=False)).to_be_visible()
        area = grid(page)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / f"whole-{width}.png")
        box = area.bounding_box()
        assert box["width"] > 150 and box["height"] > 4 * box["width"] / 3  # 30 rows of 9 maps, each about square
        # the middle of head 4's column, row 15 (layer 15): its map, named on hover
        x, y = box["x"] + box["width"] * 3.5 / 9, box["y"] + box["height"] * 14.5 / 30
        assert 100 < y < height - 50  # on screen
        page.mouse.move(x, y)
        hover = page.locator(".hoverlayer .hovertext")
        expect(hover).to_have_count(1)
        assert re.match(r"layer 15, head 4 · \w", hover.text_content()), hover.text_content()
        page.mouse.click(x, y)
        page.wait_for_url(re.compile(r"/walkthrough\?.*layer=15&head=4"))
        wait_ready(page)
        expect(page.get_by_role("heading", name=re.compile("Step 5"))).to_be_visible()
        assert_no_exception(page)
    finally:
        context.close()


def test_the_sort_is_kept_in_the_link_and_the_text_version_lists_the_heads(page: Page) -> None:
    page.goto(URL + "&sort=kind")
    wait_ready(page, LOADING_MS)
    grid(page)
    expect(page.get_by_role("radio", name="grouped by kind")).to_be_checked()
    page.get_by_text("Text version: Every head of the model at once").click()
    wait_ready(page)
    expect(page.locator("[data-testid=stExpander] [data-testid=stDataFrame]")).to_have_count(1)
    assert "sort=kind" in page.url
    assert_no_exception(page)
