"""Once per server process: the heavy imports warmed up, then everything alive frozen out of the cycle collector.

Streamlit runs a full gc.collect() after every script run (runner.postScriptGC). In a process holding torch,
plotly and pandas that full collection walks millions of objects which live as long as the process, and was most
of what an action cost the server (bench/profile.md: 114 of an app's 118 ms at one number input). gc.freeze()
moves the objects alive now to a generation no collection visits, so the collection after a run walks only what
runs made since; it still runs, so a run's garbage in reference cycles (and the tensors it holds) goes as before.
"""

from __future__ import annotations

import gc

from .. import figures
from ..core import attend
from ..presets import article


def settle() -> None:
    """Make once what the first run would make (Plotly's validators, torch's kernels), then freeze (see above)."""
    trace = attend(article())
    figures.tensor_heatmap(trace, "scores", None, lang="en")
    figures.table(trace, "scores", None, lang="en")
    gc.collect()  # the garbage of the imports first: frozen, it would never be collected
    gc.freeze()
