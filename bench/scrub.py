"""A dragged number on /inputs, computed in the browser (attention/forward/web/steps.js): redraws a second, the latency
from a pointer move to the redrawn outputs and the server's CPU during a drag, at the article's size and at 16 × 16,
against a floor that redraws the same chart from numbers it already has. Writes bench/scrub.md."""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app is not installed; the e2e helpers live here
from attention.base.case import case_to_dict
from attention.base.files import case_to_link
from attention.base.presets import random_case
from bench.server import cpu_seconds
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, new_context, serving
from tests.e2e.test_browser import cell, wait_ready

STEPS_JS = Path(__file__).resolve().parents[1] / "attention" / "forward" / "web" / "steps.js"
SECONDS = 3.0  # a drag's length
DRAGS = 3
BIG = random_case(16, 16, 16, 16, seed=7)  # 16 × 16: x, the weights and the outputs
EVERY_OPTION = random_case(16, 16, 16, 16, seed=0, heads=4, kv_heads=1, rope_base=10_000.0, mask="causal",
                           scale="sqrt_dk", temperature=0.7)  # fmt: skip
OUTPUTS = """[...document.querySelectorAll('.js-plotly-plot')]
    .find(g => (g.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === 'outputs')"""


def driven(args: str, target: str, chart: str, move: str) -> str:
    """A page function that makes a move every animation frame for `seconds` (`move`, on `input`, given the move's
    count in `moves`) and times each restyle of `chart` from the move that led to it."""
    return f"""async ({{{args}}}) => {{
  const input = {target};
  const gd = {chart};
  let moved = null; const latencies = [], draws = [];
  const heard = () => {{ draws.push(performance.now()); if (moved !== null) latencies.push(performance.now() - moved);
    moved = null; }};
  gd.on('plotly_restyle', heard);
  let moves = 0; const start = performance.now();
  await new Promise(done => {{ (function frame() {{
    if (performance.now() - start > seconds * 1000) return done();
    moves++;
    if (moved === null) moved = performance.now();
    {move}
    requestAnimationFrame(frame); }})(); }});
  gd.removeListener('plotly_restyle', heard);
  return {{seconds: (performance.now() - start) / 1000, moves, draws: draws.length, latencies}};
}}"""


# After a real mouse down on x[2][2]: a pointer move every animation frame for `seconds` (a triangle wave over 240
# px, 6 px a step), dispatched in the page (Playwright's own moves come ~13 a second on two busy cores); each
# restyle of the outputs chart timed from the move that led to it.
DRIVE = driven(
    "x, y, seconds",
    """[...document.querySelectorAll('[data-testid=stBidiComponentIsolated]')]
    .flatMap(h => [...(h.shadowRoot?.querySelectorAll('input.number') ?? [])])
    .find(i => /^x, row 2\\b.*column 2$/.test(i.getAttribute('aria-label')))""",
    OUTPUTS,
    """input.dispatchEvent(new PointerEvent('pointermove', {pointerId: 1,
      clientX: x + 5 + 240 - Math.abs(moves % 80 * 6 - 240), clientY: y, bubbles: true, composed: true}));""",
)
# The floor: the same chart restyled every animation frame from two sets of numbers it already has, as the preview
# restyles it (without its cells' numbers past 32 cells)
FLOOR = f"""async ({{seconds, texts}}) => {{
  const gd = {OUTPUTS};
  const [rows, columns] = [gd._fullData[0].z.length, gd._fullData[0].z[0].length];
  const zs = [0, 1].map(k => Array.from({{length: rows}}, (_, i) => Array.from({{length: columns}},
    (_, j) => i - j * 0.5 + k)));
  const kept = gd.data[0].texttemplate;
  let frames = 0; const start = performance.now();
  await new Promise(done => {{ (function frame() {{
    if (performance.now() - start > seconds * 1000) return done();
    frames++;
    window.Plotly.restyle(gd, texts ? {{z: [zs[frames % 2]]}} : {{z: [zs[frames % 2]], texttemplate: ''}}, [0]);
    requestAnimationFrame(frame); }})(); }});
  const rate = frames / ((performance.now() - start) / 1000);
  window.Plotly.restyle(gd, {{texttemplate: kept}}, [0]);
  return rate;
}}"""
# The temperature's slider on the walkthrough: its range input set to a new position every animation frame for
# `seconds` (a triangle wave over a quarter of its track) by the input event a drag fires; a redraw is a restyle of
# the first chart that shows a trace tensor (every such chart is restyled in the same drawing)
SLIDER = """document.querySelector('.st-key-temperature_slider [data-testid=stBidiComponentIsolated]')
    .shadowRoot.querySelector('input[type=range]')"""
