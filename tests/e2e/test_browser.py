"""Real-browser tests: the app served by `streamlit run` and driven by Chromium, as a visitor would use it."""

from __future__ import annotations

import base64
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Locator, Page, expect

from attention import attend, case_to_dict, parse_case
from attention.app.registry import PAGES as REGISTRY
from attention.app.session import Session
from attention.base.case import with_options
from attention.base.files import case_to_link
from attention.base.presets import article
from attention.forward.oracle import fused_outputs
from attention.show.heatmap import LABEL_MAX
from tests.e2e.conftest import TIMEOUT_MS, new_context

pytestmark = pytest.mark.e2e
expect.set_options(timeout=60_000)  # expect()'s own default is 5 s: too short for a rerun on two slow cores

ARTICLE_OUTPUTS = [[2, 7, 1.5], [2, 8, 0], [2, 7.8, 0.3]]  # printed in the article: the oracle, not our own result
ROOT = Path(__file__).resolve().parents[2]
# The screenshots of the README and docs/ are refreshed with SCREENSHOTS_DIR=docs/screenshots; a plain run leaves them.
SCREENSHOTS = ROOT / os.environ.get("SCREENSHOTS_DIR", "tests/artifacts/screenshots")
READY = """() => !document.querySelector('[data-testid=stSkeleton]')
    && [...document.querySelectorAll('[data-testid=stPlotlyChart]')].every(c => c.querySelector('.main-svg'))"""
IDLE = f"""() => document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning'
    && ({READY})()"""
# The end of the run the last input started (see wait_ready); a page opened without conftest.new_context says so.
RUN_ENDED = f"""() => {{
    const seen = window.__e2eRuns;
    if (!seen) throw new Error('no record of runs: open the page in a context made by tests.e2e.conftest.new_context');
    const ended = seen.end > seen.input || !!document.querySelector('[data-testid=stException]');
    const state = document.querySelector('[data-testid=stApp]')?.dataset.testScriptState;
    return ended && state === 'notRunning' && ({READY})();
}}"""
# The z of every heatmap titled `title` (Streamlit's theme wraps titles in <b>). Plotly 7 ships arrays as
# {dtype, bdata, shape}; plotly.js keeps that object in gd.data, so it is decoded in Python (see _decode).
HEATMAPS = """(title) => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(gd => (gd.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === title && gd.data?.[0]?.z)
    .map(gd => gd.data[0].z)
    .map(z => Array.isArray(z) ? z.map(row => Array.from(row)) : {dtype: z.dtype, bdata: z.bdata, shape: z.shape})"""

# Each page of the registry (by its file's name) → (its screenshot, its own header, more text its main area must show)
EXPECTED = {
    "overview": ("overview", "Attention, step by step", ()),
    "walkthrough": ("walkthrough", "Step 1 · Prepare inputs", ()),
    "inputs": ("inputs", "Inputs and weights", ()),
    "broadcasting": ("broadcasting", "Step 6 · the broadcast", ()),
    "one_query": ("one-query", "Step 8 · one query at a time", ()),
    "variants": ("", "Attention's variants on your numbers", ()),  # its screenshot: tests/e2e/test_variants.py
    "multi_head": ("multi-head", "Multi-head attention", ()),
    "explain": ("explain", "Explain a number", ("q₂ · k₂ = 2·4 + 2·4 + 2·0 = 16",)),
    "devices": ("devices", "Devices", ("GPU: unavailable",)),  # the test machine has no GPU
    "tiles": ("tiles", "Attention in tiles: FlashAttention's online softmax", ("Tiled outputs = step 7's",)),
    "exercise": ("exercise", "Exercises", ("Step 4: work out the score of query 2 on key 3",)),
    "backward": ("backward", "The backward pass: how every number learns", ("every gradient agrees with",)),
    "decoding": ("decoding", "Decoding with a KV cache: one token at a time", ("Step 3 of 3",)),
    "whole": ("whole", "Every head of the model at once", ("Pick “Real model” as the preset",)),  # no model yet
}
PAGES = {f"/{page.url_path}": EXPECTED[page.name] for page in REGISTRY}  # URL path → what that page shows


def wait_ready(page: Page, timeout_ms: float | None = None) -> None:
    """Wait for the run that the page's last input started (or a document's first run) to end, and for everything it
    drew (charts, grids) to be on screen: a run's end seen after that input (conftest.RUNS_SEEN; an exception also
    ends a run), Streamlit's script state notRunning, and READY. No fixed delay: an input that starts no run (a tab,
    an expander without a rerun) is followed by a wait for what it shows instead."""
    page.wait_for_function(RUN_ENDED, timeout=timeout_ms)  # None: the context's default (conftest.new_context)


