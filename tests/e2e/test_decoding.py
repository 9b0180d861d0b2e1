"""The Decoding page in a real browser: a link opens its decoding step, ▶ grows the cache by a row, and the URL
keeps the step; a screenshot for a person to look at."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from attention.base.files import case_to_link
from attention.base.presets import random_case
from tests.e2e.test_browser import HEATMAPS, SCREENSHOTS, wait_ready

pytestmark = pytest.mark.e2e
CASE = random_case(n=5, d_k=4, d_v=4, seed=3, heads=2, kv_heads=1, scale="sqrt_dk", rope_base=10_000.0)


def cache_rows(page, t: int) -> int:
    """How many rows the K cache's heatmap titled for step t has."""
    found = page.evaluate(HEATMAPS, f"k_cache: the keys of tokens 1 … {t} (new row: k_{t})")
    assert len(found) == 1, found
    z = found[0]
    return len(z) if isinstance(z, list) else int(str(z["shape"]).split(",")[0])


def test_a_link_opens_the_decoding_step_and_next_grows_the_cache(page, server):
    page.goto(f"{server}/decoding?case={case_to_link(CASE)}&token=2")
    wait_ready(page)
    expect(page.get_by_text("Step 2 of 5: output 2 equals row 2")).to_be_visible()
    assert cache_rows(page, 2) == 2
    page.get_by_role("button", name="▶").click()
    wait_ready(page)
    expect(page.get_by_text("Step 3 of 5: output 3 equals row 3")).to_be_visible()
    assert cache_rows(page, 3) == 3 and "token=3" in page.url
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "decoding.png"), full_page=True)


def test_a_generation_is_stopped_by_its_stop_button_and_keeps_what_it_made(page, server):
    """Stop, clicked while SmolLM2 generates, ends the run: the page says how many tokens it had made and which,
    and Generate then makes the whole generation with its timing."""
    page.goto(f"{server}/decoding")
    wait_ready(page)
    page.get_by_text("Tokens SmolLM2 generates").click()
    wait_ready(page)
    page.get_by_label("New tokens").fill("16")
    page.get_by_label("Sentence to continue").fill("The capital of France is")
    page.get_by_label("Sentence to continue").press("Enter")
    wait_ready(page)
    page.get_by_role("button", name="Generate").click()
    status = page.locator("[data-testid=stExpander]", has_text="is generating")
    expect(status.locator("[data-testid=stMarkdown] p")).not_to_be_empty(timeout=120_000)  # a token came
    status.get_by_role("button", name="Stop").click()
    wait_ready(page)
    stopped = page.get_by_text("The last generation was stopped after")
    expect(stopped).to_be_visible()
    count = int(stopped.inner_text().split("after ")[1].split(" of")[0])
    assert 1 <= count < 16, count
    page.get_by_role("button", name="Generate").click()
    wait_ready(page)
    expect(page.get_by_text("16 new tokens:")).to_be_visible(timeout=120_000)
    expect(stopped).to_have_count(0)
