"""Why each step and each option is there, in plain words, with the case's own numbers where they tell the story;
and where the article departs from textbook attention, as variants of a case."""

from __future__ import annotations

import math

import torch

from ..base.case import Case, with_options
from ..base.i18n import Message, msg, text
from .compute import Trace, attend


def sqrt_dk_effect(trace: Trace, head: int | None = None) -> dict[str, float]:
    """What dividing by √d_k does to this trace's raw scores (one head's, or every head's): their spread (standard
    deviation over the keys each query may see) and the largest weight of a row on average, without and with it."""
    d, heads = trace.case.d_head, trace.case.options.heads
    every = head is None and trace.has_head("scores_raw")
    # A head at a time, each temporary changed in place: every head's float64 scores at once made several
    # (h, n, n) temporaries alive together, at the limits (16 heads of n = 1024) over 0.9 GB for four numbers.
    count, mean, squares, rows, top_raw, top_scaled = 0, 0.0, 0.0, 0, 0.0, 0.0
    for one in range(heads) if every else (head,):
        raw = trace.view("scores_raw", one).to(torch.float64, copy=True)  # (n, n): changed in place below
        seen = torch.isfinite(trace.view("scores", one))  # a masked key is not part of a query's softmax
        kept = raw[seen]
        if m := kept.numel():  # Chan's pairwise update of the count, mean and sum of squared deviations
            delta, total = kept.mean().item() - mean, count + m
            squares += kept.var(correction=0).item() * m + delta**2 * count * m / total
            count, mean = total, mean + delta * m / total
        del kept
        some = seen.any(dim=-1)
        rows += int(some.sum())
        scaled = raw / math.sqrt(d)
        top_raw, top_scaled = top_raw + _top_weights(raw, seen, some), top_scaled + _top_weights(scaled, seen, some)
    spread = math.sqrt(squares / count) if count > 1 else 0.0
    return {
        "d": d,
        "spread_raw": spread,
        "spread_scaled": spread / math.sqrt(d),  # a standard deviation scales with its numbers
        "top_raw": top_raw / rows if rows else 0.0,
        "top_scaled": top_scaled / rows if rows else 0.0,
    }


def _top_weights(scores: torch.Tensor, seen: torch.Tensor, some: torch.Tensor) -> float:
    """The sum over the rows that see some key of each row's largest softmax weight, 1 / Σ_j e^(s_j − max s),
    made in `scores` itself (changed in place)."""
    scores.masked_fill_(~seen, float("-inf"))
    scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()  # a row that sees no key is NaN here: left out below
    return scores.sum(dim=-1).reciprocal_()[some].sum().item()


def whys(trace: Trace, step: str, lang: str = "en", head: int | None = None) -> list[str]:
    """The why of a step, then of each option in effect there, one or two sentences each, in `lang`."""
    o = trace.case.options
    out = [text(lang, f"why.{step}")]
    if step == "qkv" and o.heads > 1:
        out.append(text(lang, "why.heads"))
    if step == "scores":
        out.append(text(lang, "why.sqrt_dk", **sqrt_dk_effect(trace, head)))  # on or off: the case's numbers say why
        if o.mask is not None:
            out.append(text(lang, "why.causal" if o.mask == "causal" else "why.custom_mask"))
        if o.temperature != 1:
            out.append(text(lang, "why.temperature"))
    if step == "outputs" and o.mask == "causal":
        out.append(text(lang, "why.causal_outputs"))
    if step == "softmax" and o.weights_override is not None:
        out.append(text(lang, "why.rounded"))
    return out


def variants(case: Case) -> dict[str, Case]:
    """Where the article departs from textbook attention, side by side on one case's numbers, keyed by id: "rounded"
    (when the case has the article's rounded weights), "exact", "textbook", "temperature" (when it is not 1) and
    "causal". A variant's name is variant_name(id, case)."""
    exact = {"scale": None, "temperature": None, "mask": None, "weights_override": None}
    changes = {"exact": {}, "textbook": {"scale": "sqrt_dk"}, "causal": {"mask": "causal"}}
    if case.options.weights_override is not None:
        changes = {"rounded": {"weights_override": case.options.weights_override}} | changes
    if case.options.temperature != 1:  # at 1 it is the exact softmax again
        changes["temperature"] = {"temperature": case.options.temperature}
    order = ("rounded", "exact", "textbook", "temperature", "causal")
    return {v: with_options(case, **exact | changes[v]) for v in order if v in changes}


def variant_name(variant: str, case: Case) -> Message:
    """A variant's name in the catalogue (variant.<id>), with the case's temperature where it says it."""
    return msg(f"variant.{variant}", temperature=case.options.temperature)


EXACT = "exact"  # the variant the others are compared with


def rounding_gap(case: Case) -> float:
    """How far the case's weights override is from its exact softmax: the largest difference of one weight."""
    exact = attend(with_options(case, weights_override=None, device="cpu"))["weights_exact"]
    return (exact - torch.tensor(case.options.weights_override, dtype=exact.dtype)).abs().max().item()
