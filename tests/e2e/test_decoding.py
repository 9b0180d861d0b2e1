"""The Decoding page in a real browser: a link opens its decoding step, ▶ grows the cache by a row, and the URL
keeps the step; a screenshot for a person to look at."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from attention.files import case_to_link
from attention.presets import random_case
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
