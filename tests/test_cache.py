"""The session's cache of derived things: made once per key, least recently used out first, within its budget."""

import torch

from attention import attend
from attention.app.cache import Derived, nbytes
from attention.presets import article, random_case


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
