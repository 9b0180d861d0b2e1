"""Real-browser tests of what a visit costs others: no request leaves the app's server, and no Streamlit warning."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import new_context, streamlit_warnings
from tests.e2e.test_browser import PAGES, open_page, wait_ready

pytestmark = pytest.mark.e2e
NOT_SENT = ("data", "blob", "about")  # drawn by the browser itself (an emoji favicon is a data: URL)


def test_every_request_of_every_page_goes_to_the_apps_own_server(browser, server) -> None:
    """The app promises no CDN (issue 29): a ":material/…:" page icon made every visit fetch an SVG from
    fonts.gstatic.com, which offline fails and hosted tells a third party of each visit. Every page, in both
    languages, and a page changed in the app (the Explain page's pickers), asks its own server only."""
    context = new_context(browser, base_url=server)
    page = context.new_page()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.on("websocket", lambda socket: asked.append(socket.url))
    for path in PAGES:
        open_page(page, path)
    open_page(page, "/explain?lang=zh")
    page.get_by_role("link", name="逐步讲解").first.click()  # a page changed inside the app, not a new document
    wait_ready(page)
    context.close()
    own = urlsplit(server).netloc
    sent = [url for url in asked if urlsplit(url).scheme not in NOT_SENT]
    assert len(sent) > len(PAGES)  # the pages' documents, scripts, styles, fonts, and their websockets
    away = sorted({url for url in sent if urlsplit(url).netloc != own})
    assert not away, away


def test_the_explain_pages_url_opens_its_number_in_a_fresh_browser(page, browser, server) -> None:
    """The Explain page's URL names the number explained: a shared link opens it (and the server warns of nothing,
    as every test here: conftest.no_streamlit_warning)."""
    open_page(page, "/explain")
    page.wait_for_url("**/explain?explain=scores_raw.2.2")
    page.get_by_label("query", exact=True).first.click()
    page.get_by_role("option", name="Input 3").click()
    wait_ready(page)
    page.wait_for_url("**explain=scores_raw.3.2")
    shared = page.url
    other = new_context(browser, base_url=server)
    fresh = other.new_page()
    open_page(fresh, shared)
    assert "q₃ · k₂" in fresh.locator("[data-testid=stCode]").first.inner_text()
    other.close()


def test_the_log_check_finds_streamlit_warnings_only() -> None:
    log = """2026-12-03 13:51:34,688 [INFO streamlit.web.server] Serving
2026-12-03 13:51:35,001 [WARNING streamlit.elements.lib.policies] The widget with key "explain_tensor" was created
2026-12-03 13:51:35,002 [WARNING torch.cuda] CUDA initialisation
2026-12-03 13:51:35,003 [ERROR streamlit] Uncaught app exception"""
    found = streamlit_warnings(log)
    assert len(found) == 2 and "explain_tensor" in found[0] and "Uncaught" in found[1]
