"""How a torch model is sharded for ZeRO stage S, precision P and recompute R: the one place, for `zeroplan
validate` (a tiny GPT on real gloo/nccl ranks) and `zeroplan trace` (a Hugging Face model as rank 0 of a fake
world, on fake tensors or, with --real, on one GPU). torch is imported inside the functions, never at import.

Stage by stage (`layers` are the model's blocks, each wrapped before the root, as torchtitan does):
  0  data parallel: every rank holds and steps every parameter
  1  data parallel + optimizer states partitioned by ZeroRedundancyOptimizer's rule
     (core.memory.framework_partition.zero1_owners: whole parameters, largest first, to the least loaded rank)
  2  fully_shard(reshard_after_forward=False) per layer and on the root
  3  fully_shard(reshard_after_forward=True) per layer; the root as `Sharding.reshard_root` says
Precision "mixed": fp32 parameters, gradients and optimizer states; compute in bf16 (FSDP2 and replicate():
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32); DistributedDataParallel, which has no precision
policy: torch.autocast(bf16) around forward and loss, see Sharding.forward_context). "fp32": fp32 throughout.
Recompute "full": every layer in checkpoint_wrapper (non-reentrant) before it is sharded. "selective" is not
a wrapper: it is how the model computes attention, chosen where the model is built (trace/hf_model.py).

Where the two commands differ, a field of Sharding says so rather than a second copy:
  world="ranks"  every rank of the world runs this code with working collectives (validate). Stages 0-1
                 are torch.nn.parallel.DistributedDataParallel (gradient_as_bucket_view=True) and stage 1's
                 optimizer is torch's ZeroRedundancyOptimizer, which partitions across the live ranks itself.
  world="rank0"  only rank 0 runs, in a world of torch's "fake" backend whose collectives do nothing (trace).
                 Stages 0-1 are replicate() (FSDP2's own data parallelism, which torch's FSDPMemTracker is
                 written for; per layer and on the root, with MixedPrecisionPolicy), and stage 1's optimizer
                 steps only the parameters the most loaded rank owns under ZeroRedundancyOptimizer's
                 partition (the rank zeroplan predicts; ZeroRedundancyOptimizer on rank 0 would step rank 0's).
  reshard_root   stage 3 only: whether the root group (embeddings, final norm, head) is resharded after
                 forward too (validate: yes, as each block; trace: no, as torchtitan).
  cpu_offload    stages 2-3: FSDP2's CPUOffloadPolicy(pin_memory=True) (validate --cpu-offload).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from zeroplan.core.memory.framework_partition import framework_partition, params_from_shapes, zero1_owners
from zeroplan.core.memory.framework_states import TORCH_STEP_TENSOR_BYTES
from zeroplan.core.precision import bytes_per_param

if TYPE_CHECKING:
    import torch
    from torch import nn

STAGES = (0, 1, 2, 3)
PRECISIONS = ("mixed", "fp32")
RECOMPUTES = ("none", "selective", "full")
WORLDS = ("ranks", "rank0")
# torch's AdamW keeps a 4-byte fp32 `step` per parameter beside exp_avg and exp_avg_sq (8 B/element).
ADAM_STEP_BYTES = TORCH_STEP_TENSOR_BYTES["adamw"]


@dataclass(frozen=True)
class Sharding:
    """What to apply to a model: see the module docstring for each field."""

    stage: int
    precision: str
    world: str
    reshard_root: bool
    recompute: str = "none"
    cpu_offload: bool = False

    def __post_init__(self) -> None:  # callers validate user input; this guards the code that builds one
        for name, value, allowed in (("stage", self.stage, STAGES), ("precision", self.precision, PRECISIONS),
                                     ("world", self.world, WORLDS), ("recompute", self.recompute, RECOMPUTES)):
            if value not in allowed:
                raise ValueError(f"Sharding.{name} must be one of {allowed}, got {value!r}")
        if self.cpu_offload and self.stage < 2:
            raise ValueError("Sharding.cpu_offload applies to FSDP2 (stages 2 and 3) only")

    @property
    def autocast(self) -> bool:
        """DistributedDataParallel has no precision policy: mixed precision is torch.autocast around forward."""
        return self.precision == "mixed" and self.stage < 2 and self.world == "ranks"

    def forward_context(self, device_type: str):
        """What forward and the loss run under: torch.autocast(bf16) where `autocast`, else nothing."""
        if self.autocast:
            import torch

            return torch.autocast(device_type, dtype=torch.bfloat16)
        return contextlib.nullcontext()


def precision_policy(precision: str):
    """FSDP2's (and replicate()'s) MixedPrecisionPolicy for a precision: bf16 compute, fp32 reduction."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if precision == "mixed":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def apply_recompute(layers: nn.ModuleList, recompute: str) -> None:
    """recompute "full": each layer replaced by checkpoint_wrapper(layer) (non-reentrant), in place."""
    if recompute != "full":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

    for index in range(len(layers)):
        layers[index] = checkpoint_wrapper(layers[index], checkpoint_impl=CheckpointImpl.NO_REENTRANT)


