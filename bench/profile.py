"""Profile (not a test): where one action's server CPU goes. bench/server.py's five actions, at both its sizes, on
the real server under py-spy (pip install -r bench/requirements.txt), by function and by room of the house; writes
its section of bench/profile.md (`--label before` / `--label after`: each label's section is replaced, the others
kept, so the file shows what moved)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.server import ACTIONS, APP_ACTIONS, SIZES, app_actions
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, ROOT

RATE = 200  # samples a second
TOP = 20
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^():]*)(?::(?P<line>\d+))?\)$")
# Samples are taken only from the thread holding the GIL (--gil): Python at work, not a thread asleep in a wait,
# which py-spy's own idle test counts here (a watcher's time.sleep, a Condition.wait). These stay out as well.
WAITS = {("wait", "threading.py"), ("select", "selectors.py"), ("get", "queue.py"), ("_worker", "thread.py")}
OUT = Path(__file__).parent / "profile.md"


def room(file: str) -> str | None:
    """The room of the house a frame is in (a file of this repository, not of its .venv: "attention/app/sidebar"),
    else None."""
    path = Path(file)
    if not path.is_absolute() or ".venv" in path.parts or not path.is_relative_to(ROOT):
        return None
    return str(path.relative_to(ROOT).with_suffix(""))


def frames(stack: str) -> list[tuple[str, str]]:
    parsed = []
    for frame in stack.split(";"):
        m = FRAME.match(frame.strip())
        if m:
            parsed.append((m["function"], m["file"]))
    return parsed


def streamlit_part(parsed: list[tuple[str, str]]) -> str:
    """A sample with no frame of the house: which part of Streamlit (or the rest) it is in."""
    for function, _ in reversed(parsed):
        if function == "_on_script_finished" or function == "collect":
            return "streamlit: the full gc.collect after each run (runner.postScriptGC)"
    for _, file in reversed(parsed):
        if "streamlit" in file:
            part = file.split("streamlit/", 1)[-1].split("/")
            return f"streamlit: {'/'.join(part[:2]).removesuffix('.py')}"
    return f"elsewhere: {Path(parsed[-1][1]).name if parsed else '?'}"


def summarise(raw: Path) -> tuple[Counter, Counter, int]:
    """Samples by function (where they were taken) and by room (the innermost frame of the house)."""
    by_function, by_room, total = Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        parsed = frames(stack)
        if not parsed or (parsed[-1][0].rsplit(".", 1)[-1], Path(parsed[-1][1]).name) in WAITS:
            continue
        n = int(count)
        total += n
        function, file = parsed[-1]
        by_function[f"{function} ({_short(file)})"] += n
        inner = next((r for _, file in reversed(parsed) if (r := room(file))), None)
        by_room[inner or streamlit_part(parsed)] += n
    return by_function, by_room, total


def _short(file: str) -> str:
    """A file as the tables name it: within this repository, or within site-packages."""
    return f"{inside}.py" if (inside := room(file)) else file.split("site-packages/", 1)[-1]


def profile(browser, size: str, folder: Path) -> dict[str, tuple[Counter, Counter, int, float]]:
    raws = {name: folder / f"{i}-{size[:3]}.txt" for i, name in enumerate(APP_ACTIONS)}
    measured = app_actions(browser, size, watch=lambda pid, name: spied(pid, raws[name]))
    return {name: (*summarise(raws[name]), m.per_action) for name, m in measured.items()}


@contextmanager
def spied(pid: int, raw: Path) -> Iterator[None]:
    """py-spy recording the server into `raw` (collapsed stacks) while the block runs."""
    spy = subprocess.Popen(
        ["py-spy", "record", "-p", str(pid), "-r", str(RATE), "-f", "raw", "--gil", "--full-filenames", "-o", str(raw)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1)  # attached
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its samples when interrupted
        spy.wait(timeout=60)


def section(label: str, results: dict[str, dict]) -> str:
    lines = [f"## {label}", ""]
    for size, by_action in results.items():
        for name, (by_function, by_room, total, cpu) in by_action.items():
            ms = 1e3 / RATE / ACTIONS  # a sample's milliseconds, per action
            lines += [
                f"### {name}, {size}: {cpu * 1e3:,.0f} ms of server CPU an action "
                f"({total * ms:,.0f} ms sampled, with py-spy's pauses)",
                "",
                "| by room of the house | share | ms an action |  | by function (where the sample was) | share |",
                "|---|---:|---:|---|---|---:|",
            ]
            rooms, functions = by_room.most_common(TOP), by_function.most_common(TOP)
            for i in range(max(len(rooms), len(functions))):
                r = f"{rooms[i][0]} | {rooms[i][1] / total:.0%} | {rooms[i][1] * ms:,.1f}" if i < len(rooms) else " | |"
                f = f"`{functions[i][0]}` | {functions[i][1] / total:.0%}" if i < len(functions) else " |"
                lines.append(f"| {r} | | {f} |")
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--label", default="after", help="the section of bench/profile.md to write")
    label = parser.parse_args().label
    load = os.getloadavg()[0]
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        results = {size: profile(browser, size, Path(folder)) for size in SIZES}
        browser.close()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    loads = f"load average {load:.2f} at start, {os.getloadavg()[0]:.2f} at end"
    head = f"{label} (commit {commit.stdout.strip()}; {loads})"
    new = section(head, results)
    old = OUT.read_text() if OUT.exists() else ""
    kept = [s for s in re.split(r"(?m)^(?=## )", old) if s.startswith("## ") and not s.startswith(f"## {label} ")]
    intro = (
        "# Where one action's server CPU goes\n\n"
        f"`python bench/profile.py --label LABEL`: bench/server.py's actions ({ACTIONS} each, after a warm-up) "
        f"on the real server in Chromium, sampled by py-spy at {RATE} Hz in the thread holding the GIL (Python at "
        "work; a thread waiting is left out). By room: the "
        "innermost frame of this repository's files (a Plotly or Streamlit call made from a room counts to that "
        "room); samples with none are Streamlit's own work, by its module. By function: where the sample was.\n\n"
    )
    OUT.write_text(intro + "".join(s.rstrip() + "\n\n" for s in sorted([*kept, new], key=_order)))
    print(new)


def _order(s: str) -> int:
    return 0 if s.startswith("## before") else 1


if __name__ == "__main__":
    main()
