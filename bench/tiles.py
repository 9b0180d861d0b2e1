"""Benchmark (not a test): the tiled run (attention.tiles) against the eight-step trace at n = 1024: memory, time."""

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app runs from its folder and is not installed
import attention
from attention.base.case import with_options
from attention.base.presets import article, random_case
from attention.tiles import compute as tiles

N, D, BLOCK = 1024, 64, 64  # the app's limits, FlashAttention's usual block
CASES = {  # name -> options: one head, causal, and 8 heads (d = 8 each) with a causal mask
    "1 head": {},
    "1 head, causal": {"mask": "causal"},
    "8 heads, causal, ÷√d_k": {"heads": 8, "mask": "causal", "scale": "sqrt_dk"},
}
PEAK_TARGET, TIME_TARGET, PAGE_TARGET = 0.25, 3.0, 1.5  # tiled / trace; the Tiles page / the walkthrough


def case_of(name: str, device: str = "cpu"):
    return with_options(random_case(N, D, D, D, seed=0), device=device, **CASES[name])


def rss_kib(field: str) -> int:
    """VmRSS (now) or VmHWM (the peak since the last reset) of this process, from /proc (KiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(name: str, what: str) -> None:
    """One measure in a fresh process: the peak RSS above the resident set just before the run, in KiB.

    tracemalloc sees none of torch's allocations (they are C++), and ru_maxrss holds the peak of everything before
    (importing torch, building the case). So: warm both computations up on the article (their one-time costs),
    collect, reset the peak (writing 5 to /proc/self/clear_refs resets VmHWM to VmRSS, Linux ≥ 4.0), then run
    once, keeping the result alive (what a trace holds is part of its cost), and read VmHWM − VmRSS before."""
    case = case_of(name)
    attention.attend(article()), tiles.tiled(article())  # one-time costs (kernels, caches) outside the measure
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")
    before = rss_kib("VmRSS")
    kept = attention.attend(case) if what == "trace" else tiles.tiled(case, BLOCK, BLOCK, keep=())
    print(rss_kib("VmHWM") - before, type(kept).__name__)


def peak_kib(name: str, what: str) -> int:
    out = subprocess.run([sys.executable, __file__, "--child", name, what], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def median_s(fn, repeats: int = 7) -> float:
    return timed(fn, repeats)[0]


def timed(fn, repeats: int = 7) -> tuple[float, float]:
    """(median, fastest) seconds of `repeats` runs after a warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def page_times() -> tuple[float, float]:
    """Fastest seconds of a rerun of the Tiles page and of the walkthrough at the article's size, under AppTest: one
    app each, their reruns interleaved (11 each), so that a burst of other work on the CPUs hits both alike."""
    from streamlit.testing.v1 import AppTest

    app, apps = str(Path(__file__).resolve().parents[1] / "app.py"), []
    for page in ("pages/tiles.py", "pages/walkthrough.py"):
        at = AppTest.from_file(app, default_timeout=120).run()
        at.switch_page(page).run()
        assert not at.exception, at.exception
        apps.append(at)
    times: list[list[float]] = [[], []]
    for _ in range(11):
        for at, kept in zip(apps, times, strict=True):
            start = time.perf_counter()
            at.run()
            kept.append(time.perf_counter() - start)
    return min(times[0]), min(times[1])


