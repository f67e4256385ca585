"""Which ranks share a node, and therefore which spans a run can measure (pure, no torch).

One node: the world group is the intra-node span. Several nodes (a multi-node torchrun): the world
group is the inter-node span (a ring across nodes runs at the speed of its slowest, inter-node hop),
and, when every node has at least 2 ranks, each node's own group, run side by side, is the intra-node
span.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.inputs.calibration import INTER_NODE, INTRA_NODE, SpanName


@dataclass(frozen=True)
class RankInfo:
    node_id: str
    hostname: str
    free_bytes: int | None  # this rank's share of free memory (None: unknown)
    device_name: str


@dataclass(frozen=True)
class Topology:
    node_ranks: tuple[tuple[int, ...], ...]  # ranks of each node, nodes in order of their lowest rank
    hostnames: tuple[str, ...]
    device_name: str

    @property
    def world_size(self) -> int:
        return sum(len(ranks) for ranks in self.node_ranks)

    @property
    def nodes(self) -> int:
        return len(self.node_ranks)

    @property
    def uniform(self) -> bool:
        return len({len(ranks) for ranks in self.node_ranks}) == 1

    @property
    def ranks_per_node(self) -> int:
        return min(len(ranks) for ranks in self.node_ranks)

    def spans(self) -> list[SpanName]:
        if self.nodes == 1:
            return [INTRA_NODE]
        spans: list[SpanName] = [INTER_NODE]
        if self.uniform and self.ranks_per_node >= 2:
            spans.append(INTRA_NODE)
        return spans

    def span_ranks(self, span: str) -> int:
        """Ranks in one group of this span."""
        return self.ranks_per_node if (span == INTRA_NODE and self.nodes > 1) else self.world_size


def build_topology(infos: list[RankInfo]) -> Topology:
    by_node: dict[str, list[int]] = {}
    for rank, info in enumerate(infos):
        by_node.setdefault(info.node_id, []).append(rank)
    hostnames = tuple(dict.fromkeys(info.hostname for info in infos))
    devices = sorted({info.device_name for info in infos})
    return Topology(tuple(tuple(ranks) for ranks in by_node.values()), hostnames, " / ".join(devices))

