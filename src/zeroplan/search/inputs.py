"""From `zeroplan plan` flags to a core SearchRequest, recording every default applied as an assumption.

Model, hardware and memory budget go through the same resolvers as `zeroplan estimate`
(zeroplan.inputs.training / resolve_hardware), so a preset means the same thing in both commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zeroplan.core.activations import RECOMPUTE_MODES, DEFAULT_SEQ_LEN_CAP, default_seq_len
from zeroplan.core.errors import InputError
from zeroplan.core.layout_rules import check_whole_nodes
from zeroplan.core.parallel import ParallelDims
from zeroplan.core.precision import check_precision_on_gpu
from zeroplan.inputs.lists import parse_choice_list, parse_int_list
from zeroplan.core.hardware import ClusterSpec, Link
from zeroplan.core.model import ModelSpec, check_count_against_shape
from zeroplan.core.layout_space import SearchSpace
from zeroplan.core.precision import bytes_per_param
from zeroplan.core.fit import parse_fraction
from zeroplan.core.layout_search import DEFAULT_TIE_TOLERANCE, SearchRequest
from zeroplan.core.step_time import (DEFAULT_CPU_ADAM_PARAMS_PER_S, LinkTable, Machine, check_efficiency,
                                     gemm_efficiency)
from zeroplan.core.units import format_count, format_rate, parse_count

SEQUENCE_PARALLEL_CHOICES = {"search": (False, True), "on": (True,), "off": (False,)}


@dataclass
class PlanInputs:
    """Everything `zeroplan plan` accepts, as given (None = not given)."""

    gpus: int
    global_batch: int | None = None
    seq_len: int | None = None
    model: str | None = None
    params: str | None = None
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    vocab: int | None = None
    ffn: int | None = None
    gpu: str | None = None
    cluster: str | None = None
    gpus_per_node: int | None = None
    cpu_memory: str | None = None
    nvme: str | None = None
    nvme_bandwidth: str | None = None
    intra_node_bandwidth: str | None = None
    inter_node_bandwidth: str | None = None
    gpu_memory: str | None = None
    runtime_reserve: str | None = None
    fragmentation: str | None = None
    host_reserve: str | None = None
    precision: str = "mixed"
    optimizer: str = "adam"
    tokens: str | None = None
    calibration: str | None = None
    efficiency: float | None = None  # None: the GPU's fitted GEMM efficiency
    cpu_adam_rate: str | None = None
    stages: str | None = None
    offload: bool = True
    recompute: str | None = None
    sequence_parallel: str = "search"
    virtual_stages: str | None = None
    micro_batches: str | None = None
    tp: str | None = None
    pp: str | None = None
    allow_cross_node_tp: bool = False
    flash_attention: bool = True
    cp: str | None = None
    fsdp_pipeline: bool = False
    top: int = 5
    tie_tolerance: str | None = None
    units: str = "iec"


@dataclass
class ResolvedPlan:
    inputs: PlanInputs
    request: SearchRequest
    training_tokens: int | None
    assumptions: list[str] = field(default_factory=list)


def _estimate_inputs(inputs: PlanInputs):
    from zeroplan.inputs.estimate_inputs import EstimateInputs

    return EstimateInputs(
        gpus=inputs.gpus, params=None, model=inputs.model, gpu=inputs.gpu, cluster=inputs.cluster,
        gpus_per_node=inputs.gpus_per_node, cpu_memory=inputs.cpu_memory, nvme=inputs.nvme,
        nvme_bandwidth=inputs.nvme_bandwidth, intra_node_bandwidth=inputs.intra_node_bandwidth,
        inter_node_bandwidth=inputs.inter_node_bandwidth, gpu_memory=inputs.gpu_memory,
        runtime_reserve=inputs.runtime_reserve, fragmentation=inputs.fragmentation, host_reserve=inputs.host_reserve,
        precision=inputs.precision, optimizer=inputs.optimizer, units=inputs.units)


def resolve_model(inputs: PlanInputs, assumptions: list[str]) -> ModelSpec:
    shape = {"--layers": inputs.layers, "--hidden": inputs.hidden, "--heads": inputs.heads, "--vocab": inputs.vocab}
    extra = {"--kv-heads": inputs.kv_heads, "--ffn": inputs.ffn}
    if inputs.model is not None:
        if inputs.params is not None:
            raise InputError("--params/--model", "give one of them, not both", "--model already fixes the count")
        given = [flag for flag, value in {**shape, **extra}.items() if value is not None]
        if given:
            raise InputError(given[0], "the model's shape comes from --model", f"drop {given[0]} or --model")
        from zeroplan.inputs.training import resolve_model as resolve_named

        return resolve_named(_estimate_inputs(inputs))
    if inputs.params is None:
        raise InputError("--params", "no model given",
                         "pass --model gpt3-175b, --model path/to/config.json, or --params with its shape")
    missing = [flag for flag, value in shape.items() if value is None]
    if missing:
        raise InputError(", ".join(missing), "a plan needs the model's shape, and --params gives only a count",
                         "add --layers, --hidden, --heads and --vocab, or use --model")
    for flag, value in {**shape, **extra}.items():
        if value is not None and value < 1:
            raise InputError(flag, f"must be a positive whole number, got {value}")
    params = parse_count(inputs.params, "--params")
    assumptions.append("model from --params and its shape: pipeline stages split the parameters evenly")
    if inputs.layers is not None and inputs.hidden is not None:
        check_count_against_shape(params, inputs.layers, inputs.hidden)
    return ModelSpec(params=params, name=f"custom-{format_count(params)}", layers=inputs.layers,
                     hidden=inputs.hidden, heads=inputs.heads, kv_heads=inputs.kv_heads, vocab=inputs.vocab,
                     ffn=inputs.ffn)


def _largest_layer(model: ModelSpec, assumptions: list[str]) -> int:
    from zeroplan.core.estimate import model_largest_layer_params

    largest, note = model_largest_layer_params(model)
    if note:
        assumptions.append(note)
    return largest


def _links(inputs: PlanInputs, cluster: ClusterSpec, assumptions: list[str]) -> LinkTable:
    from zeroplan.inputs.links import CALIBRATED_COLLECTIVES, link_table, measured_links

    measured: dict[tuple[str, str], Link] = {}
    if inputs.calibration is not None:
        _, measured = measured_links(inputs.calibration, CALIBRATED_COLLECTIVES)
        names = ", ".join(f"{kind}/{span} {format_rate(link.bandwidth_bytes_per_s)}"
                          for (kind, span), link in measured.items())
        assumptions.append(f"calibration {inputs.calibration}: measured links for {names or 'nothing usable'}; "
                           "the rest from presets")
    return link_table(cluster.gpu.intra_node_link, cluster.inter_node_link, measured)


def _space(inputs: PlanInputs, model: ModelSpec, assumptions: list[str]) -> SearchSpace:
    if inputs.global_batch is None:
        raise InputError("--global-batch", "is required: the sequences per optimizer step",
                         "e.g. --global-batch 1536 (GPT-3's 3.2M tokens at 2048)")
    seq_len = inputs.seq_len
    if seq_len is None:
        seq_len = default_seq_len(model)
        assumptions.append(f"sequence length {seq_len} (the model's context, capped at {DEFAULT_SEQ_LEN_CAP}; "
                           "--seq-len)")
    if model.max_seq_len and seq_len > model.max_seq_len:
        assumptions.append(f"sequence length {seq_len} is beyond {model.name}'s context of {model.max_seq_len}: "
                           "memory and time are counted as if the model accepted it")
    if inputs.sequence_parallel not in SEQUENCE_PARALLEL_CHOICES:
        raise InputError("--sequence-parallel", f"unknown choice '{inputs.sequence_parallel}'", "use search, on or off")
    stages = parse_int_list(inputs.stages, "--stages", minimum=0)
    return SearchSpace(
        gpus=inputs.gpus, global_batch=inputs.global_batch, seq_len=seq_len,
        stages=stages or (0, 1, 2, 3),
        offload=inputs.offload,
        recompute=parse_choice_list(inputs.recompute, RECOMPUTE_MODES, "--recompute") or RECOMPUTE_MODES,
        sequence_parallel=SEQUENCE_PARALLEL_CHOICES[inputs.sequence_parallel],
        virtual_stages=parse_int_list(inputs.virtual_stages, "--virtual-stages") or (1,),
        micro_batches=parse_int_list(inputs.micro_batches, "--micro-batches"),
        tp=parse_int_list(inputs.tp, "--tp"), pp=parse_int_list(inputs.pp, "--pp"),
        allow_cross_node_tp=inputs.allow_cross_node_tp, flash_attention=inputs.flash_attention,
        cp=parse_int_list(inputs.cp, "--cp") or (1,), fsdp_pipeline=inputs.fsdp_pipeline)


def _stage_check(text: str | None) -> None:
    for value in parse_int_list(text, "--stages", minimum=0) or ():
        if value > 3:
            raise InputError("--stages", f"ZeRO stage must be 0, 1, 2 or 3, got {value}")


def resolve(inputs: PlanInputs) -> ResolvedPlan:
    from zeroplan.inputs.hardware import (
        budget_assumptions,
        resolve_budget,
        resolve_cluster,
    )

    assumptions: list[str] = []
    if isinstance(inputs.gpus, bool) or not isinstance(inputs.gpus, int) or inputs.gpus < 1:
        raise InputError("--gpus", f"must be a positive whole number, got {inputs.gpus}")
    if inputs.top < 1:
        raise InputError("--top", f"must be at least 1, got {inputs.top}")
    if inputs.units not in ("iec", "si"):
        raise InputError("--units", f"unknown units '{inputs.units}'", "use iec (GiB) or si (GB)")
    if inputs.efficiency is not None:
        check_efficiency(inputs.efficiency)
    _stage_check(inputs.stages)
    model = resolve_model(inputs, assumptions)
    if not model.has_shape:
        raise InputError("--model", f"'{model.name}' has no shape (layers, hidden, heads, vocab)",
                         "use a preset or config.json that has one")
    estimate_inputs = _estimate_inputs(inputs)
    cluster = resolve_cluster(estimate_inputs, assumptions)
    budget = resolve_budget(estimate_inputs, cluster, assumptions)
    per_param = bytes_per_param(inputs.precision, inputs.optimizer)
    space = _space(inputs, model, assumptions)
    cpu_rate = (DEFAULT_CPU_ADAM_PARAMS_PER_S if inputs.cpu_adam_rate is None
                else parse_count(inputs.cpu_adam_rate, "--cpu-adam-rate"))
    check_whole_nodes(ParallelDims(space.gpus, gpus_per_node=cluster.gpus_per_node))
    check_precision_on_gpu(inputs.precision, cluster.gpu.name, cluster.gpu.supports_bf16)
    machine = Machine(peak_flops=cluster.gpu.bf16_flops, hbm_bytes_per_s=cluster.gpu.hbm_bandwidth_bytes_per_s,
                      pcie_bytes_per_s=cluster.pcie_bandwidth_bytes_per_s,
                      nvme_bytes_per_s=cluster.nvme_bandwidth_bytes_per_s,
                      links=_links(inputs, cluster, assumptions),
                      efficiency=gemm_efficiency(cluster.gpu.name) if inputs.efficiency is None else inputs.efficiency,
                      cpu_adam_params_per_s=cpu_rate, gpus_per_node=cluster.gpus_per_node)
    tolerance = (DEFAULT_TIE_TOLERANCE if inputs.tie_tolerance is None
                 else float(parse_fraction(inputs.tie_tolerance, "--tie-tolerance")))
    request = SearchRequest(model=model, cluster=cluster, per_param=per_param, budget=budget, space=space,
                            machine=machine, largest_layer_params=_largest_layer(model, assumptions),
                            tie_tolerance=tolerance)
    tokens = None if inputs.tokens is None else parse_count(inputs.tokens, "--tokens")
    assumptions.extend(budget_assumptions(estimate_inputs, budget, inputs.units))
    assumptions.extend(model_notes(inputs, request))
    return ResolvedPlan(inputs, request, tokens, assumptions)


def model_notes(inputs: PlanInputs, request: SearchRequest) -> list[str]:
    """What the step-time model assumes, with this run's numbers."""
    machine, cluster = request.machine, request.cluster
    default_efficiency = " (fitted default; --efficiency)" if inputs.efficiency is None else ""
    notes = [
        f"compute: each GEMM (per-layer shapes after the tp/cp splits, micro-batch × sequence tokens) at "
        f"{machine.efficiency:.0%} of {cluster.gpu.name}'s dense bf16 peak "
        f"({cluster.gpu.bf16_flops / 1e12:.0f} TFLOP/s){default_efficiency}"
        f"{f' plus {machine.gemm_overhead_s * 1e6:.0f} µs' if machine.gemm_overhead_s else ''}; "
        "attention core with or without flash, element-wise work at HBM bandwidth; recompute re-runs the forward "
        "(full) or the attention core (selective)",
        "MFU = 6Ψ × tokens / (step time × peak × GPUs)",
        "communication: NCCL-like ring collectives: NVLink inside a node, the per-GPU NIC across nodes, hop "
        "latencies once per phase and a launch per bucket; TP: 4 AllReduces of s·b·h per layer and micro-batch "
        "(6 with full recompute), not overlapped; PP: one activation and one gradient per boundary and "
        "micro-batch (1/t each with tp > 1)",
        f"overlap (every ZeRO stage): gradient reductions hide behind backward, parameter gathers behind forward, "
        f"up to {machine.dp_overlap:.0%} of that compute; with pp > 1 reductions wait for the pipeline flush",
        f"offload: PCIe {format_rate(cluster.pcie_bandwidth_bytes_per_s)} per GPU, CPU Adam "
        f"{format_count(int(machine.cpu_adam_params_per_s))} parameters/s per node"
        f"{' (an estimate; --cpu-adam-rate)' if inputs.cpu_adam_rate is None else ''}",
        "pipeline: 1F1B, bubble (p-1)/(v·m) of the step, uneven stages priced by the busiest; DeepSpeed's pipeline "
        "engine runs ZeRO stages 0-1 only (--fsdp-with-pp adds ZeRO-2/3 with pp, as torchtitan and Llama 3 run)",
        f"ranking: step times within {request.tie_tolerance:.0%} of the fastest are ties (the model's resolution)"
        f"{' (default; --tie-tolerance)' if inputs.tie_tolerance is None else ''}; a tie goes to the simpler plan: "
        "no offload, less model parallelism, a lower ZeRO stage, less recompute",
    ]
    if request.per_param.precision == "fp32":
        notes.append("fp32 training is priced at the bf16 peak: an optimistic step time")
    return notes
