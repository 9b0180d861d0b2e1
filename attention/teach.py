"""Why each step and each option is there, in plain words, with the case's own numbers where they tell the story."""

from __future__ import annotations

import math

import torch

from .core import Trace
from .i18n import text


def sqrt_dk_effect(trace: Trace, head: int | None = None) -> dict[str, float]:
    """What dividing by √d_k does to this trace's raw scores (one head's): their spread (standard deviation over the
    keys each query may see) and the largest weight of a row on average, without and with the division."""
    d = trace.case.d_head
    raw = trace.view("scores_raw", head).double()
    seen = torch.isfinite(trace.view("scores", head))  # a masked key is not part of a query's softmax

    def spread_and_top(scores: torch.Tensor) -> tuple[float, float]:
        hidden = scores.masked_fill(~seen, float("-inf"))
        rows = seen.any(dim=-1)
        top = torch.softmax(hidden[rows], dim=-1).max(dim=-1).values.mean().item() if rows.any() else 0.0
        return scores[seen].std(correction=0).item() if seen.sum() > 1 else 0.0, top

    (spread_raw, top_raw), (spread_scaled, top_scaled) = spread_and_top(raw), spread_and_top(raw / math.sqrt(d))
    return {
        "d": d,
        "spread_raw": spread_raw,
        "spread_scaled": spread_scaled,
        "top_raw": top_raw,
        "top_scaled": top_scaled,
    }


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
