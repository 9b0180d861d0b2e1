"""The Tiles page in a real browser: a link opens its tile, ▶ moves the outline, a bad block size keeps the view."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from attention.base.case import with_options
from attention.base.files import case_to_link
from attention.base.presets import article
from tests.e2e.test_browser import assert_no_exception, open_page, wait_ready

pytestmark = pytest.mark.e2e
SCREENSHOTS = Path(__file__).resolve().parents[2] / os.environ.get("SCREENSHOTS_DIR", "tests/artifacts/screenshots")
OUTLINE = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(gd => (gd.layout?.title?.text ?? '').replace(/<[^>]*>/g, '').startsWith('Scores in tiles'))
    .map(gd => gd.layout.shapes.filter(s => s.type === 'rect' && s.line?.color === '#ff7f0e')
        .map(s => [s.x0, s.y0]))[0]"""


def test_the_tiles_page_plays_its_tiles_and_keeps_the_last_valid_blocks(page: Page) -> None:
    causal = case_to_link(with_options(article(), mask="causal", weights_override=None))
    open_page(page, f"/tiles?case={causal}&bq=2&bk=1&tile=2.1")
    main = page.locator("[data-testid=stMain]")
    expect(main.get_by_text("Tiled outputs = step 7's").first).to_be_visible()
    expect(main.get_by_text("1 of 6 tiles are masked for every query in them").first).to_be_visible()
    assert page.evaluate(OUTLINE) == [[-0.5, 1.5]]  # query tile 2 (query 3), key tile 1: the link's
    main.get_by_role("button", name="▶").click()
    wait_ready(page)
    assert page.evaluate(OUTLINE) == [[0.5, 1.5]]  # the next tile: key tile 2 (of one key)
    expect(main.get_by_text("ℓ after key tile 2").first).to_be_visible()
    assert {"bq=2", "bk=1", "tile=2.2"} <= set(page.url.split("?")[1].split("&"))  # a tile with its blocks
    box = page.get_by_role("textbox", name="B_q: queries per tile")
    box.fill("0")
    box.press("Enter")
    wait_ready(page)
    expect(main.get_by_text("B_q (queries per tile): must be from 1 to n = 3, not 0").first).to_be_visible()
    expect(main.get_by_text("6 tiles of 2 × 1").first).to_be_visible()  # the last valid view stays
    assert_no_exception(page)


def test_the_tiles_page_opens_on_the_tile_that_rescales(page: Page) -> None:
    """The page's premise on its first screen: the article in tiles of one key, opened on tile 1.2, where Input 1's
    largest score grows from 2 to 4 and what was summed is multiplied by e^(2 − 4)."""
    open_page(page, "/tiles")
    main = page.locator("[data-testid=stMain]")
    expect(main.get_by_text("Tile 1.2 (query tile 1, key tile 2) shows the rescaling").first).to_be_visible()
    expect(main.get_by_text("e^(2 − 4) = 0.1353").first).to_be_visible()
    assert page.evaluate(OUTLINE) == [[0.5, -0.5]]  # query tile 1, key tile 2: outlined on the first screen
    expect(main.get_by_text("ℓ after key tile 2").first).to_be_visible()
    assert "tile=" not in page.url  # the default: a link opens on it again
    assert_no_exception(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "tiles.png", full_page=True)
