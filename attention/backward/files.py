"""The backward pass as a trace file's `backward` section: the loss, its value, the check against autograd, and the
backward steps in the order they run, each with its formula, code and gradients."""

from __future__ import annotations

from ..base.files import record_to_dict
from .compute import Backward, check
from .loss import loss_to_dict
from .script import code


def backward_to_dict(result: Backward) -> dict:
    checked = check(result)
    steps = record_to_dict(result, lambda step: code(result.case, result.loss, step.name))
    check_entry = {"oracle": checked.oracle, "difference": checked.difference, "agrees": checked.agrees}
    return {"loss": loss_to_dict(result.loss), "value": result.value, "check": check_entry, "steps": steps}
