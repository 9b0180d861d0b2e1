"""The devices PyTorch really has here, by name, and turning a case's device option into one (or a clear error)."""

from __future__ import annotations

import os
import platform
import threading
from dataclasses import dataclass

import torch

from .case import CaseError
from .i18n import excerpt, msg


@dataclass(frozen=True)
class Device:
    name: str  # what torch.device takes: "cpu", "cuda:0", "mps"
    description: str  # e.g. "NVIDIA H200" (the CPU's is a catalogue Message)

    def __str__(self) -> str:
        return f"{self.name} — {self.description}"


def available_devices() -> tuple[Device, ...]:
    """CPU first, then every CUDA device, then Apple's MPS: only what is present and usable."""
    threads = msg(
        "device.cpu", machine=platform.machine() or "CPU", threads=torch.get_num_threads(), cpus=os.cpu_count()
    )
    cpu = Device("cpu", threads)
    gpus = [Device(f"cuda:{i}", torch.cuda.get_device_name(i)) for i in range(_cuda_count())]
    if torch.backends.mps.is_available():
        gpus.append(Device("mps", "Apple Metal (MPS)"))
    return (cpu, *gpus)


def gpu_unavailable_reason() -> str | None:
    """Why there is no GPU to choose, in words, or None when there is one."""
    if _cuda_count() or torch.backends.mps.is_available():
        return None
    if not torch.backends.cuda.is_built():
        return msg("reason.cpu_build", version=torch.__version__)
    return msg("reason.no_cuda")


def resolve_device(spec: str) -> torch.device:
    """'auto' picks the first GPU, else the CPU; a device that is not here is a CaseError naming those that are."""
    names = [d.name for d in available_devices()]
    if spec == "auto":
        return torch.device(names[1] if len(names) > 1 else "cpu")
    name = "cuda:0" if spec == "cuda" else spec
    if name not in names:
        reason = gpu_unavailable_reason()
        problem = (
            msg("error.device_absent_reason", spec=excerpt(spec), reason=reason, names=", ".join(names))
            if reason
            else msg("error.device_absent", spec=excerpt(spec), names=", ".join(names))
        )
        raise CaseError(msg("where.device"), problem)
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


_warmed = threading.local()  # the devices warmed up in this thread


def warm_up(name: str) -> None:
    """Run the steps' kinds of operation once, on tiny tensors, on a device: an operation's first call pays its
    one-time set-up (a kernel loaded, a thread pool started), which no step's time should include. Once a thread
    and device: PyTorch's CPU operations start a team of OpenMP threads for each new thread that calls them, and
    Streamlit runs every rerun in a new thread, so the first parallel operation of each run (the softmax, 3 ms
    against 0.02 ms after) was timed as step 5's."""
    if name in (warmed := _warmed.__dict__.setdefault("devices", set())):
        return
    warmed.add(name)
    device = torch.device(name)
    x = torch.ones(2, 2, device=device)
    scores = (x @ x.mT * 0.5).masked_fill(x == 0, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(nan=0.0)
    (x[:, None, :] * weights.mT[:, :, None]).sum(dim=-3).flatten()
    synchronize(device)
