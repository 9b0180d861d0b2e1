"""The Variants page in a real browser: the two clicks that answer "what does a window of 3 do to token 5", then
the page's screenshot (docs/screenshots/variants.png with SCREENSHOTS_DIR=docs/screenshots)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import SCREENSHOTS, assert_no_exception, open_page, wait_ready

pytestmark = pytest.mark.e2e
expect.set_options(timeout=60_000)


def test_a_window_of_3_on_8_tokens_in_two_clicks_and_a_button(page: Page) -> None:
    open_page(page, "/variants")  # click 1: the page
    main = page.locator("[data-testid=stMain]")
    main.locator(".st-key-variants_window label").first.click()  # click 2: the window, 3 by default
    wait_ready(page)
    main.get_by_role("button", name="A longer sentence (8 tokens)").click()  # the article has 3 tokens
    wait_ready(page)
    expect(main.get_by_text("Token 5 (Input 5) sees tokens 3–5").first).to_be_visible()
    expect(main.locator("[data-testid=stPlotlyChart] .main-svg").locator("visible=true").first).to_be_visible()
    expect(main.locator("[data-testid=stSkeleton]")).to_have_count(0)  # every chart drawn
    assert_no_exception(page)
    page.evaluate(
        "[...document.querySelectorAll('h3')].find(h => h.textContent.startsWith(\"Today's models\"))"
        ".scrollIntoView({block: 'start'})"
    )  # the screenshot: the switches, the readings, the maps
    page.wait_for_timeout(300)  # the scroll settled
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "variants.png", full_page=True)
