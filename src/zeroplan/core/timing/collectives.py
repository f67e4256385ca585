"""Ring-collective traffic and the α-β fit that turns measured timings into a Link (docs/formulas.md §9).

Conventions (nccl-tests, doc/PERFORMANCE.md): S is the full buffer in bytes — for AllGather the gathered
output, for ReduceScatter the unreduced input, for AllReduce the buffer. algbw = S / t and
busbw = algbw × factor, with factor 2(n-1)/n for AllReduce and (n-1)/n for AllGather and ReduceScatter.
For a ring, busbw is exactly what each rank sends per second, so "bytes on the wire per rank" is
factor × S.

Fit model (the per-collective step-count form, the same one Link documents):

    t = steps · α + factor · S / B        steps = n-1 (AllGather, ReduceScatter), 2(n-1) (AllReduce)

α is the per-step latency and B the per-direction link bandwidth; a Link(B, α) fed back into the same
formula reproduces the measured times. The fit is a weighted least squares on relative error (weights
1/t²), because sweeps span several decades of size and plain least squares would ignore small messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final, Literal, Sequence

from zeroplan.core.errors import InputError, ref
from zeroplan.core.hardware import Link

CollectiveName = Literal["all_gather", "reduce_scatter", "all_reduce"]
ALL_GATHER: Final = "all_gather"
REDUCE_SCATTER: Final = "reduce_scatter"
ALL_REDUCE: Final = "all_reduce"
COLLECTIVES: tuple[CollectiveName, ...] = (ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE)
# Expert parallelism's token exchange (priced by collective_seconds; not one of bench's measured collectives).
ALL_TO_ALL: Final = "all_to_all"

# The torch.distributed call each collective is measured with (names from the issue and the CLI).
TORCH_NAMES: dict[CollectiveName, str] = {
    ALL_GATHER: "all_gather_into_tensor",
    REDUCE_SCATTER: "reduce_scatter_tensor",
    ALL_REDUCE: "all_reduce",
}
_ALIASES: dict[CollectiveName, tuple[str, ...]] = {
    ALL_GATHER: ("all_gather", "allgather", "all_gather_into_tensor", "all_gather_single", "ag"),
    REDUCE_SCATTER: ("reduce_scatter", "reducescatter", "reduce_scatter_tensor", "reduce_scatter_single", "rs"),
    ALL_REDUCE: ("all_reduce", "allreduce", "ar"),
}
_CANONICAL: dict[str, CollectiveName] = {alias: name for name, aliases in _ALIASES.items() for alias in aliases}

# How a backend implements a collective; "allreduce+chunk" is gloo's ReduceScatter (PyTorch PR #118911).
Implementation = Literal["ring", "allreduce+chunk"]
RING: Final = "ring"
ALLREDUCE_THEN_CHUNK: Final = "allreduce+chunk"


def canonical_collective(name: str, input_name: str = "collectives") -> CollectiveName:
    key = name.strip().lower().replace("-", "_")
    if key not in _CANONICAL:
        valid = ", ".join(TORCH_NAMES.values())
        raise InputError(input_name, f"unknown collective '{name}'", f"use one or more of {valid}")
    return _CANONICAL[key]


def parse_collectives(text: str) -> tuple[CollectiveName, ...]:
    """'all_gather_into_tensor,all_reduce' -> ('all_gather', 'all_reduce'), in order, without repeats."""
    names = [part for part in (p.strip() for p in text.split(",")) if part]
    if not names:
        raise InputError("collectives", "is empty", "name at least one, e.g. all_gather_into_tensor")
    result: list[CollectiveName] = []
    for name in names:
        canonical = canonical_collective(name)
        if canonical not in result:
            result.append(canonical)
    return tuple(result)


def _check_ranks(ranks: int) -> None:
    if ranks < 1:
        raise InputError("ranks", f"must be at least 1, got {ranks}")


def busbw_factor(collective: str, ranks: int) -> float:
    """nccl-tests bus-bandwidth factor: 2(n-1)/n for AllReduce, (n-1)/n for AllGather/ReduceScatter."""
    _check_ranks(ranks)
    share = (ranks - 1) / ranks
    return 2 * share if canonical_collective(collective, "collective") == ALL_REDUCE else share


def ring_steps(collective: str, ranks: int) -> int:
    """Latency-bound steps of a ring: n-1 for AllGather/ReduceScatter, 2(n-1) for AllReduce."""
    _check_ranks(ranks)
    return 2 * (ranks - 1) if canonical_collective(collective, "collective") == ALL_REDUCE else ranks - 1


def wire_factor(collective: str, ranks: int, implementation: str = RING) -> float:
    """Bytes each rank really sends, per byte of S. gloo's ReduceScatter is an AllReduce: 2(n-1)/n."""
    if implementation == ALLREDUCE_THEN_CHUNK:
        return busbw_factor(ALL_REDUCE, ranks)
    return busbw_factor(collective, ranks)


