"""Benchmark (not a test): a trace with today's options (a sliding window, a softcap, ALiBi, T5's bias, sinks,
partial rotary, multi-head latent attention, all at once) against the plain trace of the same numbers, timed in turns
in one run (the floor is the plain trace)."""

import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app runs from its folder and is not installed
from attention.app.choices import alibi_slopes
from attention.app.process import TORCH_THREADS
from attention.base.case import Case, case_to_dict, parse_case, with_options
from attention.base.presets import random_case, relative_table
from attention.forward.compute import attend

SIZES = (16, 64, 256, 1024)
D, HEADS = 64, 4
TARGET = 1.5  # a variant's trace / the plain trace
LATENT = 16  # MLA's compressed width (DeepSeek V3: 512 of a 7,168-wide model), before its rotary key's columns


def variants(n: int) -> dict[str, dict]:
    """Each option alone at a size a model would use, then all of them; the plain case has RoPE too, so that partial
    rotary is measured against whole RoPE."""
    each = {
        "window": {"window": max(1, n // 4)},
        "softcap": {"softcap": 50.0},
        "alibi": {"alibi": alibi_slopes(HEADS)},
        "relative_bias": {"relative_bias": relative_table(HEADS), "relative_max_distance": 128},  # T5's distance
        "sinks": {"sinks": (0.5, -0.5, 1.0, 0.0)},
        "rope_fraction": {"rope_fraction": 0.25},
        "latent": {},  # made by latent() below: it changes w_key and w_value, not an option alone
    }
    return each | {"all": {k: v for options in each.values() for k, v in options.items()}}


def latent(case: Case) -> Case:
    """The case as DeepSeek's multi-head latent attention: random W_DKV (d_in, LATENT + d_rot) with its norm, W_UK
    and W_UV reading the latent, the rotary key's last d_rot columns copied into every head's turned dims (a
    quarter of each head, as rope_fraction's)."""
    generator = torch.Generator().manual_seed(1)
    d_head = case.d_head
    d_rot = d_head // 4
    w_key = torch.randn(LATENT + d_rot, case.d_k, generator=generator, dtype=torch.float64) / 4
    w_key.unflatten(1, (HEADS, d_head))[:LATENT, :, :d_rot] = 0  # the compressed part: a head's unturned dims
    w_key.unflatten(1, (HEADS, d_head))[LATENT:, :, :d_rot] = torch.eye(d_rot)[:, None, :]  # the rotary key, copied
    w_key.unflatten(1, (HEADS, d_head))[LATENT:, :, d_rot:] = 0
    w_value = torch.cat((torch.randn(LATENT, case.d_v, generator=generator, dtype=torch.float64) / 4,
                         torch.zeros(d_rot, case.d_v, dtype=torch.float64)))  # fmt: skip
    w_latent = torch.randn(case.d_in, LATENT + d_rot, generator=generator, dtype=torch.float64) / 8
    options = case_to_dict(case)["options"] | {"w_latent": w_latent.tolist(), "latent_norm": [1.0] * LATENT,
                                                "rope_fraction": d_rot / d_head}  # fmt: skip
    return parse_case(case_to_dict(case) | {"w_key": w_key.tolist(), "w_value": w_value.tolist(), "options": options})


def median_ms(cases: dict, repeats: int) -> dict[str, float]:
    """Each case's median trace time, the cases taking turns (a slow spell of the machine hits all alike)."""
    times = {name: [] for name in cases}
    for case in cases.values():  # warm-up: the first run of an operation is slow
        attend(case)
    for _ in range(repeats):
        for name, case in cases.items():
            start = time.perf_counter()
            attend(case)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def main() -> None:
    torch.set_num_threads(TORCH_THREADS)  # as the app runs each trace (attention/app/process.py)
    lines = [
        "# Today's options against the plain trace (cpu)",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; load average at start {os.getloadavg()[0]:.2f}",
        f"- cases: random, d_in = d_k = d_v = {D}, {HEADS} heads, √d_k scale, RoPE (base 10,000); each option alone "
        "(window n/4, softcap 50, ALiBi's slopes, T5's bias (16 buckets, max distance 128), four sink logits, "
        f"a quarter of each head turned, MLA: keys and values from a normed latent of {LATENT} numbers and a rotary "
        "key of a quarter of a head), then all together",
        "- times: the median of repeated `attend(case)`, the plain case and the variants taking turns; target: each "
        f"variant's trace ≤ {TARGET:g}× the plain one (met? reads each alone; all seven at once add their costs)",
        "",
        "| n | plain ms | " + " | ".join(f"{name} ×" for name in variants(4)) + " | met? |",
        "|---:|---:|" + "---:|" * len(variants(4)) + ":---:|",
    ]
    for n in SIZES:
        plain = with_options(random_case(n, D, D, D, seed=0), heads=HEADS, scale="sqrt_dk", rope_base=10000.0)
        made = {name: latent(plain) if name in ("latent", "all") else plain for name in variants(n)}
        cases = {"plain": plain} | {name: with_options(made[name], **o) for name, o in variants(n).items()}
        ms = median_ms(cases, repeats=max(5, 2000 // n))
        ratios = [ms[name] / ms["plain"] for name in variants(n)]
        met = "yes" if max(ratios[:-1]) <= TARGET else "no"  # each alone
        lines.append(f"| {n} | {ms['plain']:.2f} | " + " | ".join(f"{r:.2f}" for r in ratios) + f" | {met} |")
        print(lines[-1], file=sys.stderr, flush=True)
    table = "\n".join(lines) + "\n"
    print(table)
    (Path(__file__).parent / "variants.md").write_text(table)


if __name__ == "__main__":
    main()
