"""Benchmark (not a test): the app in a real browser (Chromium via Playwright) against a one-widget floor app."""

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
from attention import attend, case_to_dict, parse_case
from attention.presets import article
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, ROOT, START_TIMEOUT, VIEWPORT, _free_port, _healthy
from tests.e2e.test_browser import HEADER_PX, READY, ROW_PX, TIMEOUT_MS, heatmaps, wait_ready

FLOOR_APP = 'import streamlit as st\n\nx = st.number_input("x", value=1)\nst.write(x * 2)\n'
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
# What the page shows, as raw float32: rows × cols × 4 bytes for every heatmap in the main area (figures.heatmap
# puts the matrix's shape in layout.meta, whether it is drawn as a heatmap or as an image).
RAW = """() => [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')].map(gd => gd.layout?.meta)
    .filter(m => m?.rows).reduce((sum, m) => sum + 4 * m.rows * m.cols, 0)"""


@contextmanager
def serve(script: Path):
    """`streamlit run script` on a free loopback port, from the repo root (so .streamlit/config.toml applies)."""
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
            yield url
        finally:
            process.terminate()  # only the server started here, by its PID
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def new_page(browser, url: str):
    context = browser.new_context(viewport=VIEWPORT, base_url=url)
    context.set_default_timeout(TIMEOUT_MS)  # every Playwright wait is bounded
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


def open_cell(page, grid, column: int, text: str) -> None:
    """Row 2 of the grid, `column` arrows right of the row label, opened and filled with `text` (not committed):
    e2e's edit_cell, less its wait_ready (which sleeps 250 ms), so that timing can start at the Enter that commits."""
    grid.click(position={"x": 5, "y": HEADER_PX + ROW_PX + ROW_PX // 2})  # the row label: the canvas intercepts
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


def inputs_edit(browser, url: str, runs: int = 8) -> list[float]:
    """x's row 2, column "2" (grid column 3, as in the e2e test), alternately 5 and 2, until the outputs show it."""
    context, page = new_page(browser, url)
    page.goto("/inputs")
    wait_ready(page)
    grid, times = page.locator("[data-testid=stDataFrame]").first, []
    for i in range(runs + 1):  # the first is a warm-up
        d, text = case_to_dict(article()), ("5", "2")[i % 2]
        d["x"][1][1] = float(text)
        want = attend(parse_case(d)).outputs  # the project's core, as the oracle for the new numbers
        open_cell(page, grid, 3, text)  # the token column comes first
        arg = {"title": "outputs", "want": want.flatten().tolist(), "atol": 1e-4}
        times.append(timed(page, lambda: page.keyboard.press("Enter"), MATCH, arg))
        assert all(np.allclose(z, want, atol=1e-4) for z in heatmaps(page, "outputs"))
        wait_ready(page)  # the run's tail (sidebar, share panel) ends before the next edit
    context.close()
    return times[1:]


def shown_scores(page) -> np.ndarray:
    """The scores heatmap's numbers; for a big one, drawn as an image, its colour bar's range (± the largest)."""
    z = heatmaps(page, "scores")
    return z[0] if z else np.asarray(page.evaluate(BAR, "scores"), dtype=np.float64)


def temperature(page, frames: list[int], values) -> tuple[list[float], list[int], int]:
    """Temperature set to each value: time until the scores heatmap changes, and the WebSocket bytes of each rerun."""
    field, times, payloads = page.locator("[data-testid=stSidebar]").get_by_label("Temperature"), [], []
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


def main() -> None:
    load, results = os.getloadavg()[0], {}
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        (Path(folder) / "floor.py").write_text(FLOOR_APP)
        (Path(folder) / "bundles.py").write_text(BUNDLE_FLOOR_APP)
        (Path(folder) / "editor.py").write_text(EDITOR_FLOOR_APP)
        measures = {
            "floor": (Path(folder) / "floor.py", floor),
            "bundle floor": (Path(folder) / "bundles.py", lambda b, u: cold_loads(b, u, "/", "2")),
            "editor floor": (Path(folder) / "editor.py", editor_floor),
            "edit": (ROOT / "app.py", inputs_edit),
            "cold": (ROOT / "app.py", lambda b, u: cold_loads(b, u, "/walkthrough", "Step 1 · Prepare inputs")),
            "rerun": (ROOT / "app.py", walkthrough_rerun),
        }
        for name, (script, measure) in measures.items():  # a server of its own for each
            started = time.perf_counter()
            with serve(script) as url:
                results[name] = measure(browser, url)
            print(f"{name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        chromium = browser.version
        browser.close()
    (floor_edit, floor_cold), edit, cold = results["floor"], results["edit"], results["cold"]
    bundle_cold, editor_edit = results["bundle floor"], results["editor floor"]
    small, small_bytes, small_raw = results["rerun"]["small"]
    walk, big = statistics.median(small), {k: v for k, v in results["rerun"].items() if k != "small"}
    lines = [
        "# The app in a real browser, against a one-widget floor app",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {load:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end (other work on these CPUs inflates the times)",
        f"- python {platform.python_version()}, streamlit {version('streamlit')}, playwright {version('playwright')}, "
        f"Chromium {chromium} (headless, the e2e tests' flags); each measure has a server of its own",
        '- floor: a temporary app, `x = st.number_input("x", value=1)` then `st.write(x * 2)`',
        "- edit → redraw: from the Enter that commits a value until the new numbers are on screen (the floor's text; "
        "every `outputs` heatmap, as `attention.attend` computes them; the `scores` heatmap, then checked to be "
        "scores_raw / temperature); after one untimed warm-up",
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
        row("editor floor (one 3 × 4 data editor and its sum): edit a cell → sum shown", editor_edit),
        row("/inputs: edit x[2][2] → outputs redrawn", edit, ms, statistics.median(floor_edit), "floor edit", 2),
        row("/inputs: the same edit, against the editor floor", edit, ms, statistics.median(editor_edit), "editor"),
        row("/walkthrough: cold load", cold, ms, statistics.median(bundle_cold), "bundle floor cold load", 1.2),
        row(
            "/walkthrough: cold load, against the floor without a chart",
            cold,
            ms,
            statistics.median(floor_cold),
            "floor",
        ),
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
