"""The Decoding page in a real browser: a link opens its decoding step, ▶ grows the cache by a row, and the URL
keeps the step; a screenshot for a person to look at."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from attention.base.files import case_to_link
from attention.base.presets import random_case
from tests.e2e.test_browser import HEATMAPS, SCREENSHOTS, assert_no_exception, wait_ready

pytestmark = pytest.mark.e2e
SENTENCE = "The capital of France is"
# SmolLM2 loaded (about 10 s; 40 s seen with both cores busy), then a run of it: with both cores busy, at a load
# average of 10, its first token came after 8 s, 16 tokens after 48 s, and the same 16 timed without the cache took
# 185 s more (over 60 s for a whole generation was seen at a load average of 9)
GENERATION_MS = 240_000
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


def enter(page, label: str, text: str) -> None:
    """Type `text` into the field labelled `label` and press Enter: the run it starts has ended."""
    field = page.get_by_label(label)
    field.fill(text)
    field.press("Enter")
    wait_ready(page)


def words(text: str) -> str:
    """Text as shown, for comparing two renderings of the same tokens: whitespace collapsed, no zero-width spaces."""
    return " ".join(text.replace("\u200b", "").split())


def generate_and_stop(page) -> str:
    """Generate; once the status shows a token (it keeps what it showed, and its Stop, until the next run: a state,
    not a moment), Stop; then the state the page reached, checked. "stopped": the tokens heard so far kept (at least
    those shown before the click), a notice says how many of the 16 and which, the generation made before unchanged;
    "stopped while timed": the new generation, with its cached time only; "finished": the click landed after the run
    had ended, so it stopped nothing: the whole generation, both times."""
    made = page.get_by_text(re.compile(r"^16 new tokens: "))
    before = made.all_inner_texts()
    page.get_by_role("button", name="Generate").click()
    stop = page.get_by_role("button", name="Stop")
    shown = page.locator("[data-testid=stExpander]").filter(has=stop).locator("[data-testid=stMarkdown]")
    expect(shown).to_have_text(re.compile(r"\S"), timeout=GENERATION_MS)  # SmolLM2 loaded, a token made
    expect(stop).to_be_enabled()
    seen = words(shown.inner_text())  # the tokens heard so far
    stop.click()
    expect(stop).to_have_count(0, timeout=GENERATION_MS)  # the click's run draws no status: the generation's ended
    wait_ready(page, GENERATION_MS)  # and so has the click's own run
    assert_no_exception(page)
    # the whole alert: the tokens may hold a blank line ("Paris.\n\nThe"), which markdown makes a second paragraph
    notice = page.locator("[data-testid=stAlert]", has_text="The last generation was stopped after")
    if notice.count():
        said = re.fullmatch(r".*stopped after (\d+) of (\d+) new tokens: (.*)", notice.inner_text(), re.S)
        assert said is not None, notice.inner_text()
        count, asked, tokens = int(said[1]), int(said[2]), words(said[3])
        assert asked == 16 and 1 <= count < 16, said[0]  # the last token is shown only once the generation is kept
        assert tokens.startswith(seen), (seen, tokens)  # what was shown before the click is kept, and more maybe
        assert made.all_inner_texts() == before, "a stopped generation replaced the one made before it"
        return "stopped"
    assert made.all_inner_texts() != before, f"tokens were shown ({seen}), then neither kept nor said"
    line = page.locator("[data-testid=stMarkdown]", has=page.locator("strong", has_text=SENTENCE)).inner_text()
    assert words(line).startswith(words(f"{SENTENCE} {seen}")), (seen, line)  # greedy: the tokens shown, and on
    caption = made.inner_text()
    if "its timing without the cache was stopped" in caption:
        return "stopped while timed"
    assert " without it " in caption, caption
    return "finished"


@pytest.mark.timeout(900)  # SmolLM2 loaded, then up to three generations and a short one, on a busy machine
def test_a_generation_is_stopped_by_its_stop_button_and_keeps_what_it_made(page, server):
    """Stop, clicked while SmolLM2 generates, ends the run and the page keeps what was made; Generate then makes the
    whole generation with its timing. On a fast machine a click can land after the generation has ended, which
    stops nothing: that is checked too, and Stop tried again; a Stop that never stops a run fails."""
    page.goto(f"{server}/decoding")
    wait_ready(page)
    page.get_by_text("Tokens a causal model generates").click()
    wait_ready(page)
    enter(page, "New tokens", "16")
    enter(page, "Sentence to continue", SENTENCE)
    outcomes = []
    while len(outcomes) < 3 and outcomes[-1:] not in (["stopped"], ["stopped while timed"]):
        outcomes.append(generate_and_stop(page))
    assert outcomes[-1].startswith("stopped"), f"Stop never stopped a generation: {outcomes}"
    print(f"Stop's tries: {outcomes}")  # pytest -rA shows it
    enter(page, "New tokens", "4")  # a short whole generation: timed without the cache, 16 take minutes when busy
    page.get_by_role("button", name="Generate").click()
    wait_ready(page, GENERATION_MS)  # the generation's own run has ended
    expect(page.get_by_text(re.compile(r"^4 new tokens: .* without it "))).to_be_visible()
    expect(page.get_by_text("The last generation was stopped after")).to_have_count(0)
