"""Training: one step of gradient descent on W_Q, W_K and W_V with the backward pass's gradients, bounded."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..base.case import Case
from ..base.i18n import msg
from ..forward.compute import Trace
from .compute import Backward, backward
from .loss import Loss

MAX_LR = 10.0  # a training step's learning rate is bounded: past this one step throws any case far off


class TrainingError(ValueError):
    """A training step that would make some number non-finite (or leave the case's bounds): refused."""


def train_step(trace: Trace, loss: Loss, lr: float, grads: Backward | None = None) -> Case:
    """One step of gradient descent on W_Q, W_K and W_V: W ← W − lr · dW. The case with the new weights; a step
    that makes a number non-finite, or past the case's bounds, is a TrainingError (the weights stay as they were)."""
    if not (isinstance(lr, int | float) and 0 < lr <= MAX_LR):
        raise TrainingError(msg("backward.error.lr", high=MAX_LR))
    grads = grads if grads is not None and grads.loss == loss and grads.forward is trace else backward(trace, loss)
    new = {}
    for name in ("w_query", "w_key", "w_value"):
        w = trace[name].double() - lr * grads[f"d_{name}"].double()
        if not torch.isfinite(w).all() or w.abs().max().item() > 1e6:
            raise TrainingError(msg("backward.error.train_diverged", name=name, lr=lr))
        new[name] = tuple(tuple(row) for row in w.to(trace[name].dtype).tolist())
    return replace(trace.case, **new)  # within the bounds parse_case holds (finite, |w| ≤ 1e6): the case is valid