def wait_idle(page: Page) -> None:
    """Wait for a run that has begun to end (Streamlit's script state notRunning) and for what it drew: only after
    something on the page proves that it has begun (what it draws), for a run that draws no pace (a fragment's, such
    as the Variants page's temperature explorer); any other run is awaited by wait_ready."""
    page.wait_for_function(IDLE)


def open_page(page: Page, path: str) -> None:
    page.goto(path)
    wait_ready(page)


def _decode(z: list | dict) -> np.ndarray:
    if isinstance(z, list):
        return np.asarray(z, dtype=np.float64)
    shape = [int(s) for s in str(z["shape"]).split(",")]
    return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).astype(np.float64).reshape(shape)


def heatmaps(page: Page, title: str) -> list[np.ndarray]:
    return [_decode(z) for z in page.evaluate(HEATMAPS, title)]


def wait_for_heatmap(page: Page, title: str, expected, atol: float) -> np.ndarray | None:
    """The heatmap titled `title` once it shows `expected`, or the last one seen when it never does in time.

    Polled, since a rerun can still be redrawing its charts when the script state already reads notRunning.
    """
    expected = np.asarray(expected, dtype=np.float64)
    deadline, last = time.monotonic() + TIMEOUT_MS / 1000, None
    while True:
        for z in heatmaps(page, title):
            last = z
            if z.shape == expected.shape and np.allclose(z, expected, rtol=0, atol=atol):
                return z
        if time.monotonic() > deadline:
            return last
        page.wait_for_timeout(200)


def outputs_after_edit(row: int, value: float) -> np.ndarray:
    """The article's outputs after x[row][1] = value, by the session model's rule (its rounded softmax only where it
    still fits) and PyTorch's fused attention as the oracle of the numbers."""
    session = Session.start()
    session.edit("x", row, 1, value)
    return (
        fused_outputs(with_options(session.case, weights_override=None)).numpy()
        if session.rounding
        else (
            np.array(session.case.options.weights_override)
            @ (np.array(session.case.x) @ np.array(session.case.w_value))
        )
    )


def cell(page: Page, matrix: str, row: int, column: int, token: str | None = None) -> Locator:
    """A matrix editor's cell by its accessible name, as a screen reader says it (row and column from 1); x's rows
    and the n × n grids' are named after their tokens too."""
    if matrix == "x":
        return page.get_by_label(f"x, row {row} ({token or f'Input {row}'}), column {column}", exact=True)
    return page.get_by_label(f"{matrix}, row {row}, column {column}", exact=True)


def edit_cell(page: Page, matrix: str, row: int, column: int, text: str) -> None:
    """Type `text` into a cell as a person does (a click selects the number, typing replaces it) and press Enter."""
    box = cell(page, matrix, row, column)
    box.click()
    page.keyboard.press("Backspace")  # the selected number goes (so that an empty text is typed too)
    if text:
        page.keyboard.type(text)
    expect(box).to_have_value(text)
    page.keyboard.press("Enter")
    wait_ready(page)


def assert_no_exception(page: Page) -> None:
    expect(page.locator("[data-testid=stException]")).to_have_count(0)


@pytest.mark.parametrize("path", PAGES)
def test_deep_link_shows_the_page_and_the_shared_sidebar(page: Page, path: str) -> None:
    """Each page opened straight from its URL, in a new session, runs app.py's frame around it."""
    screenshot, header, texts = PAGES[path]
    open_page(page, path)
    main, sidebar = page.locator("[data-testid=stMain]"), page.locator("[data-testid=stSidebar]")
    expect(main.locator("h1, h2", has_text=header).first).to_be_visible()
    for text in texts:
        expect(main.get_by_text(text).first).to_be_visible()
    expect(sidebar.locator("[data-testid=stSelectbox]", has_text="Preset")).to_be_visible()
    expect(sidebar.locator("h3", has_text="Options")).to_be_visible()
    assert_no_exception(page)
    # An unknown path is rewritten to "/" (with a "Page not found" dialog, shown at once, so counted, not awaited)
    assert page.evaluate("location.pathname") == path, "the URL did not stay the page's own"
    assert page.get_by_role("dialog").filter(has_text="Page not found").count() == 0, "'Page not found' dialog"
    if screenshot:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / f"{screenshot}.png", full_page=True)


def test_inputs_page_shows_the_articles_outputs(page: Page) -> None:
    open_page(page, "/inputs")
    z = wait_for_heatmap(page, "outputs", ARTICLE_OUTPUTS, atol=1e-5)
    assert z is not None, "no heatmap titled 'outputs' on /inputs"
    np.testing.assert_allclose(z, ARTICLE_OUTPUTS, rtol=0, atol=1e-5)
    assert_no_exception(page)


