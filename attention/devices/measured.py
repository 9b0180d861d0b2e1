"""The project's own measurements of the core, read back for the Devices page: bench/core.md (the CPU), and
bench/core-cuda.md once a GPU has run `python bench/core.py --device cuda`. What a reader without a GPU can see."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"  # beside the package in a clone; absent from a pip install
FILES = {"cpu": "core.md", "cuda": "core-cuda.md"}


@dataclass(frozen=True)
class Measured:
    """One benchmark file: where it ran, and milliseconds by size n (the trace's, the fused kernel's, each step's)."""

    machine: str  # its "- machine:" line, the GPU's name included
    trace_ms: dict[int, float]  # all eight steps with their records
    fused_ms: dict[int, float]  # scaled_dot_product_attention on the same q, k, v
    step_ms: dict[int, tuple[float, ...]]  # steps 1-8, synchronised


@functools.cache  # the files are the repository's: they do not change while the app runs
def measured() -> dict[str, Measured]:
    """Each device's measurements that this checkout has, by device kind ("cpu", "cuda")."""
    found = {}
    for kind, name in FILES.items():
        if (path := BENCH / name).is_file():
            found[kind] = _parse(path.read_text(encoding="utf-8"))
    return found


def _parse(text: str) -> Measured:
    lines = text.splitlines()
    machine = next((line.removeprefix("- machine: ") for line in lines if line.startswith("- machine: ")), "")
    tables = _tables(lines)  # the sizes' table, then the steps' table
    sizes, steps = tables[0], tables[1]
    return Measured(
        machine,
        {int(row[0]): float(row[2]) for row in sizes},
        {int(row[0]): float(row[3]) for row in sizes},
        {int(row[0]): tuple(float(cell) for cell in row[1:]) for row in steps},
    )


def _tables(lines: list[str]) -> list[list[list[str]]]:
    """The markdown tables' body rows, cells stripped: a table is a run of lines starting with "|", its first two
    the header and the alignment row."""
    tables, current = [], None
    for line in lines:
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            current.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        else:
            current = None
    return [table[2:] for table in tables]
