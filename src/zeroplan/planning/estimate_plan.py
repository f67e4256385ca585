"""From what the user typed to an evaluated plan: resolve presets and flags, record every default.

This is the one place that knows which values were given and which were assumed, so every report
can list its assumptions. The math itself lives in zeroplan.core.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from zeroplan.core.memory.activations import ActivationConfig
from zeroplan.core.timing.dp_traffic import validate_zeropp
from zeroplan.core.errors import InputError, ref
from zeroplan.core.evaluate.estimate import EstimateRequest, OptionEstimate, evaluate_options, model_largest_layer_params
from zeroplan.core.options import options_for
from zeroplan.core.parallel.rules import (check_model_layout, check_whole_nodes, cross_node_ep_warning,
                                          cross_node_tp_warning)
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.precision import bytes_per_param, check_fp8, check_precision_on_gpu, is_fp8
from zeroplan.core.evaluate.recommend import Recommendation, recommend
from zeroplan.core.units import format_bytes
from zeroplan.inputs.estimate_inputs import EstimateInputs
from zeroplan.inputs.hardware import budget_assumptions, resolve_budget, resolve_cluster
from zeroplan.inputs.training import (
    finetune_assumption, grad_accum_steps, resolve_activations, resolve_buffers, resolve_finetune, resolve_model,
)


@dataclass
class Plan:
    inputs: EstimateInputs
    request: EstimateRequest
    estimates: list[OptionEstimate]
    recommendation: Recommendation
    assumptions: list[str] = field(default_factory=list)


def _largest_layer(inputs: EstimateInputs, model, assumptions: list[str]) -> int:
    if inputs.model.largest_layer_params is not None:
        largest = inputs.model.largest_layer_params
        if largest > model.params:
            raise InputError("largest_layer_params", f"{largest} is more than the model's {model.params} parameters",
                             "give the parameters of the single largest module")
        return largest
    largest, note = model_largest_layer_params(model)
    if note:
        assumptions.append(note)
    return largest


def _check_combinations(inputs: EstimateInputs, parallel: ParallelDims, zeropp: frozenset[str]) -> None:
    validate_zeropp(zeropp, inputs.parallel.stage)
    if zeropp and inputs.convention.convention == "deepspeed":
        raise InputError("zeropp", "DeepSpeed's estimators do not model ZeRO++", f"use {ref('convention', 'paper')}")
    if inputs.units not in ("iec", "si"):
        raise InputError("units", f"unknown units '{inputs.units}'", "use iec (GiB) or si (GB)")
    if parallel.pp > 1 and inputs.parallel.stage is not None and inputs.parallel.stage >= 2:
        raise InputError("stage", f"DeepSpeed's pipeline engine supports ZeRO stages 0-1 only, "
                         f"asked {inputs.parallel.stage} "
                         f"with pp({parallel.pp})", f"use {ref('stage', 1)}, or {ref('pp', 1)}")
    if zeropp and parallel.pp > 1:
        raise InputError("zeropp", f"ZeRO++ is a stage-3 feature and pp({parallel.pp}) allows stages 0-1 only",
                         f"drop {ref('zeropp')} or {ref('pp')}")
    if inputs.convention.framework is not None and inputs.convention.convention != "framework":
        raise InputError("framework",
                         f"applies to {ref('convention', 'framework')}, not {inputs.convention.convention}",
                         f"add {ref('convention', 'framework')}, or drop {ref('framework')}")
    if inputs.convention.convention == "deepspeed" and (inputs.step.precision not in ("mixed", "bf16", "fp16")
                                             or inputs.step.optimizer not in ("adam", "adamw")):
        raise InputError("convention", "DeepSpeed's estimators assume mixed precision with Adam, asked "
                         f"{inputs.step.precision} + {inputs.step.optimizer}",
                         f"use {ref('convention', 'paper')} for other setups")
    factor = inputs.convention.buffer_factor
    if not math.isfinite(factor) or factor <= 0 or factor > 1e3:
        raise InputError("buffer_factor", f"must be a finite positive factor, got {inputs.convention.buffer_factor}",
                         "DeepSpeed's default is 1.5")


def _activation_notes(request: EstimateRequest, activations: ActivationConfig | None, units: str) -> list[str]:
    budget = request.budget
    if activations is None:
        return [f"activations not counted (only a parameter count is known): a reserve of "
                f"{float(budget.activation_reserve):.0%} of usable memory ({format_bytes(budget.activation_reserve_bytes, units)})"
                " is kept for them (--activation-reserve; give --model for the real figure)"]
    from zeroplan.core.memory.activations import applied_implementation

    implementation, why = applied_implementation(request.model, activations)
    bits = f"{8 * activations.dtype_bytes}-bit"
    step = (f"seq {activations.seq_len} × micro-batch {activations.micro_batch}, recompute {activations.recompute}"
            f"{', sequence parallel' if activations.sequence_parallel else ''}, {bits}")
    if implementation == "transformers":
        attention = "sdpa attention" if activations.flash_attention else "eager attention (--no-flash-attention)"
        from zeroplan.core.memory.activations_gated_families import routing_note

        from zeroplan.core.memory.activations_moe_families import routing_note as moe_routing_note

        family = request.model.shape.family if request.model.shape else None
        routing = routing_note(family) or moe_routing_note(family)
        return [f"activations: transformers implementation (--activations transformers) of {request.model.reported('family')}, "
                f"{attention}, {step}; the peak moment at the start of backward: every layer's saved tensors, final "
                "norm, fp32 log-softmax and the loss gradient's fp32 temporaries" + (f"; {routing}" if routing else "")]
    flash = "flash attention (no s×s scores stored)" if activations.flash_attention else "no flash attention"
    note = f"; {why}" if why else ""
    notes = [f"activations: megatron implementation (Korthikanti et al. 2022 per layer), {step}, {flash}; the first "
             f"pipeline stage holds pp micro-batches in flight (1F1B){note}"]
    if activations.ep > 1 and request.model.shape is not None and request.model.shape.experts:
        from zeroplan.core.memory.activations import moe_excess_share

        share = float(moe_excess_share(activations))
        how = ("dropless routing with a stated allowance (--capacity-factor caps it)" if activations.capacity_factor
               is None else f"capacity factor {activations.capacity_factor:g}: every expert capped at that multiple "
               "of its even share, tokens beyond it dropped")
        notes.append(f"MoE activations: the most loaded EP rank receives {share:.0%} more routed token copies than "
                     f"the average ({how}): activations/moe_imbalance")
    return notes


def _buffer_notes(inputs: EstimateInputs) -> list[str]:
    if inputs.convention.convention == "framework":
        framework = inputs.convention.framework or "deepspeed"
        return [f"framework convention ({framework}): model states of the most loaded rank as "
                f"{'DeepSpeed' if framework == 'deepspeed' else 'DDP, ZeroRedundancyOptimizer and FSDP2'} "
                "partition the model's real tensors (checked against real runs by zeroplan validate); "
                "buffers as in the paper convention; the fewest-GPUs search uses the paper convention"]
    if inputs.convention.convention == "deepspeed":
        return [f"deepspeed convention: DeepSpeed's estimator formulas "
                f"(buffer factor {inputs.convention.buffer_factor:g}, "
                f"zero_init={int(inputs.convention.zero_init)}); they count model states and the largest layer only"]
    return ["buffers: DeepSpeed's reduce/allgather buckets (5e8 elements by default, 4.5× with overlap_comm at "
            "stages 1-2), stage 3's largest layer gathered whole (parameters and gradients) with prefetch (5e7) "
            "up to max_live_parameters (1e9), the fp32 "
            "gradient partition the optimizer steps on, NVMe swap buffers (sub_group_size 1e9); each capped at the "
            "model shard; override with --reduce-bucket-size etc."]


def expert_groups_note(parallel: ParallelDims) -> str:
    return (f"experts: Megatron-Core's folding, {parallel.describe()}; routed experts split over ep × etp "
            f"({parallel.ep * parallel.etp} ranks) with their ZeRO states sharded over edp({parallel.edp}), the "
            f"router, attention, norms and embeddings split over tp and sharded over dp({parallel.dp}) "
            "(gpu/<component>/dense and /experts in the breakdown)")


def build_request(inputs: EstimateInputs, assumptions: list[str]) -> tuple[EstimateRequest, ActivationConfig | None]:
    """Everything resolved and validated, ready for the core."""
    model = resolve_model(inputs.model)
    cluster = resolve_cluster(inputs.hardware, assumptions, inputs.units)
    given = inputs.parallel
    parallel = ParallelDims(world=inputs.hardware.gpus, tp=given.tp, pp=given.pp, gpus_per_node=cluster.gpus_per_node,
                            ep=given.ep, etp=given.tp if given.etp is None else given.etp)
    zeropp = frozenset(f.strip().lower() for f in (inputs.parallel.zeropp or "").split(",") if f.strip())
    _check_combinations(inputs, parallel, zeropp)
    options = options_for(inputs.convention.convention, given.stage, given.offload_optimizer, given.offload_params)
    if parallel.pp > 1:
        options = tuple(option for option in options if option.stage <= 1)
        if not options:
            raise InputError("pp", f"pp({parallel.pp}) allows ZeRO stages 0-1 only, and the options asked for "
                             "need stage 3", f"drop {ref('pp')}, or the stage-3 offload flags")
        assumptions.append(f"pipeline pp({parallel.pp}): only ZeRO stages 0-1 (DeepSpeed's pipeline engine "
                           "supports no higher stage)")
    check_whole_nodes(parallel)
    if inputs.step.capacity_factor is not None and (model.shape is None or not model.shape.experts):
        raise InputError("capacity_factor", f"caps the tokens of each expert, and {model.name} has no experts",
                         f"drop {ref('capacity_factor')}, or use a mixture-of-experts model")
    check_precision_on_gpu(inputs.step.precision, cluster.gpu.name, cluster.gpu.supports_bf16)
    check_fp8(inputs.step.precision, inputs.step.fp8_recipe, cluster.gpu.name, cluster.gpu.fp8_flops,
              cluster.gpu.supports_mxfp8)
    largest = _largest_layer(inputs, model, assumptions)
    cp = given.cp
    if isinstance(cp, bool) or not isinstance(cp, int) or cp < 1:
        raise InputError("cp", f"must be a positive whole number, got {cp!r}")
    if cp > 1 and parallel.dp % cp:
        raise InputError("cp", f"cp({cp}) does not divide the {parallel.dp} ranks left by tp({parallel.tp}) × "
                         f"pp({parallel.pp}) on {parallel.world} GPUs (they are dp × cp)",
                         f"use a cp that divides them, or change {ref('gpus')}")
    if cp > 1 and inputs.convention.convention != "paper":
        raise InputError("cp", f"the {inputs.convention.convention} convention models no context parallelism",
                         f"use {ref('convention', 'paper')} with {ref('cp')}")
    activations = resolve_activations(inputs.step, model, parallel, assumptions, cp)
    check_model_layout(model, parallel, seq_len=activations.seq_len if activations else None,
                       sequence_parallel=activations.sequence_parallel if activations else False)
    if (warning := cross_node_tp_warning(parallel)) is not None:
        assumptions.insert(0, warning)
    if (warning := cross_node_ep_warning(parallel)) is not None:
        assumptions.insert(0, warning)
    if parallel.has_experts_grid:
        assumptions.append(expert_groups_note(parallel))
    if activations is not None and activations.num_micro_batches is not None:  # resolve_activations sets it
        micro_batches = activations.num_micro_batches
    else:
        if inputs.step.micro_batch is not None and inputs.step.micro_batch < 1:
            raise InputError("micro_batch", f"must be at least 1, got {inputs.step.micro_batch}")
        if inputs.step.global_batch is not None and inputs.step.micro_batch is None:
            assumptions.append("micro-batch 1 sequence per GPU (the default; --micro-batch)")
        micro_batches = grad_accum_steps(inputs.step, parallel, inputs.step.micro_batch or 1, assumptions, cp)
    if inputs.step.max_micro_batch and activations is None:
        raise InputError("max_micro_batch", "needs the model's shape to size activations",
                         f"use {ref('model')} with a preset or a config.json")
    step, convention = inputs.step, inputs.convention
    request = EstimateRequest(
        model=model, cluster=cluster, parallel=parallel, per_param=bytes_per_param(step.precision, step.optimizer),
        budget=resolve_budget(inputs.budget, cluster, assumptions), options=options, convention=convention.convention,
        largest_layer_params=largest, zero_init=convention.zero_init, buffer_factor=convention.buffer_factor,
        zeropp=zeropp, hpz_partition_size=given.hpz_partition_size, dp_shard=given.dp_shard,
        buffers=resolve_buffers(inputs.buffers),
        activations=activations, micro_batches_per_step=micro_batches, global_batch=step.global_batch,
        max_micro_batch=step.max_micro_batch,
        calibrated_links=_calibrated_links(inputs, assumptions), framework=inputs.convention.framework or "deepspeed",
        parameters=_parameters(inputs, model), cp=cp,
        finetune=resolve_finetune(step, "full" if step.finetune == "auto" else None),
    )
    return request, activations


def _parameters(inputs: EstimateInputs, model) -> tuple:
    """The model's parameter tensors, which only the framework convention partitions."""
    if inputs.convention.convention != "framework":
        return ()
    if model.extra.get("parameter_shapes"):  # counted on the meta device: its tensors as transformers built them
        from zeroplan.core.memory.framework_partition import params_from_shapes

        return tuple(params_from_shapes(model.extra["parameter_shapes"]))
    config = model.extra.get("hf_config")
    if config is None:
        raise InputError("convention", f"the framework convention needs the tensors of '{model.name}'",
                         f"use {ref('model')} with a config.json or a preset of a supported family")
    from zeroplan.core.model.families import architecture_from_hf_config
    from zeroplan.core.memory.framework_partition import params_from_architecture

    return tuple(params_from_architecture(architecture_from_hf_config(config, model.name)))


