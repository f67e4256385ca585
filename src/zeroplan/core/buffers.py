"""GPU communication buffers DeepSpeed allocates besides the model states (FORMULAS.md §10 defaults).

Sizes in DeepSpeed's config are element counts; a bucket never needs to exceed the model shard.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError


@dataclass(frozen=True)
class BufferConfig:
    reduce_bucket_elements: int = 500_000_000         # reduce_bucket_size
    allgather_bucket_elements: int = 500_000_000      # allgather_bucket_size (stages 1-2)
    prefetch_bucket_elements: int = 50_000_000        # stage3_prefetch_bucket_size
    max_live_parameters: int = 1_000_000_000          # stage3_max_live_parameters

    def __post_init__(self) -> None:
        for name, value in (("--reduce-bucket-size", self.reduce_bucket_elements),
                            ("--allgather-bucket-size", self.allgather_bucket_elements),
                            ("--prefetch-bucket-size", self.prefetch_bucket_elements),
                            ("--max-live-parameters", self.max_live_parameters)):
            if value <= 0:
                raise InputError(name, f"must be positive, got {value}")


def gpu_buffer_bytes(stage: int, shard_params: int, largest_layer_params: int, param_bytes: int,
                     gradient_bytes: int, config: BufferConfig) -> dict[str, int]:
    """Buffers on one GPU, keyed by what they are (all integers, bytes).

    - stages 0-2: the gradient reduce bucket; stages 1-2 also the parameter all-gather bucket.
    - stage 3: the largest layer gathered in full (its 16-bit parameters and gradients) plus the
      prefetch bucket, capped by stage3_max_live_parameters, and the gradient reduce bucket.
    """
    reduce_elements = min(config.reduce_bucket_elements, shard_params)
    buffers = {"reduce_bucket": reduce_elements * gradient_bytes}
    if stage in (1, 2):
        buffers["allgather_bucket"] = min(config.allgather_bucket_elements, shard_params) * param_bytes
    if stage == 3:
        live = min(largest_layer_params + config.prefetch_bucket_elements, config.max_live_parameters, shard_params)
        buffers["gathered_parameters"] = live * param_bytes
        buffers["gathered_layer_gradients"] = min(largest_layer_params, shard_params) * gradient_bytes
    return buffers
