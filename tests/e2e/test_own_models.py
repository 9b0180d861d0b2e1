"""Real-browser test of a model on disk: a server of its own offering tiny random models (ATTENTION_MODELS), one
picked in the sidebar's picker, its head checked against the model."""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import Page, expect

from attention import models
from tests.e2e.conftest import new_context, serving
from tests.e2e.test_browser import SCREENSHOTS, assert_no_exception, wait_ready
from tests.test_families import FAMILIES, make, tokenizers, vocabulary  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        models.missing("smollm2") or models.missing("minilm"), reason="the shipped models' tokenizers (model packages)"
    ),
]
LOADING_MS = 120_000  # a tiny model loads in well under a second; the run also imports and warms on busy cores


@pytest.fixture(scope="module")
def shelf_server(tokenizers, tmp_path_factory):  # noqa: F811
    """One server for the module, offering a tiny Llama and a tiny BERT from an operator's folder (and an empty
    Hugging Face cache: not this machine's)."""
    shelf = tmp_path_factory.mktemp("shelf")
    for family in ("llama", "bert"):
        make(family, shelf / f"tiny-{family}", tokenizers[FAMILIES[family][3]])
    env = {**os.environ, "ATTENTION_MODELS": str(shelf), "HF_HUB_CACHE": str(tmp_path_factory.mktemp("hub"))}
    with serving(tmp_path_factory.mktemp("streamlit"), env) as served:
        yield served.url


@pytest.fixture
def shelf_page(browser, shelf_server):
    context = new_context(browser, base_url=shelf_server)
    page = context.new_page()
    yield page
    context.close()


def test_a_model_picked_in_the_picker_opens_its_head_checked_against_the_model(shelf_page: Page) -> None:
    page = shelf_page
    page.goto("/?model=local:tiny-bert")  # a link to one tiny model; the other is picked
    wait_ready(page, LOADING_MS)
    sidebar = page.locator("[data-testid=stSidebar]")
    expect(sidebar.get_by_text("A bidirectional encoder, no mask (bert architecture)", exact=False)).to_be_visible()
    sidebar.locator("[data-testid=stSelectbox]", has_text=re.compile("^Model")).click()
    option = page.get_by_role("option", name=re.compile(r"^tiny-llama · llama · 2 layers × 4 heads · .* on disk"))
    expect(option).to_be_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "own-model-picker.png")
    option.click()
    wait_ready(page, LOADING_MS)
    expect(sidebar.get_by_text("A causal decoder (llama architecture)", exact=False)).to_be_visible()
    assert "model=local%3Atiny-llama" in page.url or "model=local:tiny-llama" in page.url
    page.get_by_role("button", name="Checked against the model").click()
    expect(page.get_by_text("Agrees with the model's own output of tiny-llama, layer 1, head 1")).to_be_visible()
    page.screenshot(path=SCREENSHOTS / "own-model-head.png", full_page=True)
    assert_no_exception(page)