def test_a_cell_edit_reaches_every_step_and_page(page: Page) -> None:
    """x[1][1] (Input 2's second feature) from 2 to 5: the article's rounded softmax no longer fits: the exact one."""
    d = case_to_dict(article()) | {"options": {}}
    d["x"][1][1] = 5.0
    expected = attend(parse_case(d)).outputs.tolist()  # the project's own core, as the oracle for the new numbers
    open_page(page, "/inputs")
    edit_cell(page, "x", 2, 2, "5")
    expect(cell(page, "x", 2, 2)).to_have_value("5")

    z = wait_for_heatmap(page, "outputs", expected, atol=1e-4)
    assert z is not None, "no heatmap titled 'outputs' on /inputs"
    assert not np.allclose(z, ARTICLE_OUTPUTS, rtol=0, atol=1e-5), "the outputs did not follow the edit"
    np.testing.assert_allclose(z, expected, rtol=0, atol=1e-4)

    # The sidebar link, not a reload: the same session (and so the edit) goes on to the next page.
    page.locator("[data-testid=stSidebarNav] a", has_text="Walkthrough").click()
    wait_ready(page)
    expect(page).to_have_url(re.compile(r"/walkthrough(\?.*)?$"))  # with the link to the edited case
    page.locator("[data-testid=stRadio] label", has_text="7 outputs").click()
    wait_ready(page)
    expect(page.locator("[data-testid=stMain] h2", has_text="Step 7").first).to_be_visible()
    z = wait_for_heatmap(page, "outputs", expected, atol=1e-4)
    assert z is not None, "no heatmap titled 'outputs' at the Walkthrough's step 7"
    np.testing.assert_allclose(z, expected, rtol=0, atol=1e-4)
    assert_no_exception(page)


def test_an_invalid_cell_keeps_the_last_valid_result(page: Page) -> None:
    """An emptied cell is named in an error; the numbers shown stay the last valid ones."""
    open_page(page, "/inputs")
    edit_cell(page, "x", 2, 2, "")
    alert = page.locator("[data-testid=stAlert]", has_text="x, row 2")
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("column 2: is empty")
    z = wait_for_heatmap(page, "outputs", ARTICLE_OUTPUTS, atol=1e-5)
    assert z is not None, "no heatmap titled 'outputs' on /inputs while the input is invalid"
    np.testing.assert_allclose(z, ARTICLE_OUTPUTS, rtol=0, atol=1e-5)
    assert_no_exception(page)


def test_a_fresh_servers_first_request_can_be_a_deep_link(browser, fresh_server) -> None:
    """A pages/ folder starts a server in Streamlit's legacy mode, which runs a deep-linked page without app.py."""
    context = new_context(browser, base_url=fresh_server)
    page = context.new_page()
    try:
        open_page(page, "/walkthrough")
        expect(page.locator("[data-testid=stMain] h2", has_text="Step 1 · Prepare inputs").first).to_be_visible()
        expect(page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]", has_text="Preset")).to_be_visible()
        assert_no_exception(page)
    finally:
        context.close()


def test_a_copied_link_opens_the_same_numbers_in_a_fresh_browser(page: Page, browser) -> None:
    """Edit, copy the link from the share panel, open it in a new context (a new session): the same view."""
    expected = outputs_after_edit(1, 5.0)
    open_page(page, "/inputs")
    edit_cell(page, "x", 2, 2, "5")
    assert wait_for_heatmap(page, "outputs", expected, atol=1e-4) is not None
    expect(page).to_have_url(re.compile(r"[?&]case="))  # the live page's own rerun keeps the URL a link too
    page.locator("[data-testid=stSidebar] [data-testid=stExpander]", has_text="Share and export").click()
    wait_ready(page)  # the panel's content is made by the rerun its opening starts
    link = page.locator("[data-testid=stSidebar] [data-testid=stCode] code").first.inner_text().strip()
    assert link.startswith(page.url.split("?")[0]) and "case=" in link

    other = new_context(browser)
    try:
        fresh = other.new_page()
        fresh.goto(link)
        wait_ready(fresh)
        expect(fresh.locator("[data-testid=stMain] h2", has_text="Inputs and weights").first).to_be_visible()
        z = wait_for_heatmap(fresh, "outputs", expected, atol=1e-4)
        np.testing.assert_allclose(z, expected, rtol=0, atol=1e-4)
        assert_no_exception(fresh)
    finally:
        other.close()


def test_arrow_keys_step_through_the_walkthrough(page: Page) -> None:
    open_page(page, "/walkthrough")
    page.locator("[data-testid=stMain] h2").first.click()  # focus on the page, not on a widget
    for key, step in (("ArrowRight", 2), ("ArrowRight", 3), ("ArrowLeft", 2)):
        page.keyboard.press(key)
        wait_ready(page)
        expect(page.locator("[data-testid=stMain] h2", has_text=f"Step {step}").first).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]step=weights(&|$)"))  # the URL follows: a link to this step, by name


