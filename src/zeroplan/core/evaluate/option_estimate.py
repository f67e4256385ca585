"""One evaluated option: its flat breakdown and the figures every report reads from it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from zeroplan.core.options import Option

GPU_PARTS = ("params", "gradients", "optimizer_states", "activations", "buffers")


@dataclass(frozen=True)
class OptionEstimate:
    option: Option
    convention: str
    breakdown: dict[str, int]
    comm_seconds_per_step: float
    offload_seconds_per_step: float
    fits: bool
    limits: tuple[str, ...]  # what does not fit, e.g. ("gpu", "cpu")
    host_checked: bool
    max_micro_batch: int | None = None  # largest micro-batch that fits (when asked and the shape is known)
    # The largest micro-batch ≤ max_micro_batch that divides each rank's share of the global batch,
    # and the accumulation steps that reach it with that micro-batch.
    accumulation_micro_batch: int | None = None
    grad_accum_steps: int | None = None

    def part(self, prefix: str) -> int:
        """Sum of every breakdown entry under a path prefix ("gpu/buffers" adds all buffers)."""
        return self._prefix_sums.get(prefix, 0)

    @cached_property
    def _prefix_sums(self) -> dict[str, int]:
        """Every path prefix's sum, in one pass over the breakdown (an entry counts under each of its leading
        paths: "gpu/buffers/reduce_bucket" under "gpu", "gpu/buffers" and itself). The breakdown is complete
        when the estimate is made, and every report reads several parts of it."""
        sums: dict[str, int] = {}
        for key, value in self.breakdown.items():
            end = key.find("/")
            while end != -1:
                prefix = key[:end]
                sums[prefix] = sums.get(prefix, 0) + value
                end = key.find("/", end + 1)
            sums[key] = sums.get(key, 0) + value
        return sums

    @property
    def gpu_bytes(self) -> dict[str, int]:
        parts = {name: self.part(f"gpu/{name}") for name in GPU_PARTS}
        parts["total"] = sum(parts.values())
        return parts

    @property
    def model_state_bytes(self) -> int:
        return sum(self.part(f"gpu/{name}") for name in ("params", "gradients", "optimizer_states"))

    @property
    def cpu_bytes_per_node(self) -> int:
        return self.part("cpu")

    @property
    def nvme_bytes_per_node(self) -> int:
        return self.part("nvme")

    @property
    def comm_bytes_per_gpu_per_step(self) -> int:
        return self.breakdown["comm/intra_node_bytes"] + self.breakdown["comm/inter_node_bytes"]
