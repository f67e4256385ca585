"""From what the user typed to an evaluated plan: resolve presets and flags, record every default.

This is the one place that knows which values were given and which were assumed, so every
report can list its assumptions. The math itself lives in zeroplan.core.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from fractions import Fraction

from zeroplan import presets
from zeroplan.core.buffers import BufferConfig
from zeroplan.core.comm import validate_zeropp
from zeroplan.core.deepspeed_estimator import DEFAULT_BUFFER_FACTOR
from zeroplan.core.errors import InputError
from zeroplan.core.estimate import EstimateRequest, OptionEstimate, default_largest_layer_params, evaluate_options
from zeroplan.core.fit import (DEFAULT_ACTIVATION_RESERVE, DEFAULT_FRAGMENTATION, DEFAULT_HOST_RESERVE,
                               DEFAULT_RUNTIME_RESERVE, MemoryBudget, parse_fraction)
from zeroplan.core.hardware import ClusterSpec, Link
from zeroplan.core.model import ModelSpec
from zeroplan.core.options import options_for
from zeroplan.core.parallel import ParallelDims
from zeroplan.core.precision import bytes_per_param
from zeroplan.core.recommend import Recommendation, recommend
from zeroplan.core.units import format_bytes, format_count, format_rate, parse_bytes, parse_count, parse_rate

DEFAULT_GPU = "a100-80g"
GENERIC_GPUS_PER_NODE = 8
GENERIC_INTER_NODE = Link(bandwidth_bytes_per_s=25_000_000_000, latency_s=10e-6, source="default")


@dataclass
class EstimateInputs:
    """Everything `zeroplan estimate` accepts, as given (None = not given, use the default)."""

    gpus: int = 1
    params: str | None = None
    model: str | None = None
    gpu: str | None = None
    cluster: str | None = None
    gpus_per_node: int | None = None
    tp: int = 1
    pp: int = 1
    precision: str = "mixed"
    optimizer: str = "adam"
    convention: str = "paper"
    stage: int | None = None
    offload_optimizer: str | None = None
    offload_params: str | None = None
    largest_layer_params: str | None = None
    zero_init: bool = True
    buffer_factor: float = DEFAULT_BUFFER_FACTOR
    cpu_memory: str | None = None
    nvme: str | None = None
    nvme_bandwidth: str | None = None
    intra_node_bandwidth: str | None = None
    inter_node_bandwidth: str | None = None
    gpu_memory: str | None = None
    runtime_reserve: str | None = None
    fragmentation: str | None = None
    activation_reserve: str | None = None
    host_reserve: str | None = None
    zeropp: str | None = None
    hpz_partition_size: int | None = None
    units: str = "iec"


@dataclass
class Plan:
    inputs: EstimateInputs
    request: EstimateRequest
    estimates: list[OptionEstimate]
    recommendation: Recommendation
    assumptions: list[str] = field(default_factory=list)


def _resolve_model(inputs: EstimateInputs, assumptions: list[str]) -> ModelSpec:
    if inputs.params is not None and inputs.model is not None:
        raise InputError("--params/--model", "give one of them, not both", "--model already fixes the parameter count")
    if inputs.model is not None:
        return presets.model(inputs.model)
    if inputs.params is None:
        raise InputError("--params", "no model given", "pass --params 13e9 or --model llama-2-13b")
    return ModelSpec(params=parse_count(inputs.params, "--params"))


def _default_cluster_for(gpu_name: str) -> str | None:
    for name in presets.names("clusters"):
        if presets.entry("clusters", name).gpu == gpu_name:
            return name
    return None


def _resolve_cluster(inputs: EstimateInputs, assumptions: list[str]) -> ClusterSpec:
    if inputs.cluster is not None:
        cluster = presets.cluster(inputs.cluster)
        if inputs.gpu is not None and presets.gpu(inputs.gpu).name != cluster.gpu.name:
            raise InputError("--gpu", f"'{inputs.gpu}' conflicts with cluster '{inputs.cluster}' "
                             f"({cluster.gpu.name})", "drop --gpu or --cluster")
    else:
        gpu_name = (inputs.gpu or DEFAULT_GPU).strip().lower()
        gpu = presets.gpu(gpu_name)
        if inputs.gpu is None:
            assumptions.append(f"GPU: {gpu_name} (the default; choose with --gpu or --cluster)")
        node_name = _default_cluster_for(gpu_name)
        if node_name is not None:
            cluster = dataclasses.replace(presets.cluster(node_name), name=f"{node_name} (default node for {gpu_name})")
            assumptions.append(f"node: {node_name} preset for {gpu_name} (CPU RAM, NVMe, links; choose with --cluster)")
        else:
            cluster = ClusterSpec(name=f"generic {gpu_name} node", gpu=gpu, gpus_per_node=GENERIC_GPUS_PER_NODE,
                                  inter_node_link=GENERIC_INTER_NODE, cpu_memory_bytes=None, nvme_bytes=None,
                                  nvme_bandwidth_bytes_per_s=None, pcie_bandwidth_bytes_per_s=31_500_000_000,
                                  pcie_generation=4)
            assumptions.append(f"node: generic, {GENERIC_GPUS_PER_NODE} GPUs per node, PCIe Gen4, inter-node "
                               f"{format_rate(GENERIC_INTER_NODE.bandwidth_bytes_per_s)} per GPU; CPU RAM and NVMe "
                               "unknown (give --cpu-memory/--nvme or --cluster)")
    overrides = {}
    if inputs.gpus_per_node is not None:
        overrides["gpus_per_node"] = inputs.gpus_per_node
    if inputs.cpu_memory is not None:
        overrides["cpu_memory_bytes"] = parse_bytes(inputs.cpu_memory, "--cpu-memory")
    if inputs.nvme is not None:
        overrides["nvme_bytes"] = parse_bytes(inputs.nvme, "--nvme")
    if inputs.nvme_bandwidth is not None:
        overrides["nvme_bandwidth_bytes_per_s"] = parse_rate(inputs.nvme_bandwidth, "--nvme-bandwidth")
    if inputs.inter_node_bandwidth is not None:
        link = cluster.inter_node_link
        overrides["inter_node_link"] = Link(parse_rate(inputs.inter_node_bandwidth, "--inter-node-bandwidth"),
                                            link.latency_s, "flag")
    if inputs.intra_node_bandwidth is not None or inputs.gpu_memory is not None:
        gpu = cluster.gpu
        if inputs.intra_node_bandwidth is not None:
            gpu = dataclasses.replace(gpu, intra_node_link=Link(
                parse_rate(inputs.intra_node_bandwidth, "--intra-node-bandwidth"), gpu.intra_node_link.latency_s, "flag"))
        if inputs.gpu_memory is not None:
            memory = parse_bytes(inputs.gpu_memory, "--gpu-memory")
            if memory <= 0:
                raise InputError("--gpu-memory", "must be positive", "write e.g. 80GiB")
            gpu = dataclasses.replace(gpu, memory_bytes=memory)
        overrides["gpu"] = gpu
    return dataclasses.replace(cluster, **overrides) if overrides else cluster


def _budget(inputs: EstimateInputs, cluster: ClusterSpec, assumptions: list[str]) -> MemoryBudget:
    def fraction(text: str | None, flag: str, default: Fraction) -> Fraction:
        return default if text is None else parse_fraction(text, flag)

    return MemoryBudget(
        gpu_capacity=cluster.gpu.memory_bytes,
        runtime_reserve=(DEFAULT_RUNTIME_RESERVE if inputs.runtime_reserve is None
                         else parse_bytes(inputs.runtime_reserve, "--runtime-reserve")),
        fragmentation=fraction(inputs.fragmentation, "--fragmentation", DEFAULT_FRAGMENTATION),
        activation_reserve=fraction(inputs.activation_reserve, "--activation-reserve", DEFAULT_ACTIVATION_RESERVE),
        host_reserve=fraction(inputs.host_reserve, "--host-reserve", DEFAULT_HOST_RESERVE),
    )


def _budget_assumptions(inputs: EstimateInputs, budget: MemoryBudget, units: str) -> list[str]:
    notes = [f"usable GPU memory {format_bytes(budget.usable_gpu_bytes, units)} = "
             f"{format_bytes(budget.gpu_capacity, units)} − runtime reserve {format_bytes(budget.runtime_reserve, units)}"
             f"{' (default: CUDA context + NCCL)' if inputs.runtime_reserve is None else ''} − fragmentation "
             f"{float(budget.fragmentation):.0%} {format_bytes(budget.fragmentation_bytes, units)}"
             f"{' (default)' if inputs.fragmentation is None else ''}"]
    notes.append(f"host: {float(budget.host_reserve):.0%} of CPU RAM kept for the OS and dataloaders"
                 f"{' (default; --host-reserve)' if inputs.host_reserve is None else ''}")
    return notes


def build_plan(inputs: EstimateInputs) -> Plan:
    assumptions: list[str] = []
    units = inputs.units
    if units not in ("iec", "si"):
        raise InputError("--units", f"unknown units '{units}'", "use iec (GiB) or si (GB)")
    model = _resolve_model(inputs, assumptions)
    cluster = _resolve_cluster(inputs, assumptions)
    parallel = ParallelDims(world=inputs.gpus, tp=inputs.tp, pp=inputs.pp, gpus_per_node=cluster.gpus_per_node)
    per_param = bytes_per_param(inputs.precision, inputs.optimizer)
    options = options_for(inputs.convention, inputs.stage, inputs.offload_optimizer, inputs.offload_params)
    zeropp = frozenset(f.strip().lower() for f in inputs.zeropp.split(",") if f.strip()) if inputs.zeropp else frozenset()
    validate_zeropp(zeropp, inputs.stage)
    if zeropp and inputs.convention == "deepspeed":
        raise InputError("--zeropp", "DeepSpeed's estimators do not model ZeRO++", "use --convention paper")
    if inputs.buffer_factor <= 0:
        raise InputError("--buffer-factor", f"must be positive, got {inputs.buffer_factor}")

    if inputs.largest_layer_params is not None:
        largest = parse_count(inputs.largest_layer_params, "--largest-layer-params")
        model = dataclasses.replace(model, largest_layer_params=largest)
    elif model.largest_layer_params is not None:
        largest = model.largest_layer_params
    else:
        largest = default_largest_layer_params(model.params)
        assumptions.append(f"largest layer: {format_count(largest)} parameters, assumed from a GPT-style shape "
                           "(hidden/layers = 128, 32k vocabulary); give --largest-layer-params or --model")
    budget = _budget(inputs, cluster, assumptions)
    request = EstimateRequest(
        model=model, cluster=cluster, parallel=parallel, per_param=per_param, budget=budget, options=options,
        convention=inputs.convention, largest_layer_params=largest, zero_init=inputs.zero_init,
        buffer_factor=inputs.buffer_factor, zeropp=zeropp, hpz_partition_size=inputs.hpz_partition_size,
        buffers=BufferConfig(),
    )
    estimates = evaluate_options(request)
    recommendation = recommend(request, estimates, units)

    assumptions.extend(_budget_assumptions(inputs, budget, units))
    assumptions.append(f"activations not counted: a reserve of {float(budget.activation_reserve):.0%} of usable "
                       f"memory ({format_bytes(budget.activation_reserve_bytes, units)}) is kept for them "
                       "(--activation-reserve)")
    if inputs.convention == "paper":
        assumptions.append("buffers: DeepSpeed defaults reduce_bucket_size 5e8, allgather_bucket_size 5e8, "
                           "stage3_prefetch_bucket_size 5e7, stage3_max_live_parameters 1e9 (elements), each "
                           "capped at the model shard")
    else:
        assumptions.append(f"deepspeed convention: DeepSpeed's estimator formulas (buffer factor "
                           f"{inputs.buffer_factor:g}, zero_init={int(inputs.zero_init)}); they count model states "
                           "and the largest layer only")
    if parallel.pp > 1:
        assumptions.append(f"pipeline: parameters split evenly over {parallel.pp} stages (only the count is known)")
    assumptions.append(f"precision {per_param.precision} + {per_param.optimizer}: {per_param.params} + "
                       f"{per_param.gradients} + {per_param.optimizer_states} = {per_param.total} bytes per parameter")
    assumptions.append("communication: ring collectives over the data-parallel group, priced on the slowest link "
                       "it crosses; one micro-batch per step; TP/PP traffic not counted here")
    if any(e.cpu_bytes_per_node or e.nvme_bytes_per_node for e in estimates) and any(
            not e.host_checked for e in estimates):
        assumptions.append("host capacity unknown: offload rows are not checked against CPU RAM/NVMe")
    return Plan(inputs, request, estimates, recommendation, assumptions)
