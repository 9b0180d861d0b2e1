"""The Devices page's traces: the session's case on every device here, and each step's time, kept in the session's
cache while the case is."""

from __future__ import annotations

import statistics

from ..app.session import Session
from ..app.traces import trace_bytes, trace_of
from ..base.case import with_options
from ..forward.compute import Trace, attend


def on_device(session: Session, trace: Trace, device: str) -> Trace:
    return trace if trace.device == device else trace_of(session, with_options(trace.case, device=device))


TIMED_TRACES = 5  # traces whose step times the Devices page shows the median of


TIMED_MAX_BYTES = 8 << 20  # past this a trace is timed once: five at the limits would hold 5 × 256 MiB


def step_seconds(session: Session, trace: Trace) -> tuple[float, ...]:
    """Each step's seconds on the trace's device, the median of TIMED_TRACES traces, kept while the case is.

    One run's time can hold a wait that is not the step's work: PyTorch's softmax splits even three rows between
    the CPU's threads (an OpenMP parallel region), and the step ends only when every thread has been scheduled to
    do its part; on a busy two-core server that wait is milliseconds, against 0.02 ms of arithmetic. The median
    of five is what the step computes."""

    def timed() -> tuple[float, ...]:
        runs = [trace.steps] + [attend(trace.case).steps for _ in range(TIMED_TRACES - 1)]
        return tuple(statistics.median(steps[i].seconds for steps in runs) for i in range(len(trace.steps)))

    if trace_bytes(trace.case) > TIMED_MAX_BYTES:
        return tuple(step.seconds for step in trace.steps)
    return session.derived.get(("step seconds", trace.case), timed)
