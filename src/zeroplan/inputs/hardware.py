"""Hardware from presets and flags: the node, its links and capacities, and the memory budget."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from zeroplan.inputs import presets
from zeroplan.core.errors import InputError, ref
from zeroplan.core.memory.budget import (DEFAULT_ACTIVATION_RESERVE, DEFAULT_FRAGMENTATION, DEFAULT_HOST_RESERVE,
                               DEFAULT_RUNTIME_RESERVE, MemoryBudget)
from zeroplan.core.hardware import ClusterSpec, Link
from zeroplan.core.units import format_bytes, format_rate

if TYPE_CHECKING:
    from zeroplan.inputs.sections import BudgetInputs, HardwareInputs

DEFAULT_GPU = "a100-80g"
GENERIC_GPUS_PER_NODE = 8
GENERIC_INTER_NODE = Link(bandwidth_bytes_per_s=25_000_000_000, latency_s=10e-6, source="default")


def resolve_cluster(inputs: HardwareInputs, assumptions: list[str], units: str = "iec") -> ClusterSpec:
    generic = False
    if inputs.cluster is not None:
        cluster = presets.cluster(inputs.cluster)
        if inputs.gpu is not None and presets.gpu(inputs.gpu).name != cluster.gpu.name:
            raise InputError("gpu", f"'{inputs.gpu}' conflicts with cluster '{inputs.cluster}' "
                             f"({cluster.gpu.name})", f"drop {ref('gpu')} or {ref('cluster')}")
    else:
        if inputs.gpu is not None and not inputs.gpu.strip():
            raise InputError("gpu", "is empty", f"name a GPU preset, e.g. {ref('gpu', 'h100-80g')}")
        gpu_name = (inputs.gpu or DEFAULT_GPU).strip().lower()
        gpu = presets.gpu(gpu_name)
        if inputs.gpu is None:
            assumptions.append(f"GPU: {gpu_name} (the default; choose with --gpu or --cluster)")
        node_name = presets.default_cluster(gpu_name)
        if node_name is not None:
            cluster = dataclasses.replace(presets.cluster(node_name), name=f"{node_name} (default node for {gpu_name})")
            assumptions.append(f"node: {node_name} preset for {gpu_name} (CPU RAM, NVMe, links; choose with --cluster)")
        else:
            cluster = ClusterSpec(name=f"generic {gpu_name} node", gpu=gpu, gpus_per_node=GENERIC_GPUS_PER_NODE,
                                  inter_node_link=GENERIC_INTER_NODE, cpu_memory_bytes=None, nvme_bytes=None,
                                  nvme_bandwidth_bytes_per_s=None, pcie_bandwidth_bytes_per_s=31_500_000_000,
                                  pcie_generation=4)
            generic = True
    overrides: dict[str, Any] = {}  # ClusterSpec fields to replace
    if inputs.gpus_per_node is not None:
        overrides["gpus_per_node"] = inputs.gpus_per_node
    if inputs.cpu_memory is not None:
        overrides["cpu_memory_bytes"] = inputs.cpu_memory
    if inputs.nvme is not None:
        overrides["nvme_bytes"] = inputs.nvme
    if inputs.nvme_bandwidth is not None:
        overrides["nvme_bandwidth_bytes_per_s"] = inputs.nvme_bandwidth
    if inputs.inter_node_bandwidth is not None:
        overrides["inter_node_link"] = Link(inputs.inter_node_bandwidth, cluster.inter_node_link.latency_s, "flag")
    if inputs.intra_node_bandwidth is not None or inputs.gpu_memory is not None:
        gpu = cluster.gpu
        if inputs.intra_node_bandwidth is not None:
            gpu = dataclasses.replace(gpu, intra_node_link=Link(
                inputs.intra_node_bandwidth, gpu.intra_node_link.latency_s, "flag"))
        if inputs.gpu_memory is not None:
            if inputs.gpu_memory <= 0:
                raise InputError("gpu_memory", "must be positive", "write e.g. 80GiB")
            gpu = dataclasses.replace(gpu, memory_bytes=inputs.gpu_memory)
        overrides["gpu"] = gpu
    cluster = dataclasses.replace(cluster, **overrides) if overrides else cluster
    if generic:  # described after the flags, so it says what is really used
        def known(value, flag: str) -> str:
            return "unknown, not checked (" + flag + ")" if value is None else format_bytes(value, units)

        assumptions.append(
            f"node: no preset for {cluster.gpu.name}, so a generic node: {cluster.gpus_per_node} GPUs per node, PCIe "
            f"Gen4, inter-node {format_rate(cluster.inter_node_link.bandwidth_bytes_per_s)} per GPU, CPU RAM "
            f"{known(cluster.cpu_memory_bytes, '--cpu-memory')}, NVMe {known(cluster.nvme_bytes, '--nvme')}; "
            "defaults wherever no flag was given (or choose --cluster)")
    return cluster


def resolve_budget(inputs: BudgetInputs, cluster: ClusterSpec, assumptions: list[str]) -> MemoryBudget:
    def given(value: Fraction | None, default: Fraction) -> Fraction:
        return default if value is None else value

    return MemoryBudget(
        gpu_capacity=cluster.gpu.memory_bytes,
        runtime_reserve=DEFAULT_RUNTIME_RESERVE if inputs.runtime_reserve is None else inputs.runtime_reserve,
        fragmentation=given(inputs.fragmentation, DEFAULT_FRAGMENTATION),
        activation_reserve=given(inputs.activation_reserve, DEFAULT_ACTIVATION_RESERVE),
        host_reserve=given(inputs.host_reserve, DEFAULT_HOST_RESERVE),
    )


def budget_assumptions(inputs: BudgetInputs, budget: MemoryBudget, units: str) -> list[str]:
    notes = [f"usable GPU memory {format_bytes(budget.usable_gpu_bytes, units)} = "
             f"{format_bytes(budget.gpu_capacity, units)} − runtime reserve {format_bytes(budget.runtime_reserve, units)}"
             f"{' (default: CUDA context + NCCL)' if inputs.runtime_reserve is None else ''} − fragmentation "
             f"{float(budget.fragmentation):.0%} {format_bytes(budget.fragmentation_bytes, units)}"
             f"{' (default)' if inputs.fragmentation is None else ''}"]
    notes.append(f"host: {float(budget.host_reserve):.0%} of CPU RAM kept for the OS and dataloaders"
                 f"{' (default; --host-reserve)' if inputs.host_reserve is None else ''}")
    return notes