TAGGED = "[...document.querySelectorAll('.js-plotly-plot')].filter(g => g.layout?.meta?.tensor)"
SLIDE = driven(
    "seconds",
    SLIDER,
    f"{TAGGED}[0]",
    "input.value = String(150 + Math.abs(moves % 100 - 50)); input.dispatchEvent(new Event('input', {bubbles: true}));",
)
# Its floor: every chart that shows a trace tensor restyled every animation frame from numbers it already has
SLIDE_FLOOR = f"""async ({{seconds, texts}}) => {{
  const charts = {TAGGED};
  const zs = charts.map(gd => [0, 1].map(k => gd._fullData[0].z.map((row, i) => Array.from(row, (_, j) => i - j + k))));
  const kept = charts.map(gd => gd.data[0].texttemplate);
  let frames = 0; const start = performance.now();
  await new Promise(done => {{ (function frame() {{
    if (performance.now() - start > seconds * 1000) return done();
    frames++;
    charts.forEach((gd, c) => window.Plotly.restyle(gd, texts ? {{z: [zs[c][frames % 2]]}}
      : {{z: [zs[c][frames % 2]], texttemplate: ''}}, [0]));
    requestAnimationFrame(frame); }})(); }});
  const rate = frames / ((performance.now() - start) / 1000);
  charts.forEach((gd, c) => window.Plotly.restyle(gd, {{texttemplate: kept[c]}}, [0]));
  return rate;
}}"""
STEPS_RUN = """async ({source, kase, runs}) => {
  const url = URL.createObjectURL(new Blob([source], {type: 'text/javascript'}));
  const steps = await import(url);
  steps.attend(kase);
  const start = performance.now();
  for (let i = 0; i < runs; i++) steps.attend(kase);
  return (performance.now() - start) / runs;
}"""


def steps_js(browser) -> dict[str, float]:
    """steps.js alone, in a blank page: milliseconds a run."""
    page, source = browser.new_page(), STEPS_JS.read_text()
    cases = {"the article's size": random_case(3, 4, 3, 3, seed=0), "16 × 16": BIG, "16 × 16, every option": None}
    cases["16 × 16, every option"] = EVERY_OPTION
    out = {name: page.evaluate(STEPS_RUN, {"source": source, "kase": case_to_dict(case), "runs": 500})
           for name, case in cases.items()}  # fmt: skip
    page.close()
    return out


def drags(browser, url: str, pid: int, path: str) -> dict:
    """Drags of x[2][2] on the page at `path`, then the floor on the same chart."""
    context = new_context(browser, base_url=url)
    page = context.new_page()
    page.goto(path)
    wait_ready(page)
    rates, latencies, runs, cpu, release = [], [], [], [], []
    for _ in range(DRAGS):
        box = cell(page, "x", 2, 2).bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        ended = page.evaluate("window.__e2eRuns.end")
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + 5, y)
        before = cpu_seconds(pid)
        drive = page.evaluate(DRIVE, {"x": x, "y": y, "seconds": SECONDS})
        cpu.append(cpu_seconds(pid) - before)
        runs.append(page.evaluate("window.__e2eRuns.end") - ended)
        rates.append(drive["draws"] / drive["seconds"])
        latencies += drive["latencies"]
        before = cpu_seconds(pid)
        page.mouse.up()
        wait_ready(page)
        time.sleep(0.5)  # the run's tail
        release.append(cpu_seconds(pid) - before)
    texts = page.evaluate(f"() => ({OUTPUTS}).data[0].texttemplate")
    cells = page.evaluate(f"() => (z => z.length * z[0].length)(({OUTPUTS})._fullData[0].z)")  # rows of typed arrays
    floor = [page.evaluate(FLOOR, {"seconds": SECONDS, "texts": cells <= 32}) for _ in range(DRAGS)]
    context.close()
    return {"rates": rates, "latencies": latencies, "runs": runs, "cpu": cpu, "release": release, "floor": floor,
            "texts": bool(texts) and cells <= 32, "drawn": "the outputs"}  # fmt: skip


