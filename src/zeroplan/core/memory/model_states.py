"""Where model states live, per GPU and per node, in the ZeRO paper's convention (docs/formulas.md §4).

Stage s shards over the dp ranks: stage 1 the optimizer states, stage 2 also the gradients, stage 3
also the parameters. The most loaded rank holds the ceiling of each shard. Offload moves the
optimizer partition (with the fp32 gradient copy the host optimizer steps on) and, at stage 3,
the 16-bit parameter partition to the host or NVMe; from stage 2 on, gradients then leave the GPU too.
"""

from __future__ import annotations

from zeroplan.core.options import Option
from zeroplan.core.precision import BytesPerParam
from zeroplan.core.units import ceil_div

HOST_GRADIENT_BYTES = 4  # offloaded optimizers step on fp32 gradients kept in host memory


def sharded(bytes_per_param: int, params: int, ranks: int) -> int:
    """Bytes of the most loaded rank's shard: it holds ceil(Ψ/N) whole elements."""
    return bytes_per_param * ceil_div(params, ranks)


def paper_model_states(option: Option, shard_params: int, dp: int, per_param: BytesPerParam,
                       gpus_in_node: int) -> dict[str, int]:
    """Breakdown with path keys: gpu/* per GPU, cpu/* and nvme/* per node (gpus_in_node ranks)."""
    stage = option.stage
    params = sharded(per_param.params, shard_params, dp) if stage == 3 else per_param.params * shard_params
    gradients = sharded(per_param.gradients, shard_params, dp) if stage >= 2 else per_param.gradients * shard_params
    optimizer = sharded(per_param.optimizer_states, shard_params, dp) if stage >= 1 else (
        per_param.optimizer_states * shard_params)

    breakdown = {"gpu/params": params, "gpu/gradients": gradients, "gpu/optimizer_states": optimizer,
                 "cpu/params": 0, "cpu/gradients": 0, "cpu/optimizer_states": 0,
                 "nvme/params": 0, "nvme/gradients": 0, "nvme/optimizer_states": 0}
    if option.offload_optimizer != "none":
        tier = option.offload_optimizer
        breakdown["gpu/optimizer_states"] = 0
        breakdown[f"{tier}/optimizer_states"] = gpus_in_node * optimizer
        # The host optimizer steps on an fp32 copy of the gradient partition, kept beside its states
        # (DeepSpeed swaps it to NVMe with them). From stage 2 on the 16-bit partition does not stay
        # on the GPU: buckets are reduced and moved out as backward runs.
        breakdown[f"{tier}/gradients"] = gpus_in_node * sharded(HOST_GRADIENT_BYTES, shard_params, dp)
        if stage >= 2:
            breakdown["gpu/gradients"] = 0
    if option.offload_params != "none":
        breakdown["gpu/params"] = 0
        breakdown[f"{option.offload_params}/params"] = gpus_in_node * params
    return breakdown
