"""Wrap the tiny GPT as each stage's torch framework, with its optimizer (imports torch). The wrappers are
zeroplan.distributed.sharding's (the ones `zeroplan trace` applies), with every rank running (world="ranks").

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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from zeroplan.distributed.sharding import Sharding, make_optimizer, shard_model
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
    sharding: Sharding

    def forward_context(self, device: torch.device):
        return self.sharding.forward_context(device.type)


def _optimizer_class(name: str, capturable: bool) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    if name in ("adam", "adamw"):
        kwargs: dict[str, Any] = {"lr": LEARNING_RATE}
        if capturable:
            kwargs["capturable"] = True
        return (torch.optim.Adam if name == "adam" else torch.optim.AdamW), kwargs
    momentum = MOMENTUM if name == "sgd-momentum" else 0.0
    return torch.optim.SGD, {"lr": LEARNING_RATE, "momentum": momentum}


def sharding_for(stage: int, config: ValidateConfig) -> Sharding:
    """validate's sharding: every rank runs (DDP, ZeroRedundancyOptimizer), the stage-3 root resharded too."""
    return Sharding(stage=stage, precision=config.precision, world="ranks", reshard_root=True,
                    cpu_offload=config.cpu_offload)


def wrap(model: TinyGpt, stage: int, config: ValidateConfig, device: torch.device) -> Wrapped:
    """model must already be on device (all ranks built it from the same seed)."""
    capturable = device.type == "cuda" and not config.cpu_offload
    optimizer_class, kwargs = _optimizer_class(config.optimizer, capturable)
    sharding = sharding_for(stage, config)
    module = shard_model(model, model.blocks, sharding, device)
    optimizer = make_optimizer(list(model.parameters()), sharding, optimizer_class, device, **kwargs)
    return Wrapped(module, model, optimizer, sharding)