def slides(browser, url: str, pid: int, path: str) -> dict:
    """Drags of the temperature's slider on the page at `path` (released each time), then the floor."""
    context = new_context(browser, base_url=url)
    page = context.new_page()
    page.goto(path)
    wait_ready(page)
    rates, latencies, runs, cpu, release = [], [], [], [], []
    for _ in range(DRAGS):
        ended, before = page.evaluate("window.__e2eRuns.end"), cpu_seconds(pid)
        drive = page.evaluate(SLIDE, {"seconds": SECONDS})
        cpu.append(cpu_seconds(pid) - before)
        runs.append(page.evaluate("window.__e2eRuns.end") - ended)
        rates.append(drive["draws"] / drive["seconds"])
        latencies += drive["latencies"]
        before = cpu_seconds(pid)
        page.evaluate(f"() => {SLIDER}.dispatchEvent(new Event('change', {{bubbles: true}}))")  # the release
        page.wait_for_function(f"() => window.__e2eRuns.end > {ended}")
        wait_ready(page)
        time.sleep(0.5)  # the run's tail
        release.append(cpu_seconds(pid) - before)
    charts = page.evaluate(f"() => {TAGGED}.length")
    cells = page.evaluate(f"() => (z => z.length * z[0].length)({TAGGED}[0]._fullData[0].z)")
    floor = [page.evaluate(SLIDE_FLOOR, {"seconds": SECONDS, "texts": cells <= 32}) for _ in range(DRAGS)]
    context.close()
    return {"rates": rates, "latencies": latencies, "runs": runs, "cpu": cpu, "release": release, "floor": floor,
            "texts": cells <= 32, "drawn": f"the step's {charts} charts"}  # fmt: skip


def main() -> None:
    load = os.getloadavg()[0]
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        alone = steps_js(browser)
        with serving(Path(folder)) as served:
            sizes = {
                "the article's size (outputs 3 × 3)": drags(browser, served.url, served.pid, "/inputs"),
                "16 × 16 (outputs 16 × 16)": drags(
                    browser, served.url, served.pid, f"/inputs?case={case_to_link(BIG)}"
                ),
                "the temperature's slider, walkthrough step 5, the article's size": slides(
                    browser, served.url, served.pid, "/walkthrough?step=5"
                ),
                "the temperature's slider, walkthrough step 5, 16 × 16": slides(
                    browser, served.url, served.pid, f"/walkthrough?step=5&case={case_to_link(BIG)}"
                ),
            }
        chromium = browser.version
        browser.close()
    median = statistics.median
    lines = [
        "# A dragged number, computed in the browser",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {load:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end (other work on these CPUs inflates the times)",
        f"- streamlit {version('streamlit')}, playwright {version('playwright')}, Chromium {chromium} (headless, the "
        "e2e tests' flags)",
        f"- a drag: a real mouse down on x[2][2] of /inputs, then a pointer move every animation frame for {SECONDS:g} "
        "s, dispatched in the page (a triangle wave over 240 px, 6 px a step: a new value nearly every move); a "
        f"redraw is a restyle of the outputs chart; {DRAGS} drags a size",
        "- floor: the same chart restyled every animation frame from two sets of numbers it already has, as the "
        "preview restyles it (past 32 cells without the cells' numbers)",
        f"- the temperature's slider: on /walkthrough at step 5 (weights_exact and weights), its range input set to a "
        f"new position every animation frame for {SECONDS:g} s (the input event a drag fires), then released; its "
        "floor restyles the same charts every frame from numbers they already have",
        "- server CPU: the server process's user + system time (/proc/PID/stat) while the mouse is down, and from "
        "the release until its run has ended",
        "",
        "| measure | median | range | floor | ratio | target | met? |",
        "|---|---:|---|---:|---:|---:|:---:|",
    ]
    for name, ms in alone.items():
        lines.append(f"| steps.js alone, {name}: one run | {ms:.2f} ms |  |  |  | ≤ 4 ms | {_met(ms <= 4)} |")
    for name, m in sizes.items():
        rate, floor = median(m["rates"]), median(m["floor"])
        texts = "with the cells' numbers" if m["texts"] else "colour only while dragged"
        lines += [
            f"| {name}, {texts}: redraws a second, mouse down | {rate:.1f}/s | {min(m['rates']):.1f}–"
            f"{max(m['rates']):.1f}/s | {floor:.1f}/s | {rate / floor:.2f}× | ≥ 30/s, ≥ 0.8× floor | "
            f"{_met(rate >= 30 and rate >= 0.8 * floor)} |",
            f"| … a move → {m['drawn']} redrawn | {median(m['latencies']):.0f} ms | "
            f"{min(m['latencies']):.0f}–{max(m['latencies']):.0f} ms |  |  | ≤ 100 ms | "
            f"{_met(median(m['latencies']) <= 100)} |",
            f"| … runs on the server while the mouse is down | {max(m['runs'])} |  |  |  | 0 | "
            f"{_met(max(m['runs']) == 0)} |",
            f"| … server CPU while the mouse is down, against the release's run | {median(m['cpu']) * 1e3:.0f} ms | "
            f"{min(m['cpu']) * 1e3:.0f}–{max(m['cpu']) * 1e3:.0f} ms | {median(m['release']) * 1e3:.0f} ms |  | "
            f"≤ one run | {_met(median(m['cpu']) <= median(m['release']))} |",
        ]
    table = "\n".join(lines) + "\n"
    print(table)
    (Path(__file__).parent / "scrub.md").write_text(table)


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


if __name__ == "__main__":
    main()
