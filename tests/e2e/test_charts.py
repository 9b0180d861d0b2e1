"""Charts and tables readable at the size they are drawn, measured in Chromium on every page: no two text boxes of a
chart overlap, no cell's number is wider or taller than its cell, and every table's last column can be reached."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from attention.app.registry import PAGES
from attention.base.files import case_to_link
from attention.base.presets import random_case

from .conftest import new_context
from .test_browser import READY, assert_no_exception, wait_ready

pytestmark = pytest.mark.e2e

SIZES = (3, 10, 13, 64, 1024)  # tokens: the article's size, a real sentence's, a generation's, the limits' ends
SCREENS = {"1400 px": {"width": 1400, "height": 1000}, "phone": {"width": 390, "height": 844}}
# Every page at every size once; the languages and the screens spread across them (page i at size s: English or
# Chinese as i + s is even or odd, the wide screen or the phone as i // 2 + s is), so that every page meets both
# languages and both screens, without multiplying everything by everything (13 pages × 5 sizes = 65 pages opened).
# Every chart on screen fitted (web/fit.js), its texts as the fitter left them: a chart drawn hidden is not fitted
# until it is shown; a text Plotly wrote again after a redraw (its text no longer the one fitted) is waited for.
FITTED = """() => [...document.querySelectorAll('.js-plotly-plot')].every(gd =>
    !gd.getClientRects().length || !gd.querySelector('g.heatmap-label text') || (gd.dataset.fitted === '1'
        && [...gd.querySelectorAll('g.heatmap-label text')].every(t => t.dataset.fit
            && t.dataset.shown === t.textContent)))"""
# Each chart's text boxes: its title, the axes' titles, tick labels and the cells' numbers shown (web/fit.js hides
# those that do not fit), as the screen has them; and each shown number against its cell's size.
MEASURE = """() => {
  const problems = [], MIN_PX = 10;  // a number smaller than this is not read (Plotly's "auto" size wrote 5 px)
  const shown = e => e.getClientRects().length && getComputedStyle(e).display !== 'none' && e.textContent.trim();
  // a text's box as drawn: its four corners on screen (a rotated tick label is a rotated box, not its bounding one)
  const corners = e => {
    const box = e.getBBox(), m = e.getScreenCTM();
    return [[box.x, box.y], [box.x + box.width, box.y], [box.x + box.width, box.y + box.height],
      [box.x, box.y + box.height]].map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  // two convex boxes overlap unless some edge's normal separates them (the separating axis test), by more than 2 px:
  // a text's box is its line's, about 2 px above and below the glyphs
  const overlap = (p, q) => [p, q].every(poly => poly.every((a, i) => {
    const b = poly[(i + 1) % poly.length], length = Math.hypot(b[0] - a[0], b[1] - a[1]);
    if (!length) return true;
    const normal = [(a[1] - b[1]) / length, (b[0] - a[0]) / length];
    const span = pts => pts.map(([x, y]) => x * normal[0] + y * normal[1]);
    const sp = span(p), sq = span(q);
    return Math.min(Math.max(...sp), Math.max(...sq)) - Math.max(Math.min(...sp), Math.min(...sq)) > 2;
  }));
  const name = gd => (gd.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') || '(untitled)';
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const boxes = [];
    for (const [kind, selector] of [['title', '.g-gtitle text'], ['axis title', '.g-xtitle text, .g-ytitle text'],
        ['tick', '.xtick text, .ytick text'], ['cell', 'g.heatmap-label text']])
      for (const e of gd.querySelectorAll(selector)) if (shown(e)) boxes.push([kind, e, corners(e)]);
    for (let a = 0; a < boxes.length; a++)
      for (let b = a + 1; b < boxes.length; b++)
        if (overlap(boxes[a][2], boxes[b][2]))
          problems.push(`${name(gd)}: ${boxes[a][0]} "${boxes[a][1].textContent}" overlaps`
            + ` ${boxes[b][0]} "${boxes[b][1].textContent}"`);
    const layout = gd._fullLayout;
    for (const group of gd.querySelectorAll('g.hm')) {
      const trace = group.__data__?.[0]?.trace;
      const xa = layout[`xaxis${trace.xaxis.slice(1)}`], ya = layout[`yaxis${trace.yaxis.slice(1)}`];
      const width = Math.abs(xa.l2p(1) - xa.l2p(0)) - (trace.xgap || 0);
      const height = Math.abs(ya.l2p(1) - ya.l2p(0)) - (trace.ygap || 0);
      for (const e of group.querySelectorAll('g.heatmap-label text')) {
        if (!shown(e)) continue;
        const box = e.getBBox(), px = parseFloat(getComputedStyle(e).fontSize);
        if (px < MIN_PX) problems.push(`${name(gd)}: "${e.textContent}" is written ${px} px high`);
        if (box.width > width + 0.5 || box.height > height + 0.5)
          problems.push(`${name(gd)}: "${e.textContent}" is ${box.width.toFixed(1)} × ${box.height.toFixed(1)} px`
            + ` in a cell of ${width.toFixed(1)} × ${height.toFixed(1)}`);
      }
    }
  }
  return problems;
}"""
# Every table (HTML, Markdown, or a dataframe's canvas grid) whose right edge lies past what shows it: reachable only
# where a box between it and the window scrolls sideways and itself lies inside the window.
UNREACHABLE = """() => {
  const problems = [];
  const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  const items = [...document.querySelectorAll('[data-testid=stMain] table')]
    .filter(t => !t.closest('[data-testid=stDataFrame]')).map(t => [t, t.getBoundingClientRect().right]);
  for (const grid of document.querySelectorAll('[data-testid=stMain] [data-testid=stDataFrame] .dvn-scroller'))
    items.push([grid, grid.getBoundingClientRect().left + grid.scrollWidth]);
  for (const [table, right] of items) {
    if (!table.getClientRects().length) continue;
    let reached = false;
    for (let box = table; box && box !== document.body && !reached; box = box.parentElement) {
      const edge = box.getBoundingClientRect().right;
      if (scrolls(box) && box.scrollWidth > box.clientWidth + 1) {
        reached = edge <= window.innerWidth + 1;  // it scrolls to its last column, and is itself on screen
        if (!reached) break;
      } else if (getComputedStyle(box).overflowX !== 'visible' && right > edge + 1) break;  // clipped
    }
    const page = Math.min(window.innerWidth, table.closest('[data-testid=stMain]').getBoundingClientRect().right);
    if (!reached && right > page + 1)
      problems.push(`${(table.innerText || table.closest('[data-testid=stDataFrame]')?.innerText || '').slice(0, 60)}`
        + ` ends at ${Math.round(right)} px, out of reach`);
  }
  return problems;
}"""

# Each table together with its chart: a table of a chart's numbers lies right after it (beside it, or under it in the
# same container), so no table comes right after a chart's text version (its expander, keyed chart_NAME_text), as one
# put under the row of columns did: a page's element before each table, the outermost that does not hold the table.
TOGETHER = """() => {
  const problems = [], main = document.querySelector('[data-testid=stMain]');
  const parts = [...main.querySelectorAll('[data-testid=stElementContainer], [data-testid=stLayoutWrapper]')];
  for (const grid of main.querySelectorAll('[data-testid=stDataFrame]')) {
    const table = grid.closest('[data-testid=stElementContainer]');
    const before = parts.filter(e => !e.contains(table)
        && (e.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING));
    if (!before.length) continue;
    const last = before.find(e => e.contains(before[before.length - 1]));  // ancestors come first: the outermost
    const version = last.className.match(/\\bst-key-(chart_\\S+)_text\\b/);
    if (version) problems.push(`a table comes after ${version[1]}'s text version, away from its chart`);
  }
  return problems;
}"""
# The tab labelled `id` open, what it drew on screen (test_browser.READY) and fitted.
TAB_OPEN = f"""(id) => [...document.querySelectorAll('[data-testid=stMain] [role=tabpanel]')]
    .some(p => p.getAttribute('aria-labelledby') === id && p.getClientRects().length)
    && ({READY})() && ({FITTED})()"""
# The first heatmap whose fitter shortened or left out a number, hidden (its element, marked data-e2e-hidden), then
# drawn again while hidden: its texts as Plotly writes them (web/fit.js keeps them in data-written), and afterplot.
REDRAWN_HIDDEN = """() => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')].find(gd =>
    [...gd.querySelectorAll('g.heatmap-label text')].some(t => t.dataset.fit === 'hidden'
        || t.dataset.written !== t.textContent));
  if (!gd) return false;
  const box = gd.closest('[data-testid=stElementContainer]');
  box.dataset.e2eHidden = '1';
  box.style.display = 'none';
  for (const t of gd.querySelectorAll('g.heatmap-label text')) {
    t.textContent = t.dataset.written;
    t.style.display = '';
  }
  gd.emit('plotly_afterplot');
  return true;
}"""


@pytest.mark.parametrize("size", SIZES)
def test_every_chart_and_table_is_readable_at_the_size_drawn(browser: Browser, server: str, size: int) -> None:
    link = case_to_link(random_case(size, 4, 3, 3, seed=size))
    contexts = {screen: new_context(browser, viewport=v, base_url=server, is_mobile=screen == "phone")
                for screen, v in SCREENS.items()}  # fmt: skip
    pages = {screen: context.new_page() for screen, context in contexts.items()}
    found = {}
    try:
        for i, registered in enumerate(PAGES):
            lang = ("en", "zh")[(i + size) % 2]
            screen = list(SCREENS)[(i // 2 + size) % 2]
            page = pages[screen]
            page.goto(f"/{registered.url_path}?lang={lang}&case={link}")
            wait_ready(page)
            page.wait_for_function(FITTED)
            assert_no_exception(page)
            if problems := _measured(page):
                found[f"{registered.url_path or '/'} ({lang}, {screen})"] = problems
    finally:
        for context in contexts.values():
            context.close()
    assert not found, f"at {size} tokens: {found}"


def test_the_backward_pages_tabs_are_readable_once_opened(browser: Browser, server: str) -> None:
    """The charts of each tab of the Backward page (Streamlit draws a tab's charts when it is opened), measured in
    each tab once it is open and its charts fitted, at 1400 px and on a phone."""
    link = case_to_link(random_case(13, 4, 3, 3, seed=13))
    found = {}
    for screen, viewport in SCREENS.items():
        context = new_context(browser, viewport=viewport, base_url=server, is_mobile=screen == "phone")
        try:
            page = context.new_page()
            page.goto(f"/backward?case={link}")
            wait_ready(page)
            tabs = page.locator("[data-testid=stMain] [role=tab]")
            assert tabs.count() == 4, tabs.all_text_contents()
            for i in range(tabs.count()):
                tabs.nth(i).click()  # a tab starts no run
                page.wait_for_function(TAB_OPEN, arg=tabs.nth(i).get_attribute("id"))
                assert_no_exception(page)
                if problems := _measured(page):
                    found[f"{tabs.nth(i).inner_text()} ({screen})"] = problems
        finally:
            context.close()
    assert not found, found


def test_a_chart_drawn_while_hidden_is_fitted_when_shown(browser: Browser, server: str) -> None:
    """A chart Plotly draws again while it is hidden (its texts measure 0 wide) is fitted once shown, not taken for
    fitted: its drawing is stood in for by its texts written again as the figure has them, then Plotly's
    afterplot event, which the fitter hears."""
    link = case_to_link(random_case(13, 4, 3, 3, seed=13))
    context = new_context(browser, viewport=SCREENS["phone"], base_url=server, is_mobile=True)
    try:
        page = context.new_page()
        page.goto(f"/walkthrough?step=scores&case={link}")
        wait_ready(page)
        page.wait_for_function(FITTED)
        hidden = page.evaluate(REDRAWN_HIDDEN)
        assert hidden, "no heatmap with a number left out or shortened to redraw"
        page.evaluate("() => document.querySelector('[data-e2e-hidden]').style.display = ''")
        page.wait_for_function(FITTED)
        assert not (problems := _measured(page)), problems
    finally:
        context.close()


def test_a_walkthrough_redrawn_by_a_click_is_readable_at_every_step(browser: Browser, server: str) -> None:
    """A click that redraws (the next step): each step's new charts measured once fitted, on a phone."""
    link = case_to_link(random_case(13, 4, 3, 3, seed=13))
    context = new_context(browser, viewport=SCREENS["phone"], base_url=server, is_mobile=True)
    found = {}
    try:
        page = context.new_page()
        page.goto(f"/walkthrough?step=inputs&case={link}")
        wait_ready(page)
        step = page.locator("[data-testid=stMain] h2").first
        while True:
            page.wait_for_function(FITTED)
            assert_no_exception(page)
            if problems := _measured(page):
                found[step.inner_text()] = problems
            following = page.locator(".st-key-next button")  # ▶, the next step
            if following.is_disabled():
                break
            title = step.inner_text()
            following.click()
            wait_ready(page)
            expect(step).not_to_have_text(title)  # the next step drawn
    finally:
        context.close()
    assert not found, found


def _measured(page: Page) -> list[str]:
    return page.evaluate(MEASURE) + page.evaluate(UNREACHABLE) + page.evaluate(TOGETHER)