def _calibrated_links(inputs: EstimateInputs, assumptions: list[str]) -> tuple:
    if inputs.hardware.calibration is None:
        return ()
    from zeroplan.inputs.links import measured_links

    calibration, measured = measured_links(inputs.hardware.calibration, ("all_gather", "reduce_scatter"))
    links = list(measured.items())
    if not links:
        raise InputError("calibration",
                         f"{inputs.hardware.calibration} has no usable all_gather or reduce_scatter fit",
                         "rerun zeroplan bench with those collectives")
    measured = ", ".join(f"{kind} {span.replace('_', '-')} {link.bandwidth_bytes_per_s / 1e9:.1f} GB/s"
                         for (kind, span), link in links)
    assumptions.append(f"communication priced with calibration {inputs.hardware.calibration} ({calibration.backend}, "
                       f"{calibration.world_size} ranks on {calibration.device}, {calibration.created}): {measured}; "
                       "preset links for anything not measured")
    return tuple(links)


def _recompute_hint(inputs: EstimateInputs, request: EstimateRequest, activations: ActivationConfig | None) -> str:
    """When nothing fits with the chosen recompute mode, the cheapest mode that would make something fit."""
    if activations is None or activations.recompute == "full":
        return ""
    modes = ("selective", "full") if activations.recompute == "none" else ("full",)
    for mode in modes:
        trial = dataclasses.replace(request, activations=dataclasses.replace(activations, recompute=mode))
        fitting = [e for e in evaluate_options(trial) if e.fits]
        if fitting:
            best = recommend(trial, fitting, inputs.units).option
            if best is not None:  # something fits, so recommend chose it
                return (f"; with --recompute {mode}, {best.option.label} fits "
                        f"({format_bytes(best.gpu_bytes['total'], inputs.units)} per GPU)")
    return ""


