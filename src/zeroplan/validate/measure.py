"""What a rank really holds (imports torch).

Model states are counted as the bytes of the distinct storages behind parameter, gradient and
optimizer-state tensors: a view counts its whole storage once (an FSDP2 shard is a view of its padded
chunk; its gradient a view of the group's padded reduce-scatter output; DDP gradients views of its
buckets), a DTensor counts its local tensor, a tied weight counts once. "gpu" is the rank's compute
device (the CPU in a CPU-only run); anything elsewhere is "cpu" (offloaded).

Activations are the distinct storages autograd saves for backward during the forward pass, except
parameters (and views of them), module buffers, and dtype copies of parameters (autocast's bf16 weight
casts), which are counted apart as parameter copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from zeroplan.core.memory.framework_partition import COMPONENTS


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor._local_tensor if isinstance(tensor, DTensor) else tensor


def _key(tensor: torch.Tensor) -> tuple[str, int, int]:
    storage = tensor.untyped_storage()
    return tensor.device.type, tensor.device.index or 0, storage.data_ptr()


def storage_bytes(tensors, compute_type: str) -> dict[str, int]:
    """{"gpu": bytes, "cpu": bytes} of the distinct storages behind the tensors."""
    seen: dict[tuple, tuple[str, int]] = {}
    for tensor in tensors:
        if tensor is None:
            continue
        local = _local(tensor)
        tier = "gpu" if local.device.type == compute_type else "cpu"
        seen[_key(local)] = (tier, local.untyped_storage().nbytes())
    totals = {"gpu": 0, "cpu": 0}
    for tier, size in seen.values():
        totals[tier] += size
    return totals


def optimizer_state_tensors(optimizer) -> list[torch.Tensor]:
    """Every tensor in the optimizer's state (ZeroRedundancyOptimizer: its local optimizer's)."""
    inner = getattr(optimizer, "optim", optimizer)
    return [value for state in inner.state.values() for value in state.values() if torch.is_tensor(value)]


def model_states(module: nn.Module, optimizer, compute_type: str) -> dict[str, int]:
    """{"gpu/params": ..., "cpu/optimizer_states": ...}: what this rank holds right now."""
    params = list(module.parameters())  # a tied weight is listed once
    groups = {"params": params, "gradients": [p.grad for p in params],
              "optimizer_states": optimizer_state_tensors(optimizer)}
    held: dict[str, int] = {}
    for component in COMPONENTS:
        for tier, size in storage_bytes(groups[component], compute_type).items():
            held[f"{tier}/{component}"] = size
    return held


def unsharded_param_bytes(module: nn.Module, compute_type: str) -> int:
    """FSDP2: bytes of the unsharded (all-gathered) parameters registered on the module right now."""
    plain = [p for p in module.parameters() if not isinstance(p, DTensor)]
    return sum(storage_bytes(plain, compute_type).values())


def _is_param_copy(tensor: torch.Tensor) -> bool:
    base = tensor._base if tensor._base is not None else tensor
    node = base.grad_fn
    if node is None or type(node).__name__ != "ToCopyBackward0" or not node.next_functions:
        return False
    source = node.next_functions[0][0]
    return isinstance(getattr(source, "variable", None), nn.Parameter)


@dataclass
class SavedTensorMeter:
    """Records the storages saved for backward while active (a saved_tensors_hooks context)."""

    module: nn.Module
    activations: dict = field(default_factory=dict)
    param_copies: dict = field(default_factory=dict)

    def _excluded(self) -> set:
        # Read at every save: FSDP2 swaps unsharded parameters in and out as forward runs.
        tensors = [_local(t) for t in list(self.module.parameters()) + list(self.module.buffers())]
        return {_key(t) for t in tensors}

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        local = _local(tensor)
        key = _key(local)
        if key not in self._excluded():
            target = self.param_copies if _is_param_copy(local) else self.activations
            target[key] = local.untyped_storage().nbytes()
        return tensor

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)

    @property
    def activation_bytes(self) -> int:
        return sum(self.activations.values())

    @property
    def param_copy_bytes(self) -> int:
        return sum(self.param_copies.values())


def cuda_baseline(device: torch.device) -> int:
    """Bytes allocated before the model exists, once cuBLAS has its workspaces: they come from the same
    caching allocator, one per (handle, stream), and backward runs on its own thread (its own handle). So
    warm up a linear layer forward and backward in fp32 and bf16, free it, and read what stays."""
    for dtype in (torch.float32, torch.bfloat16):
        layer = nn.Linear(64, 64).to(device=device, dtype=dtype)
        layer(torch.randn(8, 64, device=device, dtype=dtype, requires_grad=True)).sum().backward()
        del layer
    torch.cuda.synchronize(device)
    return torch.cuda.memory_allocated(device)


class CudaMemory:
    """Allocated bytes and peaks of one training step, by phase (CUDA only), net of the baseline."""

    def __init__(self, device: torch.device, baseline: int) -> None:
        self.device = device
        self.baseline = baseline
        self.values: dict[str, int] = {}

    def start(self) -> None:
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.values["before_forward"] = torch.cuda.memory_allocated(self.device)

    def mark(self, name: str) -> None:
        torch.cuda.synchronize(self.device)
        self.values[name] = torch.cuda.memory_allocated(self.device)

    def end_phase(self, name: str) -> None:
        """Peak since start() or the last end_phase(); then a fresh peak for the next phase."""
        torch.cuda.synchronize(self.device)
        self.values[f"peak_{name}"] = torch.cuda.max_memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)

    def summary(self) -> dict[str, int]:
        values = {key: value - self.baseline for key, value in self.values.items()}
        values["peak"] = max(values.get("peak_forward_backward", 0), values.get("peak_optimizer_step", 0))
        values["forward_growth"] = values.get("after_forward", 0) - values.get("before_forward", 0)
        values["baseline"] = self.baseline
        return values
