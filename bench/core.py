"""Benchmark (not a test): the traced core, attention.attend, against PyTorch's fused attention: time, peak memory."""

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app runs from its folder and is not installed
import attention
from attention.base.presets import article, random_case
from attention.forward.compute import REPEAT_MAX_N, WHOLE_MAX_NUMBERS

SIZES = (3, 16, 64, 256, 1024)  # n; 1024 is the app's MAX_N
D = 64  # d_in = d_k = d_v, the app's MAX_D; n = 3 is the article's case as it is (4/3/3)
MATRICES = 4  # n × n float32 a trace holds: scores_raw, scores, weights_exact, weights (the article's rounded ones)
TIME_TARGET = {1024: 3.0}  # trace / fused; 2× below
PEAK_TARGET = 1.5  # peak / floor at n = 1024


def build(n: int, device: str):
    """The case on the device, and its q, k, v computed once, as the fused floor's inputs."""
    case = article() if n == 3 else random_case(n, D, D, D, seed=0)
    data = attention.case_to_dict(case)
    data["options"]["device"] = device
    case = attention.parse_case(data)
    tensor = partial(torch.tensor, dtype=torch.float32, device=device)
    x = tensor(case.x)
    return case, x @ tensor(case.w_query), x @ tensor(case.w_key), x @ tensor(case.w_value)


def fused(q, k, v):
    # scale=1: the cases keep the article's unscaled scores, so both sides compute the same numbers
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1.0)


def median_ms(fn, device: str, budget_s: float) -> float:
    """Median of repeated runs after a warm-up; the number of repeats fits the time budget (5 to 1000)."""
    sync = torch.cuda.synchronize if device == "cuda" else lambda: None  # GPU calls return before the work is done

    def once() -> float:
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - start

    warm = [once() for _ in range(3)]  # first runs pay for allocation and kernel selection
    repeats = max(5, min(1000, int(budget_s / max(min(warm), 1e-6))))
    return statistics.median(once() for _ in range(repeats)) * 1e3


def peak(n: int, device: str, trace: bool) -> tuple[float, float]:
    """Peak RSS (and GPU memory) in MiB of a fresh process: a process's peak never goes down, so one per measure."""
    args = [sys.executable, __file__, "--device", device, "--peak", str(n)] + (["--trace"] if trace else [])
    # Through a small launcher: on Linux a child's ru_maxrss starts at the peak of the process that spawned it
    # (exec keeps it), so spawned from here it would report this process's peak, not its own.
    args = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)", *args]
    rss, gpu = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    return float(rss) / (2**20 if sys.platform == "darwin" else 2**10), float(gpu) / 2**20  # ru_maxrss: KiB on Linux


def child(n: int, device: str, trace: bool) -> None:
    case, *_ = build(n, device)
    if trace:
        attention.attend(case)
    else:  # the floor: torch imported, the inputs built, and the n × n matrices a trace must hold
        kept = [torch.rand(n, n, device=device) for _ in range(MATRICES)]
        assert len(kept) == MATRICES
    gpu = torch.cuda.max_memory_allocated() if device == "cuda" else 0
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, gpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--peak", type=int, help=argparse.SUPPRESS)  # internal: one memory measure, in a child
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        reason = attention.gpu_unavailable_reason()
        print(f"CUDA is not available here: {reason}. Run without --device for the CPU.", file=sys.stderr)
        sys.exit(2)
    if args.peak is not None:
        return child(args.peak, args.device, args.trace)

    cuda = args.device == "cuda"
    lines = [
        f"# Traced core vs fused attention ({args.device})",
        "",
        f"- machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs"
        + (f", {torch.cuda.get_device_name()}" if cuda else ""),
        f"- python {platform.python_version()}, torch {torch.__version__}, "
        f"torch.get_num_threads() = {torch.get_num_threads()}; load average at start {os.getloadavg()[0]:.2f} "
        "(other work on these CPUs inflates the times)",
        "- trace: `attention.attend(case)`, all eight steps with their records; fused: "
        "`scaled_dot_product_attention(q, k, v, scale=1)` on the same q, k, v, computed once",
        "- times: median after 3 warm-up runs; peak: ru_maxrss of a fresh process that builds the inputs and runs one "
        f"trace, against the floor, one that builds the inputs and holds {MATRICES} n × n float32 matrices "
        "(scores_raw, scores, weights_exact, weights)",
        "- n = 3 is the article's case, with its rounded weights: hence its difference from the exact fused result",
        f"- past {WHOLE_MAX_NUMBERS:,} numbers (n > 64 here) step 6's broadcast is not kept whole and "
        f"step 8 repeats the first {REPEAT_MAX_N} queries (the trace says so)",
        "",
        "| n | d_in/d_k/d_v | trace ms | fused ms | ratio | target | met? | max abs diff | peak MiB | floor MiB "
        "| peak / floor | target | met? |" + (" GPU peak MiB |" if cuda else ""),
        "|---:|:---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|:---:|" + ("---:|" if cuda else ""),
    ]
    step_ms = {}
    for n in SIZES:
        case, q, k, v = build(n, args.device)
        trace_ms = median_ms(lambda case=case: attention.attend(case), args.device, budget_s=3.0)
        fused_ms = median_ms(lambda q=q, k=k, v=v: fused(q, k, v), args.device, budget_s=1.0)
        traces = [attention.attend(case) for _ in range(20)]
        step_ms[n] = [statistics.median(t.steps[i].seconds for t in traces) * 1e3 for i in range(8)]
        diff = (traces[0].outputs - fused(q, k, v).cpu()).abs().max().item()
        (rss, gpu), (floor, _) = peak(n, args.device, trace=True), peak(n, args.device, trace=False)
        ratio, target = trace_ms / fused_ms, TIME_TARGET.get(n, 2.0)
        peak_goal = f"≤ {PEAK_TARGET:g}× | {'yes' if rss / floor <= PEAK_TARGET else 'no'}" if n == 1024 else " | "
        lines.append(
            f"| {n} | {case.d_in}/{case.d_k}/{case.d_v} | {trace_ms:.3f} | {fused_ms:.4f} | {ratio:.1f}× "
            f"| ≤ {target:g}× | {'yes' if ratio <= target else 'no'} | {diff:.2g} | {rss:.0f} | {floor:.0f} "
            f"| {rss / floor:.2f}× | {peak_goal} |" + (f" {gpu:.0f} |" if cuda else "")
        )
        print(lines[-1], file=sys.stderr, flush=True)  # progress, while the rest runs
    lines += [
        "",
        "Time per step on the device (ms, synchronised; median of 20 traces):",
        "",
        "| n | " + " | ".join(f"{i} {name}" for i, name in enumerate(attention.STEP_NAMES, start=1)) + " |",
        "|---:|" + "---:|" * 8,
        *(f"| {n} | " + " | ".join(f"{ms:.3f}" for ms in times) + " |" for n, times in step_ms.items()),
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    name = "core.md" if not cuda else "core-cuda.md"  # a CUDA run keeps the CPU numbers
    (Path(__file__).parent / name).write_text(table)


if __name__ == "__main__":
    main()
