"""Accessibility in a real browser: the walkthrough by keyboard alone; axe-core on every page, light and dark.

The axe summary (per scheme and page: what fails, what is allowlisted and why, the moderate and minor findings) is
written to tests/artifacts/axe.json for the record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import VIEWPORT, new_context
from tests.e2e.test_browser import PAGES, cell, edit_cell, open_page, wait_idle, wait_ready

pytestmark = pytest.mark.e2e
expect.set_options(timeout=60_000)

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
FAILING_IMPACTS = {"serious", "critical"}
SCHEMES = ("light", "dark")


@dataclass(frozen=True)
class Allowed:
    """A violation that is not ours to fix (or not a real barrier), by rule and element, with the reason."""

    rule: str
    html: str  # a regular expression the element's opening HTML (axe's node "html") must match
    why: str


ALLOWLIST = (
    Allowed(
        "color-contrast",
        r'^<span class="token token [a-z-]+">',
        "Syntax colours inside st.code (Streamlit's Prism theme: keyword blue70, comment gray70, boolean green70 on "
        "the code background, 2.2-4.2:1). They are fixed palette colours in Streamlit's frontend, not theme options, "
        "so config.toml cannot change them; the code itself is also readable as plain text (the base code colour "
        "passes) and a screen reader ignores the colours.",
    ),
)

# A focused element shows where it is: an outline (not none, wider than 0, not transparent) or a box shadow. A radio
# or checkbox hides its real <input> (react-aria's VisuallyHidden: 1×1 px, clipped), so its <label> must show it.
FOCUS_RING = """() => {
    let el = document.activeElement;
    while (el?.shadowRoot?.activeElement) el = el.shadowRoot.activeElement;  // a component's own input
    if (!el || el === document.body) return {ok: false, what: 'nothing focused'};
    const hidden = el.matches('input[type=radio], input[type=checkbox]') && el.closest('label');
    const shown = hidden || el;
    const s = getComputedStyle(shown);
    const outline = s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0
        && !/rgba\\([^)]*,\\s*0\\)|transparent/.test(s.outlineColor);
    const shadow = s.boxShadow !== 'none';
    const r = shown.getBoundingClientRect();
    return {ok: (outline || shadow) && r.width > 2 && r.height > 2,
            what: `${el.tagName} ${el.type || ''} "${(el.innerText || el.value || '').slice(0, 30)}"`
                + ` shown by ${shown.tagName}: outline ${s.outlineStyle} ${s.outlineWidth} ${s.outlineColor},`
                + ` box-shadow ${s.boxShadow}, ${r.width}×${r.height}`,
            tag: el.tagName, type: el.type || '', value: el.value || '', text: el.innerText || ''};
}"""


def focus(page: Page) -> dict:
    """The focused element, asserted to show a visible focus indicator."""
    state = page.evaluate(FOCUS_RING)
    assert state["ok"], f"no visible focus indicator: {state['what']}"
    return state


def expect_step(page: Page, number: int) -> None:
    expect(page.locator("[data-testid=stMain] h2", has_text=re.compile(rf"^Step {number} · ")).first).to_be_visible()


def test_the_walkthrough_by_keyboard_alone_with_visible_focus(page: Page) -> None:
    """Skip link, the check's badge, then the step radio with the arrow keys from 1 to 8, then the ◀ button under
    it (Enter, Space) back to 1."""
    open_page(page, "/walkthrough")
    expect_step(page, 1)
    page.keyboard.press("Tab")  # the first stop on the page: Streamlit's "Skip to main content" link
    assert focus(page)["text"].strip() == "Skip to main content"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")  # the first control of the main area: the check's badge, which opens its detail
    assert "Checked against PyTorch" in focus(page)["text"]
    page.keyboard.press("Tab")  # then the step radio
    state = focus(page)
    assert (state["tag"], state["type"], state["value"]) == ("INPUT", "radio", "0"), state["what"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=ARTIFACTS / "focus_radio.png", clip={"x": 0, "y": 0, **VIEWPORT, "height": 300})
    for number in range(2, 9):
        page.keyboard.press("ArrowRight")  # a radio group's own key: the next option is chosen and focused
        wait_ready(page)
        expect_step(page, number)
        state = focus(page)
        assert (state["type"], state["value"]) == ("radio", str(number - 1)), state["what"]
    page.keyboard.press("Tab")  # on to ◀ under the picker, enabled now
    for number, key in zip(range(7, 0, -1), ("Enter", "Space") * 4, strict=False):
        state = focus(page)
        assert state["tag"] == "BUTTON" and "◀" in state["text"], state["what"]
        if number == 7:
            page.screenshot(path=ARTIFACTS / "focus_previous.png", clip={"x": 0, "y": 0, **VIEWPORT, "height": 300})
        page.keyboard.press(key)
        wait_ready(page)
        expect_step(page, number)
    assert "step=" not in page.url  # step 1 is the page's own URL again
    expect(page.locator("[data-testid=stException]")).to_have_count(0)


RESULTS: dict[str, dict[str, dict]] = {}


@pytest.fixture(scope="module")
def scheme_pages(browser, server):
    """One browser context per colour scheme (Streamlit follows the system's), opened when first needed."""
    contexts, pages = [], {}

    def get(scheme: str) -> Page:
        if scheme not in pages:
            context = new_context(browser, base_url=server, color_scheme=scheme)
            contexts.append(context)
            pages[scheme] = context.new_page()
        return pages[scheme]

    yield get
    for context in contexts:
        context.close()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    record = {"allowlist": [a.__dict__ for a in ALLOWLIST], "results": RESULTS}
    (ARTIFACTS / "axe.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))


def allowed(rule: str, node: dict) -> Allowed | None:
    return next((a for a in ALLOWLIST if a.rule == rule and re.search(a.html, node["html"])), None)


def axe(page: Page) -> tuple[list, list, list]:
    """axe-core (axe-playwright-python's bundled copy) on the page as it is: (failing, allowlisted, the others)."""
    from axe_playwright_python.sync_playwright import Axe

    failing, allowlisted, other = [], [], []
    for v in Axe().run(page).response["violations"]:
        for node in v["nodes"]:
            found = {"rule": v["id"], "impact": v["impact"], "target": node["target"], "html": node["html"][:160]}
            if v["impact"] not in FAILING_IMPACTS:
                other.append(found)
            elif a := allowed(v["id"], node):
                allowlisted.append(found | {"why": a.why})
            else:
                failing.append(found | {"help": v["help"], "url": v["helpUrl"], "summary": node["failureSummary"]})
    return failing, allowlisted, other


def summary(failing: list) -> str:
    return "\n".join(
        f"- {f['rule']} ({f['impact']}): {f['help']} at {f['target']}\n  {f['summary']}\n  {f['url']}" for f in failing
    )


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("path", PAGES)
def test_axe_finds_no_serious_violation(scheme_pages, scheme: str, path: str) -> None:
    """axe-core (axe-playwright-python's bundled copy) on a fully drawn page, every chart's text version open."""
    page = scheme_pages(scheme)
    open_page(page, path)
    # the text versions in view: those in a tab not chosen (the Backward page's) cannot be clicked open
    versions = page.locator("[data-testid=stExpander] summary:visible", has_text="Text version: ")
    tables = page.locator("[data-testid=stTable]")
    for i in range(versions.count()):  # the tables are scanned too: each made by the rerun its opening starts
        versions.nth(i).click()
        expect(tables).to_have_count(i + 1)  # its rerun has begun: it drew the table (a page still ready may not)
        wait_idle(page)  # and has ended (the temperature explorer's is a fragment's run: it draws no pace)
    failing, allowlisted, other = axe(page)
    RESULTS.setdefault(scheme, {})[path] = {"failing": failing, "allowlisted": allowlisted, "moderate_or_minor": other}
    assert not failing, f"axe on {path} ({scheme}): {len(failing)} serious or critical violations\n{summary(failing)}"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_matrix_editors_show_focus_and_axe_passes_with_a_wrong_cell(browser, server, scheme: str) -> None:
    """/inputs with every editor (a custom mask too) and a cell holding text: a visible focus ring on a cell, named
    as a screen reader says it, and nothing serious for axe, in both themes."""
    context = new_context(browser, base_url=server, color_scheme=scheme)
    page = context.new_page()
    try:
        open_page(page, "/inputs")
        mask = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]", has_text="Mask")
        mask.evaluate("e => e.scrollIntoView({block: 'center'})")  # at the window's lower edge its list cannot open
        mask.click()
        page.get_by_role("option", name="custom").click()
        wait_ready(page)
        edit_cell(page, "x", 2, 3, "abc")
        cell(page, "x", 1, 2).focus()
        state = focus(page)
        assert state["what"].startswith("INPUT text"), state["what"]
        assert cell(page, "x", 1, 2).get_attribute("aria-label") == "x, row 1 (Input 1), column 2"
        expect(page.get_by_label("Mask, row 3 (Input 3), column 1 (Input 1)", exact=True)).to_have_value("1")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        clip = {"x": 280, "y": 0, "width": 1120, "height": 700}  # the main area's top: x's editor
        page.screenshot(path=ARTIFACTS / f"editor_focus_{scheme}.png", clip=clip)
        failing, allowlisted, other = axe(page)
        RESULTS.setdefault(scheme, {})["/inputs, editors"] = {
            "failing": failing, "allowlisted": allowlisted, "moderate_or_minor": other,
        }  # fmt: skip
        assert not failing, f"axe on /inputs' editors ({scheme}): {len(failing)} serious ones\n{summary(failing)}"
    finally:
        context.close()
