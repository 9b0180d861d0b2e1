"""Pure builders for the Devices page: each step's time on each device, and the project's own measurements."""

from __future__ import annotations

import pandas as pd

from ..base.i18n import text
from ..base.record import Step
from ..forward.steps import STEP_NAMES
from .measured import Measured


def step_times(steps: tuple[Step, ...], seconds: dict[str, tuple[float, ...]], lang: str = "en") -> pd.DataFrame:
    """Milliseconds per step on each device (its seconds by device name, in the steps' order), side by side."""
    return pd.DataFrame(
        {device: [s * 1e3 for s in times] for device, times in seconds.items()},
        index=[f"{s.label} {text(lang, f'step.{s.name}.title')}" for s in steps],
    )


def measured_times(measured: Measured, lang: str = "en") -> pd.DataFrame:
    """A benchmark file's milliseconds (measured.py), a column per size n: each step, the whole trace, fused
    attention, a row each. Steps down and sizes across: five sizes fit a page (and nearly a phone) where ten step
    names across were cut off at the right."""
    steps = [f"{i} {text(lang, f'step.{name}.title')}" for i, name in enumerate(STEP_NAMES, start=1)]
    sizes = list(measured.step_ms)
    return pd.DataFrame(
        [[measured.step_ms[n][i] for n in sizes] for i in range(len(steps))]
        + [[measured.trace_ms.get(n) for n in sizes], [measured.fused_ms.get(n) for n in sizes]],
        index=[*steps, text(lang, "devices.trace_ms"), text(lang, "devices.fused_ms")],
        columns=[f"n = {n}" for n in sizes],
    )
