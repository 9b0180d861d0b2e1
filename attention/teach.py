"""Why each step and each option is there, in plain words, with the case's own numbers where they tell the story."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from .core import Trace
from .i18n import text

ROWS = 128  # query rows of one head's scores taken at a time: 1 MiB of float64 at n = 1024


def sqrt_dk_effect(trace: Trace, head: int | None = None) -> dict[str, float]:
    """What dividing by √d_k does to this trace's raw scores (one head's, or every head's): their spread (standard
    deviation over the keys each query may see) and the largest weight of a row on average, without and with it."""
    d = trace.case.d_k // trace.case.options.heads
    count, mean, squares, rows, top_raw, top_scaled = 0, 0.0, 0.0, 0, 0.0, 0.0
    for raw, seen in _blocks(trace, head):
        kept = raw[seen]
        if m := kept.numel():  # Chan's pairwise update of the count, mean and sum of squared deviations
            delta, total = kept.mean().item() - mean, count + m
            squares += ((kept - kept.mean()) ** 2).sum().item() + delta**2 * count * m / total
            count, mean = total, mean + delta * m / total
        some = seen.any(dim=-1)
        if some.any():
            rows += int(some.sum())
            top_raw += _top_weights(raw, seen, some)
            top_scaled += _top_weights(raw / math.sqrt(d), seen, some)
    spread = math.sqrt(squares / count) if count > 1 else 0.0
    return {
        "d": d,
        "spread_raw": spread,
        "spread_scaled": spread / math.sqrt(d),  # a standard deviation scales with its numbers
        "top_raw": top_raw / rows if rows else 0.0,
        "top_scaled": top_scaled / rows if rows else 0.0,
    }


def _blocks(trace: Trace, head: int | None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The raw scores (one head's, or every head's) in float64, ROWS query rows at a time, and which keys those rows
    see (a masked key is not part of a query's softmax). Every head's scores at once would make (h, n, n) float64
    temporaries, several alive together: at the limits (16 heads of n = 1024) over 0.9 GB for four numbers."""
    every = head is None and trace.axes("scores_raw")[0] == "head"
    for one in range(trace.case.options.heads) if every else (head,):
        raw, scores = trace.view("scores_raw", one), trace.view("scores", one)  # (n, n)
        for i in range(0, raw.shape[0], ROWS):
            yield raw[i : i + ROWS].double(), torch.isfinite(scores[i : i + ROWS])


def _top_weights(scores: torch.Tensor, seen: torch.Tensor, some: torch.Tensor) -> float:
    """The sum over the rows that see some key of each row's largest softmax weight."""
    hidden = scores.masked_fill(~seen, float("-inf"))
    return torch.softmax(hidden[some], dim=-1).max(dim=-1).values.sum().item()


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
