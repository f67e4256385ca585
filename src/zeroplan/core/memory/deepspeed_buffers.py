"""GPU communication buffers DeepSpeed allocates besides the model states (docs/formulas.md §7.1, §18 for the defaults).

Sizes in DeepSpeed's config are element counts; a bucket never needs to exceed the model shard. This is
the one place bucket bytes are computed: `zeroplan estimate`/`plan`, check's ZP011 (through the planner)
and ZP014, and export's bucket choice (zeroplan.deepspeed.buckets) all call communication_buffer_bytes.

What DeepSpeed allocates:
- stages 1-2 (stage_1_and_2.py): the reduce bucket (ipg buffer) and the parameter all-gather bucket;
  with overlap_comm DeepSpeed's docs (config-json, "overlap_comm": "uses 4.5x the allgather_bucket_size
  and reduce_bucket_size values ... 5e8 x 2Bytes x 2 x 4.5 = 9GB") put the extra in-flight copies at 4.5×
  both buckets. Hugging Face's DeepSpeed guide repeats the rule, for ZeRO-2.
- stage 3 (stage3.py, partitioned_param_coordinator.py): one reduce bucket of reduce_bucket_size (the
  4.5× rule is documented for stages 1-2 only; stage 3 reduces through a single ipg bucket on its own
  stream); the module running now gathered in full plus what is prefetched behind it, where prefetch
  stops at stage3_prefetch_bucket_size and at stage3_max_live_parameters available parameters; and the
  full-size gradients of the largest module before they are reduce-scattered.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from zeroplan.core.errors import InputError
from zeroplan.core.units import ceil_div

OVERLAP_COMM_FACTOR = Fraction(9, 2)  # DeepSpeed docs: overlap_comm uses 4.5× the two bucket sizes (stages 1-2)
OVERLAPPED_STAGES = (1, 2)  # where DeepSpeed's overlap_comm multiplies the buckets
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
        for name, value in (("reduce_bucket_size", self.reduce_bucket_elements),
                            ("allgather_bucket_size", self.allgather_bucket_elements),
                            ("prefetch_bucket_size", self.prefetch_bucket_elements),
                            ("max_live_parameters", self.max_live_parameters),
                            ("sub_group_size", self.sub_group_size),
                            ("param swap buffer_count", self.param_swap_buffer_count),
                            ("param swap buffer_size", self.param_swap_buffer_elements),
                            ("optimizer swap buffer_count", self.optimizer_swap_buffer_count)):
            if value <= 0:
                raise InputError(name, f"must be positive, got {value}")

    def overlaps(self, stage: int) -> bool:
        return stage == 3 if self.overlap_comm is None else self.overlap_comm


def bucket_calls(stage: int, shard_params: int, config: BufferConfig) -> tuple[int, int]:
    """(reduce launches, gather launches) per pass over the shard: each bucket is one collective call.
    Stage 0's AllReduce goes in reduce buckets; stage 3 gathers in prefetch-bucket pieces."""
    calls_reduce = ceil_div(shard_params, config.reduce_bucket_elements)
    if stage == 0:
        return calls_reduce, calls_reduce
    gather_bucket = config.prefetch_bucket_elements if stage == 3 else config.allgather_bucket_elements
    return calls_reduce, ceil_div(shard_params, gather_bucket)


def overlap_factor(stage: int, config: BufferConfig) -> Fraction:
    """4.5 where DeepSpeed's overlap_comm keeps extra bucket copies in flight (stages 1-2), else 1."""
    return OVERLAP_COMM_FACTOR if stage in OVERLAPPED_STAGES and config.overlaps(stage) else Fraction(1)


def stage3_gathered_params(shard_params: int, largest_layer_params: int, config: BufferConfig) -> int:
    """Parameters gathered at once at stage 3: the running module in full plus the prefetch behind it.

    DeepSpeed's coordinator always gathers the whole module it is about to run; stage3_max_live_parameters
    and stage3_prefetch_bucket_size only bound how much more it prefetches (it prefetches
    min(max_live − available, prefetch_bucket) parameters). So a module larger than max_live is still
    gathered whole: the cap never cuts the largest layer (it did here before, while the same layer's
    gradients were counted whole).
    """
    layer = min(largest_layer_params, shard_params)
    with_prefetch = min(layer + config.prefetch_bucket_elements, config.max_live_parameters)
    return min(max(layer, with_prefetch), shard_params)


def communication_buffer_bytes(stage: int, shard_params: int, largest_layer_params: int, param_bytes: int,
                               gradient_bytes: int, config: BufferConfig) -> dict[str, int]:
    """DeepSpeed's communication buffers on one GPU (see the module note), keyed by what they are."""
    if stage == 0:  # torch DDP-style AllReduce of reduce buckets
        return {"reduce_bucket": min(config.reduce_bucket_elements, shard_params) * gradient_bytes}
    factor = overlap_factor(stage, config)
    reduce_bytes = min(config.reduce_bucket_elements, shard_params) * gradient_bytes
    buffers = {"reduce_bucket": ceil(reduce_bytes * factor)}
    if stage in (1, 2):
        allgather_bytes = min(config.allgather_bucket_elements, shard_params) * param_bytes
        buffers["allgather_bucket"] = ceil(allgather_bytes * factor)
    else:
        buffers["gathered_parameters"] = stage3_gathered_params(shard_params, largest_layer_params, config) * param_bytes
        buffers["gathered_layer_gradients"] = min(largest_layer_params, shard_params) * gradient_bytes
    return buffers


def largest_bucket_within(budget_bytes: int, stage: int, config: BufferConfig, element_bytes: int,
                          fixed_bytes: int = 0) -> int:
    """The largest reduce (and, stages 1-2, all-gather) bucket, in elements, whose bytes in
    communication_buffer_bytes plus `fixed_bytes` stay within `budget_bytes`; 0 when even fixed_bytes
    does not fit."""
    room = budget_bytes - fixed_bytes
    if room <= 0:
        return 0
    per_element = element_bytes * overlap_factor(stage, config) * (2 if stage in (1, 2) else 1)
    return int(room / per_element)


def gpu_buffer_bytes(stage: int, shard_params: int, dp: int, largest_layer_params: int, param_bytes: int,
                     gradient_bytes: int, mixed_precision: bool, optimizer_on_gpu: bool,
                     config: BufferConfig) -> dict[str, int]:
    """Buffers and step temporaries on one GPU, keyed by what they are (all integers, bytes).

    - the communication buffers of communication_buffer_bytes;
    - mixed precision with the optimizer on the GPU: the optimizer steps on an fp32 copy of the
      gradients it owns (stage 0: all of them, as DeepSpeed's fp16/bf16 optimizers do; stages 1-2: the
      partition; stage 3: one sub-group at a time).
    """
    buffers = communication_buffer_bytes(stage, shard_params, largest_layer_params, param_bytes, gradient_bytes,
                                         config)
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
