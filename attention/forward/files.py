"""The trace file (attention-trace/1): the case, every step with its formula, code and tensors, and the outputs; a
capability adds its section (the backward pass's)."""

from __future__ import annotations

from ..base.case import case_to_dict
from ..base.files import dumps, record_to_dict, to_lists
from .compute import Trace
from .script import shown

TRACE_FORMAT = "attention-trace/1"


def trace_to_dict(trace: Trace, **sections: dict) -> dict:
    """The trace file's content, and the sections given (backward=…). Each step's code is the exported script's
    lines, as the page shows them."""
    steps = record_to_dict(trace, lambda step: shown(trace.case, step.name))
    steps[0]["tokens"] = list(trace.case.tokens)  # step 1's inputs: one row per token
    if trace.case.cross:  # cross-attention's x_kv, the keys' sentence: its own labels
        steps[0]["tokens_kv"] = list(trace.case.key_tokens)
    content = {"format": TRACE_FORMAT, "case": case_to_dict(trace.case), "device": trace.device, "steps": steps}
    return content | {"outputs": to_lists(trace.outputs)} | sections


def dump_trace(trace: Trace, **sections: dict) -> str:
    return dumps(trace_to_dict(trace, **sections))
