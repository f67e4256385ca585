"""Per-step time of the data-parallel collectives, the offload transfers and the optimizer step
(FORMULAS.md §4, §9), split by what compute each part can hide behind (core.step_time.compose).

DP: the ZeRO collectives of core.comm (the same list the memory estimate prices), each priced with the
α-β model on its measured or preset link. Offload: see core.step_time's module note. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.comm import Collective, dp_collectives
from zeroplan.core.options import Option
from zeroplan.core.precision import BytesPerParam
from zeroplan.core.step_time import LinkTable, Machine
from zeroplan.core.units import ceil_div


@dataclass(frozen=True)
class DpSeconds:
    """Data-parallel collective time per step, by where it can hide."""

    reduce: float  # gradient ReduceScatter (stage 0: the AllReduce's first half)
    gather_forward: float  # stage 3
    gather_backward: float  # stage 3
    gather_after_step: float  # stages 0-2 (stage 0: the AllReduce's second half)

    @property
    def total(self) -> float:
        return self.reduce + self.gather_forward + self.gather_backward + self.gather_after_step


def dp_seconds(collectives: list[Collective], links: LinkTable) -> DpSeconds:
    parts = {"reduce": 0.0, "gather_forward": 0.0, "gather_backward": 0.0, "gather_after_step": 0.0}
    for c in collectives:
        kind = "reduce_scatter" if c.name.startswith("reduce_scatter") else "all_gather"
        seconds = c.seconds(links.link(kind, c.span == "intra_node"))
        if kind == "reduce_scatter":
            parts["reduce"] += seconds
        elif c.name.startswith("allgather_parameters_forward"):
            parts["gather_forward"] += seconds
        elif c.name.startswith("allgather_parameters_backward"):
            parts["gather_backward"] += seconds
        else:
            parts["gather_after_step"] += seconds
    return DpSeconds(**parts)


def zero_dp_seconds(option: Option, shard_params: int, dp: int, per_param: BytesPerParam, dp_intra_node: bool,
                    micro_batches: int, reduce_bucket: int, gather_bucket: int, links: LinkTable) -> DpSeconds:
    """DP time from core.comm's collectives, with the buckets the memory model uses."""
    calls_reduce = ceil_div(shard_params, reduce_bucket)
    calls_gather = calls_reduce if option.stage == 0 else ceil_div(shard_params, gather_bucket)
    span = "intra_node" if dp_intra_node else "inter_node"
    collectives = dp_collectives(option.stage, shard_params, dp, per_param.params, per_param.gradients, span,
                                 frozenset(), 1, calls_reduce, calls_gather, micro_batches)
    return dp_seconds(collectives, links)


@dataclass(frozen=True)
class OffloadSeconds:
    gradients_down: float  # per repeat, hides behind backward
    gradient_repeats: int
    exposed: float  # parameters back up, CPU optimizer step, NVMe swaps
    param_fetch: float  # per micro-batch, forward + backward each, hides like stage-3 gathers


def offload_seconds(option: Option, partition: int, gpus_in_node: int, per_param: BytesPerParam,
                    micro_batches: int, machine: Machine) -> OffloadSeconds:
    """Host and NVMe transfers of one step for an offloading option (partition: parameters per rank)."""
    if not option.offloads:
        return OffloadSeconds(0.0, 0, 0.0, 0.0)
    pcie, nvme = machine.pcie_bytes_per_s, machine.nvme_bytes_per_s
    down = up = exposed = fetch = 0.0
    repeats = 0
    if option.offload_optimizer != "none":
        repeats = micro_batches if option.stage >= 2 else 1  # stage 2+ moves each micro-batch's partition
        down = partition * per_param.gradients / pcie
        up = partition * per_param.params / pcie
        exposed = up + gpus_in_node * partition / machine.cpu_adam_params_per_s
        if option.offload_optimizer == "nvme" and nvme:
            exposed += 2 * gpus_in_node * partition * per_param.optimizer_states / nvme
    if option.offload_params != "none":
        fetch = partition * per_param.params / pcie
        if option.offload_params == "nvme" and nvme:
            fetch += gpus_in_node * partition * per_param.params / nvme
    return OffloadSeconds(down, repeats, exposed, fetch)


def gpu_optimizer_seconds(option: Option, partition: int, per_param: BytesPerParam, machine: Machine) -> float:
    """A fused Adam step reads and writes the states, reads the gradient, writes the 16-bit parameter."""
    if option.offload_optimizer != "none":
        return 0.0
    bytes_per_param = 2 * per_param.optimizer_states + per_param.gradients + per_param.params
    return partition * bytes_per_param / machine.hbm_bytes_per_s
