"""Data-parallel traffic per training step and its α-β time (docs/formulas.md §9, §10).

Ring collectives over n ranks on a full buffer of S bytes: AllGather and ReduceScatter each send
(n-1)/n·S per rank in n-1 steps; AllReduce = ReduceScatter + AllGather. ZeRO per step:
stages 0-2 reduce gradients and gather parameters (2Ψ elements in the paper's large-n count);
stage 3 gathers parameters twice (forward and backward) and reduce-scatters gradients (3Ψ).
ZeRO++ (arXiv 2306.10209): qwZ gathers int8 weights in forward, hpZ keeps a secondary partition
inside each node so the backward gather never leaves the node, qgZ reduces int4 gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError, ref
from zeroplan.core.hardware import Link
from zeroplan.core.units import ceil_div
from zeroplan.core.timing.collectives import ALL_GATHER, REDUCE_SCATTER, alpha_beta_seconds, ring_steps

ZEROPP_FEATURES = ("qwz", "hpz", "qgz")
QWZ_BITS = 8
QGZ_BITS = 4


def ring_bytes(buffer_bytes: int, ranks: int) -> int:
    """Bytes one rank sends in a ring AllGather or ReduceScatter of a buffer_bytes buffer."""
    return ceil_div(buffer_bytes * (ranks - 1), ranks)


def quantized_bytes(elements: int, bits: int) -> int:
    """Sub-byte element sizes done in bits, never bits // 8."""
    return ceil_div(elements * bits, 8)


@dataclass(frozen=True)
class Collective:
    """One collective phase of a step: name, the full buffer size, the group, and the link it uses."""

    name: str
    buffer_bytes: int
    ranks: int
    span: str  # "intra_node" or "inter_node"
    calls: int = 1  # bucketed into this many launches (each pays the ring's latency)
    repeats: int = 1  # times per optimizer step (once per micro-batch under gradient accumulation)

    @property
    def kind(self) -> str:
        """The collective it is priced as: "reduce_scatter" or "all_gather"."""
        return REDUCE_SCATTER if self.name.startswith("reduce_scatter") else ALL_GATHER

    @property
    def bytes_per_gpu(self) -> int:
        return ring_bytes(self.buffer_bytes, self.ranks) * self.repeats

    def seconds(self, link: Link) -> float:
        if self.ranks <= 1:
            return 0.0
        return alpha_beta_seconds(self.repeats * self.calls * ring_steps(self.kind, self.ranks), self.bytes_per_gpu,
                                  link.latency_s, link.bandwidth_bytes_per_s)


def validate_zeropp(features: frozenset[str], stage: int | None = None) -> frozenset[str]:
    unknown = sorted(set(features) - set(ZEROPP_FEATURES))
    if unknown:
        raise InputError("zeropp", f"unknown feature(s) {', '.join(unknown)}", "use any of qwz,hpz,qgz")
    if features and stage is not None and stage != 3:
        raise InputError("zeropp", f"ZeRO++ applies to stage 3 only, asked with stage {stage}",
                         f"use {ref('stage', 3)}")
    return frozenset(features)


def dp_collectives(stage: int, shard_params: int, dp: int, param_bytes: int, gradient_bytes: int,
                   dp_span: str, zeropp: frozenset[str], hpz_ranks: int, calls_reduce: int = 1,
                   calls_gather: int = 1, micro_batches: int = 1, hpz_span: str = "intra_node") -> list[Collective]:
    """The DP collectives one GPU takes part in per optimizer step of `micro_batches` micro-batches.

    Stages 0-1 accumulate gradients locally and reduce once per step; stage 2 reduce-scatters every
    micro-batch (its gradients are partitioned); stage 3 also gathers parameters every micro-batch.
    """
    if dp <= 1:
        return []
    gradient_repeats = micro_batches if stage >= 2 else 1
    gradients = Collective("reduce_scatter_gradients", shard_params * gradient_bytes, dp, dp_span, calls_reduce,
                           gradient_repeats)
    if stage < 3:
        # Stage 0 is one AllReduce: the same bytes as ReduceScatter + AllGather.
        return [gradients, Collective("allgather_parameters", shard_params * param_bytes, dp, dp_span, calls_gather)]
    forward_bytes = quantized_bytes(shard_params, QWZ_BITS) if "qwz" in zeropp else shard_params * param_bytes
    collectives = [Collective("allgather_parameters_forward", forward_bytes, dp, dp_span, calls_gather, micro_batches)]
    if "hpz" in zeropp and hpz_ranks > 1:
        collectives.append(Collective("allgather_parameters_backward_hpz", shard_params * param_bytes,
                                      min(hpz_ranks, dp), hpz_span, calls_gather, micro_batches))
    elif "hpz" not in zeropp:
        collectives.append(Collective("allgather_parameters_backward", shard_params * param_bytes, dp, dp_span,
                                      calls_gather, micro_batches))
    if "qgz" in zeropp:
        collectives.append(Collective("reduce_scatter_gradients_qgz", quantized_bytes(shard_params, QGZ_BITS), dp,
                                      dp_span, calls_reduce, micro_batches))
    else:
        collectives.append(gradients)
    return collectives


def torch_collectives(stage: int, shard_params: int, dp: int, compute_bytes: int, dp_span: str, calls: int = 1,
                      micro_batches: int = 1) -> list[Collective]:
    """DP traffic as torch's wrappers send it (fp32 gradients even in mixed precision):
    DDP all-reduces fp32 gradients (stage 0); ZeroRedundancyOptimizer adds a broadcast of the updated
    fp32 parameters (stage 1, priced as an all-gather); FSDP2 gathers parameters in the compute dtype
    once (stage 2, no resharding) or for forward and again for backward (stage 3) and reduce-scatters
    fp32 gradients (MixedPrecisionPolicy's reduce_dtype) every micro-batch."""
    if dp <= 1:
        return []
    fp32 = 4
    gradients = shard_params * fp32
    if stage <= 1:
        collectives = [Collective("reduce_scatter_gradients", gradients, dp, dp_span, calls),
                       Collective("allgather_gradients", gradients, dp, dp_span, calls)]
        if stage == 1:
            collectives.append(Collective("allgather_parameters", shard_params * fp32, dp, dp_span, calls))
        return collectives
    gathers = 1 if stage == 2 else 2
    return [Collective("allgather_parameters", shard_params * compute_bytes, dp, dp_span, calls,
                       gathers * micro_batches),
            Collective("reduce_scatter_gradients", gradients, dp, dp_span, calls, micro_batches)]


def paper_elements(stage: int, shard_params: int) -> int:
    """The ZeRO paper's large-n figure in parameter elements: 2Ψ for stages 0-2, 3Ψ for stage 3."""
    return (3 if stage == 3 else 2) * shard_params


def hpz_secondary_bytes(shard_params: int, param_bytes: int, hpz_ranks: int) -> int:
    """hpZ's secondary 16-bit partition per GPU: the parameters split over the node's ranks only."""
    return param_bytes * ceil_div(shard_params, hpz_ranks)
