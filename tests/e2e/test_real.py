"""Real-browser test of the real-model preset: a typed sentence through SmolLM2, its tokens on a heatmap's axes."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from attention import models
from tests.e2e.test_browser import SCREENSHOTS, assert_no_exception, open_page, wait_ready
from tests.e2e.test_charts import FITTED, MEASURE

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(models.missing("smollm2") is not None, reason="the model packages are not installed"),
]
LOADING_MS = 180_000  # SmolLM2's weights dequantized: about 10 s on two quiet cores, 40 s seen with both busy
# the weights chart's tick labels, as SVG text (no innerText: textContent), where the chart titled "weights" is
TICKS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(gd => (gd.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === 'weights')
    .flatMap(gd => [...gd.querySelectorAll('.xtick text, .ytick text')].map(t => t.textContent))"""


def test_a_typed_sentence_shows_its_tokens_on_the_axes_and_is_checked_against_the_model(page: Page) -> None:
    open_page(page, "/")
    page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]", has_text="Preset").click()
    page.get_by_role("option", name="real model", exact=True).click()
    wait_ready(page, LOADING_MS)  # SmolLM2 loads in this run the first time on this server
    sidebar = page.locator("[data-testid=stSidebar]")
    expect(sidebar.get_by_text("4-bit quantized weights", exact=False)).to_be_visible()
    box = sidebar.get_by_label("Your sentence", exact=True)
    box.fill("The capital of France is")
    box.press("Enter")
    wait_ready(page)
    # the model's next token, on the overview: its table is the page's first (the first token's comes after)
    next_token = page.locator("[data-testid=stDataFrame]").first.locator("#glide-cell-0-0")
    expect(next_token).to_have_text("␣Paris")  # a canvas grid: its cells are hidden, their text is there
    page.locator("[data-testid=stSidebarNav] a", has_text="Walkthrough").click()
    wait_ready(page)
    steps = page.locator("[data-testid=stMain] [data-testid=stRadio]").first
    assert "3b RoPE" in steps.inner_text()
    steps.get_by_text("5 softmax").click()  # the weights, tokens on both axes
    wait_ready(page)
    page.wait_for_function(f"() => ({TICKS})().length > 0")
    ticks = page.evaluate(TICKS)
    for token in ("The", "␣capital", "␣France", "␣is"):
        assert token in ticks, ticks
    page.wait_for_function(FITTED)
    assert not page.evaluate(MEASURE)  # a real head's numbers readable, or left to the hover (test_charts.py)
    page.get_by_role("button", name="Checked against the model").click()
    expect(page.get_by_text("Agrees with the model's own output of SmolLM2-135M-Instruct")).to_be_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "real-walkthrough.png", full_page=True)
    assert_no_exception(page)
