"""A decoding as a file (attention-decoding/1): the status, then each step's tensors' shapes, its output and its
difference from row t of the causal trace."""

from __future__ import annotations

import json

from .compute import Decoding


def dump_decoding(decoding: Decoding) -> str:
    """The decoding as JSON text: the status, then each step's tensors' shapes, its output and its difference."""
    steps = [
        {"token": step.t + 1, "label": decoding.case.tokens[step.t],
         "shapes": {name: " × ".join(map(str, shape)) for name, shape in step.shapes().items()},
         "output": step["output_t"][0].tolist(), "difference": step.difference, "agrees": step.agrees}
        for step in decoding.steps
    ]  # fmt: skip
    status = {"agrees": decoding.agrees, "difference": decoding.difference, "status": str(decoding.status())}
    return json.dumps({"format": "attention-decoding/1", **status, "steps": steps}, indent=1) + "\n"
