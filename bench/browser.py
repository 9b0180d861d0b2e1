"""Benchmark (not a test): the app in a real browser (Chromium via Playwright) against one-widget floor apps."""

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

import numpy as np
from playwright.sync_api import expect, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app is not installed; the e2e helpers live here
from attention import attend
from attention.app.session import Session
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, ROOT, START_TIMEOUT, _free_port, _healthy, new_context
from tests.e2e.test_browser import READY, TIMEOUT_MS, cell, heatmaps, wait_ready

FLOOR_APP = 'import streamlit as st\n\nx = st.number_input("x", value=1)\nst.write(x * 2)\n'
# The edit floors of issue 12: one number input drawing one heatmap, as the app's edits end in heatmaps: a bare
# 2 × 2 Plotly heatmap, and the app's own 3 × 3 one (show/heatmap.py: numbers in the cells, a colour bar, titles),
# which is what /inputs draws.
HEATMAP_FLOOR_APP = """import plotly.graph_objects as go
import streamlit as st

x = st.number_input("x", value=1)
st.plotly_chart(go.Figure(go.Heatmap(z=[[x, 2 * x], [3 * x, 4 * x]])), key="heatmap")
"""
FIGURE_FLOOR_APP = f"""import sys

sys.path.insert(0, {str(ROOT)!r})  # the app's own figure builder
import numpy as np
import streamlit as st
from attention.show.heatmap import heatmap

x = st.number_input("x", value=1)
z = x * np.arange(1.0, 10.0).reshape(3, 3)
names = ["Input 1", "Input 2", "Input 3"]
st.plotly_chart(heatmap(z, names, ["1", "2", "3"], "query", "output dim", "outputs"), key="heatmap")
"""
# The edit floor for a cell of a grid: one data editor (x's 3 × 4 at first) and the sum of its numbers.
EDITOR_FLOOR_APP = """import pandas as pd
import streamlit as st

x = st.data_editor(pd.DataFrame([[1.0, 0.0, 1.0, 0.0]] * 3, columns=list("1234")), key="x")
st.write(f"sum {x.to_numpy().sum():g}")
"""
# The cold-load floor: the same app drawing one of each kind of element the walkthrough draws, so that it loads
# the same frontend code (plotly.js, KaTeX, the data grid, the code highlighter) as the app must.
BUNDLE_FLOOR_APP = (
    FLOOR_APP
    + """import pandas as pd
import plotly.graph_objects as go

st.latex("x^2")
st.code("x = 1", language="python")
st.plotly_chart(go.Figure(go.Heatmap(z=[[x, 2]])))
st.dataframe(pd.DataFrame([[x, 2]]))
with st.expander("more"):
    st.table(pd.DataFrame([[x, 2]]))
"""
)
SHOWN = "(t) => document.querySelector('[data-testid=stMain]')?.innerText.split('\\n').some(l => l.trim() === t)"
# A load ends when the run is over, every chart is drawn (the e2e tests' READY) and the page's text is there.
LOADED = f"(t) => document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning' \
&& ({READY})() && ({SHOWN})(t)"
TITLED = "(title) => [...document.querySelectorAll('.js-plotly-plot')].filter(gd => (gd.layout?.title?.text ?? '')\
.replace(/<[^>]*>/g, '') === title && gd.data?.[0])"
# Plotly 7 ships z as {dtype, bdata, shape}, decoded here in the page: the wait then polls every frame (the e2e
# helper polls from Python every 200 ms, too coarse for a redraw of ~100 ms).
MATCH = f"""({{title, want, atol}}) => {{
    const types = {{f8: Float64Array, f4: Float32Array, i4: Int32Array, i2: Int16Array, i1: Int8Array}};
    const values = (z) => Array.isArray(z) ? z.flatMap(r => Array.from(r))
        : Array.from(new (types[z.dtype])(Uint8Array.from(atob(z.bdata), c => c.charCodeAt(0)).buffer));
    const figs = ({TITLED})(title).filter(gd => gd.data[0].z);
    return figs.length > 0 && figs.map(gd => values(gd.data[0].z))
        .every(v => v.length === want.length && v.every((x, i) => Math.abs(x - want[i]) <= atol));
}}"""
Z_KEY = f"""() => {{ const t = ({TITLED})('scores')[0]?.data[0];
    return t ? (t.source ?? t.z?.bdata ?? JSON.stringify(t.z)) : null; }}"""  # a big matrix is an image: its PNG
