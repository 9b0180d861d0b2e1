"""Benchmark (not a test): torch's intra-op threads for the app's runs, one against the default (one a core), on the
walkthrough, tiles and decoding pages' action (a new temperature, which recomputes each page), through Streamlit's
AppTest in this process: the process's CPU time and the wall time an action, on quiet cores and with every core
busy with other work (as in a class, where other sessions' runs fill them). Writes bench/threads.md."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.app import APP, ok  # noqa: E402

ACTIONS = int(os.environ.get("BENCH_ACTIONS", 12))
PAGES = ("walkthrough", "tiles", "decoding")
SIZES = {"the article's size": None, "n = 64, d = 16": {"d_in": 16, "d_k": 16, "d_v": 16, "n": 64}}
DEFAULT = torch.get_num_threads()


def opened(page: str, sizes: dict | None):
    from streamlit.testing.v1 import AppTest

    at = ok(AppTest.from_file(APP, default_timeout=300).run())
    if sizes:
        ok(at.radio(key="fill").set_value("random").run())
        for key, value in sizes.items():
            ok(at.number_input(key=key).set_value(value).run())
    ok(at.switch_page(f"pages/{page}.py").run())
    if page == "walkthrough":
        ok(at.radio(key="step_picker").set_value("scores").run())
    return at


def action(at, first: float) -> tuple[float, float]:
    """A new temperature each time (from `first` on: none seen before, so none of its traces or figures are kept
    from an earlier run): median CPU and wall seconds an action."""
    cpu, wall = [], []
    for i in range(ACTIONS + 1):
        c, w = time.process_time(), time.perf_counter()
        ok(at.number_input(key="temperature").set_value(round(first + 0.01 * i, 2)).run())
        if i:  # the first warms up
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    load = os.getloadavg()[0]
    rows = []
    for busy in (False, True):
        # every core kept busy by a process of its own at the same priority, as other sessions' runs would
        hogs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() if busy else 0)
        ]
        try:
            for page in PAGES:
                for size, sizes in SIZES.items():
                    at = opened(page, sizes)
                    got = {}
                    for first, threads in ((0.5, 1), (2.5, DEFAULT)):
                        torch.set_num_threads(threads)
                        got[threads] = action(at, first)
                    torch.set_num_threads(DEFAULT)
                    rows.append((busy, page, size, got))
        finally:
            for hog in hogs:
                hog.kill()
    lines = [
        "# torch's intra-op threads for the app's runs",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {load:.2f} at start (before the "
        "busy rows' own load)",
        f"- python {platform.python_version()}, streamlit {version('streamlit')}, torch {torch.__version__}; the "
        f"default: torch.get_num_threads() = {DEFAULT}",
        f"- an action: a new temperature on the page (AppTest, in this process), each one not seen before (nothing "
        f"kept from an earlier run), median of {ACTIONS} after one; CPU: this process's user + system time (every "
        "thread's), wall: the run's",
        "- busy: one process a core spinning at the same priority, as other sessions' runs would fill the cores",
        "",
        f"| cores | page | size | CPU, 1 thread | CPU, {DEFAULT} | wall, 1 thread | wall, {DEFAULT} | wall, 1 against "
        f"{DEFAULT} |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for busy, page, size, got in rows:
        (c1, w1), (cd, wd) = got[1], got[DEFAULT]
        lines.append(
            f"| {'busy' if busy else 'quiet'} | {page} | {size} | {c1 * 1e3:.0f} ms | {cd * 1e3:.0f} ms | "
            f"{w1 * 1e3:.0f} ms | {wd * 1e3:.0f} ms | {w1 / wd:.2f}× |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    (Path(__file__).parent / "threads.md").write_text(table)


if __name__ == "__main__":
    main()