def test_html_and_script_in_a_token_label_show_as_text_and_run_nothing(page: Page) -> None:
    """A shared link whose token labels are HTML and script: shown as typed, nothing runs, no dialog opens."""
    hostile = ['<img src=x onerror="window.pwned=1">', "<script>window.pwned=2</script>", "<b>bold</b>"]
    case = parse_case({**case_to_dict(article()), "tokens": hostile})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_page(page, f"/walkthrough?case={case_to_link(case)}")
    ticks = page.locator(".js-plotly-plot .ytick text").all_text_contents()
    # the literal text on the axes, a long label cut with "…" (heatmap.LABEL_MAX; its cell's hover names it whole)
    assert hostile[0][: LABEL_MAX - 1] + "…" in ticks and hostile[2] in ticks, ticks
    assert page.locator(".js-plotly-plot b", has_text="bold").count() == 0  # not rendered as bold
    open_page(page, f"/inputs?case={case_to_link(case)}")
    assert page.evaluate("window.pwned") is None and not dialogs
    assert page.locator("[data-testid=stMain] img[src=x]").count() == 0
    assert_no_exception(page)


def test_two_visitors_editing_at_once_see_only_their_own_numbers(browser, server) -> None:
    """Two sessions on one server, both editing: each sees its own outputs (session state is per visitor)."""
    contexts = [new_context(browser, base_url=server) for _ in range(2)]
    try:
        pages = [c.new_page() for c in contexts]
        for p in pages:
            open_page(p, "/inputs")
        expected = []
        for p, (row, value) in zip(pages, ((1, "5"), (2, "7")), strict=True):
            edit_cell(p, "x", row + 1, 2, value)  # x's column 2 of Input 2, then of Input 3
            expected.append(outputs_after_edit(row, float(value)))
        for p, outputs in zip(pages, expected, strict=True):  # after both edits, each shows its own numbers
            p.locator("[data-testid=stMain] h2").first.click()
            p.keyboard.press("r")  # Streamlit's own rerun key: each session computes again from its own state
            wait_ready(p)
            np.testing.assert_allclose(wait_for_heatmap(p, "outputs", outputs, atol=1e-4), outputs, atol=1e-4)
        assert not np.allclose(expected[0], expected[1])
    finally:
        for c in contexts:
            c.close()


def test_a_chinese_browser_gets_chinese_and_the_language_travels_in_the_link(browser, server) -> None:
    """navigator.language zh-CN: Chinese everywhere, also the page titles; English by the picker; ?lang=zh wins."""
    context = new_context(browser, base_url=server, locale="zh-CN")
    page = context.new_page()
    try:
        open_page(page, "/walkthrough")
        sidebar = page.locator("[data-testid=stSidebar]")
        expect(page.locator("[data-testid=stMain] h2", has_text="第 1 步 · 准备输入").first).to_be_visible()
        expect(sidebar.locator("[data-testid=stSelectbox]", has_text="预设")).to_be_visible()
        expect(page.locator("[data-testid=stSidebarNav] a", has_text="逐步讲解")).to_be_visible()
        assert "注意力机制" in page.title()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # docs/pages.md's Chinese screenshot (CJK fonts to read it)
        page.screenshot(path=SCREENSHOTS / "walkthrough-zh.png", full_page=True)
        page.locator("[data-testid=stMain] h2").first.click()
        page.keyboard.press("ArrowRight")  # a rerun: the language and the step are kept in the URL
        wait_ready(page)
        expect(page.locator("[data-testid=stMain] h2", has_text="第 2 步").first).to_be_visible()
        expect(page).to_have_url(re.compile(r"step=weights.*lang=zh|lang=zh.*step=weights"))
        sidebar.locator("[data-testid=stSelectbox]", has_text="语言").click()
        page.get_by_role("option", name="English").click()
        wait_ready(page)
        expect(page.locator("[data-testid=stMain] h2", has_text="Step 2 · Initialise weights").first).to_be_visible()
        expect(sidebar.locator("[data-testid=stSelectbox]", has_text="Preset")).to_be_visible()
        assert "lang=en" in page.url and "step=weights" in page.url  # a Chinese browser's choice of English is kept
        assert_no_exception(page)
    finally:
        context.close()
    english = new_context(browser, base_url=server, locale="en-US")
    try:
        page = english.new_page()
        open_page(page, "/inputs?lang=zh")
        expect(page.locator("[data-testid=stMain] h2", has_text="输入与权重").first).to_be_visible()
        assert "lang=zh" in page.url
        assert_no_exception(page)
    finally:
        english.close()
