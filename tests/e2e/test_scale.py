"""Scale-out tests: two real replicas behind real nginx (deploy/serve.sh), many browser sessions, one replica lost."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from attention import attend
from attention.app.session import Session
from attention.base.case import with_options
from attention.base.files import dump_case
from attention.base.presets import article
from tests.e2e.cluster import COOKIE, REPLICA_COOKIE, REPLICA_HEADER, serve
from tests.e2e.conftest import new_context
from tests.e2e.test_browser import assert_no_exception, edit_cell, heatmaps, wait_for_heatmap, wait_ready

pytestmark = pytest.mark.e2e
expect.set_options(timeout=60_000)  # two slow cores, two replicas and several browsers at once
SERVER_CHANGED = "The server changed"  # notice.server_changed, as the page shows it
UPLOAD_LOST = "The file you were uploading did not arrive"  # notice.upload_lost


@pytest.fixture
def cluster(tmp_path: Path):
    with serve(2, tmp_path / "run") as cluster:
        yield cluster


def session(browser, cluster, cookie: str | None = None, **options):
    """A new browser context (a new Streamlit session) whose sticky cookie, when given, picks its replica."""
    context = new_context(browser, base_url=cluster.url, **options)
    if cookie is not None:
        context.add_cookies([{"name": COOKIE, "value": cookie, "url": cluster.url}])
    return context, context.new_page()


def served_by(page: Page, path: str) -> int:
    """Open `path` and wait for its run; the port of the replica that served the page."""
    response = page.goto(path)
    wait_ready(page)
    return int(response.headers[REPLICA_HEADER.lower()].rsplit(":", 1)[1])


def expected_outputs(row: int, value: float, **options) -> np.ndarray:
    """The article's outputs with x[row][1] = value (and these options), by the session model's rule (the article's
    rounded softmax only where it still fits) and the project's core."""
    model = Session.start()
    model.edit("x", row, 1, value)
    model.choose(**options)
    return attend(model.case).outputs.numpy()


def test_six_sessions_spread_over_two_replicas_see_only_their_own_edits(browser, cluster) -> None:
    """Three sessions on each replica, each editing a different cell or value through the proxy: after all edits
    each one, run again, shows its own outputs. A seventh, with no cookie, gets one from nginx and keeps its replica."""
    cookies = cluster.cookies(per_replica=3)
    plan = [(port, cookie) for port in cluster.ports for cookie in cookies[port]]
    edits = [(1 + i % 2, 3.0 + i) for i in range(len(plan))]  # x's row 2 or 3, column "2": each its own value
    contexts = []
    try:
        pages = []
        for port, cookie in plan:
            context, page = session(browser, cluster, cookie)
            contexts.append(context)
            assert served_by(page, "/inputs") == port, "nginx did not follow the sticky cookie"
            pages.append(page)
        for page, (row, value) in zip(pages, edits, strict=True):
            edit_cell(page, "x", row + 1, 2, f"{value:g}")
        for page, (row, value) in zip(pages, edits, strict=True):
            page.locator("[data-testid=stMain] h2").first.click()
            page.keyboard.press("r")  # Streamlit's rerun key: each session computes again from its own state
            wait_ready(page)
            want = expected_outputs(row, value)
            np.testing.assert_allclose(wait_for_heatmap(page, "outputs", want, atol=1e-4), want, atol=1e-4)
            assert_no_exception(page)
        assert len({expected_outputs(*e).tobytes() for e in edits}) == len(edits), "two sessions expect the same"

        context, page = session(browser, cluster)  # no cookie: nginx gives one
        contexts.append(context)
        first = served_by(page, "/")
        given = cookie_of(page, COOKIE)
        assert len(given) == 32, f"nginx set no sticky cookie: {context.cookies()}"
        assert cluster.replica_of(given) == first and cookie_of(page, REPLICA_COOKIE).endswith(f":{first}")
        assert served_by(page, "/walkthrough") == first, "a second page load moved to another replica"
    finally:
        for context in contexts:
            context.close()


