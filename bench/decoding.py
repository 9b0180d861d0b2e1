"""Benchmark (not a test): SmolLM2 generating 16 tokens from a 10-token sentence with the app's own KV cache,
against transformers' cached `generate` on the same GGUF file and against the app without a cache; the cache's
measured bytes against the formula; the process's peak memory. Prints ratios, writes bench/decoding.md."""

import argparse
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

# the app runs from its folder and is not installed; bench/ itself off the path (its profile.py is not the stdlib's)
sys.path[0] = str(Path(__file__).resolve().parents[1])
from attention import models  # noqa: E402 (after the path is set)
from attention.decoding.compute import cache_bytes_per_token, model_sizes  # noqa: E402
from attention.models.generate import generate  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # transformers reads the package's file; nothing from a hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SENTENCE = "The cat sat on the mat because it was tired"  # 10 tokens of SmolLM2
NEW = 16
TARGET_VS_TRANSFORMERS = 1.5  # the app's cached generation / transformers' cached generate, at most
TARGET_VS_UNCACHED = 3.0  # the app without a cache / with it, at least


def timed(run, repeats: int) -> tuple[float, object]:
    """The median of `repeats` runs' seconds (after one run to warm up), and the last run's result."""
    run()
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split(":")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).with_name("decoding.md")))
    # one thread: on two cores shared with other work, torch's two threads wait for each other at every op (a
    # token took 10× longer with 2 threads than with 1 while the load average was 5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import LlamaForCausalLM

    model = models.loaded("smollm2")
    ids, _ = model.tokenize(SENTENCE)
    assert len(ids) == 10, ids
    path = models.files("smollm2")["SmolLM2-135M-Instruct.Q4_1.gguf"]
    hf = LlamaForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    prompt = torch.tensor([ids])

    def theirs(cache: bool):
        with torch.inference_mode():
            return hf.generate(prompt, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, use_cache=cache)

    rows = {
        "app, KV cache": timed(lambda: generate(model, SENTENCE, NEW, cached=True), args.repeats),
        "transformers generate, cache": timed(lambda: theirs(True), args.repeats),
        "app, no cache": timed(lambda: generate(model, SENTENCE, NEW, cached=False), args.repeats),
        "transformers generate, no cache": timed(lambda: theirs(False), args.repeats),
    }
    app, hf_cached, app_uncached = (rows[k][0] for k in ("app, KV cache", "transformers generate, cache",
                                                         "app, no cache"))  # fmt: skip
    made = rows["app, KV cache"][1]
    same = made.new_ids == tuple(rows["transformers generate, cache"][1][0, len(ids) :].tolist())
    formula = cache_bytes_per_token(model_sizes(models.SMOLLM2)) * len(made.run.ids)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()[0]
    lines = [
        "# Decoding with a KV cache: SmolLM2 generating (bench/decoding.py)",
        "",
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), load average {load:.1f} at the end; '{SENTENCE}' (10 tokens) + "
        f"{NEW} new tokens, greedy; median of {args.repeats} runs after one to warm up.",
        "",
        "| generation | seconds (16 tokens) | per token |",
        "|---|---|---|",
        *(f"| {name} | {s:.3f} | {s / NEW * 1000:.1f} ms |" for name, (s, _) in rows.items()),
        "",
        f"- app cached / transformers cached: **{app / hf_cached:.2f}×** (target ≤ {TARGET_VS_TRANSFORMERS}×)",
        f"- app uncached / app cached: **{app_uncached / app:.2f}×** (target ≥ {TARGET_VS_UNCACHED}×)",
        f"- the same 16 tokens as transformers: {same}",
        f"- cache bytes measured {made.cache_bytes:,} = formula 2 × 30 × 3 × 64 × 4 × {len(made.run.ids)} tokens "
        f"= {formula:,}: {made.cache_bytes == formula}",
        f"- the process's peak resident memory (both models loaded): {peak_mib:.0f} MiB",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