def _auto_finetune(inputs: EstimateInputs, request: EstimateRequest) -> tuple[EstimateRequest, list[OptionEstimate],
                                                                            Recommendation]:
    """--finetune auto: full, then lora, then qlora (the least the model changes first): the first mode with an
    option that fits, and the reason says which modes were passed over and why."""
    passed: list[str] = []
    for mode in ("full", "lora", "qlora"):
        trial = dataclasses.replace(request, finetune=resolve_finetune(inputs.step, mode))
        estimates = evaluate_options(trial)
        recommendation = recommend(trial, estimates, inputs.units)
        chosen = recommendation.option
        if (chosen is not None and chosen.host_checked) or mode == "qlora":
            if recommendation.option is None:
                head = f"--finetune auto: no mode fits ({'; '.join(passed)}; qlora: nothing fits either)"
            else:
                head = (f"--finetune auto chose {mode}" + (f" ({'; '.join(passed)})" if passed else
                                                           " (every parameter trains)"))
            return trial, estimates, dataclasses.replace(recommendation, reason=f"{head}; {recommendation.reason}")
        if chosen is not None:
            passed.append(f"{mode} fits only with offload to a host of unknown capacity ({chosen.option.label})")
            continue
        least = min(e.gpu_bytes["total"] for e in estimates)
        passed.append(f"{mode} does not fit: at least {format_bytes(least, inputs.units)} per GPU")
    raise AssertionError("unreachable")