def wire_bytes_per_rank(collective: str, size_bytes: int, ranks: int, implementation: str = RING) -> float:
    return wire_factor(collective, ranks, implementation) * size_bytes


def algbw(size_bytes: int, seconds: float) -> float:
    """Algorithm bandwidth S / t in bytes per second."""
    if seconds <= 0:
        raise InputError("time", f"must be positive, got {seconds}")
    return size_bytes / seconds


def busbw(collective: str, size_bytes: int, seconds: float, ranks: int) -> float:
    return algbw(size_bytes, seconds) * busbw_factor(collective, ranks)


def alpha_beta_seconds(steps: int, wire_bytes: float, latency_s: float, bandwidth_bytes_per_s: float) -> float:
    """The one α-β price of every collective (bench's fit, ZeRO's DP traffic, TP's AllReduces):
    steps·α + bytes each rank sends / B."""
    return steps * latency_s + wire_bytes / bandwidth_bytes_per_s


def ring_time(collective: str, size_bytes: float, ranks: int, latency_s: float, bandwidth_bytes_per_s: float) -> float:
    """The fit model's prediction: steps·α + factor·S/B."""
    if ranks <= 1:
        return 0.0
    return alpha_beta_seconds(ring_steps(collective, ranks), busbw_factor(collective, ranks) * size_bytes,
                              latency_s, bandwidth_bytes_per_s)


def sweep_sizes(min_bytes: int, max_bytes: int, factor: int, align_bytes: int) -> list[int]:
    """nccl-tests sweep: min, min·factor, ... up to max, each rounded down to a multiple of align_bytes."""
    if min_bytes <= 0:
        raise InputError("min_bytes", f"must be positive, got {min_bytes}")
    if max_bytes < min_bytes:
        raise InputError("max_bytes", f"{max_bytes} is below {ref('min_bytes', min_bytes)}",
                         f"raise {ref('max_bytes')}")
    if factor < 2:
        raise InputError("factor", f"must be at least 2, got {factor}")
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        aligned = size // align_bytes * align_bytes
        if aligned > 0 and aligned not in sizes:
            sizes.append(aligned)
        size *= factor
    if not sizes:
        raise InputError("max_bytes", f"no size in the sweep holds one element per rank ({align_bytes} bytes)",
                         f"raise {ref('max_bytes')} to at least {align_bytes}")
    return sizes


@dataclass(frozen=True)
class AlphaBetaFit:
    """latency_s is per ring step; bandwidth is None when the sweep never left the latency regime."""

    collective: str
    ranks: int
    latency_s: float
    bandwidth_bytes_per_s: float | None
    r_squared: float
    max_relative_residual: float
    points: int

    def predict(self, size_bytes: int) -> float:
        if not self.bandwidth_bytes_per_s:  # latency-bound: no transfer term
            return ring_steps(self.collective, self.ranks) * self.latency_s
        return ring_time(self.collective, size_bytes, self.ranks, self.latency_s, self.bandwidth_bytes_per_s)


def _weighted_line(xs: Sequence[float], ys: Sequence[float], ws: Sequence[float]) -> tuple[float, float]:
    """Intercept and slope minimising Σ w (y - a - b x)²."""
    sw = math.fsum(ws)
    mx = math.fsum(w * x for w, x in zip(ws, xs)) / sw
    my = math.fsum(w * y for w, y in zip(ws, ys)) / sw
    sxx = math.fsum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
    sxy = math.fsum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys))
    slope = sxy / sxx
    return my - slope * mx, slope


