"""Fixtures for the real-browser tests: one Streamlit server and one Chromium per session, a fresh context per test;
a test after which the server's log holds a Streamlit warning fails."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"  # Debian's build: Playwright's own browser download cannot work offline
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1000}
# The server's log names each line's level and logger, so that a Streamlit warning can be told from other lines
# (Streamlit's own format is the time and the message only)
LOG_FORMAT = "%(asctime)s [%(levelname)s %(name)s] %(message)s"
WARNED = re.compile(r"^.*\[(?:WARNING|ERROR|CRITICAL) streamlit[\w.]*\] .*$", re.MULTILINE)
START_TIMEOUT = 300  # seconds, a ceiling: the server imports torch on two cores that may be busy with other work
TIMEOUT_MS = 60_000  # a context's default: two slow cores, busy with other work, and a run with torch take seconds
# Run in every document before the app's own scripts: the order in which the visitor's last input (a key, a pointer,
# typed text, a paste) and the last end of a run came. A run ends when its last element, the app's pace component
# (attention/app/grid.py), is drawn: it says so by the window event "attention:run-ended". A run that an input starts
# ends after that input, however slow or fast the machine is, so test_browser.wait_ready can never take an earlier
# run's end, or a page still idle before its rerun began, for the end of the run an action started. (Streamlit's
# script state is no such sign: it also turns notRunning between a run that st.rerun() ends and the next one, as a
# page's first run does, and before a run's last elements are drawn.)
RUNS_SEEN = """(() => {
    const seen = { count: 0, input: 0, end: 0 };
    Object.defineProperty(window, '__e2eRuns', { value: seen });
    for (const type of ['keydown', 'pointerdown', 'pointerup', 'input', 'change', 'paste'])
        window.addEventListener(type, () => { seen.input = ++seen.count; }, true);
    window.addEventListener('attention:run-ended', () => { seen.end = ++seen.count; });
})();"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200 and response.read().strip() == b"ok"
    except OSError:
        return False


def streamlit_warnings(text: str) -> list[str]:
    """The lines of a server log (in LOG_FORMAT) that are Streamlit's warnings or errors."""
    return WARNED.findall(text)


class ServerLog:
    """The shared server's log, read on from where the last test's reading ended."""

    def __init__(self, path: Path):
        self.path, self.read_to = path, 0
        self.between: list[str] = []  # warnings logged between two tests: the session fails at its end

    def warnings(self) -> list[str]:
        """Streamlit's warnings logged since the last call."""
        with self.path.open("rb") as log:
            log.seek(self.read_to)
            text = log.read()
        self.read_to += len(text)
        return streamlit_warnings(text.decode(errors="replace"))


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The app served by a real `streamlit run`, on a free port, shared by every test that needs a server."""
    with serving(tmp_path_factory.mktemp("streamlit")) as served:
        yield served


@pytest.fixture(scope="session")
def server(served: Served) -> str:
    """The shared server's base URL."""
    return served.url


@pytest.fixture(scope="session")
def server_log(served: Served) -> Iterator[ServerLog]:
    """The shared server's log; at the session's end it must hold no Streamlit warning the tests did not fail on
    already (one logged between two tests)."""
    log = ServerLog(served.log)
    yield log
    if left := log.between + log.warnings():
        pytest.fail("the server logged Streamlit warnings:\n" + "\n".join(left))


@pytest.fixture(autouse=True)
def no_streamlit_warning(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that used the shared server fails when the server logged a Streamlit warning during it (a widget
    given a default and a session-state value, a deprecated argument …): each is a defect a visitor may meet."""
    if "server" not in request.fixturenames:
        yield
        return
    log = request.getfixturevalue("server_log")
    log.between += log.warnings()  # logged before this test began: not its own, and not forgotten
    yield
    if warned := log.warnings():
        pytest.fail("the server logged Streamlit warnings during this test:\n" + "\n".join(warned))


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[str]:
    """A server of its own, whose first request is the test's (a fresh server runs pages/ differently)."""
    yield from _serve(tmp_path)


def _serve(folder: Path) -> Iterator[str]:
    with serving(folder) as served:
        yield served.url


@dataclass(frozen=True)
class Served:
    """A running `streamlit run`: its base URL and its process id (to read its memory)."""

    url: str
    pid: int
    log: Path  # its stdout and stderr, in LOG_FORMAT


@contextmanager
def serving(folder: Path, env: Mapping[str, str] | None = None) -> Iterator[Served]:
    """`streamlit run app.py` on a free port (in `env`, else this process's environment) until the block ends."""
    port = _free_port()
    log_path = folder / "server.log"  # a file, not a pipe: a full pipe would block it
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    command += ["--server.port", str(port), "--server.address", "127.0.0.1", "--logger.messageFormat", LOG_FORMAT]
    log = log_path.open("wb")
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _healthy(url):
            if process.poll() is not None:
                output = log_path.read_text(errors="replace")
                pytest.fail(f"streamlit exited with {process.returncode} before it was healthy:\n{output}")
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit was not healthy at {url} after {START_TIMEOUT} s")
            time.sleep(0.25)
        yield Served(url, process.pid, log_path)
    finally:
        process.terminate()  # only the server this fixture started, by its PID
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


@pytest.fixture(scope="session")
def browser():
    # Imported here so that collecting the other tests never needs Playwright.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def new_context(browser, timeout_ms: int = TIMEOUT_MS, **options):
    """A browser context (a new Streamlit session for each page opened in it) whose pages record when runs end
    (RUNS_SEEN, which test_browser.wait_ready reads); VIEWPORT unless `options` say otherwise."""
    context = browser.new_context(**{"viewport": VIEWPORT, **options})
    context.set_default_timeout(timeout_ms)
    context.add_init_script(RUNS_SEEN)
    return context


@pytest.fixture
def page(browser, server):
    """A page in a fresh browser context: a new Streamlit session, so no test sees another's edits."""
    context = new_context(browser, base_url=server)
    page = context.new_page()
    yield page
    context.close()
