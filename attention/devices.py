"""The devices PyTorch really has here, by name, and turning a case's device option into one (or a clear error)."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import torch

from .case import CaseError


@dataclass(frozen=True)
class Device:
    name: str  # what torch.device takes: "cpu", "cuda:0", "mps"
    description: str  # e.g. "NVIDIA H200"

    def __str__(self) -> str:
        return f"{self.name} — {self.description}"


def available_devices() -> tuple[Device, ...]:
    """CPU first, then every CUDA device, then Apple's MPS: only what is present and usable."""
    cpu = Device("cpu", f"{platform.machine() or 'CPU'}, {torch.get_num_threads()} of {os.cpu_count()} threads")
    gpus = [Device(f"cuda:{i}", torch.cuda.get_device_name(i)) for i in range(_cuda_count())]
    if torch.backends.mps.is_available():
        gpus.append(Device("mps", "Apple Metal (MPS)"))
    return (cpu, *gpus)


def gpu_unavailable_reason() -> str | None:
    """Why there is no GPU to choose, in words, or None when there is one."""
    if _cuda_count() or torch.backends.mps.is_available():
        return None
    if not torch.backends.cuda.is_built():
        return f"this PyTorch ({torch.__version__}) is a CPU-only build"
    return "PyTorch has CUDA support, but no CUDA device is visible"


def resolve_device(spec: str) -> torch.device:
    """'auto' picks the first GPU, else the CPU; a device that is not here is a CaseError naming those that are."""
    names = [d.name for d in available_devices()]
    if spec == "auto":
        return torch.device(names[1] if len(names) > 1 else "cpu")
    name = "cuda:0" if spec == "cuda" else spec
    if name not in names:
        reason = gpu_unavailable_reason()
        raise CaseError(
            "options.device",
            f"{spec!r} is not available here{f' ({reason})' if reason else ''}; available: {', '.join(names)}",
        )
    return torch.device(name)


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a timer read afterwards is true."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _cuda_count() -> int:
    # is_available() is False on a CPU-only build and on a machine without a driver; never raises.
    return torch.cuda.device_count() if torch.cuda.is_available() else 0
