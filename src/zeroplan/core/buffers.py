"""GPU communication buffers DeepSpeed allocates besides the model states (FORMULAS.md §10 defaults).

Sizes in DeepSpeed's config are element counts; a bucket never needs to exceed the model shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from zeroplan.core.errors import InputError
from zeroplan.core.units import ceil_div


OVERLAP_COMM_FACTOR = Fraction(9, 2)  # DeepSpeed docs: overlap_comm uses 4.5× the two bucket sizes (stages 1-2)
FP32_BYTES = 4


@dataclass(frozen=True)
class BufferConfig:
    reduce_bucket_elements: int = 500_000_000         # reduce_bucket_size
    allgather_bucket_elements: int = 500_000_000      # allgather_bucket_size (stages 1-2)
    prefetch_bucket_elements: int = 50_000_000        # stage3_prefetch_bucket_size
    max_live_parameters: int = 1_000_000_000          # stage3_max_live_parameters
    sub_group_size: int = 1_000_000_000               # stage 3 optimizer step granularity
    overlap_comm: bool | None = None                  # None: DeepSpeed's default (on at stage 3 only)
    param_swap_buffer_count: int = 5                  # offload_param.buffer_count (NVMe)
    param_swap_buffer_elements: int = 100_000_000     # offload_param.buffer_size (NVMe)
    optimizer_swap_buffer_count: int = 4              # offload_optimizer.buffer_count (NVMe)

    def __post_init__(self) -> None:
        for name, value in (("--reduce-bucket-size", self.reduce_bucket_elements),
                            ("--allgather-bucket-size", self.allgather_bucket_elements),
                            ("--prefetch-bucket-size", self.prefetch_bucket_elements),
                            ("--max-live-parameters", self.max_live_parameters),
                            ("--sub-group-size", self.sub_group_size),
                            ("param swap buffer_count", self.param_swap_buffer_count),
                            ("param swap buffer_size", self.param_swap_buffer_elements),
                            ("optimizer swap buffer_count", self.optimizer_swap_buffer_count)):
            if value <= 0:
                raise InputError(name, f"must be positive, got {value}")

    def overlaps(self, stage: int) -> bool:
        return stage == 3 if self.overlap_comm is None else self.overlap_comm


def gpu_buffer_bytes(stage: int, shard_params: int, dp: int, largest_layer_params: int, param_bytes: int,
                     gradient_bytes: int, mixed_precision: bool, optimizer_on_gpu: bool,
                     config: BufferConfig) -> dict[str, int]:
    """Buffers and step temporaries on one GPU, keyed by what they are (all integers, bytes).

    - stages 0-2: the gradient reduce bucket; stages 1-2 also the parameter all-gather bucket, both
      4.5× with overlap_comm (DeepSpeed's documented rule).
    - stage 3: the largest layer gathered in full (its 16-bit parameters and gradients) plus the
      prefetch bucket, capped by stage3_max_live_parameters, and the gradient reduce bucket.
    - mixed precision with the optimizer on the GPU: the optimizer steps on an fp32 copy of the
      gradients it owns (stage 0: all of them, as DeepSpeed's fp16/bf16 optimizers do; stages 1-2: the
      partition; stage 3: one sub-group at a time).
    """
    reduce_bytes = min(config.reduce_bucket_elements, shard_params) * gradient_bytes
    buffers = {"reduce_bucket": reduce_bytes}
    if stage in (1, 2):
        allgather_bytes = min(config.allgather_bucket_elements, shard_params) * param_bytes
        buffers["allgather_bucket"] = allgather_bytes
        if config.overlaps(stage):
            buffers["reduce_bucket"] = ceil(reduce_bytes * OVERLAP_COMM_FACTOR)
            buffers["allgather_bucket"] = ceil(allgather_bytes * OVERLAP_COMM_FACTOR)
    if stage == 3:
        live = min(largest_layer_params + config.prefetch_bucket_elements, config.max_live_parameters, shard_params)
        buffers["gathered_parameters"] = live * param_bytes
        buffers["gathered_layer_gradients"] = min(largest_layer_params, shard_params) * gradient_bytes
    partition = ceil_div(shard_params, dp)
    if mixed_precision and optimizer_on_gpu:
        if stage == 0:
            step_elements = shard_params
        else:
            step_elements = partition if stage < 3 else min(config.sub_group_size, partition)
        buffers["fp32_gradient_partition"] = step_elements * FP32_BYTES
    return buffers


def host_buffer_bytes(offload_optimizer: str, offload_params: str, shard_params: int, dp: int, param_bytes: int,
                      gpus_in_node: int, config: BufferConfig) -> dict[str, int]:
    """Pinned host buffers NVMe offload swaps through, per node (DeepSpeed's aio swap buffers)."""
    buffers = {}
    if offload_optimizer == "nvme":
        sub_group = min(config.sub_group_size, ceil_div(shard_params, dp))
        buffers["optimizer_swap_buffers"] = gpus_in_node * config.optimizer_swap_buffer_count * sub_group * FP32_BYTES
    if offload_params == "nvme":
        buffers["param_swap_buffers"] = (gpus_in_node * config.param_swap_buffer_count
                                         * min(config.param_swap_buffer_elements, shard_params) * param_bytes)
    return buffers
