"""DeepSpeed's communication buckets as a config names them, and their GPU memory.

Sizes in the config are element counts; each element is one 16-bit value under mixed precision (4 bytes
in fp32). The bytes come from zeroplan.core.memory.deepspeed_buffers.communication_buffer_bytes, the same formula
`zeroplan estimate` and check's ZP011 use (the 4.5× overlap_comm rule at stages 1-2; stage 3's gathered
module, prefetch and max_live_parameters: see that module). A budget share keeps buckets from crowding
out model states.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from zeroplan.core.memory import deepspeed_buffers as core_buffers
from zeroplan.core.memory.deepspeed_buffers import BufferConfig, communication_buffer_bytes

BUDGET_SHARE = Fraction(1, 4)    # warn when buckets take more than a quarter of usable GPU memory
FIXED_PARTS = ("gathered_parameters", "gathered_layer_gradients")  # not scaled by the reduce/all-gather sizes


@dataclass(frozen=True)
class Buckets:
    stage: int
    reduce: int
    allgather: int
    prefetch: int
    max_live: int
    overlap_comm: bool

    def buffer_config(self) -> BufferConfig:
        """The planner's buffer settings (DeepSpeed reads a size of 0 as the smallest, 1)."""
        return BufferConfig(reduce_bucket_elements=max(1, self.reduce), allgather_bucket_elements=max(1, self.allgather),
                            prefetch_bucket_elements=max(1, self.prefetch), max_live_parameters=max(1, self.max_live),
                            overlap_comm=self.overlap_comm)

    def footprint(self, element_bytes: int, shard_params: int | None = None,
                  largest_layer_params: int | None = None) -> dict[str, int]:
        """Bytes per GPU of each bucket (stage 0 has none of ZeRO's). Without a model (shard_params None)
        nothing is capped at the shard, and an unknown largest layer is taken at max_live_parameters, the
        most DeepSpeed gathers before it stops prefetching."""
        if self.stage == 0:
            return {}
        shard = shard_params if shard_params is not None else max(self.reduce, self.allgather, self.max_live)
        layer = largest_layer_params if largest_layer_params is not None else self.max_live
        return communication_buffer_bytes(self.stage, shard, layer, element_bytes, element_bytes,
                                          self.buffer_config())

    def total(self, element_bytes: int, shard_params: int | None = None,
              largest_layer_params: int | None = None) -> int:
        return sum(self.footprint(element_bytes, shard_params, largest_layer_params).values())


def largest_bucket_within(budget_bytes: int, stage: int, overlap_comm: bool, element_bytes: int,
                          fixed_bytes: int = 0) -> int:
    """The largest reduce (and, stages 1-2, all-gather) bucket, in elements, whose footprint plus
    `fixed_bytes` stays within `budget_bytes`; 0 when even fixed_bytes does not fit."""
    return core_buffers.largest_bucket_within(budget_bytes, stage, BufferConfig(overlap_comm=overlap_comm),
                                              element_bytes, fixed_bytes)


def round_down(elements: int, step: int = 10_000_000) -> int:
    """A readable bucket size: down to a multiple of 1e7 (or of 1e5 below that)."""
    if elements >= step:
        return elements - elements % step
    return max(elements - elements % 100_000, min(elements, 100_000))


def scientific(elements: int) -> str:
    """190000000 -> '1.9e8', exactly (a JSON number DeepSpeed reads as the same whole count)."""
    text = str(elements)
    exponent = len(text) - 1
    digits = text.rstrip("0")
    if exponent < 6 or len(digits) > 4:
        return text
    return digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + f"e{exponent}"
