"""GPU memory DeepSpeed's communication buckets take, from their sizes in elements.

Sizes in the config are element counts; each element is one 16-bit value under mixed precision (4 bytes
in fp32). With overlap_comm, DeepSpeed keeps extra copies in flight: Hugging Face's DeepSpeed guide puts
it at 4.5× the reduce and all-gather bucket sizes ("5e8 × 2 bytes × 2 × 4.5 = 9 GB"); we apply the same
factor to stage 3's reduce bucket. stage3_max_live_parameters is a ceiling on gathered parameters, so it
counts at most the model shard. A budget share keeps buckets from crowding out model states.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

OVERLAP_FACTOR = Fraction(9, 2)  # 4.5
BUDGET_SHARE = Fraction(1, 4)    # warn when buckets take more than a quarter of usable GPU memory


@dataclass(frozen=True)
class Buckets:
    stage: int
    reduce: int
    allgather: int
    prefetch: int
    max_live: int
    overlap_comm: bool

    def footprint(self, element_bytes: int, shard_params: int | None = None) -> dict[str, int]:
        """Bytes per GPU of each bucket (stage 0 has none of ZeRO's)."""
        factor = OVERLAP_FACTOR if self.overlap_comm else 1
        parts: dict[str, int] = {}
        if self.stage in (1, 2):
            parts["reduce_bucket"] = int(self.reduce * element_bytes * factor)
            parts["allgather_bucket"] = int(self.allgather * element_bytes * factor)
        elif self.stage == 3:
            live = self.max_live if shard_params is None else min(self.max_live, shard_params)
            parts["reduce_bucket"] = int(self.reduce * element_bytes * factor)
            parts["prefetch_bucket"] = self.prefetch * element_bytes
            parts["max_live_parameters"] = live * element_bytes
        return parts

    def total(self, element_bytes: int, shard_params: int | None = None) -> int:
        return sum(self.footprint(element_bytes, shard_params).values())


def largest_bucket_within(budget_bytes: int, stage: int, overlap_comm: bool, element_bytes: int,
                          fixed_bytes: int = 0) -> int:
    """The largest reduce (and, stages 1-2, all-gather) bucket, in elements, whose footprint plus
    `fixed_bytes` stays within `budget_bytes`; 0 when even fixed_bytes does not fit."""
    room = budget_bytes - fixed_bytes
    if room <= 0:
        return 0
    factor = OVERLAP_FACTOR if overlap_comm else 1
    per_element = element_bytes * factor * (2 if stage in (1, 2) else 1)
    return int(room / per_element)


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
