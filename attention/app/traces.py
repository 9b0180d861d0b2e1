"""The session's traces and what is made of them, through its cache: the trace every page shows, its exact-softmax
twin, the variants, and the check against PyTorch's own attention."""

from __future__ import annotations

import gc

import torch

from ..base.case import Case, with_options
from ..base.i18n import clip, msg
from ..base.record import Check
from ..forward import compute, oracle, teach
from ..forward.compute import Trace, attend
from .session import Session

BIG = 32 * 2**20  # bytes of a trace past which the memory of the traces already dropped is freed first


def current(session: Session) -> Trace:
    """The trace of the session's case: what every page of this run shows (kept whatever else the cache holds)."""
    session.derived.pin(("trace", session.case))  # before it is made: the trace shown last may make room for it
    trace = trace_of(session, session.case)
    if trace.case != session.case:  # the GPU failed: the session's case is on the CPU now, and this is its trace
        session.derived.pin(("trace", session.case))
        trace = session.derived.get(("trace", session.case), lambda: trace)
    return trace


def trace_of(session: Session, case: Case) -> Trace:
    expected = trace_bytes(case)
    if expected > BIG and ("trace", case) not in session.derived:
        gc.collect()  # a dropped trace may still sit in a cycle (a finished page's module and its functions)
    return session.derived.get(("trace", case), lambda: _attend(session, case), expected=expected)


def trace_bytes(case: Case) -> int:
    """About the bytes a trace of the case holds: its n × n_kv scores and weights per head, its n × d and n_kv × d
    matrices and its weights (for the room the cache makes before it is computed)."""
    h, n, n_kv, d_in, d_k, d_v = case.options.heads, case.n, case.n_kv, case.d_in, case.d_k, case.d_v
    numbers = 4 * h * n * n_kv + n * (d_in + d_k + 2 * d_v) + n_kv * (d_k + d_v) + d_in * (2 * d_k + d_v)
    numbers += n_kv * d_in if case.cross else 0  # x_kv
    return numbers * torch.finfo(getattr(torch, case.options.dtype)).bits // 8


def _attend(session: Session, case: Case) -> Trace:
    """attend(case); if the GPU fails (out of memory, a CUDA error), the CPU for the rest of the session, said so."""
    try:
        return attend(case)
    except (RuntimeError, AssertionError) as e:  # CUDA out of memory and CUDA errors are RuntimeErrors
        if case.options.device == "cpu":
            raise
        session.choose(device="cpu")  # for the rest of the session; the numbers are kept
        failed = {"device": case.options.device, "kind": type(e).__name__, "detail": clip(str(e))}
        session.notices.append(msg("warning.device_failed", **failed))
        return attend(with_options(case, device="cpu"))


def exact(session: Session, trace: Trace) -> Trace:
    """The same case with the exact softmax, to show what the article's rounding changes."""
    if trace.case.options.weights_override is None:
        return trace
    return trace_of(session, with_options(trace.case, weights_override=None))


def variant_outputs(session: Session, trace: Trace, case: Case) -> torch.Tensor:
    """A variant's outputs alone (n × d_out numbers, not a whole trace), made from the trace's queries, keys, values."""
    return session.derived.get(("variant outputs", case), lambda: compute.variant_outputs(trace, case))


def variant_weights(session: Session, trace: Trace, case: Case, head: int = 0) -> torch.Tensor:
    """A variant's step-5 weights of one head."""
    return session.derived.get(("variant weights", case, head), lambda: compute.variant_weights(trace, case, head))


def whys(session: Session, trace: Trace, step: str, lang: str) -> list[str]:
    """teach.whys of a step, kept while the case is: step 4's numbers for ÷√d_k read every head's n × n scores
    (of the trace's own numbers: an exercise's trace has NaN where it hides one)."""
    real = current(session) if trace.hidden else trace
    return session.derived.get(("whys", trace.case, step, lang), lambda: teach.whys(real, step, lang))


def sqrt_dk_effect(session: Session, trace: Trace) -> dict[str, float]:
    """teach.sqrt_dk_effect of every head, kept while the case is (the variants page's why ÷√d_k)."""
    return session.derived.get(("sqrt_dk effect", trace.case), lambda: teach.sqrt_dk_effect(trace))


def check(session: Session, trace: Trace) -> Check:
    """Whether the trace (with the exact softmax) agrees with PyTorch's attention, kept while the case is."""
    twin = exact(session, trace)
    return session.derived.get(("check", twin.case), lambda: oracle.check(twin))


def origin_check(session: Session, trace: Trace) -> Check | None:
    """The check only the case's origin can make (a model's head: against the model's own output of that head,
    attention/models/), kept while the case is; None when it has none."""
    origin = session.origin
    return session.derived.get(("origin check", trace.case, type(origin)), lambda: origin.check(trace))
