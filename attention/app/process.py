"""Once per server process: glibc's mmap threshold fixed; torch's intra-op threads set to one; the heavy imports
warmed up, then everything alive frozen out of the cycle collector.

Streamlit runs a full gc.collect() after every script run (runner.postScriptGC). In a process holding torch,
plotly and pandas that full collection walks millions of objects which live as long as the process, and was most
of what an action cost the server (bench/profile.md: 65 % of a new temperature's 322 ms). gc.freeze() moves the
objects alive now to a generation no collection visits, so the collection after a run walks only what runs made
since; it still runs, so a run's garbage in reference cycles (and the tensors it holds) goes as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

import torch

from ..base.presets import article
from ..forward.compute import attend
from ..forward.figures import tensor_heatmap
from ..show.tables import table

MMAP_THRESHOLD = 131072  # bytes: glibc's starting mmap threshold, which MALLOC_MMAP_THRESHOLD_=131072 also fixes
M_MMAP_THRESHOLD = -3  # mallopt's parameter number for it (glibc's malloc.h)
# Each run on one thread: the sessions' runs share the cores, and a run of this app's sizes gains little from a
# second thread and pays for it in CPU (bench/threads.md: as fast or faster on quiet cores, less CPU per action)
TORCH_THREADS = 1


def return_big_blocks() -> bool:
    """Fix glibc's mmap threshold in this process, as MALLOC_MMAP_THRESHOLD_=131072 does: every block past it is
    its own mapping, given back to the system when freed. True where it was set (glibc), False elsewhere."""
    # By default glibc raises the threshold to each big block freed (up to 32 MiB), so that later n × n tensors
    # (4 MiB a head at the limits) come from its heap and stay there once freed: +60-100 MiB per session at the
    # limits, run to run (docs/hosting.md). Setting it also turns that raising off. The server's own command
    # cannot be relied on to set the variable (a host's own, Community Cloud's), so the app sets it itself.
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):  # not glibc (macOS's libc has no mallopt)
        mallopt = None
    return bool(mallopt and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1)


def settle() -> None:
    """Make once what the first run would make (Plotly's validators, torch's kernels), then freeze (see above)."""
    torch.set_num_threads(TORCH_THREADS)
    trace = attend(article())
    tensor_heatmap(trace, "scores", None, lang="en")
    table(trace, "scores", None, lang="en")
    gc.collect()  # the garbage of the imports first: frozen, it would never be collected
    gc.freeze()


RETURNS_BIG_BLOCKS = return_big_blocks()  # once, when the app is first imported in the server's process
