"""Benchmark (not a test): what one action costs the server. The real server driven by real Chromium, its CPU time
over a run of actions (each waited for until the page has redrawn), less its idle rate, per action, for five
actions at the article's size and at n = 64, d = 16, against two floor apps measured in the same run; writes
bench/server.md (bench/profile.py drives the same actions under py-spy)."""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app is not installed; the e2e helpers live here
from attention.base.files import case_to_link
from attention.base.presets import random_case
from bench.browser import TITLED, new_page, server
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, ROOT
from tests.e2e.test_browser import TIMEOUT_MS, cell, wait_ready

# Actions a measure: the server's CPU clock ticks every 10 ms, so a 10 ms action is read to ±6 % over 16.
ACTIONS = int(os.environ.get("BENCH_ACTIONS", 16))
IDLE_S = 3.0  # seconds of an open page doing nothing, for the idle rate subtracted (the WebSocket's pings)
TICK = os.sysconf("SC_CLK_TCK")
TARGET = 3  # server CPU per action ≤ 3× the heatmap floor's (issue 19), at both sizes
# The floors (issue 19): one number input drawing one 3 × 3 Plotly heatmap, and one drawing only the number as text.
HEATMAP_FLOOR_APP = """import numpy as np
import plotly.graph_objects as go
import streamlit as st

x = st.number_input("x", value=1)
st.plotly_chart(go.Figure(go.Heatmap(z=x * np.arange(1.0, 10.0).reshape(3, 3))), key="heatmap")
"""
TEXT_FLOOR_APP = 'import streamlit as st\n\nx = st.number_input("x", value=1)\nst.write(f"value {x}")\n'
# The key of the heatmap titled `title` (its numbers as shipped), to see that a redraw has shown new numbers.
KEY = f"""(title) => {{ const t = ({TITLED})(title)[0]?.data[0];
    return t ? (t.z?.bdata ?? JSON.stringify(t.z)) : null; }}"""
CHANGED = f"([title, before]) => (k => k !== null && k !== before)(({KEY})(title))"
SIZES = {"the article's size": None, "n = 64, d = 16": dict(n=64, d_in=16, d_k=16, d_v=16, seed=1)}


def cpu_seconds(pid: int) -> float:
    """The process's user + system time so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


@dataclass
class Measure:
    """One action, repeated: its server CPU and wall time, each per action."""

    name: str
    per_action: float  # seconds of server CPU an action, idle subtracted
    wall: float  # seconds an action, until redrawn


def measure(
    pid: int, page, act: Callable[[int], None], name: str, actions: int = ACTIONS, watch=nullcontext
) -> Measure:
    """`act(i)` for i in 0..actions-1 (each waits until its redraw is on screen), after one untimed warm-up; the
    actions run inside `watch()` (bench/profile.py's py-spy)."""
    act(-1)
    wait_ready(page)
    idle_start, idle_cpu = time.perf_counter(), cpu_seconds(pid)
    page.wait_for_timeout(IDLE_S * 1e3)
    idle_rate = (cpu_seconds(pid) - idle_cpu) / (time.perf_counter() - idle_start)
    with watch():
        start, cpu = time.perf_counter(), cpu_seconds(pid)
        for i in range(actions):
            act(i)
        wall = time.perf_counter() - start
        used = cpu_seconds(pid) - cpu - idle_rate * wall
    return Measure(name, max(used, 0.0) / actions, wall / actions)


def redrawn(page, title: str, commit: Callable[[], None]) -> None:
    """`commit()`, then wait until the heatmap titled `title` shows new numbers and the run has ended."""
    before = page.evaluate(KEY, title)
    commit()
    page.wait_for_function(CHANGED, arg=[title, before], polling="raf", timeout=TIMEOUT_MS)
    wait_ready(page)


def floor_action(page, chart: bool) -> Callable[[int], None]:
    field = page.get_by_label("x", exact=True)

    def act(i: int) -> None:
        field.fill(str(i + 3))  # a new number every time: nothing is served from a cache
        if chart:
            redrawn(page, "", lambda: field.press("Enter"))
        else:
            field.press("Enter")
            page.get_by_text(f"value {i + 3}", exact=True).wait_for(timeout=TIMEOUT_MS)
            wait_ready(page)

    return act


def edit(page) -> Callable[[int], None]:
    """/inputs: x[2][2] typed and committed with Enter, a new value every time, until the outputs are redrawn."""

    def act(i: int) -> None:
        box = cell(page, "x", 2, 2)
        box.click()
        page.keyboard.press("Backspace")
        page.keyboard.type(f"{2 + (i + 2) / 8:g}")
        redrawn(page, "outputs", lambda: page.keyboard.press("Enter"))

    return act


def drag_step(page) -> Callable[[int], None]:
    """/inputs: one step of a drag (Alt+↑ in x[2][2]: one whole run, as a dragged mouse's step is)."""

    def act(i: int) -> None:
        box = cell(page, "x", 2, 2)
        box.focus()
        redrawn(page, "outputs", lambda: box.press("Alt+ArrowUp" if i % 4 < 2 else "Alt+ArrowDown"))

    return act


def temperature(page) -> Callable[[int], None]:
    """/walkthrough at step 4: a new temperature in the sidebar, until the scores are redrawn."""
    field = page.locator("[data-testid=stSidebar] .st-key-temperature input")

    def act(i: int) -> None:
        field.fill(f"{1 + (i + 2) / 8:g}")  # a new one every time
        redrawn(page, "scores", lambda: field.press("Enter"))

    return act


def new_header(page, click: Callable[[], None]) -> None:
    """`click()`, then wait until the page's header (its step, or another page) has changed and the run has ended."""
    before = page.locator("[data-testid=stMain] h2").first.inner_text()
    click()
    page.wait_for_function(
        "(before) => document.querySelector('[data-testid=stMain] h2')?.innerText !== before", arg=before
    )
    wait_ready(page)


def step(page) -> Callable[[int], None]:
    """/walkthrough: the next step (▶), and from the last back (◀), until the step's page is drawn."""
    direction = {"next": True}

    def act(i: int) -> None:
        button = page.locator(".st-key-next button" if direction["next"] else ".st-key-previous button")
        if button.is_disabled():
            direction["next"] = not direction["next"]
            button = page.locator(".st-key-next button" if direction["next"] else ".st-key-previous button")
        new_header(page, button.click)

    return act


def switch(page) -> Callable[[int], None]:
    """A page switch by the sidebar's links, /walkthrough and /inputs in turn, until the page is drawn."""

    def act(i: int) -> None:
        path = "inputs" if i % 2 else "walkthrough"  # from /walkthrough: the warm-up (-1) opens /inputs
        new_header(page, page.locator(f"[data-testid=stSidebarNav] a[href$='/{path}']").click)

    return act


def open_app(page, path: str, sizes: dict | None) -> None:
    """The app at `path`, with the article's numbers or a seeded random case of `sizes` (by its link)."""
    query = f"?case={case_to_link(random_case(**sizes))}" if sizes else ""
    page.goto(f"/{path}{query}")
    wait_ready(page)


def at_step_4(page) -> None:
    page.locator("[data-testid=stMain] [data-testid=stRadio] label >> text=/^4 /").click()
    wait_ready(page)


# The five actions (issue 19): where each starts, and how it is done.
APP_ACTIONS = {
    "an edit of x on /inputs": ("inputs", None, edit),
    "a new temperature at step 4": ("walkthrough", at_step_4, temperature),
    "the next step on the walkthrough": ("walkthrough", None, step),
    "one step of a drag (Alt+↑)": ("inputs", None, drag_step),
    "a page switch": ("walkthrough", None, switch),
}


@contextmanager
def app_server(script: Path) -> Iterator[tuple[str, int]]:
    with server(script) as (url, process):
        yield url, process.pid


def floors(browser, folder: Path) -> dict[str, Measure]:
    results = {}
    for name, source, chart in (("heatmap floor", HEATMAP_FLOOR_APP, True), ("text floor", TEXT_FLOOR_APP, False)):
        script = folder / f"{name.split()[0]}.py"
        script.write_text(source)
        with app_server(script) as (url, pid):
            context, page = new_page(browser, url)
            page.goto("/")
            wait_ready(page)
            results[name] = measure(pid, page, floor_action(page, chart), name)
            context.close()
    return results


def app_actions(browser, size: str, watch: Callable[[int, str], object] | None = None) -> dict[str, Measure]:
    """Every action of APP_ACTIONS at one size, on one server (a page of its own for each); `watch(pid, name)`, a
    context manager around each action's run (bench/profile.py's py-spy)."""
    results = {}
    with app_server(ROOT / "app.py") as (url, pid):
        for name, (path, before, action) in APP_ACTIONS.items():
            context, page = new_page(browser, url)
            open_app(page, path, SIZES[size])
            if before:
                before(page)
            spy = (lambda name=name: watch(pid, name)) if watch else nullcontext
            results[name] = measure(pid, page, action(page), name, watch=spy)
            context.close()
            print(f"{size}, {name}: {results[name].per_action * 1e3:.0f} ms", file=sys.stderr, flush=True)
    return results


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f} ms"


