"""Every label a person reads to act (a question, a button, a link, a widget's name, a tab) is whole on every page,
in both languages, at 1400 px and on a phone: measured in Chromium, not judged from a screenshot."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser

from attention.app.registry import PAGES

from .conftest import new_context
from .test_browser import wait_ready

pytestmark = pytest.mark.e2e

LABELS = (
    ", ".join(
        f"[data-testid={testid}]"
        for testid in (
            "stPageLink",
            "stButton",
            "stDownloadButton",
            "stLinkButton",
            "stPopover",
            "stWidgetLabel",
            "stSidebarNavLink",
            "stExpanderHeader",
        )
    )
    + ", [data-baseweb=tab], [data-testid=stExpander] summary"
)
# A label is cut when it, or anything inside it, clips its text (overflow or an ellipsis) and its text is wider than
# the box it is clipped to, or when it runs off the right edge of the window. Hidden ones (a folded sidebar) are not
# read, so not measured.
CUT = """(selector) => {
  const cut = [];
  for (const label of document.querySelectorAll(selector)) {
    if (!label.getClientRects().length || !label.innerText.trim()) continue;
    const clipped = [label, ...label.querySelectorAll('*')].some(e => {
      const style = getComputedStyle(e);
      const clips = style.overflowX !== 'visible' || style.textOverflow === 'ellipsis';
      return clips && e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1;
    });
    if (clipped || label.getBoundingClientRect().right > window.innerWidth + 1) cut.push(label.innerText.trim());
  }
  return cut;
}"""
SCREENS = {"1400 px": {"width": 1400, "height": 1000}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("screen", SCREENS)
def test_no_label_is_cut_off(browser: Browser, server: str, lang: str, screen: str) -> None:
    context = new_context(browser, viewport=SCREENS[screen], base_url=server, is_mobile=screen == "phone")
    page, cut = context.new_page(), {}
    try:
        for registered in PAGES:
            page.goto(f"/{registered.url_path}?lang={lang}")
            wait_ready(page)
            if labels := page.evaluate(CUT, LABELS):
                cut[registered.url_path or "/"] = labels
    finally:
        context.close()
    assert not cut, f"labels cut off ({lang}, {screen}): {cut}"
