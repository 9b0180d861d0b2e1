"""What the backward pass differentiates: ½ Σ (outputs − target)², or one output number; as the learner sets it, as
a link or file writes it, and its value and gradient on the outputs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..base.case import Case, CaseError, Matrix
from ..base.i18n import msg
from ..forward.compute import Trace


@dataclass(frozen=True)
class Loss:
    """What the backward pass differentiates: ½ Σ (outputs − target)², or one output cell alone."""

    target: Matrix | None = None  # (n, d_out): the outputs the learner wants; the squared error's target
    cell: tuple[int, int] | None = None  # (row, column) from 0: the loss is that output number itself

    @property
    def kind(self) -> str:
        return "cell" if self.cell is not None else "target"


def default_loss(trace: Trace) -> Loss:
    """The learner's first loss: the outputs as they are with one number changed (output 3's second, or the last
    one's last), so the squared error is ½ and every gradient says how to move toward it."""
    target = [row[:] for row in _rows(trace.outputs)]
    i, j = min(2, len(target) - 1), min(1, len(target[0]) - 1)
    target[i][j] = float(round(target[i][j]) + 1)
    return Loss(target=tuple(tuple(row) for row in target))


def parse_loss(obj: object, case: Case) -> Loss:
    """A loss as plain JSON values ({"target": rows} or {"cell": [row, column]}, from 1); CaseError names the place."""
    n, d_out = case.n, len(case.options.w_out[0]) if case.options.w_out is not None else _concat_width(case)
    if not isinstance(obj, dict) or len(obj) != 1 or next(iter(obj)) not in ("target", "cell"):
        raise CaseError(msg("backward.where.loss"), msg("backward.error.loss_kind"))
    if "cell" in obj:
        cell = obj["cell"]
        ok = isinstance(cell, list | tuple) and len(cell) == 2 and all(type(v) is int for v in cell)
        if not ok or not (1 <= cell[0] <= n and 1 <= cell[1] <= d_out):
            raise CaseError(msg("backward.where.loss_cell"), msg("backward.error.loss_cell", n=n, d=d_out))
        return Loss(cell=(cell[0] - 1, cell[1] - 1))
    target = obj["target"]
    if not isinstance(target, list | tuple) or len(target) != n:
        raise CaseError(msg("backward.where.target"), msg("backward.error.target_shape", n=n, d=d_out))
    rows = []
    for i, row in enumerate(target):
        if not isinstance(row, list | tuple) or len(row) != d_out:
            raise CaseError(msg("backward.where.target"), msg("backward.error.target_shape", n=n, d=d_out))
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or abs(v) > 1e6:
                where = msg("backward.where.target_cell", row=i + 1, column=j + 1)
                raise CaseError(where, msg("backward.error.target_number"))
        rows.append(tuple(float(v) for v in row))
    return Loss(target=tuple(rows))


def loss_to_dict(loss: Loss) -> dict:
    return {"cell": [loss.cell[0] + 1, loss.cell[1] + 1]} if loss.cell is not None else {"target": loss.target}


def fits(loss: Loss, trace: Trace) -> bool:
    """Whether a loss fits the trace's outputs (a resized case leaves the target, or the cell, without a place)."""
    n, d = trace.outputs.shape
    if loss.cell is not None:
        return loss.cell[0] < n and loss.cell[1] < d
    return loss.target is not None and len(loss.target) == n and all(len(row) == d for row in loss.target)


def gradient(outputs: torch.Tensor, loss: Loss) -> tuple[float, torch.Tensor]:
    """The loss's value and its gradient on the outputs."""
    if loss.cell is not None:  # one output number: its gradient is 1 there and 0 everywhere else
        d_outputs = torch.zeros_like(outputs)
        d_outputs[loss.cell] = 1.0
        return outputs[loss.cell].item(), d_outputs
    d_outputs = outputs - torch.tensor(loss.target, dtype=outputs.dtype)  # ½ Σ (O − T)²: its gradient is O − T
    return 0.5 * (d_outputs**2).sum().item(), d_outputs


def _concat_width(case: Case) -> int:
    o = case.options
    g = o.kv_heads or o.heads
    return case.d_v * o.heads // g  # with grouped heads each query head's output is d_v / g wide


def _rows(tensor: torch.Tensor) -> list[list[float]]:
    return [[float(f"{v:.6g}") for v in row] for row in tensor.tolist()]


def loss_value(trace: Trace, loss: Loss) -> float:
    """The loss of a trace's outputs, without a backward pass."""
    if loss.cell is not None:
        return trace.outputs[loss.cell].item()
    return 0.5 * ((trace.outputs - torch.tensor(loss.target, dtype=trace.outputs.dtype)) ** 2).sum().item()
