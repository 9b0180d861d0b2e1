"""The session's cache of derived things: made once per key, least recently used out first, within its budget."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention import attend
from attention.app.cache import Derived, nbytes
from attention.base.presets import article, random_case


def test_a_thing_is_made_once_per_key():
    made = []
    cache = Derived()
    for _ in range(3):
        assert cache.get("a", lambda: made.append(1) or torch.zeros(4)).shape == (4,)
    assert made == [1] and len(cache) == 1 and cache.bytes == 16


def test_the_least_recently_used_go_first_and_the_pinned_one_stays():
    cache = Derived(budget=100)
    cache.pin("main")
    cache.get("main", lambda: torch.zeros(10))  # 40 bytes
    cache.get("a", lambda: torch.zeros(10))
    cache.get("main", lambda: None)  # used again: now the most recent
    cache.get("b", lambda: torch.zeros(10))  # 120 bytes: "a", the least recently used, goes
    assert "a" not in cache and "main" in cache and "b" in cache and cache.bytes == 80
    big = cache.get("big", lambda: torch.zeros(20))  # 80 bytes: only beside "main" if "b" goes, and still too many
    assert big.shape == (20,) and "big" not in cache and "main" in cache and cache.bytes <= 100


def test_a_pinned_thing_is_kept_even_past_the_budget():
    cache = Derived(budget=10)
    cache.pin("main")
    cache.get("main", lambda: torch.zeros(100))
    assert "main" in cache and cache.bytes == 400
    cache.get("other", lambda: torch.zeros(1))
    assert "other" not in cache and "main" in cache


def test_a_traces_bytes_count_shared_tensors_once():
    trace = attend(article())  # weights is the override, weights_exact its own; x, q, k, v … each their own
    tensors = [t for step in trace.steps for t in step.tensors.values()]
    assert nbytes(trace) == sum(t.untyped_storage().nbytes() for t in tensors)
    exact = attend(random_case(4, 4, 4, 4))  # no override: weights is weights_exact
    assert exact["weights"].data_ptr() == exact["weights_exact"].data_ptr()
    tensors = [t for step in exact.steps for name, t in step.tensors.items() if name != "weights"]
    assert nbytes(exact) == sum(t.untyped_storage().nbytes() for t in tensors)


# In a fresh interpreter without MALLOC_MMAP_THRESHOLD_: a 16 MiB block freed (glibc then raises its mmap threshold
# past 4 MiB), then sixteen 4 MiB tensors with small ones between them, freed: MiB still resident.
FRAGMENTS = """
import sys, torch
if sys.argv[1] == "app":
    from attention.app import process
    assert process.RETURNS_BIG_BLOCKS
def rss():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS")) * 1024
big = torch.ones(4 * 2**20)
del big
before, kept, blocks = rss(), [], []
for _ in range(16):
    blocks.append(torch.ones(2**20))
    kept.append(torch.ones(64))  # between the big ones: the heap cannot shrink past these
del blocks
print((rss() - before) / 2**20)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mmap threshold")
def test_the_app_gives_freed_big_blocks_back_without_the_malloc_variable():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])

    def resident(mode: str) -> float:
        run = subprocess.run([sys.executable, "-c", FRAGMENTS, mode], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        return float(run.stdout.split()[-1])

    assert resident("plain") > 32  # glibc's default keeps them in its heap (the case the app guards against)
    assert resident("app") < 4  # with the app imported, each was a mapping of its own, given back when freed