def fit_alpha_beta(collective: str, ranks: int, sizes: Sequence[int], seconds: Sequence[float]) -> AlphaBetaFit:
    """Fit t = steps·α + factor·S/B to (size, time) points; see the module docstring."""
    if len(sizes) != len(seconds):
        raise InputError("fit", f"{len(sizes)} sizes but {len(seconds)} times")
    if ranks < 2:
        raise InputError("ranks", f"a collective needs at least 2 ranks to fit, got {ranks}")
    if len(set(sizes)) < 2:
        raise InputError("min_bytes/max_bytes", "fitting α and β needs at least two different sizes",
                         "widen the sweep")
    if any(t <= 0 for t in seconds):
        raise InputError("fit", "times must be positive")
    factor = busbw_factor(collective, ranks)
    steps = ring_steps(collective, ranks)
    xs = [factor * s for s in sizes]
    weights = [1.0 / (t * t) for t in seconds]
    intercept, slope = _weighted_line(xs, seconds, weights)
    if slope <= 0:  # flat or falling: latency-bound only, no bandwidth to report
        intercept, slope = math.fsum(w * t for w, t in zip(weights, seconds)) / math.fsum(weights), 0.0
    elif intercept < 0:  # negative latency is noise: refit through the origin
        intercept = 0.0
        slope = (math.fsum(w * x * t for w, x, t in zip(weights, xs, seconds))
                 / math.fsum(w * x * x for w, x in zip(weights, xs)))
    predicted = [intercept + slope * x for x in xs]
    mean = math.fsum(seconds) / len(seconds)
    total = math.fsum((t - mean) ** 2 for t in seconds)
    residual = math.fsum((t - p) ** 2 for t, p in zip(seconds, predicted))
    return AlphaBetaFit(
        collective=canonical_collective(collective, "collective"),
        ranks=ranks,
        latency_s=intercept / steps,
        bandwidth_bytes_per_s=1.0 / slope if slope > 0 else None,
        r_squared=1.0 - residual / total if total > 0 else 1.0,
        max_relative_residual=max(abs(p - t) / t for t, p in zip(seconds, predicted)),
        points=len(sizes),
    )


# ---- a collective on the links a group crosses (what `zeroplan plan` and `estimate` price ZeRO's traffic with) ----
# Links: NVLink reaches ~0.78 of its rate in a ring (8×A100 AllReduce busbw 235 of 300 GB/s, 8×H200 AllGather
# 361 of 450 GB/s: stas00/ml-engineering network/README.md); InfiniBand/RoCE ~0.9 (Calculon's a100/h100 systems).
NVLINK_EFFICIENCY = 0.78
NIC_EFFICIENCY = 0.9
NCCL_LAUNCH_S = 8.4e-6  # NCCL's base latency of a Simple-protocol collective (src/graph/tuning.cc baseLat)


@dataclass(frozen=True)
class LinkTable:
    """Links by span, with optional measured ones per collective ("all_reduce/intra_node")."""

    intra_node: Link
    inter_node: Link
    measured: dict[str, Link] = field(default_factory=dict)
    node_rails: bool = False  # a group's cross-node ring spreads over the NICs of its ranks' nodes (group_bandwidth)

    def link(self, collective: str, intra_node: bool) -> Link:
        if self.measured:  # most tables measure nothing: no key to build
            span = "intra_node" if intra_node else "inter_node"
            found = self.measured.get(f"{collective}/{span}")
            if found:
                return found
        return self.intra_node if intra_node else self.inter_node


def link_bandwidth(link: Link, intra_node: bool) -> float:
    """What a ring reaches on a link: measured links as measured, preset rates at the documented efficiency."""
    if link.source != "preset":
        return link.bandwidth_bytes_per_s
    return link.bandwidth_bytes_per_s * (NVLINK_EFFICIENCY if intra_node else NIC_EFFICIENCY)


def group_bandwidth(links: LinkTable, collective: str, ranks_per_node: int, intra_node: bool) -> float:
    """Bus bandwidth of a ring over a group: the GPU link inside a node; across nodes one NIC per rank (the
    per-GPU network bandwidth; the fit on the calibration set's DeepSpeed ZeRO-3 runs of 2021 supports no more),
    capped by the GPU link. With links.node_rails (the fsdp and megatron framework rules, CommOverlap.node_rails)
    the ring's channels run over every NIC of the node, one per member rank (NCCL's multi-channel rings, one per
    NIC, and PXN since NCCL 2.12: each node injects (nodes-1)/nodes of the buffer through k NICs when k of the
    group's ranks share it), so the cross-node rate is k NICs, still capped by the GPU link."""
    intra = link_bandwidth(links.link(collective, True), True)
    if intra_node:
        return intra
    rails = ranks_per_node if links.node_rails else 1
    return min(intra, rails * link_bandwidth(links.link(collective, False), False))


