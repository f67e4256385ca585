"""The data × tensor × pipeline grid, validated once, and which groups stay inside a node (docs/formulas.md §11.1).

Rank order follows Megatron-LM: tp innermost (consecutive ranks), then dp, then pp. That order is
the single source of truth for whether a TP or DP group crosses a node boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from zeroplan.core.errors import InputError
from zeroplan.core.units import ceil_div

MAX_WORLD = 2**24  # 16.7M GPUs: beyond any cluster, and it keeps every search over world sizes bounded


@dataclass(frozen=True)
class ParallelDims:
    """world = dp × tp × pp, with gpus_per_node GPUs in each node."""

    world: int
    tp: int = 1
    pp: int = 1
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        for name, value in (("--gpus", self.world), ("--tp", self.tp), ("--pp", self.pp),
                            ("--gpus-per-node", self.gpus_per_node)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(name, f"must be a positive whole number, got {value}")
            if value > MAX_WORLD:
                raise InputError(name, f"{value} is beyond any cluster (more than {MAX_WORLD})")
        if self.world % (self.tp * self.pp):
            dp_floor = self.world // (self.tp * self.pp)
            raise InputError(
                "--gpus",
                f"tp({self.tp}) × pp({self.pp}) = {self.tp * self.pp} does not divide world({self.world}); "
                f"dp would be {self.world / (self.tp * self.pp):g}",
                f"use --gpus {max(dp_floor, 1) * self.tp * self.pp} or change --tp/--pp",
            )

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp)

    @property
    def nodes(self) -> int:
        return ceil_div(self.world, self.gpus_per_node)

    @property
    def gpus_in_busiest_node(self) -> int:
        return min(self.world, self.gpus_per_node)

    def rank(self, dp_index: int, tp_index: int, pp_index: int) -> int:
        return (pp_index * self.dp + dp_index) * self.tp + tp_index

    def dp_group(self, tp_index: int = 0, pp_index: int = 0) -> list[int]:
        return [self.rank(d, tp_index, pp_index) for d in range(self.dp)]

    def tp_group(self, dp_index: int = 0, pp_index: int = 0) -> list[int]:
        return [self.rank(dp_index, t, pp_index) for t in range(self.tp)]

    def _nodes_of(self, ranks: list[int]) -> set[int]:
        return {r // self.gpus_per_node for r in ranks}

    def _period(self, stride: int) -> int:
        # Group placement relative to node boundaries repeats after gpus_per_node/gcd blocks.
        return self.gpus_per_node // gcd(self.gpus_per_node, stride)

    @property
    def dp_intra_node(self) -> bool:
        """True when every DP group lies inside one node (then it runs on the fast GPU link)."""
        if self.dp == 1:
            return True
        if self.dp > self.gpus_per_node:
            return False
        blocks = min(self.pp, self._period(self.tp * self.dp))
        return all(len(self._nodes_of(self.dp_group(t, p))) == 1 for p in range(blocks) for t in range(self.tp))

    @property
    def tp_intra_node(self) -> bool:
        if self.tp == 1:
            return True
        if self.tp > self.gpus_per_node:
            return False
        groups = min(self.world // self.tp, self._period(self.tp))
        return all(len(self._nodes_of(list(range(k * self.tp, (k + 1) * self.tp)))) == 1 for k in range(groups))

    @property
    def dp_nodes_spanned(self) -> int:
        """Nodes the first DP group touches (its ranks are tp apart)."""
        if self.tp > self.gpus_per_node:
            return self.dp
        return ((self.dp - 1) * self.tp) // self.gpus_per_node + 1

    def describe(self) -> str:
        return f"dp({self.dp}) × tp({self.tp}) × pp({self.pp}) = world({self.world})"
