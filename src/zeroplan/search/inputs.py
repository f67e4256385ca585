"""From `zeroplan plan` flags to a core SearchRequest, recording every default applied as an assumption.

Model, hardware and memory budget go through the same resolvers as `zeroplan estimate`
(zeroplan.inputs.training / resolve_hardware), so a preset means the same thing in both commands.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from zeroplan.core.memory.activations import RECOMPUTE_MODES, DEFAULT_SEQ_LEN_CAP, default_seq_len
from zeroplan.core.errors import InputError, ref
from zeroplan.core.parallel.rules import check_whole_nodes
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.precision import check_precision_on_gpu
from zeroplan.core.hardware import ClusterSpec, Link
from zeroplan.core.model.adapters import adapted_experts
from zeroplan.core.model.experts import active_params, model_expert_params
from zeroplan.core.model.spec import ModelShape, ModelSpec, check_count_against_shape
from zeroplan.core.layout.space import SearchSpace
from zeroplan.core.precision import bytes_per_param, check_fp8
from zeroplan.core.layout.search import DEFAULT_TIE_TOLERANCE, SearchRequest
from zeroplan.core.timing.step_time import (DEFAULT_CPU_ADAM_PARAMS_PER_S, DP_OVERLAP, MOE_DROPLESS_SYNC_S, FlopModel,
                                            LinkTable, Machine, check_efficiency, comm_overlap, eager_block_of,
                                            flash_efficiency, gemm_efficiency, gemm_k0)
from zeroplan.core.units import format_count, format_rate
from zeroplan.inputs.command_sections import SearchInputs
from zeroplan.inputs.sections import CommandInputs, BudgetInputs, HardwareInputs, ModelInputs, Section, StepInputs
from zeroplan.inputs.training import finetune_assumption, resolve_finetune
from zeroplan.inputs.training import resolve_model as resolve_named
from zeroplan.inputs.estimate_inputs import FINETUNE_FIELDS
from zeroplan.core.evaluate.estimate import model_largest_layer_params
from zeroplan.inputs.links import CALIBRATED_COLLECTIVES, link_table, measured_links
from zeroplan.inputs.hardware import (budget_assumptions, resolve_budget, resolve_cluster,)

SEQUENCE_PARALLEL_CHOICES = {"search": (False, True), "on": (True,), "off": (False,)}


# The fields `zeroplan plan` takes from each section (the CLI's options, and the report's "inputs").
FIELDS: dict[type[Section], tuple[str, ...]] = {
    HardwareInputs: ("gpus",),
    StepInputs: ("global_batch", "seq_len"),
    ModelInputs: ("model", "params", "layers", "hidden", "heads", "kv_heads", "vocab", "ffn"),
}
FIELDS[HardwareInputs] += ("gpu", "cluster", "presets_file", "gpus_per_node", "cpu_memory", "nvme", "nvme_bandwidth",
                           "intra_node_bandwidth", "inter_node_bandwidth", "gpu_memory")
FIELDS[BudgetInputs] = ("runtime_reserve", "fragmentation", "host_reserve")
FIELDS[StepInputs] += ("precision", "fp8_recipe", "optimizer", "tokens")
FIELDS[HardwareInputs] += ("calibration",)
FIELDS[SearchInputs] = ("efficiency", "cpu_adam_rate", "stages", "offload", "recompute", "sequence_parallel",
                        "virtual_stages", "micro_batches", "tp", "pp", "allow_cross_node_tp")
FIELDS[StepInputs] += ("flash_attention",)
FIELDS[SearchInputs] += ("cp", "fsdp_pipeline", "top", "tie_tolerance", "comm_overlap", "attention_kernel",
                         "async_tp", "torch_compile", "dp_shard", "ep", "etp", "moe_dispatcher", "moe_a2a_overlap")
FIELDS[StepInputs] += ("capacity_factor",)
FIELDS[StepInputs] += FINETUNE_FIELDS
ECHO_ORDER = ("gpus", "global_batch", "seq_len", "model", "params", "layers", "hidden", "heads", "kv_heads", "vocab",
              "ffn", "gpu", "cluster", "gpus_per_node", "cpu_memory", "nvme", "nvme_bandwidth", "intra_node_bandwidth",
              "inter_node_bandwidth", "gpu_memory", "runtime_reserve", "fragmentation", "host_reserve", "precision",
              "optimizer", "tokens", "calibration", "efficiency", "cpu_adam_rate", "stages", "offload", "recompute",
              "sequence_parallel", "virtual_stages", "micro_batches", "tp", "pp", "allow_cross_node_tp",
              "flash_attention", "cp", "fsdp_pipeline", "top", "tie_tolerance", "comm_overlap", "attention_kernel",
              "fp8_recipe", "async_tp", "torch_compile", "dp_shard", "ep", "etp", "capacity_factor", "moe_dispatcher",
              "moe_a2a_overlap", *FINETUNE_FIELDS)


@dataclass
class PlanInputs(CommandInputs):
    """Everything `zeroplan plan` accepts, by section, as given (None = not given)."""

    model: ModelInputs = field(default_factory=ModelInputs)
    hardware: HardwareInputs = field(default_factory=HardwareInputs)
    budget: BudgetInputs = field(default_factory=BudgetInputs)
    step: StepInputs = field(default_factory=StepInputs)
    search: SearchInputs = field(default_factory=SearchInputs)
    units: str = "iec"
    FIELDS: ClassVar[dict[Any, tuple[str, ...]]] = FIELDS
    ECHO_ORDER: ClassVar[tuple[str, ...]] = ECHO_ORDER



@dataclass
class ResolvedPlan:
    inputs: PlanInputs
    request: SearchRequest
    training_tokens: int | None
    assumptions: list[str] = field(default_factory=list)


# The assumption line of --torch-compile (core.timing.step_time.elementwise_seconds).
COMPILE_NOTE = ("; torch.compile (--torch-compile): element-wise and norm ops fused, one kernel per region between two "
                "GEMMs, each region's inputs read and outputs written once")
# The assumption line of each eager block (core.timing.step_time.eager_block_of, docs/formulas.md §25-26).
EAGER_BLOCK_NOTES = {
    "transformers": ("; eager element-wise work of a gated dense layer as Hugging Face transformers' "
                     "LlamaDecoderLayer runs it, op by op (fp32 RMSNorm, rotate_half rotary, SiLU·up; "
                     "docs/formulas.md §26): PyTorch FSDP assumed to run Hugging Face's model code "
                     "(--torch-compile for a compiled block)"),
    "torchtitan": ("; eager element-wise work of a gated dense layer as torchtitan's Llama block runs it, op by op "
                   "(fp32 RMSNorm and complex rotary, repeat_kv copies, SiLU·up; docs/formulas.md §25; "
                   "--torch-compile for a compiled block)"),
}
# The assumption line of --async-tp (core.timing.step_time.tp_async_exposed says what is fused and why).
ASYNC_TP_NOTE = ("; async TP (--async-tp): TP collectives inside a node hide behind the GEMM each feeds or comes from: all "
                 "of the forward's, in backward the output-gradient all-gathers only")

def resolve_model(inputs: PlanInputs, assumptions: list[str]) -> ModelSpec:
    asked = inputs.model
    shape = {"layers": asked.layers, "hidden": asked.hidden, "heads": asked.heads, "vocab": asked.vocab}
    extra = {"kv_heads": inputs.model.kv_heads, "ffn": inputs.model.ffn}
    if inputs.model.model is not None:
        if inputs.model.params is not None:
            raise InputError("params/model", "give one of them, not both", f"{ref('model')} already fixes the count")
        given = [flag for flag, value in {**shape, **extra}.items() if value is not None]
        if given:
            raise InputError(given[0], f"the model's shape comes from {ref('model')}",
                             f"drop {ref(given[0])} or {ref('model')}")

        return resolve_named(inputs.model)
    if inputs.model.params is None:
        raise InputError("params", "no model given",
                         f"pass {ref('model', 'gpt3-175b')}, {ref('model', 'path/to/config.json')}, or {ref('params')} "
                         "with its shape")
    missing = [flag for flag, value in shape.items() if value is None]
    layers, hidden, heads, vocab = asked.layers, asked.hidden, asked.heads, asked.vocab
    if missing or layers is None or hidden is None or heads is None or vocab is None:
        raise InputError(", ".join(missing), f"a plan needs the model's shape, and {ref('params')} gives only a count",
                         f"add {ref('layers')}, {ref('hidden')}, {ref('heads')} and {ref('vocab')}, or use "
                         f"{ref('model')}")
    for flag, value in {**shape, **extra}.items():
        if value is not None and value < 1:
            raise InputError(flag, f"must be a positive whole number, got {value}")
    params = inputs.model.params
    assumptions.append("model from --params and its shape: pipeline stages split the parameters evenly")
    check_count_against_shape(params, layers, hidden)
    custom = ModelShape.of(layers=layers, hidden=hidden, heads=heads, kv_heads=asked.kv_heads, vocab=vocab,
                           ffn=asked.ffn)
    return ModelSpec(params=params, name=f"custom-{format_count(params)}", shape=custom)


def _largest_layer(model: ModelSpec, assumptions: list[str]) -> int:
    largest, note = model_largest_layer_params(model)
    if note:
        assumptions.append(note)
    return largest


def _links(inputs: PlanInputs, cluster: ClusterSpec, assumptions: list[str]) -> LinkTable:
    measured: dict[tuple[str, str], Link] = {}
    if inputs.hardware.calibration is not None:
        _, measured = measured_links(inputs.hardware.calibration, CALIBRATED_COLLECTIVES)
        names = ", ".join(f"{kind}/{span} {format_rate(link.bandwidth_bytes_per_s)}"
                          for (kind, span), link in measured.items())
        assumptions.append(f"calibration {inputs.hardware.calibration}: measured links for "
                           f"{names or 'nothing usable'}; "
                           "the rest from presets")
    return link_table(cluster.gpu.intra_node_link, cluster.inter_node_link, measured)


def _space(inputs: PlanInputs, model: ModelSpec, assumptions: list[str]) -> SearchSpace:
    if inputs.step.global_batch is None:
        raise InputError("global_batch", "is required: the sequences per optimizer step",
                         f"e.g. {ref('global_batch', 1536)} (GPT-3's 3.2M tokens at 2048)")
    seq_len = inputs.step.seq_len
    if seq_len is None:
        seq_len = default_seq_len(model)
        assumptions.append(f"sequence length {seq_len} (the model's context, capped at {DEFAULT_SEQ_LEN_CAP}; "
                           "--seq-len)")
    context = model.shape.max_seq_len if model.shape is not None else None
    if context and seq_len > context:
        assumptions.append(f"sequence length {seq_len} is beyond {model.name}'s context of {context}: "
                           "memory and time are counted as if the model accepted it")
    if inputs.search.sequence_parallel not in SEQUENCE_PARALLEL_CHOICES:
        raise InputError("sequence_parallel", f"unknown choice '{inputs.search.sequence_parallel}'",
                         "use search, on or off")
    shape = model.shape
    spans = [span for span in (shape.attention_spans or ()) if span is not None and span[1] < seq_len] \
        if shape is not None else []
    if spans and shape is not None:  # core.timing.flash_blocks: what the step time does with them
        kinds = sorted({f"{kind} {size}" for kind, size in spans})
        assumptions.append(f"attention: {len(spans)} of {shape.layers} layers attend to less than the sequence "
                           f"({', '.join(kinds)}): with flash attention their core is priced by the key tiles the "
                           "kernel runs (docs/formulas.md §14.2); without it the whole score matrix is computed")
    search = inputs.search
    return SearchSpace(
        gpus=inputs.hardware.gpus, global_batch=inputs.step.global_batch, seq_len=seq_len,
        stages=search.stages or (0, 1, 2, 3),
        offload=search.offload,
        recompute=search.recompute or RECOMPUTE_MODES,
        sequence_parallel=SEQUENCE_PARALLEL_CHOICES[search.sequence_parallel],
        virtual_stages=search.virtual_stages or (1,), micro_batches=search.micro_batches, tp=search.tp, pp=search.pp,
        allow_cross_node_tp=search.allow_cross_node_tp, flash_attention=inputs.step.flash_attention,
        cp=search.cp or (1,), fsdp_pipeline=search.fsdp_pipeline, dp_shard=search.dp_shard or (),
        ep=_expert_degrees(inputs, model, assumptions), etp=search.etp,
        capacity_factor=_capacity_factor(inputs, model))


def _capacity_factor(inputs: PlanInputs, model: ModelSpec) -> float | None:
    dense = model.shape is None or not model.shape.experts
    for field, given in (("moe_dispatcher", inputs.search.moe_dispatcher is not None),
                         ("moe_a2a_overlap", inputs.search.moe_a2a_overlap)):
        if given and dense:
            raise InputError(field, f"prices a mixture-of-experts model's token exchange, and {model.name} has no "
                             "experts", f"drop {ref(field)}, or use a mixture-of-experts model")
    factor = inputs.step.capacity_factor
    if factor is not None and (model.shape is None or not model.shape.experts):
        raise InputError("capacity_factor", f"caps the tokens of each expert, and {model.name} has no experts",
                         f"drop {ref('capacity_factor')}, or use a mixture-of-experts model")
    return factor


def _expert_degrees(inputs: PlanInputs, model: ModelSpec, assumptions: list[str]) -> tuple[int, ...]:
    """--ep's degrees; for a mixture-of-experts model without --ep, every divisor of its experts (ep 1 included:
    the layouts without expert parallelism compete too); 1 for a dense model."""
    given = inputs.search.ep
    if given:
        return given
    split = model_expert_params(model)
    if split is None:
        return (1,)
    degrees = tuple(d for d in range(1, split.experts + 1) if split.experts % d == 0)
    assumptions.append(f"expert parallelism: ep {','.join(map(str, degrees))} tried (the divisors of the "
                       f"{split.experts} experts; --ep to narrow)")
    return degrees


def resolve(inputs: PlanInputs) -> ResolvedPlan:
    assumptions: list[str] = []
    if isinstance(inputs.hardware.gpus, bool) or not isinstance(inputs.hardware.gpus, int) or inputs.hardware.gpus < 1:
        raise InputError("gpus", f"must be a positive whole number, got {inputs.hardware.gpus}")
    if inputs.search.top < 1:
        raise InputError("top", f"must be at least 1, got {inputs.search.top}")
    if inputs.units not in ("iec", "si"):
        raise InputError("units", f"unknown units '{inputs.units}'", "use iec (GiB) or si (GB)")
    if inputs.search.efficiency is not None:
        check_efficiency(inputs.search.efficiency)
    model = resolve_model(inputs, assumptions)
    if not model.has_shape:
        raise InputError("model", f"'{model.name}' has no shape (layers, hidden, heads, vocab)",
                         "use a preset or config.json that has one")
    cluster = resolve_cluster(inputs.hardware, assumptions, inputs.units)
    budget = resolve_budget(inputs.budget, cluster, assumptions)
    per_param = bytes_per_param(inputs.step.precision, inputs.step.optimizer)
    space = _space(inputs, model, assumptions)
    cpu_rate = DEFAULT_CPU_ADAM_PARAMS_PER_S if inputs.search.cpu_adam_rate is None else inputs.search.cpu_adam_rate
    check_whole_nodes(ParallelDims(space.gpus, gpus_per_node=cluster.gpus_per_node))
    check_precision_on_gpu(inputs.step.precision, cluster.gpu.name, cluster.gpu.supports_bf16)
    gpu = cluster.gpu
    recipe = check_fp8(inputs.step.precision, inputs.step.fp8_recipe, gpu.name, gpu.fp8_flops, gpu.supports_mxfp8)
    overlap = comm_overlap(inputs.search.comm_overlap)
    if recipe == "tensorwise" and overlap.float8_gather:  # torchao's FP8 all-gather runs for tensorwise scales only
        per_param = replace(per_param, gathered=1)
    machine = Machine(peak_flops=cluster.gpu.bf16_flops, hbm_bytes_per_s=cluster.gpu.hbm_bandwidth_bytes_per_s,
                      pcie_bytes_per_s=cluster.pcie_bandwidth_bytes_per_s,
                      nvme_bytes_per_s=cluster.nvme_bandwidth_bytes_per_s,
                      links=replace(_links(inputs, cluster, assumptions), node_rails=overlap.node_rails),
                      efficiency=(gemm_efficiency(cluster.gpu.name) if inputs.search.efficiency is None
                                  else inputs.search.efficiency),
                      cpu_adam_params_per_s=cpu_rate, gpus_per_node=cluster.gpus_per_node,
                      dp_overlap=DP_OVERLAP if overlap.dp_overlap is None else overlap.dp_overlap,
                      tp_hidden=overlap.tp_hidden, tp_async=inputs.search.async_tp and not overlap.tp_hidden,
                      pp_hidden=overlap.pp_hidden, elementwise_fused=inputs.search.torch_compile, cp_ring=overlap.cp_ring,
                      eager_block=overlap.eager_block,
                      flash_efficiency=flash_efficiency(cluster.gpu.name,
                                                        inputs.search.attention_kernel or overlap.attention_kernel),
                      attention_kernel=inputs.search.attention_kernel or overlap.attention_kernel,
                      fp8_flops=float(gpu.fp8_flops or 0) if recipe else 0.0, fp8_recipe=recipe or "",
                      **moe_traits(inputs.search.moe_dispatcher, inputs.search.moe_a2a_overlap,
                                   inputs.step.capacity_factor))
    tolerance = DEFAULT_TIE_TOLERANCE if inputs.search.tie_tolerance is None else float(inputs.search.tie_tolerance)
    if inputs.step.finetune == "auto":
        raise InputError("finetune", "auto is for zeroplan estimate (the cheapest mode that fits)",
                         "give full, lora or qlora")
    finetune = resolve_finetune(inputs.step)
    request = SearchRequest(model=model, cluster=cluster, per_param=per_param, budget=budget, space=space,
                            machine=machine, largest_layer_params=_largest_layer(model, assumptions),
                            tie_tolerance=tolerance, finetune=finetune)
    if (note := finetune_assumption(finetune, inputs.step)) is not None:
        assumptions.append(note + "; only data-parallel layouts (tp = pp = cp = 1) are searched; frozen linears "
                           "skip their weight-gradient GEMMs, adapters add two small GEMMs forward and four backward"
                           + (", QLoRA dequantises each linear to 16 bits every pass" if finetune.storage else "")
                           + (", LoRA on the routed experts folds W + s·B·A into each expert tensor (twice forward, as "
                              "PEFT 0.21 does) and computes the merged weight's gradient backward"
                              if model.shape is not None and adapted_experts(model.shape, finetune) else ""))
    tokens = inputs.step.tokens
    assumptions.extend(budget_assumptions(inputs.budget, budget, inputs.units))
    assumptions.extend(model_notes(inputs, request))
    return ResolvedPlan(inputs, request, tokens, assumptions)


CP_TORCH_NOTE = ("; context parallelism as PyTorch's experimental ring runs it (docs/formulas.md §24): keys and "
                 "values repeated to the query heads, gathered behind the first step's kernel only, their fp32 "
                 "gradients passed around the ring (the last send exposed), the fp32 merges at HBM bandwidth")


def moe_traits(dispatcher: str | None, a2a_overlap: bool, capacity_factor: float | None) -> dict:
    """The Machine fields a MoE framework's traits set: the host sync per MoE layer and micro-batch
    (core.timing.machine MOE_DROPLESS_SYNC_S: dropless routing, no capacity factor, through the alltoall or DeepEP
    dispatcher, whose normal dispatch returns its received counts to the host; none with a capacity factor or
    HybridEP), the all-to-all overlap (--moe-a2a-overlap) and a node-deduplicating dispatch (deepep, hybridep)."""
    dispatcher = dispatcher or "alltoall"
    syncs = capacity_factor is None and dispatcher in ("alltoall", "deepep")
    return {"moe_sync_s": MOE_DROPLESS_SYNC_S if syncs else 0.0, "moe_a2a_hidden": a2a_overlap,
            "moe_node_dedup": dispatcher in ("deepep", "hybridep")}


def _active_note(request: SearchRequest) -> str:
    """For a mixture-of-experts model: which Ψ the MFU counts (the active parameters, core.model.experts)."""
    model = request.model
    if model_expert_params(model) is None:
        return ""
    return (f", Ψ the active parameters ({format_count(active_params(model))} of {format_count(model.params)}: "
            "the top-k routed experts of each MoE layer, not all of them)")


def model_notes(inputs: PlanInputs, request: SearchRequest) -> list[str]:
    """What the step-time model assumes, with this run's numbers."""
    machine, cluster = request.machine, request.cluster
    overlap_rule = comm_overlap(inputs.search.comm_overlap)
    default_efficiency = " (fitted default; --efficiency)" if inputs.search.efficiency is None else ""
    notes = [
        f"compute: each GEMM (per-layer shapes after the tp/cp splits, micro-batch × sequence tokens) at "
        f"{machine.efficiency:.0%} of {cluster.gpu.name}'s dense bf16 peak "
        f"({cluster.gpu.bf16_flops / 1e12:.0f} TFLOP/s){default_efficiency} for large weights"
        f"{f' plus {machine.gemm_overhead_s * 1e6:.0f} µs' if machine.gemm_overhead_s else ''}, "
        f"slowed by 1 + K0·(1/inner + 1/outer)/2 for an inner × outer weight (K0 = {gemm_k0(machine):.0f}: "
        f"the GPU's FLOP/byte ridge × {machine.gemm_epilogue_bytes / 2:.2g}, fitted); flash attention at "
        f"{machine.flash_efficiency:.0%} of peak ({inputs.search.attention_kernel or overlap_rule.attention_kernel} "
        "kernel; --attention-kernel), without flash as batched GEMMs plus the score matrix's traffic; element-wise "
        "work at HBM bandwidth; recompute re-runs the forward (full) or the attention core (selective)",
        "MFU = 6Ψ × tokens / (step time × peak × GPUs)" + _active_note(request),
        "communication: NCCL-like ring collectives: NVLink inside a node, the per-GPU NIC across nodes, hop "
        "latencies once per phase and a launch per bucket; TP: 4 AllReduces of s·b·h per layer and micro-batch "
        "(6 with full recompute), not overlapped; PP: one activation and one gradient per boundary and "
        "micro-batch (1/t each with tp > 1)",
        f"overlap (every ZeRO stage; {comm_overlap(inputs.search.comm_overlap).name} framework rule, "
        f"--comm-overlap): gradient reductions hide behind backward, parameter gathers behind forward, "
        f"up to {machine.dp_overlap:.0%} of that compute; with pp > 1 reductions wait for the pipeline flush"
        f"{'; TP collectives inside a node hide behind the GEMMs' if machine.tp_hidden else ''}"
        f"{ASYNC_TP_NOTE if machine.tp_async else ''}"
        f"{COMPILE_NOTE if machine.elementwise_fused else ''}"
        f"{EAGER_BLOCK_NOTES.get(eager_block_of(FlopModel.from_model(request.model), machine) or '', '')}"
        f"{'; interleaved pipeline transfers hide behind compute' if machine.pp_hidden else ''}"
        f"{CP_TORCH_NOTE if machine.cp_ring == 'torch' and max(request.space.cp) > 1 else ''}",
        f"offload: PCIe {format_rate(cluster.pcie_bandwidth_bytes_per_s)} per GPU, CPU Adam "
        f"{format_count(int(machine.cpu_adam_params_per_s))} parameters/s per node"
        f"{' (an estimate; --cpu-adam-rate)' if inputs.search.cpu_adam_rate is None else ''}",
        "pipeline: 1F1B, bubble (p-1)/(v·m) of the step, uneven stages priced by the busiest; DeepSpeed's pipeline "
        "engine runs ZeRO stages 0-1 only (--fsdp-with-pp adds ZeRO-2/3 with pp, as torchtitan and Llama 3 run)",
        f"ranking: step times within {request.tie_tolerance:.0%} of the fastest are ties (the model's resolution)"
        f"{' (default; --tie-tolerance)' if inputs.search.tie_tolerance is None else ''}; "
        "a tie goes to the simpler plan: "
        "no offload, less model parallelism, a lower ZeRO stage, less recompute",
    ]
    if request.space.ep != (1,) or request.space.etp:
        notes.append(
            "experts (--ep/--etp): Megatron-Core's folding over the same GPUs (experts etp × ep × edp per stage); "
            "routed experts' states sharded over edp, dense ones over dp; per MoE layer and micro-batch 4 all-to-alls "
            "(dispatch and combine, forward and backward; 6 with full recompute) of T/tp × top-k × hidden 16-bit "
            "elements over the EP group, balanced routing, "
            + ("hidden behind another micro-batch's compute up to the stage's (--moe-a2a-overlap: Megatron-Core's "
               "overlap_moe_expert_parallel_comm, DualPipe)" if machine.moe_a2a_hidden
               else "exposed (--moe-a2a-overlap hides it)")
            + "; expert GEMMs: one grouped GEMM per matrix; MFU counts active parameters (6 × active Ψ)")
    if model_expert_params(request.model) is not None:
        notes.append(
            f"MoE host sync: {machine.moe_sync_s * 1e3:.1f} ms per MoE layer and micro-batch"
            + (" (dropless routing through the alltoall or DeepEP dispatcher: the host waits for the token counts; "
               "measured from Megatron-Bridge's paired token-drop/dropless B200 runs; --capacity-factor or "
               "--moe-dispatcher hybridep avoid it)" if machine.moe_sync_s else
               " (a capacity factor or the HybridEP dispatcher: no host sync)"))
    if request.per_param.precision == "fp32":
        notes.append("fp32 training is priced at the bf16 peak: an optimistic step time")
    if machine.fp8_flops:
        gathered = request.per_param.gather_bytes < request.per_param.params
        notes.append(
            f"fp8 ({machine.fp8_recipe}): the linear layers' GEMMs (QKV, output projection, MLP) at "
            f"{machine.efficiency:.0%} of {cluster.gpu.name}'s dense FP8 peak ({machine.fp8_flops / 1e12:.0f} TFLOP/s, "
            "the bf16 share: no FP8 run was fitted), each operand cast at HBM bandwidth; attention core, embeddings "
            "and the LM head in bf16; model states as mixed precision (bf16 weights and gradients, fp32 master and "
            "Adam), activations counted in bf16 (an upper bound: FP8 recipes keep some linear inputs in FP8)"
            + ("; ZeRO-3/FSDP gathers the weights in FP8 (torchao enable_fsdp_float8_all_gather)" if gathered else "")
            + "; MFU against the bf16 peak")
    return notes
