"""Attention, step by step: the article's eight steps of self-attention as a traced PyTorch computation."""

from .base import presets
from .base.case import CASE_FORMAT, Case, CaseError, Options, case_to_dict, parse_case, with_options
from .base.device import available_devices, gpu_unavailable_reason, resolve_device
from .base.record import Step
from .forward.compute import Trace, attend
from .forward.steps import STEP_NAMES

__all__ = [
    "CASE_FORMAT",
    "STEP_NAMES",
    "Case",
    "CaseError",
    "Options",
    "Step",
    "Trace",
    "attend",
    "available_devices",
    "case_to_dict",
    "gpu_unavailable_reason",
    "parse_case",
    "presets",
    "resolve_device",
    "with_options",
]
