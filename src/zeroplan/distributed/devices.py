"""GPUs, the backend and the number of local ranks, decided without importing torch (importing it
costs over a second of CPU and hundreds of MiB): the launcher looks at the NVIDIA driver, and the
ranks, which import torch anyway, settle "auto" with torch's own view."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Mapping

from zeroplan.core.errors import InputError

BACKENDS = ("auto", "gloo", "nccl")
DEFAULT_CPU_RANKS = 2
MAX_LOCAL_RANKS = 1024  # one machine; larger jobs go through torchrun across nodes
NVIDIA_PROC_DIR = "/proc/driver/nvidia/gpus"  # one entry per GPU the driver sees
NVIDIA_SMI_TIMEOUT_S = 10.0


def check_nproc(nproc: int | None, purpose: str) -> None:
    """--nproc bounds for every command that spawns local ranks; purpose says why 2 is the least
    ("a collective", "sharding")."""
    if nproc is None:
        return
    if nproc > MAX_LOCAL_RANKS:
        raise InputError("--nproc", f"{nproc} local ranks is more than this command starts (at most "
                         f"{MAX_LOCAL_RANKS})", "use torchrun across nodes for larger runs")
    if nproc < 2:
        raise InputError("--nproc", f"{purpose} needs at least 2 ranks, got {nproc}",
                         "use --nproc 2 or more, or start it under torchrun")


def _driver_gpus(proc_dir: str) -> int | None:
    try:
        return len(os.listdir(proc_dir))
    except OSError:
        return None


def _smi_gpus() -> int | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


def visible_gpu_count(environ: Mapping[str, str] = os.environ, proc_dir: str = NVIDIA_PROC_DIR) -> int:
    """GPUs this process could use: the driver's list (/proc/driver/nvidia/gpus, else `nvidia-smi -L`),
    cut to CUDA_VISIBLE_DEVICES when it is set ("" or "-1": none)."""
    found = _driver_gpus(proc_dir)
    if found is None:
        found = _smi_gpus() or 0
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return found
    listed = []
    for item in (part.strip() for part in visible.split(",")):
        if not item or item.startswith("-"):
            break  # CUDA stops at the first invalid entry
        listed.append(item)
    return min(found, len(listed))


def launcher_backend(requested: str, gpus: int) -> str:
    """The backend as far as the launcher can tell without torch: "gloo" with no GPU, and "auto" left
    for the ranks (nccl when torch sees CUDA, gloo with a CPU-only torch) when there are GPUs."""
    if requested == "nccl" and gpus == 0:
        raise InputError("--backend", "nccl needs CUDA GPUs, and none is visible (no NVIDIA driver, or "
                         "CUDA_VISIBLE_DEVICES hides them)", "use --backend gloo (CPU) or --backend auto")
    if requested == "auto" and gpus == 0:
        return "gloo"
    return requested


def resolve_backend(requested: str, cuda_available: bool) -> str:
    """Inside a rank, with torch imported: "auto" becomes nccl or gloo."""
    if requested == "nccl" and not cuda_available:
        raise InputError("--backend", "nccl needs CUDA GPUs, and torch sees none",
                         "use --backend gloo (CPU) or --backend auto")
    if requested == "auto":
        return "nccl" if cuda_available else "gloo"
    return requested


def local_world(nproc: int | None, backend: str, gpus: int, purpose: str) -> int:
    """Ranks to spawn: --nproc, else one per GPU (nccl, or auto with GPUs), else 2 CPU ranks.
    backend is launcher_backend()'s answer."""
    world = nproc if nproc is not None else (gpus if backend != "gloo" else DEFAULT_CPU_RANKS)
    if world < 2:
        raise InputError("--nproc", f"{purpose} needs at least 2 ranks, got {world}",
                         "use --nproc 2 or more (with --backend gloo on a single-GPU machine), or torchrun")
    if backend != "gloo" and world > gpus:
        raise InputError("--nproc", f"{world} ranks but {gpus} GPU(s) are visible; nccl needs one GPU per rank",
                         f"use --nproc {gpus} or fewer, or --backend gloo")
    return world
