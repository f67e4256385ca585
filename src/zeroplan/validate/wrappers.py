"""Wrap the tiny GPT as each stage's torch framework, with its optimizer (imports torch).

What "mixed" means here, because it is what torch really does:
- stages 0 and 1 (DDP, ZeroRedundancyOptimizer): torch.autocast(bf16) around forward and loss. Parameters,
  gradients and optimizer states stay fp32; autocast makes bf16 copies of the weights it feeds to matmuls,
  and keeps them until backward has used them.
- stages 2 and 3 (FSDP2): MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32). The sharded
  parameters stay fp32 (the optimizer steps on them: no separate master copy), are all-gathered as bf16
  for compute, and gradients are reduce-scattered in fp32 into fp32 shards.
So in every wrapper the model states are the fp32 ones: 4 + 4 + K bytes per parameter.

DDP runs with gradient_as_bucket_view=True: gradients are views of its communication buckets rather than
a second copy. Adam/AdamW run with capturable=True on CUDA (unless offloaded), so their per-parameter
`step` sits on the GPU beside the other states instead of on the host.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from zeroplan.validate.config import ValidateConfig

if TYPE_CHECKING:
    from zeroplan.validate.model import TinyGpt

LEARNING_RATE = 1e-3
MOMENTUM = 0.9


@dataclass
class Wrapped:
    module: nn.Module  # what forward is called on
    inner: nn.Module  # the TinyGpt itself (parameters live here)
    optimizer: torch.optim.Optimizer
    autocast: bool

    def forward_context(self, device: torch.device):
        if self.autocast:
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()


def _optimizer_class(name: str, capturable: bool) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    if name in ("adam", "adamw"):
        kwargs: dict[str, Any] = {"lr": LEARNING_RATE}
        if capturable:
            kwargs["capturable"] = True
        return (torch.optim.Adam if name == "adam" else torch.optim.AdamW), kwargs
    momentum = MOMENTUM if name == "sgd-momentum" else 0.0
    return torch.optim.SGD, {"lr": LEARNING_RATE, "momentum": momentum}


def _ddp(model: nn.Module, device: torch.device) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, gradient_as_bucket_view=True)


def _fsdp2(model: TinyGpt, config: ValidateConfig, device: torch.device, reshard: bool) -> nn.Module:
    from torch.distributed import get_world_size
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (get_world_size(),))
    kwargs: dict[str, Any] = {"mesh": mesh, "reshard_after_forward": reshard}
    if config.precision == "mixed":
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if config.cpu_offload:
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
    for block in model.blocks:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)  # the root group: embeddings, final norm, (untied) head
    return model


def wrap(model: TinyGpt, stage: int, config: ValidateConfig, device: torch.device) -> Wrapped:
    """model must already be on device (all ranks built it from the same seed)."""
    capturable = device.type == "cuda" and not config.cpu_offload
    optimizer_class, kwargs = _optimizer_class(config.optimizer, capturable)
    if stage in (0, 1):
        module = _ddp(model, device)
        if stage == 0:
            optimizer = optimizer_class(model.parameters(), **kwargs)
        else:
            from torch.distributed.optim import ZeroRedundancyOptimizer

            optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=optimizer_class, **kwargs)
        return Wrapped(module, model, optimizer, autocast=config.precision == "mixed")
    module = _fsdp2(model, config, device, reshard=stage == 3)
    return Wrapped(module, model, optimizer_class(module.parameters(), **kwargs), autocast=False)