def test_a_lost_replicas_sessions_come_back_on_the_other_without_a_click(browser, cluster, tmp_path: Path) -> None:
    """Two sessions on each replica, each at its own page, step, temperature and language; one session on the
    replica to be lost has an upload on its way. That replica is killed (SIGKILL, as a lost machine): its sessions
    show the same view on the other, with the note, without any input; the upload says it was lost; the other
    replica's sessions notice nothing. Then every session works, the moved ones on the replica that is left."""
    cookies = cluster.cookies(per_replica=2)
    lost, kept = cluster.ports
    views = [  # (cookie, replica, page, step, temperature, browser locale, the note in its language)
        (cookies[lost][0], lost, "/walkthrough", 4, 2.0, "zh-CN", "服务器已更换"),
        (cookies[lost][1], lost, "/inputs", 1, 4.0, "en-US", SERVER_CHANGED),
        (cookies[kept][0], kept, "/walkthrough", 4, 3.0, "en-US", SERVER_CHANGED),
        (cookies[kept][1], kept, "/walkthrough", 4, 5.0, "zh-CN", "服务器已更换"),
    ]
    case_file = tmp_path / "case.json"
    case_file.write_text(dump_case(with_options(article(), temperature=9.0)))
    contexts, pages = [], []
    try:
        for cookie, port, path, step, temperature, locale, _ in views:
            context, page = session(browser, cluster, cookie, locale=locale)
            contexts.append(context)
            assert served_by(page, path) == port
            set_temperature(page, temperature)
            if step != 1:
                page.locator(
                    "[data-testid=stMain] [data-testid=stRadio] label", has_text=re.compile(f"^{step} ")
                ).click()
                wait_ready(page)
            pages.append(page)
        before = [snapshot(page) for page in pages]
        for (_, _, path, step, *_), seen in zip(views, before, strict=True):
            assert seen["url"].split("?")[0].endswith(path) and "case=" in seen["url"]
            assert ("step=scores" in seen["url"]) == (step == 4)  # step 4 by its name

        uploading = pages[1]  # on the replica to be lost: its upload is held in the browser until the replica is gone
        held = []  # the PUT that sends the file (an OPTIONS preflight, if any, goes on)
        uploading.route(
            "**/_stcore/upload_file/**", lambda r: r.continue_() if r.request.method != "PUT" else held.append(r)
        )
        uploading.locator("[data-testid=stSidebar] [data-testid=stExpander]", has_text="Share and export").click()
        wait_ready(uploading)
        uploading.locator("[data-testid=stFileUploader] input[type=file]").set_input_files(case_file)
        wait_until(uploading, lambda: held)

        os.kill(cluster.pid(lost), signal.SIGKILL)  # no input to any page from here on, until the checks below
        for (_, port, *_, note), page in zip(views, pages, strict=True):
            if port == lost:
                expect(notice(page, note)).to_be_visible()
        held[0].continue_()  # the upload goes on to the proxy, whose replica for this session is gone
        expect(uploading.get_by_text(UPLOAD_LOST)).to_be_visible()
        expect(uploading.get_by_text("Opened case.json")).to_have_count(0)

        for (_, port, *_, note), page, seen in zip(views, pages, before, strict=True):
            wait_ready(page)
            assert snapshot(page) == seen, f"the view on {page.url} changed when replica {lost} was lost"
            # nginx now names the replica that holds the session: its requests stay there when the lost one is back
            assert cookie_of(page, REPLICA_COOKIE).endswith(f":{kept}")
            if port == kept:
                expect(notice(page, note)).to_have_count(0)
            assert_no_exception(page)

        raw = attend(article())["scores_raw"].numpy()
        for (_, _, path, *_), page in zip(views, pages, strict=True):  # every session is live, on the kept replica
            if path == "/walkthrough":
                set_temperature(page, 8.0)
                want = raw / 8.0
                np.testing.assert_allclose(wait_for_heatmap(page, "scores", want, atol=1e-5), want, atol=1e-5)
            else:
                edit_cell(page, "x", 2, 2, "5")
                want = expected_outputs(1, 5.0, temperature=4.0)
                np.testing.assert_allclose(wait_for_heatmap(page, "outputs", want, atol=1e-4), want, atol=1e-4)
            assert_no_exception(page)
    finally:
        for context in contexts:
            context.close()


def cookie_of(page: Page, name: str) -> str:
    """The value of the cookie `name` that the page's context holds ("" when none)."""
    return next((c["value"] for c in page.context.cookies() if c["name"] == name), "")


def notice(page: Page, text: str):
    """The app's notice (an alert at the top of the page) that holds `text`."""
    return page.locator("[data-testid=stAlert]", has_text=text)


def set_temperature(page: Page, value: float) -> None:
    field = temperature_field(page)
    field.fill(f"{value:g}")
    field.press("Enter")
    wait_ready(page)


def temperature_field(page: Page):
    """The sidebar's Temperature, by its widget key (its label is in the page's language)."""
    return page.locator("[data-testid=stSidebar] .st-key-temperature input")


def snapshot(page: Page) -> dict:
    """What a person sees of the view: the URL (page, step, case, language), the header, the temperature, and the
    numbers of every heatmap titled scores or outputs."""
    return {
        "url": page.url,
        "header": page.locator("[data-testid=stMain] h1, [data-testid=stMain] h2").first.inner_text(),
        "temperature": temperature_field(page).input_value(),
        "charts": {t: [z.round(5).tolist() for z in heatmaps(page, t)] for t in ("scores", "outputs")},
    }


def wait_until(page: Page, condition, seconds: float = 60) -> None:
    """Poll `condition()` while Playwright handles the page's events (route handlers run in its waits)."""
    for _ in range(int(seconds * 10)):
        if condition():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"not true after {seconds} s")
