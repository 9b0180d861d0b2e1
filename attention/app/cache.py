"""A session's derived things (traces, figures, tables), keyed by what they are made of, within a byte budget.

Everything here is remade from its key (a Case is frozen and hashable), so dropping an entry only costs time. The
least recently used entries go first once the budget is passed; the one entry pinned (the trace every page shows)
stays, and a new entry that cannot fit beside it is handed out without being kept.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Hashable
from typing import TypeVar

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from ..forward.compute import Broadcast, Trace

T = TypeVar("T")
BUDGET = 256 * 2**20  # bytes a session keeps: one trace at the limits (192 MiB: docs/hosting.md) and its figures
# A session's peak above the server's own, on every page at the limits, with glibc's mmap threshold fixed (process.py)
# (docs/hosting.md; tests/test_memory.py under AppTest, tests/e2e/test_server_memory.py on the real server)
SESSION_BOUND = 288 * 2**20


class Derived:
    """Derived things by key, the most recently used last, their bytes counted."""

    def __init__(self, budget: int = BUDGET):
        self.budget, self.bytes = budget, 0
        self._items: dict[Hashable, tuple[object, int]] = {}
        self._pinned: Hashable | None = None
        self.made: Counter[Hashable] = Counter()  # things made, by kind (a key's first part): what runs rebuild

    def get(self, key: Hashable, make: Callable[[], T], expected: int = 0) -> T:
        """The thing made of `key`: kept from before, or made now (and kept while the budget allows). `expected`,
        about its bytes, makes room before it is made, so that the old and the new are never held at once."""
        if key in self._items:
            self._items[key] = self._items.pop(key)  # now the most recently used
            return self._items[key][0]
        self._make_room(expected, keep=key)
        value = make()
        self.made[key[0] if isinstance(key, tuple) else key] += 1
        self._items[key] = (value, nbytes(value))
        self.bytes += self._items[key][1]
        self._make_room(0, keep=key)
        if self.bytes > self.budget and key != self._pinned:  # it does not fit beside the pinned one
            self._drop(key)
        return value

    def _make_room(self, more: int, keep: Hashable) -> None:
        if self.bytes + more <= self.budget:
            return
        for old in [k for k in self._items if k not in (keep, self._pinned)]:  # the least recently used first
            if self.bytes + more <= self.budget:
                break
            self._drop(old)

    def pin(self, key: Hashable) -> None:
        """Keep this entry whatever else comes (the trace every page of this run shows); one pin at a time."""
        self._pinned = key

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def _drop(self, key: Hashable) -> None:
        self.bytes -= self._items.pop(key)[1]


def nbytes(value: object) -> int:
    """About how many bytes a derived thing holds: its arrays and strings (tensors that share memory once)."""
    if isinstance(value, Trace):
        kept = (tensor for step in value.steps for tensor in step.tensors.values())
        tensors = [tensor for tensor in kept if not isinstance(tensor, Broadcast)]
        return _tensor_bytes(tensors)
    if isinstance(value, torch.Tensor):
        return _tensor_bytes([value])
    if hasattr(value, "tensors_held"):  # a thing that says which tensors it holds (decoding.Decoding)
        return _tensor_bytes(value.tensors_held())
    if isinstance(value, go.Figure):
        return sum(_figure_part(getattr(trace, name, None)) for trace in value.data for name in _FIGURE_ARRAYS)
    if isinstance(value, pd.DataFrame):  # of numbers written as text (figures.table): a pointer and a short str
        return 68 * value.size  # a cell (pandas' memory_usage costs more than the estimate is worth)
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, tuple | list):
        return sum(map(nbytes, value))
    return sys.getsizeof(value)


_FIGURE_ARRAYS = ("z", "x", "y", "source", "text", "customdata", "hovertemplate")


def _figure_part(part: object) -> int:
    if part is None:
        return 0
    if isinstance(part, str):
        return len(part)
    array = np.asarray(part)
    return array.nbytes if array.dtype != object else sum(len(str(v)) for v in array.flat)


def _tensor_bytes(tensors: list[torch.Tensor]) -> int:
    storages = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        storages[(tensor.device, storage.data_ptr())] = storage.nbytes()
    return sum(storages.values())