def build_plan(inputs: EstimateInputs) -> Plan:
    assumptions: list[str] = []
    request, activations = build_request(inputs, assumptions)
    if inputs.step.finetune == "auto":
        request, estimates, recommendation = _auto_finetune(inputs, request)
    else:
        estimates = evaluate_options(request)
        recommendation = recommend(request, estimates, inputs.units)
    if (note := finetune_assumption(request.finetune, inputs.step)) is not None:
        assumptions.append(note)
    if recommendation.option is None:
        hint = _recompute_hint(inputs, request, activations)
        if hint:
            recommendation = dataclasses.replace(recommendation, reason=recommendation.reason + hint)

    per_param, parallel = request.per_param, request.parallel
    assumptions.extend(request.model.extra.get("notes", ()))  # what the model's count leaves out, and how it was made
    assumptions.extend(budget_assumptions(inputs.budget, request.budget, inputs.units))
    assumptions.extend(_activation_notes(request, activations, inputs.units))
    assumptions.extend(_buffer_notes(inputs))
    if parallel.pp > 1 and request.model.layout is None:
        assumptions.append(f"pipeline: parameters split evenly over {parallel.pp} stages (only the count is known)")
    if inputs.convention.convention == "framework" and request.framework == "torch":
        assumptions.append(f"precision as torch keeps it for {per_param.precision} + {per_param.optimizer}: fp32 weights"
                           " and gradients (4 + 4 bytes), fp32 optimizer states, Adam's 4-byte step per tensor; the"
                           " compute-dtype copies (autocast, FSDP2's unsharded parameters) are not counted")
    else:
        assumptions.append(f"precision {per_param.precision} + {per_param.optimizer}: {per_param.params} + "
                           f"{per_param.gradients} + {per_param.optimizer_states} = {per_param.total} bytes per "
                           "parameter")
    count = request.micro_batches_per_step
    batch = (f"{count} micro-batch{'es' if count > 1 else ''} of the given size per optimizer step"
             + ("; --max-micro-batch does not reprice it" if request.max_micro_batch else ""))
    assumptions.append(f"communication: ring collectives over the data-parallel group, priced on the slowest link it "
                       f"crosses; {batch}; TP/PP traffic not counted here (zeroplan plan prices it)")
    if request.zeropp:
        assumptions.append(f"ZeRO++ {', '.join(sorted(request.zeropp))} on the stage-3 rows (arXiv 2306.10209): qwZ "
                           "gathers int8 weights in forward, hpZ keeps a 16-bit secondary partition over groups of "
                           f"{request.hpz_ranks} ranks ({request.hpz_span.replace('_', '-')}; --hpz-partition-size, "
                           "default GPUs per node) so the backward gather stays there, qgZ reduces int4 gradients; "
                           "quantisation scales not counted")
    if is_fp8(inputs.step.precision):
        assumptions.append(f"fp8 ({inputs.step.fp8_recipe or 'tensorwise'}): the model states are mixed precision's "
                           "(bf16 weights and gradients, fp32 master weights and optimizer states; FP8 copies of a "
                           "weight are cast per use and their scales are negligible), activations counted in bf16 "
                           "(an upper bound: FP8 recipes keep some linear inputs in FP8); zeroplan plan prices the "
                           "FP8 GEMMs")
    if request.dp_shard:
        replicas = request.parallel.dp // request.dp_shard
        assumptions.append(f"hybrid sharding (--dp-shard {request.dp_shard}; FSDP2 HSDP, ZeRO++ hpZ/MiCS): ZeRO-1/2/3 "
                           f"partition over groups of {request.dp_shard} of the {request.parallel.dp} data-parallel "
                           f"ranks ({request.dp_span.replace('_', '-')}), replicated {replicas}×; each gradient "
                           "reduction adds an AllReduce of the group's gradient partition across the replicas "
                           "(inter-node)")
    if any(not e.host_checked for e in estimates):
        assumptions.append("host capacity unknown: offload rows are not checked against CPU RAM/NVMe")
    return Plan(inputs, request, estimates, recommendation, assumptions)