BAR = f"(title) => ({TITLED})(title)[0]?.data[1]?.z?.[0]"  # an image's colour bar: [low, high] of its values
SHAPE = f"(title) => (m => m && [m.rows, m.cols])(({TITLED})(title)[0]?.layout?.meta)"
# What the page shows, as raw float32: rows × cols × 4 bytes for every heatmap in the main area (heatmap()
# puts the matrix's shape in layout.meta, whether it is drawn as a heatmap or as an image).
RAW = """() => [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')].map(gd => gd.layout?.meta)
    .filter(m => m?.rows).reduce((sum, m) => sum + 4 * m.rows * m.cols, 0)"""


@contextmanager
def serve(script: Path):
    """`streamlit run script` on a free loopback port, from the repo root (so .streamlit/config.toml applies)."""
    with server(script) as (url, _):
        yield url


@contextmanager
def server(script: Path):
    """The same, yielding its URL and its process (whose CPU time bench/server.py reads)."""
    port = _free_port()
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a full pipe would block the server
        command = [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true"]
        command += ["--server.port", str(port), "--server.address", "127.0.0.1"]
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log)
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + START_TIMEOUT
        try:
            while not _healthy(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    sys.exit(f"streamlit did not start at {url}:\n{log.read().decode(errors='replace')}")
                time.sleep(0.25)
            yield url, process
        finally:
            process.terminate()  # only the server started here, by its PID
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def new_page(browser, url: str):
    """A page in a new context that records when runs end (wait_ready reads it), every Playwright wait bounded."""
    context = new_context(browser, base_url=url)
    return context, context.new_page()


def timed(page, commit, done: str, arg=None) -> float:
    """Milliseconds from `commit()` until `done` holds in the page, polled every animation frame."""
    start = time.perf_counter()
    commit()
    page.wait_for_function(done, arg=arg, polling="raf", timeout=TIMEOUT_MS)
    return (time.perf_counter() - start) * 1e3


def cold_loads(browser, url: str, path: str, text: str, runs: int = 5) -> list[float]:
    """goto → ready, each in a fresh context (a new session, an empty cache). The first is untimed: a server's first
    session imports the app's modules (torch, plotly), which no later visitor waits for."""
    times = []
    for _ in range(runs + 1):
        context, page = new_page(browser, url)
        times.append(timed(page, lambda page=page: page.goto(path), LOADED, text))
        context.close()
    return times[1:]


def floor(browser, url: str) -> tuple[list[float], list[float]]:
    context, page = new_page(browser, url)
    page.goto("/")
    page.wait_for_function(LOADED, arg="2", polling="raf", timeout=TIMEOUT_MS)
    box, edits = page.get_by_label("x"), []
    for i in range(11):  # the first is a warm-up; alternate values, so every edit changes the text
        box.fill(str((1234, 4321)[i % 2]))
        edits.append(timed(page, lambda: box.press("Enter"), SHOWN, str(2 * (1234, 4321)[i % 2])))
    context.close()
    return edits[1:], cold_loads(browser, url, "/", "2")


def heatmap_floor(browser, url: str, runs: int = 10, title: str = "", cells: int = 4) -> list[float]:
    """A heatmap floor app: a new x, Enter, until its heatmap shows x, 2x, 3x, … (its `cells` numbers)."""
    context, page = new_page(browser, url)
    page.goto("/")
    page.wait_for_function(LOADED, arg="x", polling="raf", timeout=TIMEOUT_MS)
    box, edits = page.get_by_label("x", exact=True), []
    for i in range(runs + 1):  # the first is a warm-up
        value = (1234, 4321)[i % 2]
        box.fill(str(value))
        want = {"title": title, "want": [value * k for k in range(1, cells + 1)], "atol": 0}
        edits.append(timed(page, lambda: box.press("Enter"), MATCH, want))
        page.wait_for_function(LOADED, arg="x", polling="raf", timeout=TIMEOUT_MS)
    context.close()
    return edits[1:]


def open_cell(page, grid, column: int, text: str) -> None:
    """Row 2 of the grid, `column` arrows right of the row label, opened and filled with `text` (not committed),
    so that timing can start at the Enter that commits."""
    grid.click(position={"x": 5, "y": 35 + 35 + 35 // 2})  # the row label (header and rows 35 px): not the canvas
    for key in ("ArrowRight",) * column + ("Enter",):
        page.keyboard.press(key)
    box = page.locator("input.gdg-input")
    box.fill(text)
    expect(box).to_have_value(text, timeout=TIMEOUT_MS)


def editor_floor(browser, url: str, runs: int = 8) -> list[float]:
    """The data-editor floor app: its cell (2, "2"), alternately 5 and 2, until the new sum is shown."""
    context, page = new_page(browser, url)
    page.goto("/")
    page.wait_for_function(LOADED, arg="sum 6", polling="raf", timeout=TIMEOUT_MS)
    grid, times = page.locator("[data-testid=stDataFrame]").first, []
    for i in range(runs + 1):  # the first is a warm-up
        text = ("5", "2")[i % 2]
        open_cell(page, grid, 2, text)
        times.append(timed(page, lambda: page.keyboard.press("Enter"), SHOWN, f"sum {6 + int(text):g}"))
        page.wait_for_function(LOADED, arg=f"sum {6 + int(text):g}", polling="raf", timeout=TIMEOUT_MS)
    context.close()
    return times[1:]


def type_into(page, text: str) -> None:
    """x[2][2] selected by a click and typed into (not committed: the timing starts at the Enter that commits)."""
    box = cell(page, "x", 2, 2)
    box.click()
    page.keyboard.press("Backspace")
    page.keyboard.type(text)
    expect(box).to_have_value(text, timeout=TIMEOUT_MS)


def inputs_edit(browser, url: str, runs: int = 8) -> list[float]:
    """x's row 2, column 2 in the matrix editor, alternately 5 and 2, until every chart on /inputs (the outputs)
    shows the numbers the core computes."""
    context, page = new_page(browser, url)
    page.goto("/inputs")
    wait_ready(page)
    times = []
    for i in range(runs + 1):  # the first is a warm-up
        text, edited = ("5", "2")[i % 2], Session.start()
        edited.edit("x", 1, 1, float(text))  # by the session model's rule (the rounded softmax where it fits)
        want = attend(edited.case).outputs  # the project's core, as the oracle for the new numbers
        type_into(page, text)
        arg = {"title": "outputs", "want": want.flatten().tolist(), "atol": 1e-4}
        times.append(timed(page, lambda: page.keyboard.press("Enter"), MATCH, arg))
        assert all(np.allclose(z, want, atol=1e-4) for z in heatmaps(page, "outputs"))
        wait_ready(page)  # the run's tail (the table, the pace marker) ends before the next edit
    context.close()
    return times[1:]


# Each time the outputs heatmap shows new numbers, the moment (performance.now), recorded every animation frame.
RECORD_DRAWS = f"""() => {{ window.draws = []; let last = null;
    const key = () => {{ const t = ({TITLED})('outputs')[0]?.data[0];
        return t ? (t.z?.bdata ?? JSON.stringify(t.z)) : null; }};
    (function frame() {{ const k = key(); if (k !== last) {{ last = k; window.draws.push(performance.now()); }}
        requestAnimationFrame(frame); }})(); }}"""


def scrub(browser, url: str, drags: int = 4, seconds: float = 4.0) -> tuple[list[float], list[float]]:
    """x[2][2] dragged sideways (back and forth over 240 px, a move every ~16 ms) for `seconds`: the outputs redrawn
    per second while the mouse is down, and the milliseconds between two redraws."""
    context, page = new_page(browser, url)
    page.goto("/inputs")
    wait_ready(page)
    page.evaluate(RECORD_DRAWS)
    rates, gaps = [], []
    for _ in range(drags):
        box = cell(page, "x", 2, 2).bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        start, moves = page.evaluate("performance.now()"), 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            moves += 1
            page.mouse.move(x + 120 - abs(moves % 80 * 6 - 240) + 120, y)  # a triangle wave: 0 … 240 px
            page.wait_for_timeout(16)
        stop = page.evaluate("performance.now()")
        page.mouse.up()
        wait_ready(page)
        draws = [t for t in page.evaluate("window.draws") if start < t <= stop]
        rates.append(len(draws) / ((stop - start) / 1e3))
        gaps += list(np.diff(draws))
    context.close()
    return rates, gaps


def editor_sizes(browser, url: str, sizes=((16, 16), (32, 32), (32, 64)), runs: int = 4) -> dict:
    """/inputs with x at each size (set in the sidebar: d_in, then n): the rerun until the editor holds all of x's
    inputs (a new grid: every input made), then edits of one cell until the outputs are redrawn (every input
    refreshed). The editor's draw is what sets EDITOR_MAX_CELLS (attention/app/editors.py)."""
    context, page = new_page(browser, url)
    page.goto("/inputs")
    wait_ready(page)
    sidebar, results = page.locator("[data-testid=stSidebar]"), {}
    sidebar.locator("[data-testid=stExpander] summary", has_text="Sizes").click()
    sidebar.locator("[data-testid=stRadio] label", has_text="random").click()  # zeros would make the outputs 0
    wait_ready(page)
    count = """(n) => [...document.querySelectorAll('[data-testid=stBidiComponentIsolated]')]
        .some(h => h.shadowRoot?.querySelectorAll('input.number').length === n)"""
    outputs = f"() => (t => t && (t.z?.bdata ?? JSON.stringify(t.z)))(({TITLED})('outputs')[0]?.data[0])"
    for n, d in sizes:
        for label, value in (("n · tokens", 3), ("d_in", d)):  # from 3 tokens: n set last always makes a new grid
            field = sidebar.get_by_label(label, exact=True)
            if field.input_value() == str(value):
                continue  # no change, no run to wait for
            field.fill(str(value))
            field.press("Enter")
            wait_ready(page)
        field = sidebar.get_by_label("n · tokens", exact=True)
        field.fill(str(n))
        drawn = timed(page, lambda field=field: field.press("Enter"), count, n * d)
        wait_ready(page)
        edits = []
        for _ in range(runs + 1):
            before = page.evaluate(outputs)
            text = "2" if cell(page, "x", 2, 2).input_value() == "5" else "5"  # a new number every time
            type_into(page, text)
            edits.append(timed(page, lambda: page.keyboard.press("Enter"), f"(b) => ({outputs})() !== b", before))
            wait_ready(page)
        results[(n, d)] = (drawn, edits[1:])
    context.close()
    return results


def shown_scores(page) -> np.ndarray:
    """The scores heatmap's numbers; for a big one, drawn as an image, its colour bar's range (± the largest)."""
    z = heatmaps(page, "scores")
    return z[0] if z else np.asarray(page.evaluate(BAR, "scores"), dtype=np.float64)


def temperature(page, frames: list[int], values) -> tuple[list[float], list[int], int]:
    """Temperature set to each value: time until the scores heatmap changes, and the WebSocket bytes of each rerun."""
    field, times, payloads = page.locator("[data-testid=stSidebar]").get_by_label("Temperature", exact=True), [], []
    raw = shown_scores(page) * float(field.input_value())  # scores_raw: the scores are this / temperature
    for t in values:  # the first is a warm-up
        field.fill(f"{t:g}")
        page.evaluate(f"() => {{ window.before = ({Z_KEY})(); }}")  # compared in the page: 11 MB at n = 1024
        mark = len(frames)
        times.append(timed(page, lambda: field.press("Enter"), f"() => (k => k && k !== window.before)(({Z_KEY})())"))
        wait_ready(page)
        page.wait_for_timeout(500)  # the rerun's last messages (script finished) come after the charts
        payloads.append(sum(frames[mark:]))
        assert np.allclose(shown_scores(page), raw / t, rtol=1e-6), "the scores did not follow"
    return times[1:], payloads[1:], page.evaluate(RAW)


def walkthrough_rerun(browser, url: str) -> dict[str, tuple]:
    """/walkthrough at step 4, at the default size, then at n = 1024, d = 64 set through the sidebar. The client
    keeps recent large messages and the server sends a reference for those (Streamlit's ForwardMsgCache): new
    temperatures, going back and forth between two, and the first draw at n = 1024 are measured apart."""
    context, page = new_page(browser, url)
    frames: list[int] = []  # sizes of the frames the page receives; listening before the socket opens
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(len(payload))))
    page.goto("/walkthrough")
    wait_ready(page)
    page.locator("[data-testid=stRadio] label", has_text="4 scores").click()
    wait_ready(page)
    new = [1 + k / 4 for k in range(1, 15)]  # exact in binary: the check scores_raw / t is exact too
    results = {"small": temperature(page, frames, new[:9])}
    sidebar = page.locator("[data-testid=stSidebar]")
    sidebar.locator("[data-testid=stExpander] summary", has_text="Sizes").click()
    sidebar.locator("[data-testid=stRadio] label", has_text="random").click()  # zeros: all-zero scores, no change
    wait_ready(page)
    for label, value in (("d_in", 64), ("d_k", 64), ("d_v", 64), ("n · tokens", 1024)):  # n last: the costly one
        mark = len(frames)
        sidebar.get_by_label(label, exact=True).fill(str(value))
        sidebar.get_by_label(label, exact=True).press("Enter")
        wait_ready(page)
    page.wait_for_timeout(500)
    results["first"] = ([], [sum(frames[mark:])], page.evaluate(RAW))
    assert page.evaluate(SHAPE, "scores") == [1024, 1024]
    results["new"] = temperature(page, frames, new[9:])
    results["again"] = temperature(page, frames, [new[-2], new[-1]] * 2 + [new[-2]])
    context.close()
    return results


def ms(v: float) -> str:
    return f"{v:,.0f} ms"


def size(v: float) -> str:
    return f"{v / 2**20:,.2f} MiB" if v >= 2**20 else f"{v / 2**10:,.1f} KiB" if v >= 2**10 else f"{v:.0f} B"


def row(name: str, values: list, show=ms, floor: float | None = None, of: str = "", target: float = 0) -> str:
    """Median and range of `values`, and the median's ratio to `floor` (measured in this run) and to the target."""
    median = statistics.median(values)
    cells = [name, len(values), show(median), f"{show(min(values))} – {show(max(values))}"]
    if floor is not None:
        met = ("yes" if median / floor <= target else "**no**") if target else ""
        cells += [f"{of} {show(floor)}", f"{median / floor:,.2f}×", f"≤ {target:g}×" if target else "", met]
    return "| " + " | ".join(map(str, cells + [""] * (8 - len(cells)))) + " |"


def rate(name: str, values: list[float], target: float) -> str:
    """A row for a rate (more is better): median, range and whether the median reaches the target."""
    median = statistics.median(values)
    met = "yes" if median >= target else "**no**"
    spread = f"{min(values):.1f}/s – {max(values):.1f}/s"
    cells = [name, len(values), f"{median:.1f}/s", spread, "", "", f"≥ {target:g}/s"]
    return "| " + " | ".join(map(str, [*cells, met])) + " |"


def measure(browser, folder: Path) -> dict:
    """Every measure, each with a server of its own (a fresh process: no measure warms another's caches)."""
    (folder / "floor.py").write_text(FLOOR_APP)
    (folder / "heatmap.py").write_text(HEATMAP_FLOOR_APP)
    (folder / "figure.py").write_text(FIGURE_FLOOR_APP)
    (folder / "bundles.py").write_text(BUNDLE_FLOOR_APP)
    (folder / "editor.py").write_text(EDITOR_FLOOR_APP)
    measures = {
        "floor": (folder / "floor.py", floor),
        "heatmap floor": (folder / "heatmap.py", heatmap_floor),
        "figure floor": (folder / "figure.py", lambda b, u: heatmap_floor(b, u, title="outputs", cells=9)),
        "bundle floor": (folder / "bundles.py", lambda b, u: cold_loads(b, u, "/", "2")),
        "editor floor": (folder / "editor.py", editor_floor),
        "edit": (ROOT / "app.py", inputs_edit),
        "scrub": (ROOT / "app.py", scrub),
        "sizes": (ROOT / "app.py", editor_sizes),
        "cold": (ROOT / "app.py", lambda b, u: cold_loads(b, u, "/walkthrough", "Step 1 · Prepare inputs")),
        "rerun": (ROOT / "app.py", walkthrough_rerun),
    }
    results = {}
    for name, (script, run) in measures.items():
        started = time.perf_counter()
        with serve(script) as url:
            results[name] = run(browser, url)
        print(f"{name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return results


def editing_rows(results: dict) -> list[str]:
    """The editing loop's rows (issue 12): edit → redraw against the floors, scrubbing, the editor's size."""
    edit, heatmap_edit = results["edit"], statistics.median(results["heatmap floor"])
    figure_edit = statistics.median(results["figure floor"])
    number_edit, grid_edit = statistics.median(results["floor"][0]), statistics.median(results["editor floor"])
    rates, gaps = results["scrub"]
    rows = [
        row("heatmap floor (one number input drawing a bare 2 × 2 heatmap): edit → redrawn", results["heatmap floor"]),
        row("figure floor (one number input drawing the app's 3 × 3 heatmap): edit → redrawn", results["figure floor"]),
        row("editor floor (one 3 × 4 st.data_editor and its sum): edit a cell → sum shown", results["editor floor"]),
        row("/inputs: edit x[2][2] in the matrix editor → outputs redrawn", edit, ms, figure_edit, "figure floor", 2),
        row("/inputs: the same edit, against the bare heatmap floor", edit, ms, heatmap_edit, "heatmap floor", 2),
        row("/inputs: the same edit, against the number-input floor", edit, ms, number_edit, "floor"),
        row("/inputs: the same edit, against the data-editor floor", edit, ms, grid_edit, "editor floor"),
        rate("/inputs, 3 tokens: x[2][2] dragged sideways → outputs redrawn per second, mouse down", rates, 5),
        row("… between two redraws while dragging", gaps, ms, statistics.median(edit), "an edit"),
    ]
    small_edit = statistics.median(edit)
    for (n, d), (drawn, edits) in results["sizes"].items():
        rows.append(row(f"/inputs, x {n} × {d} ({n * d:,} inputs): n set → x's editor drawn", [drawn]))
        rows.append(row("… an edit of x[2][2] → outputs redrawn", edits, ms, small_edit, "3 × 4"))
    return rows


def main() -> None:
    load = os.getloadavg()[0]
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        results = measure(browser, Path(folder))
        chromium = browser.version
        browser.close()
    (floor_edit, floor_cold), cold, median = results["floor"], results["cold"], statistics.median
    bundle_cold = results["bundle floor"]
    small, small_bytes, small_raw = results["rerun"]["small"]
    walk, big = statistics.median(small), {k: v for k, v in results["rerun"].items() if k != "small"}
    lines = [
        "# The app in a real browser, against one-widget floor apps",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {load:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end (other work on these CPUs inflates the times)",
        f"- python {platform.python_version()}, streamlit {version('streamlit')}, playwright {version('playwright')}, "
        f"Chromium {chromium} (headless, the e2e tests' flags); each measure has a server of its own",
        '- floors: temporary apps, `x = st.number_input("x", value=1)` then `st.write(x * 2)` (the number-input '
        "floor) or `st.plotly_chart` of a 2 × 2 heatmap of x (the heatmap floor, issue 12's)",
        "- edit → redraw: from the Enter that commits a value until the new numbers are on screen (the floor's text "
        "or heatmap; every `outputs` heatmap, as `attention.attend` computes them; the `scores` heatmap, then "
        "checked to be scores_raw / temperature); after one untimed warm-up",
        "- dragging: the mouse held on x[2][2] and moved back and forth over 240 px (a move every ~16 ms) for 4 s; "
        "a redraw is a new `outputs` heatmap on screen, seen every animation frame",
        "- cold load: `page.goto` in a fresh context (new session, empty cache) until the run is over, every chart "
        "drawn and the page's text shown; after one untimed load that warms the server",
        "- payload: the WebSocket messages the page receives in one rerun (decompressed); raw: rows × cols × 4 bytes "
        "of every heatmap on the page. Streamlit sends a reference for a large message the client still holds "
        "(the unchanged scores_raw; a temperature shown a rerun ago). With 3 tokens, the rest of the page is all of it",
        "",
        "| measure | runs | median | range | floor (median, this run) | ratio | target | met? |",
        "|---|---:|---:|---|---|---:|---:|:---:|",
        row("floor: edit → redraw", floor_edit),
        row("floor: cold load", floor_cold),
        row(
            "bundle floor (the floor + a chart, LaTeX, code, a grid, a table: the same frontend code): cold load",
            bundle_cold,
        ),
        *editing_rows(results),
        row("/walkthrough: cold load", cold, ms, statistics.median(bundle_cold), "bundle floor cold load", 1.2),
        row("/walkthrough: cold load, against the number-input floor", cold, ms, median(floor_cold), "floor"),
        row("/walkthrough step 4, 3 tokens: new temperature → scores redrawn", small),
        row("… n = 1024, d = 64: new temperature", big["new"][0], ms, walk, "3 tokens", 3),
        row("… n = 1024: back and forth between two temperatures", big["again"][0], ms, walk, "3 tokens", 3),
        row("payload per rerun, step 4, 3 tokens: new temperature", small_bytes, size, small_raw, "raw"),
        row("… n = 1024: the first draw (n set to 1024)", big["first"][1], size, big["first"][2], "raw", 1.5),
        row("… n = 1024: new temperature", big["new"][1], size, big["new"][2], "raw", 1.5),
        row("… n = 1024: back and forth (references)", big["again"][1], size, big["again"][2], "raw", 1.5),
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    (Path(__file__).parent / "browser.md").write_text(table)


if __name__ == "__main__":
    main()
