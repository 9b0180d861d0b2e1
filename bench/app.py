"""Benchmark (not a test): the app through Streamlit's AppTest: reruns per page, at n = 1024, cold start, peak RSS."""

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
sys.path.insert(0, str(ROOT))  # the app's page registry, read in main(): a cold child imports no more than it must
# the page's heavy steps, named apart (a row's name keeps the article's number; the picker takes the step's name)
STEPS = {"walkthrough": "inputs", "walkthrough step 4": "scores", "walkthrough step 6": "weighted"}
RERUNS, COLD_RUNS = 15, 3
N, D = 1024, 64  # the app's MAX_N and MAX_D
IMPORTS = "import numpy, pandas, plotly.graph_objects, streamlit, torch\n"  # what the app imports, drawing nothing
START = time.perf_counter()  # a cold child's clock: before streamlit, torch or the app load (stdlib only above)
FRAME = f"""import sys
sys.path.insert(0, {str(ROOT)!r})
import streamlit as st
from attention.app import frame
frame.run(pages=[st.Page(frame.trace, title="frame")])
"""  # app.py's frame around a page that only reads the trace: what every page pays before drawing anything
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def session(path: str):
    from streamlit.testing.v1 import AppTest  # imported late: a cold child's clock must see this import

    return ok(AppTest.from_file(path, default_timeout=300).run())


def ok(at):
    if at.exception:  # a page that failed would time its error message, not itself
        raise RuntimeError(at.exception)
    return at


def visit(at, row: str) -> None:
    page = "walkthrough" if row in STEPS else row
    ok(at.switch_page(f"pages/{page}.py").run())
    if row in STEPS:  # the chosen step persists across pages, so every walkthrough row sets its own
        ok(at.radio(key="step_picker").set_value(STEPS[row]).run())


def rerun_ms(at) -> float:
    """Median of plain reruns: what a widget change costs the server, minus the widget's own effect."""
    times = []
    for _ in range(RERUNS):
        start = time.perf_counter()
        ok(at.run())
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def go_big(at) -> None:
    """n = 1024, d = 64 through the sidebar, as a user would: random new cells, then the sizes one by one."""
    ok(at.radio(key="fill").set_value("random").run())
    for key in ("d_in", "d_k", "d_v"):
        ok(at.number_input(key=key).set_value(D).run())
    ok(at.number_input(key="n").set_value(N).run())
    assert (at.session_state["session"].case.n, at.session_state["session"].case.d_in) == (N, D)


def edit_ms(at) -> float:
    """Median of edits at the article's size on the walkthrough: x's second row, first column, back and forth."""
    from tests.apptest import edit  # the matrix editor's own message, as AppTest can send it

    times = []
    for i in range(RERUNS):
        start = time.perf_counter()
        ok(edit(at, "x", 1, "1", 2.0 + i % 2))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def switch_ms(at, key: str, values: tuple[int, int]) -> float:
    """Median of switches of a real model's layer or head (its widget), back and forth, on the walkthrough."""
    times = []
    for i in range(RERUNS):
        start = time.perf_counter()
        ok(at.number_input(key=key).set_value(values[i % 2]).run())
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def real_rows(say) -> None:
    """Switching layer or head of a loaded real model (SmolLM2: 10 tokens × 576) against an edit at the article's
    size, both on the walkthrough, in this run (the target: within 2×)."""
    from attention import models

    if models.missing("smollm2"):
        return print("real model rows skipped: the model packages are not installed", file=sys.stderr)
    at = session(APP)
    visit(at, "walkthrough")
    edit = edit_ms(at)
    ok(at.selectbox(key="preset").set_value("real").run())  # loads SmolLM2 once (not timed)
    for what, key, values in (("head", "real_head", (3, 4)), ("layer", "real_layer", (2, 3))):
        say((f"switch of a real model's {what} (SmolLM2) against an edit at the article's size", switch_ms(at, key,
            values), edit, "ms", 2))  # fmt: skip


def child(kind: str, path: str | None) -> None:
    if kind == "cold":
        session(path)
        return print(time.perf_counter() - START)
    if kind in ("matrices", "floor"):  # what a trace must hold at least: four n×n matrices and five n×d ones
        import torch

        kept = [torch.rand(N, N) for _ in range(4)] + [torch.rand(N, D) for _ in range(5)]
        assert len(kept) == 9
        if kind == "floor":  # and the app's imports, run as an app
            session(path)
    else:
        at = session(path)
        if kind == "app":
            go_big(at)
            visit(at, "walkthrough step 4")
            visit(at, "walkthrough step 6")
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10)  # KiB on Linux