def cuda_lines() -> list[str]:
    """On a GPU: the tiled run on CUDA against SDPA's flash and memory-efficient kernels (which ran, the difference)."""
    if not torch.cuda.is_available():
        reason = attention.gpu_unavailable_reason() or "torch.cuda.is_available() is False"
        return [f"- SDPA's flash and memory-efficient backends: **not run**, no CUDA here ({reason}); run this "
                "benchmark where a GPU is lent to compare them"]  # fmt: skip
    from torch.nn.attention import SDPBackend, sdpa_kernel

    lines, case = [], case_of("1 head, causal", "cuda")
    run = tiles.tiled(case, BLOCK, BLOCK, keep=())
    tiled_s = median_s(lambda: tiles.tiled(case, BLOCK, BLOCK, keep=()), repeats=5)
    x = torch.tensor(case.x, device="cuda")
    q, k, v = (x @ torch.tensor(w, device="cuda") for w in (case.w_query, case.w_key, case.w_value))
    for backend, dtype in (
        (SDPBackend.FLASH_ATTENTION, torch.float16),
        (SDPBackend.EFFICIENT_ATTENTION, torch.float32),
    ):
        args = [t[None, None].to(dtype) for t in (q, k, v)]  # (1, 1, n, d)
        try:
            with sdpa_kernel([backend]):
                out = torch.nn.functional.scaled_dot_product_attention(*args, is_causal=True, scale=1.0)
                torch.cuda.synchronize()

                def again(args=args):
                    torch.nn.functional.scaled_dot_product_attention(*args, is_causal=True, scale=1.0)
                    torch.cuda.synchronize()

                seconds = median_s(again)
        except RuntimeError as e:
            lines.append(f"- {backend.name}: did not run ({str(e).splitlines()[0][:160]})")
            continue
        difference = (out[0, 0].float().cpu() - run.outputs).abs().max().item()
        lines.append(
            f"- {backend.name} ({str(dtype).removeprefix('torch.')}) ran: {seconds * 1e3:.3f} ms, the tiled loop "
            f"{tiled_s * 1e3:.1f} ms ({tiled_s / seconds:.0f}×); largest difference from the tiled outputs "
            f"{difference:.3g} (outputs up to {run.outputs.abs().max().item():.3g})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)  # internal: one memory measure
    parser.add_argument("--no-page", action="store_true", help="skip the AppTest page timing")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch's CPU threads for the times (default 1: see below)"
    )
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    torch.set_num_threads(args.threads)
    lines = [
        "# Attention in tiles against the eight-step trace (n = 1024, d = 64, blocks of 64)",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; python {platform.python_version()}, torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads; load average at start {os.getloadavg()[0]:.2f} "
        "(other work on these CPUs inflates the times)",
        "- trace: `attention.attend(case)`, the eight steps with their records; tiled: "
        "`attention.tiles.compute.tiled(case, 64, 64, keep=())`, the online softmax a 64 × 64 tile at a time, nothing "
        "recorded (the page records one query tile's visits)",
        "- peak: a fresh process per measure; after both computations ran once on the article's case (one-time "
        "costs) and `gc.collect()`, the peak RSS is reset (`5` into /proc/self/clear_refs), the computation runs "
        "once with its result kept, and the peak is VmHWM − VmRSS before, from /proc/self/status "
        "(tracemalloc does not see torch's C++ allocations)",
        "- time: the fastest of 11 runs after a warm-up (the median in brackets), in this process, with "
        f"{args.threads} torch thread(s) (`--threads`); the ratio is of the fastest runs. These CPUs are shared with "
        "other work (load average above the core count): with two threads each of the tiled loop's ~15 small ops per "
        "tile waits for its second thread, and runs of it were 3-17× slower than with one (the trace 2-4×)",
        "",
        "| case | trace peak MiB | tiled peak MiB | tiled / trace | target | met? | trace s | tiled s | tiled / "
        "trace | target | met? | tiled = step 7 (relative) | skipped tiles |",
        "|---|---:|---:|---:|---:|:---:|---:|---:|---:|---:|:---:|---:|---:|",
    ]
    for name in CASES:
        case = case_of(name)
        trace_peak, tiled_peak = peak_kib(name, "trace") / 1024, peak_kib(name, "tiled") / 1024
        trace_s, trace_best = timed(lambda case=case: attention.attend(case), repeats=11)
        tiled_s, tiled_best = timed(lambda case=case: tiles.tiled(case, BLOCK, BLOCK, keep=()), repeats=11)
        run = tiles.tiled(case, BLOCK, BLOCK, keep=())
        agreement = tiles.check(run, attention.attend(run.case))
        memory, speed = tiled_peak / trace_peak, tiled_best / trace_best
        lines.append(
            f"| {name} | {trace_peak:.1f} | {tiled_peak:.2f} | {memory:.3f}× | ≤ {PEAK_TARGET:g}× "
            f"| {'yes' if memory <= PEAK_TARGET else 'no'} | {trace_best:.3f} ({trace_s:.3f}) "
            f"| {tiled_best:.3f} ({tiled_s:.3f}) | {speed:.2f}× "
            f"| ≤ {TIME_TARGET:g}× | {'yes' if speed <= TIME_TARGET else 'no'} | {agreement.relative:.2g} "
            f"({'yes' if agreement.agrees else 'NO'}) | {len(run.skipped)} of {run.tiles} |"
        )
        print(lines[-1], file=sys.stderr, flush=True)
    if not args.no_page:
        tiles_s, walkthrough_s = page_times()
        ratio = tiles_s / walkthrough_s
        lines += [
            "",
            "- the Tiles page's rerun at the article's size (AppTest, the fastest of 11, interleaved): "
            f"{tiles_s * 1e3:.0f} ms against "
            f"the walkthrough's {walkthrough_s * 1e3:.0f} ms: {ratio:.2f}× (target ≤ {PAGE_TARGET:g}×: "
            f"{'yes' if ratio <= PAGE_TARGET else 'no'})",
        ]
    lines += ["", "On a GPU:", "", *cuda_lines()]
    table = "\n".join(lines) + "\n"
    print(table)
    (Path(__file__).parent / "tiles.md").write_text(table)


if __name__ == "__main__":
    main()