def table(floor: dict[str, Measure], apps: dict[str, dict[str, Measure]]) -> list[str]:
    heatmap = floor["heatmap floor"].per_action
    lines = [
        "| action | size | server CPU per action | wall per action | × heatmap floor | × text floor | target | met? |",
        "|---|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for m in floor.values():
        lines.append(f"| {m.name} | 3 × 3 | {ms(m.per_action)} | {ms(m.wall)} | | | | |")
    for size, results in apps.items():
        for m in results.values():
            ratio = m.per_action / heatmap
            text = m.per_action / floor["text floor"].per_action
            met = "yes" if ratio <= TARGET else "**no**"
            lines.append(
                f"| {m.name} | {size} | {ms(m.per_action)} | {ms(m.wall)} | {ratio:.2f}× | {text:.2f}× "
                f"| ≤ {TARGET}× | {met} |"
            )
    return lines


def main() -> None:
    load = os.getloadavg()[0]
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        floor = floors(browser, Path(folder))
        apps = {size: app_actions(browser, size) for size in SIZES}
        chromium = browser.version
        browser.close()
    gc_setting = os.environ.get("STREAMLIT_RUNNER_POST_SCRIPT_GC", "as .streamlit/config.toml sets it")
    lines = [
        "# What one action costs the server",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {load:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end",
        f"- python {platform.python_version()}, streamlit {version('streamlit')}, torch {version('torch')}, "
        f"Chromium {chromium} (headless); every server started from the checkout, so .streamlit/config.toml "
        f"applies to the floors too (post-script gc: {gc_setting})",
        f"- server CPU: the server process's user + system time (/proc/PID/stat) over {ACTIONS} actions, each "
        f"waited for until the page has redrawn with the new numbers, less the idle rate over {IDLE_S:g} s of the "
        "same page doing nothing, divided by the actions; after one untimed warm-up. Wall: the same run's time an "
        "action (the browser's drawing included)",
        "- floors: temporary apps, one `st.number_input` drawing one 3 × 3 Plotly heatmap (the heatmap floor), or "
        "the number as text (the text floor)",
        "",
        *table(floor, apps),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    (Path(__file__).parent / "server.md").write_text(text)


if __name__ == "__main__":
    main()
