"""Where model states live, per GPU and per node, in the ZeRO paper's convention (FORMULAS.md §2, §9).

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
    return ceil_div(bytes_per_param * params, ranks)


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


def offload_traffic(option: Option, shard_params: int, dp: int, per_param: BytesPerParam,
                    gpus_in_node: int) -> dict[str, int]:
    """Bytes moved per optimizer step: over PCIe per GPU, to/from NVMe per node.

    Optimizer offload: the 16-bit gradient partition goes down, the updated 16-bit parameter
    partition comes back up. NVMe optimizer: the partition's states are read and written back.
    Parameter offload: the rank's parameter partition crosses PCIe for forward and again for backward.
    """
    traffic = {"pcie/bytes_per_gpu": 0, "nvme/read_bytes_per_node": 0, "nvme/write_bytes_per_node": 0}
    if option.offload_optimizer != "none":
        traffic["pcie/bytes_per_gpu"] += (sharded(per_param.gradients, shard_params, dp)
                                          + sharded(per_param.params, shard_params, dp))
        if option.offload_optimizer == "nvme":
            states = gpus_in_node * sharded(per_param.optimizer_states, shard_params, dp)
            traffic["nvme/read_bytes_per_node"] += states
            traffic["nvme/write_bytes_per_node"] += states
    if option.offload_params != "none":
        partition = sharded(per_param.params, shard_params, dp)
        traffic["pcie/bytes_per_gpu"] += 2 * partition
        if option.offload_params == "nvme":
            traffic["nvme/read_bytes_per_node"] += 2 * gpus_in_node * partition
            traffic["nvme/write_bytes_per_node"] += gpus_in_node * partition  # updated params written back
    return traffic