def spawn(kind: str, path: str | None = None) -> float:
    args = [sys.executable, __file__, "--child", kind] + ([path] if path else [])
    # Through a launcher: on Linux a child's ru_maxrss starts at its spawner's peak (exec keeps it), see bench/core.py
    args = [sys.executable, "-c", LAUNCHER, *args]
    return float(subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)  # internal: one cold start or peak, fresh
    parser.add_argument("--real", action="store_true", help="only the real model's rows, printed (app.md is kept)")
    args = parser.parse_args()
    if args.real:
        return real_rows(print)
    if args.child:
        kind, *path = args.child
        return child(kind, path[0] if path else None)

    load = os.getloadavg()[0]
    tmp = tempfile.TemporaryDirectory()
    empty, imports = Path(tmp.name, "empty.py"), Path(tmp.name, "imports.py")
    empty.write_text("import streamlit as st\n")
    imports.write_text(IMPORTS)
    rows = []  # (measure, value, floor, unit, target)

    def say(row):
        rows.append(row)
        print(row, file=sys.stderr, flush=True)  # progress, while the rest runs

    floor_ms = rerun_ms(session(str(empty)))
    frame = Path(tmp.name, "frame.py")
    frame.write_text(FRAME)
    frame_ms = rerun_ms(session(str(frame)))
    say(
        (
            "rerun · the frame alone: sidebar, navigation, check, share panel (not a target)",
            frame_ms,
            floor_ms,
            "ms",
            None,
        )
    )
    from attention.app.registry import PAGES

    at, small = session(APP), {}
    for row in (*(page.name for page in PAGES), *list(STEPS)[1:]):
        visit(at, row)
        small[row] = rerun_ms(at)
        say((f"rerun · {row}", small[row], floor_ms, "ms", 3 if row == "walkthrough" else None))
    say(("rerun · walkthrough against the frame alone (not a target)", small["walkthrough"], frame_ms, "ms", None))
    real_rows(say)
    go_big(at)
    for row in small:
        visit(at, row)
        say((f"rerun at n = {N}, d = {D} · {row}", rerun_ms(at), small[row], "ms", 3))

    cold = {APP: [], str(imports): []}
    for _ in range(COLD_RUNS):
        for path, times in cold.items():  # alternated, so drift in the machine's load hits both alike
            times.append(spawn("cold", path))
    say(("cold first run (app.py)", *map(statistics.median, cold.values()), "s", 1.2))
    say(
        (f"peak RSS at n = {N}, walkthrough steps 4 and 6", spawn("app", APP), spawn("floor", str(imports)), "MiB", 1.5)
    )
    say(
        (
            "peak RSS, the imports-only app against torch alone (not a target)",
            spawn("imports", str(imports)),
            spawn("matrices"),
            "MiB",
            None,
        )
    )

    lines = [
        "# The app through Streamlit's AppTest",
        "",
        f"- machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs; load average at start "
        f"{load:.2f} (other work on these CPUs inflates the times)",
        f"- python {platform.python_version()}, torch {version('torch')}, streamlit {version('streamlit')}, "
        f"plotly {version('plotly')}",
        f"- rerun: median of {RERUNS} plain `at.run()` after switching to the page; floor: an app of only "
        "`import streamlit as st`, timed alike. Walkthrough rows: step 1 unless named",
        f"- at n = {N}, d_in = d_k = d_v = {D} (set through the sidebar's widgets): the same reruns, against the same "
        "page at the article's size. An AppTest proxy for the browser's edit → redraw: the script's run only, "
        "no websocket, no Plotly drawing in a browser",
        f"- cold first run: median of {COLD_RUNS} fresh processes, each timing itself from its first line to the end "
        "of the first `AppTest.from_file(...).run()`; floor: an app that imports what app.py imports "
        "(streamlit, torch, plotly.graph_objects, pandas, numpy) and draws nothing",
        f"- peak: ru_maxrss of a fresh process; floor: the imports-only app run through AppTest, holding 4 n×n "
        f"float32 matrices (scores_raw, scores, weights_exact, weights) and 5 n×{D} (x, q, k, v, outputs); below it, "
        "what the app's imports weigh against torch alone with the same matrices",
        "",
        "| measure | median | floor | ratio | target | met? |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for measure, value, floor, unit, target in rows:
        ratio, digits = value / floor, 2 if unit == "s" else 1 if unit == "ms" else 0
        met = "" if target is None else "yes" if ratio <= target else "no"
        goal = "" if target is None else f"≤ {target:g}×"
        value, floor = f"{value:.{digits}f} {unit}", f"{floor:.{digits}f} {unit}"
        lines.append(f"| {measure} | {value} | {floor} | {ratio:.2f}× | {goal} | {met} |")
    table = "\n".join(lines) + "\n"
    print(table)
    (Path(__file__).parent / "app.md").write_text(table)
    tmp.cleanup()


if __name__ == "__main__":
    main()
