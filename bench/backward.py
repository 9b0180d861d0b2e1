"""Benchmark (not a test): the hand-written backward trace against torch.autograd's backward of the same forward."""

import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app runs from its folder and is not installed
from attention import attend
from attention import backward as bw
from attention.presets import random_case

SIZES = (64, 256, 1024)  # n at d_in = d_k = d_v = 64; 1024 is the app's MAX_N
TARGET = 3.0  # backward trace / autograd's backward at n = 1024 (issue 21)
OUT = Path(__file__).with_name("backward.md")


def median_ms(fn, repeats: int) -> float:
    fn()  # a warm-up: the first run pays for allocation
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def autograd_backward(case, loss):
    """The floor: autograd's forward graph built once per run, and only its .backward() timed."""
    made = {}

    def setup():
        made.clear()
        names = ("x", "w_query", "w_key", "w_value")
        leaves = [torch.tensor(getattr(case, name), requires_grad=True) for name in names]
        x, wq, wk, wv = leaves
        a = torch.softmax((x @ wq) @ (x @ wk).T, dim=-1)
        out = a @ (x @ wv)
        made["loss"] = 0.5 * ((out - torch.tensor(loss.target)) ** 2).sum()

    def run():
        made["loss"].backward()

    return setup, run


def main() -> None:
    rows = []
    for n in SIZES:
        case = random_case(n, 64, 64, 64, seed=0)
        trace = attend(case)
        loss = bw.default_loss(trace)
        repeats = 30 if n < 1024 else 10
        mine = median_ms(lambda: bw.backward(trace, loss), repeats)  # noqa: B023
        setup, run = autograd_backward(case, loss)
        times = []
        for _ in range(repeats + 1):
            setup()
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        theirs = statistics.median(times[1:]) * 1e3
        difference = bw.check(bw.backward(trace, loss)).difference
        rows.append((n, mine, theirs, mine / theirs, difference))
        print(f"n = {n}: backward trace {mine:.2f} ms, autograd's backward {theirs:.2f} ms, {mine / theirs:.2f}×")
    load = os.getloadavg()[0]
    lines = [
        "# Backward trace vs torch.autograd's backward (cpu)",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; load average at start {load:.2f} (other work on these CPUs inflates both)",
        "- backward trace: `attention.backward.backward(trace, loss)`, every step's gradients recorded (the forward "
        "trace made before); autograd: the same forward (exact softmax, no options) built with `requires_grad`, then "
        "only `loss.backward()` timed; loss ½ Σ (O − T)², the default target; median of repeats after a warm-up",
        "",
        "| n | d | backward trace ms | autograd backward ms | ratio | target | met? | largest gradient difference |",
        "|---:|---:|---:|---:|---:|---:|:---:|---:|",
    ]
    for n, mine, theirs, ratio, difference in rows:
        target, met = ("≤ 3×", "yes" if ratio <= TARGET else "no") if n == 1024 else ("", "")
        lines.append(f"| {n} | 64 | {mine:.2f} | {theirs:.2f} | {ratio:.2f}× | {target} | {met} | {difference:.2g} |")
    OUT.write_text("\n".join(lines) + "\n")
    print(f"written: {OUT}")


if __name__ == "__main__":
    main()