def apply_fsdp2(model: nn.Module, layers: Iterable[nn.Module], sharding: Sharding, device_type: str) -> nn.Module:
    """Stages 2-3: fully_shard on each layer, then on the root (which then holds what no layer does)."""
    from torch.distributed import get_world_size
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    mesh = init_device_mesh(device_type, (get_world_size(),))
    kwargs: dict[str, Any] = {"mesh": mesh, "mp_policy": precision_policy(sharding.precision)}
    if sharding.cpu_offload:
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
    reshard = sharding.stage == 3
    for layer in layers:
        fully_shard(layer, reshard_after_forward=reshard, **kwargs)
    fully_shard(model, reshard_after_forward=reshard and sharding.reshard_root, **kwargs)
    return model


def apply_replicate(model: nn.Module, layers: Iterable[nn.Module], sharding: Sharding, device_type: str) -> nn.Module:
    """Stages 0-1 on a fake world: replicate() on each layer, then on the root, with the precision policy."""
    from torch.distributed import get_world_size
    from torch.distributed._composable.replicate_with_fsdp import replicate
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device_type, (get_world_size(),), mesh_dim_names=("replicate",))
    policy = precision_policy(sharding.precision)
    for layer in layers:
        replicate(layer, mesh=mesh, mp_policy=policy)
    replicate(model, mesh=mesh, mp_policy=policy)
    return model


def apply_ddp(model: nn.Module, device: torch.device) -> nn.Module:
    """Stages 0-1 on live ranks: DistributedDataParallel, gradients as views of its buckets."""
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, gradient_as_bucket_view=True)


def shard_model(model: nn.Module, layers: nn.ModuleList, sharding: Sharding, device: torch.device | str) -> nn.Module:
    """Apply the recompute and the stage's wrappers (a process group must exist). Returns the module to call
    forward on: DistributedDataParallel's wrapper, or the model itself (the other wrappers work in place).
    `layers` is the model's ModuleList of blocks; with recompute "full" its entries are replaced."""
    import torch

    device = torch.device(device)
    apply_recompute(layers, sharding.recompute)
    if sharding.stage >= 2:
        return apply_fsdp2(model, layers, sharding, device.type)
    if sharding.world == "ranks":
        return apply_ddp(model, device)
    return apply_replicate(model, layers, sharding, device.type)


def zero1_most_loaded_owned(shapes: Sequence[tuple[int, ...]], world_size: int) -> list[int]:
    """Indexes (in order) of the parameters the most loaded rank owns under ZeroRedundancyOptimizer's
    partition, for Adam/AdamW's fp32 states (core.memory.framework_partition: the rule and the most loaded rank)."""
    specs = params_from_shapes((f"param{index}", shape) for index, shape in enumerate(shapes))
    partition = framework_partition(specs, world_size, bytes_per_param("fp32", "adamw"), "torch-zero1",
                                    per_tensor_state_bytes=ADAM_STEP_BYTES)
    owners = zero1_owners(specs, world_size)
    return [index for index, owner in enumerate(owners) if owner == partition.most_loaded_rank]


def make_optimizer(params: list[nn.Parameter], sharding: Sharding, optimizer_class: type[torch.optim.Optimizer],
                   device: torch.device | str, **kwargs: Any) -> torch.optim.Optimizer:
    """The stage's optimizer over `params` (the model's trainable parameters, in order). Stage 1 partitions
    the states: ZeroRedundancyOptimizer on live ranks; on a fake world, the most loaded rank's share only."""
    if sharding.stage != 1:
        return optimizer_class(params, **kwargs)
    if sharding.world == "ranks":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(params, optimizer_class=optimizer_class, **kwargs)
    import torch
    from torch.distributed import get_world_size

    owned = [params[index] for index in zero1_most_loaded_owned([tuple(p.shape) for p in params], get_world_size())]
    return optimizer_class(owned or [torch.nn.Parameter(torch.empty(0, device=device))], **kwargs)