def collective_seconds(kind: str, buffer_bytes: float, ranks: int, links: LinkTable, ranks_per_node: int,
                       calls: int = 1, split: tuple[float, float] | None = None) -> float:
    """split (all-to-all only): the bytes each rank sends over the GPU link and over the NIC, where the sender
    does not spread its buffer uniformly over the peers (a node-deduplicating MoE dispatcher)."""
    if kind == ALL_TO_ALL:
        return _all_to_all_seconds(buffer_bytes, ranks, links, ranks_per_node, calls, split)
    return _ring_seconds(kind, buffer_bytes, ranks, links, ranks_per_node, calls)


def _all_to_all_seconds(buffer_bytes: float, ranks: int, links: LinkTable, ranks_per_node: int, calls: int,
                        split: tuple[float, float] | None = None) -> float:
    """All-to-all (NCCL's grouped send/recv, as Megatron-Core's and DeepSpeed-MoE's token dispatchers run it) of a
    rank's buffer_bytes, S/n to each peer: (per_node-1)/n·S to the peers inside its node on the GPU link and
    (n-per_node)/n·S to the others on its NIC, the two at once (the slower sets the time); one latency per link
    (the sends are issued together), NCCL_LAUNCH_S per call. Across nodes each rank has its own NIC's rate:
    unlike a ring, whose cross-node hops can spread over the node's NICs (group_bandwidth's node_rails), every
    rank of a node sends its own share across at once. Routing is taken as uniform over the ranks: a
    node-deduplicating dispatcher passes its own split (core.timing.step_time.ep_alltoall_layer_seconds;
    docs/formulas.md §20.4)."""
    if ranks <= 1 or buffer_bytes <= 0:
        return 0.0
    per_node = min(ranks, max(1, ranks_per_node))
    intra_bytes = (per_node - 1) / ranks * buffer_bytes
    inter_bytes = (ranks - per_node) / ranks * buffer_bytes
    if split is not None:
        intra_bytes, inter_bytes = split
    intra = links.link(ALL_TO_ALL, True)
    seconds = alpha_beta_seconds(1, intra_bytes, intra.latency_s, link_bandwidth(intra, True)) if per_node > 1 else 0.0
    if inter_bytes > 0:
        inter = links.link(ALL_TO_ALL, False)
        # one NIC per rank whatever the framework's rails (group_bandwidth's node_rails is for rings): every rank
        # of a node sends its own cross-node share at once, so the node's NICs carry per_node ranks' traffic
        nic = min(link_bandwidth(intra, True), link_bandwidth(inter, False))
        seconds = max(seconds, alpha_beta_seconds(1, inter_bytes, inter.latency_s, nic))
    return seconds + calls * NCCL_LAUNCH_S


def _ring_seconds(kind: str, buffer_bytes: float, ranks: int, links: LinkTable, ranks_per_node: int,
                  calls: int = 1) -> float:
    """NCCL-like time of one collective phase (kind all_reduce, all_gather or reduce_scatter) on a buffer of
    buffer_bytes split into `calls` buckets: bandwidth (n-1)/n·S (2× for AllReduce) on the group's bus
    bandwidth; the ring's hop latencies once (pipelined chunks), NCCL_LAUNCH_S per bucket; AllReduce takes the
    tree's latency when lower. See the module docstring."""
    if ranks <= 1 or buffer_bytes <= 0:
        return 0.0
    per_node = min(ranks, max(1, ranks_per_node))
    intra_node = per_node >= ranks
    bandwidth = group_bandwidth(links, kind, per_node, intra_node)
    factor = 2 if kind == ALL_REDUCE else 1
    wire_bytes = factor * (ranks - 1) / ranks * buffer_bytes
    intra_lat = links.link(kind, True).latency_s
    inter_lat = intra_lat if intra_node else links.link(kind, False).latency_s
    nodes = -(-ranks // per_node)
    intra_hops, inter_hops = factor * (ranks - nodes), factor * (nodes - 1 + (0 if intra_node else 1))
    if kind == ALL_REDUCE:  # NCCL's tree when its latency is lower: 2·(k-1) hops in a node, 2·log2(nodes) across
        tree_intra, tree_inter = 2 * (per_node - 1), 2 * (nodes - 1).bit_length()
        if tree_intra * intra_lat + tree_inter * inter_lat < intra_hops * intra_lat + inter_hops * inter_lat:
            intra_hops, inter_hops = tree_intra, tree_inter
    # core.timing.collectives' one α-β price, with the network hops and a launch per bucket on top
    return (alpha_beta_seconds(intra_hops, wire_bytes, intra_lat, bandwidth) + inter_hops * inter_lat
            + calls * NCCL_LAUNCH_S)
