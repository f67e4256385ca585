"""The data × tensor × pipeline grid, with expert parallelism folded over it, validated once, and which groups
stay inside a node (docs/formulas.md §11.1).

Rank order follows Megatron-LM: tp innermost (consecutive ranks), then dp, then pp. That order is
the single source of truth for whether a TP or DP group crosses a node boundary.

Expert parallelism follows Megatron-Core's folding (parallel_state.initialize_model_parallel, the
"tp-cp-ep-dp-pp" order with its expert grid "tp-ep-dp-pp"): inside each pipeline stage the same world/pp ranks
are cut twice, for attention and dense layers as tp × (cp ×) dp, for the routed experts as etp × ep × edp with
etp innermost, then ep, then edp (edp = world / (pp · ep · etp), the expert-data-parallel group that shards the
experts' ZeRO states). A rank's expert coordinates are those of its index inside its stage:
index = (edp_index · ep + ep_index) · etp + etp_index. etp defaults to tp (Megatron's
--expert-tensor-parallel-size default); ep = 1 with etp = tp is the plain grid (docs/formulas.md §20.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from zeroplan.core.errors import InputError, ref
from zeroplan.core.units import ceil_div

MAX_WORLD = 2**24  # 16.7M GPUs: beyond any cluster, and it keeps every search over world sizes bounded


@dataclass(frozen=True)
class ParallelDims:
    """world = dp × tp × pp, with gpus_per_node GPUs in each node; the experts' ranks world/pp = etp × ep × edp
    per stage (etp None: as tp)."""

    world: int
    tp: int = 1
    pp: int = 1
    gpus_per_node: int = 8
    ep: int = 1
    etp: int = None  # type: ignore[assignment]  # None given: tp (set in __post_init__)

    def __post_init__(self) -> None:
        if self.etp is None:
            object.__setattr__(self, "etp", self.tp)
        for name, value in (("gpus", self.world), ("tp", self.tp), ("pp", self.pp),
                            ("gpus_per_node", self.gpus_per_node), ("ep", self.ep), ("etp", self.etp)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(name, f"must be a positive whole number, got {value}")
            if value > MAX_WORLD:
                raise InputError(name, f"{value} is beyond any cluster (more than {MAX_WORLD})")
        if self.world % (self.tp * self.pp):
            dp_floor = self.world // (self.tp * self.pp)
            raise InputError(
                "gpus",
                f"tp({self.tp}) × pp({self.pp}) = {self.tp * self.pp} does not divide world({self.world}); "
                f"dp would be {self.world / (self.tp * self.pp):g}",
                f"use {ref('gpus', max(dp_floor, 1) * self.tp * self.pp)} or change {ref('tp')}/{ref('pp')}",
            )
        stage_ranks = self.world // self.pp
        if stage_ranks % (self.ep * self.etp):
            flag = "ep" if self.ep > 1 else "etp"
            raise InputError(
                flag,
                f"ep({self.ep}) × etp({self.etp}) = {self.ep * self.etp} does not divide the {stage_ranks} ranks of a "
                f"pipeline stage (tp({self.tp}) × dp({self.dp}); experts fold over the same ranks as attention)",
                f"use ep × etp dividing {stage_ranks}")

    @property
    def dp(self) -> int:
        return self.world // (self.tp * self.pp)

    @property
    def nodes(self) -> int:
        return ceil_div(self.world, self.gpus_per_node)

    @property
    def gpus_in_busiest_node(self) -> int:
        return min(self.world, self.gpus_per_node)

    @property
    def edp(self) -> int:
        """Expert-data-parallel degree: the ranks holding the same experts, which share their ZeRO states."""
        return self.world // (self.pp * self.ep * self.etp)

    def expert_shard(self, dp_shard: int | None) -> int:
        """The ranks that shard the routed experts' ZeRO states: edp, or under hybrid sharding (dp_shard ranks of the
        dp·cp group shard, dp/dp_shard replicas) the expert-data-parallel ranks inside one shard group,
        dp_shard·tp/(ep·etp): torchtitan's "efsdp" mesh dimension, dp_shard·cp·tp // ep
        (torchtitan/distributed/parallel_dims.py, sparse mesh ["pp", "dp_replicate", "efsdp", "ep"]), whose
        dp_replicate dimension replicates experts and dense parameters alike (core.parallel.rules
        check_hybrid_experts: ep·etp must divide dp_shard·tp)."""
        if not dp_shard:
            return self.edp
        return dp_shard * self.tp // (self.ep * self.etp)

    @property
    def has_experts_grid(self) -> bool:
        """True when experts are cut differently from the dense layers (ep > 1 or etp != tp)."""
        return self.ep > 1 or self.etp != self.tp

    def expert_rank(self, edp_index: int, ep_index: int, etp_index: int, pp_index: int) -> int:
        return pp_index * (self.world // self.pp) + (edp_index * self.ep + ep_index) * self.etp + etp_index

    def ep_group(self, edp_index: int = 0, etp_index: int = 0, pp_index: int = 0) -> list[int]:
        return [self.expert_rank(edp_index, e, etp_index, pp_index) for e in range(self.ep)]

    def edp_group(self, ep_index: int = 0, etp_index: int = 0, pp_index: int = 0) -> list[int]:
        return [self.expert_rank(d, ep_index, etp_index, pp_index) for d in range(self.edp)]

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
    def ep_intra_node(self) -> bool:
        """True when every EP group (ep ranks etp apart) lies inside one node: its all-to-all runs on NVLink."""
        return self._expert_groups_intra_node(self.ep, self.etp, self.edp, self.ep * self.etp, self.etp, 1)

    @property
    def edp_intra_node(self) -> bool:
        """True when every expert-data-parallel group (edp ranks ep·etp apart) lies inside one node."""
        return self._expert_groups_intra_node(self.edp, self.ep * self.etp, self.ep, self.etp, self.etp, 1)

    @property
    def ep_ranks_per_node(self) -> int:
        """Ranks of an EP group that share a node (they share its NICs): all ep inside one node, else the ranks
        etp apart that a node holds."""
        if self.ep_intra_node:
            return self.ep
        return max(1, self.gpus_per_node // self.etp) if self.etp <= self.gpus_per_node else 1

    @property
    def ep_nodes_spanned(self) -> int:
        """Nodes the first EP group touches."""
        return len(self._nodes_of(self.ep_group()))

    def _expert_groups_intra_node(self, size: int, stride: int, outer: int, outer_stride: int, inner: int,
                                  inner_stride: int) -> bool:
        """Whether every group of `size` ranks `stride` apart stays in a node. Groups start at p·(world/pp) +
        o·outer_stride + i·inner_stride (o < outer, i < inner); a group starting at r is inside a node exactly
        when r mod n + (size-1)·stride < n, so only the start offsets modulo n matter (at most n of them)."""
        n = self.gpus_per_node
        span = (size - 1) * stride
        if span == 0:
            return True
        if span >= n:
            return False
        stage = self.world // self.pp
        offsets = {(p * stage + o * outer_stride + i * inner_stride) % n
                   for p in range(min(self.pp, n)) for o in range(min(outer, n)) for i in range(min(inner, n))}
        return all(offset + span < n for offset in offsets)

    @property
    def dp_nodes_spanned(self) -> int:
        """Nodes the first DP group touches (its ranks are tp apart)."""
        if self.tp > self.gpus_per_node:
            return self.dp
        return ((self.dp - 1) * self.tp) // self.gpus_per_node + 1

    def describe(self, cp: int = 1) -> str:
        """The grid in words; cp > 1: dp counts the dp × cp ranks that share ZeRO's partitions, shown apart."""
        if cp > 1:
            text = f"dp({self.dp // cp}) × cp({cp}) × tp({self.tp}) × pp({self.pp}) = world({self.world})"
        else:
            text = f"dp({self.dp}) × tp({self.tp}) × pp({self.pp}) = world({self.world})"
        if self.has_experts_grid:
            text += f"; experts edp({self.edp}) × ep({self.ep}) × etp({self.etp})"
        return text
