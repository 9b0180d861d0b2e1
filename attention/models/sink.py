"""Why so many heads park their weight on the first token (issue 31, point 3), on the head in front of the learner:
its rows' share of weight there, that token's value vector against the others', and the head's outputs with and
without the parked weight's part (attention sinks: Xiao et al., 2023). An encoder's rows see every token: its
places are [CLS] and [SEP], the first token and the last."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sink:
    """A token weight may be parked on, in one head, each a mean over rows 2 … n."""

    position: int  # from 0
    share: float  # the weight on it
    value_norm: float  # ‖v‖ of its value vector
    others_norm: float  # the mean ‖v‖ of the other tokens' value vectors
    output_norm: float  # ‖output‖: a short one adds little to the model's stream
    without_norm: float  # ‖output − weight · v‖: the output without the parked weight's part


def sinks(weights: torch.Tensor, values: torch.Tensor, outputs: torch.Tensor, causal: bool) -> list[Sink]:
    """The first token (and an encoder's last) in one head: weights (n, n), values (n, d_v), outputs (n, d_v)."""
    w, v, out = weights.double(), values.double(), outputs.double()
    n = len(w)
    norms = v.norm(dim=-1)
    found = []
    for position in (0,) if causal or n < 2 else (0, n - 1):
        rows = w[1:, position]  # rows 2 … n
        others = torch.cat([norms[:position], norms[position + 1 :]]).mean().item()
        without = (out[1:] - rows[:, None] * v[position]).norm(dim=-1).mean().item()
        said = rows.mean().item(), norms[position].item(), others, out[1:].norm(dim=-1).mean().item(), without
        found.append(Sink(position, *said))
    return found
