"""Rules that need the model and the hardware: predicted GPU, CPU and NVMe overflow (ZP011-ZP013) through
zeroplan's planner, and bucket sizes against the GPU budget (ZP014)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from zeroplan.deepspeed import planning
from zeroplan.deepspeed.buckets import BUDGET_SHARE, Buckets, largest_bucket_within, round_down, scientific, FIXED_PARTS
from zeroplan.deepspeed.config_view import ConfigView
from zeroplan.deepspeed.context import CheckContext
from zeroplan.deepspeed.keys import DEEPSPEED_DEFAULTS
from zeroplan.deepspeed.findings import ERROR, WARNING, Finding, Skipped
from zeroplan.core.errors import InputError
from zeroplan.core.evaluate.estimate import evaluate_options, model_largest_layer_params
from zeroplan.core.options import Option
from zeroplan.core.units import format_bytes, ceil_div, parse_count
from zeroplan.core.memory.deepspeed_buffers import OVERLAPPED_STAGES
from zeroplan.core.model.pipeline_stages import shard_params
from zeroplan.planning.estimate_plan import build_plan

MEMORY_RULES = ("ZP011", "ZP012", "ZP013")


def effective_option(stage: int, optimizer_tier: str, param_tier: str) -> Option:
    """The option DeepSpeed actually runs: no offload at stage 0, NVMe as CPU and no parameter offload below 3."""
    if stage == 0:
        return Option(0)
    if stage < 3:
        return Option(stage, "cpu" if optimizer_tier == "nvme" else optimizer_tier)
    return Option(3, optimizer_tier, param_tier)


def element_bytes(view: ConfigView) -> int:
    """2 under fp16/bf16 (or an unresolved "auto", which enables one of them), 4 in plain fp32."""
    fp16, bf16 = view.enabled("fp16"), view.enabled("bf16" if "bf16" in view.data else "bfloat16")
    return 4 if fp16 is False and bf16 is False else 2


def config_buckets(view: ConfigView, stage: int) -> Buckets | None:
    zero, defaults = ("zero_optimization",), DEEPSPEED_DEFAULTS
    reduce = view.count((*zero, "reduce_bucket_size"), defaults["reduce_bucket_size"])
    allgather = view.count((*zero, "allgather_bucket_size"), defaults["allgather_bucket_size"])
    prefetch_key = "prefetch_bucket_size" if "prefetch_bucket_size" in view.zero else "stage3_prefetch_bucket_size"
    prefetch = view.count((*zero, prefetch_key), defaults["stage3_prefetch_bucket_size"])
    live_key = "max_live_parameters" if "max_live_parameters" in view.zero else "stage3_max_live_parameters"
    live = view.count((*zero, live_key), defaults["stage3_max_live_parameters"])
    if reduce is None or allgather is None or prefetch is None or live is None:
        return None
    overlap = view.overlap_comm
    return Buckets(stage, reduce, allgather, prefetch, live, overlap if isinstance(overlap, bool) else stage == 3)


def _known(view: ConfigView, key: str, fallback: int | None) -> int | None:
    """A batch setting from the config when it is a number, else the flag's value."""
    value = view.count((key,), positive=True) if view.raw(key) not in (None, "auto") else None
    return value if value is not None else fallback


def _change_text(option: Option, view: ConfigView) -> str:
    changes = [f"set zero_optimization.stage to {option.stage}"]
    for block, tier in (("offload_optimizer", option.offload_optimizer), ("offload_param", option.offload_params)):
        if tier != view.device(block):
            changes.append(f"{block}.device to {tier}")
    return ", ".join(changes)


def _expert_part(estimate, request, units: str) -> str:
    """', of which routed experts X (sharded over edp N)' when experts are cut apart from the dense layers."""
    experts = sum(value for key, value in estimate.breakdown.items() if key.startswith("gpu/") and
                  key.endswith("/experts"))
    if not experts:
        return ""
    parallel = request.parallel
    return (f", of which routed experts {format_bytes(experts, units)} on ep({parallel.ep}) × etp({parallel.etp}) "
            f"with their states sharded over edp({parallel.edp})")


def memory(view: ConfigView, context: CheckContext, skipped: list[Skipped], assumptions: list[str]) -> Iterator[Finding]:
    env = view.env
    if not context.has_model:
        skipped.append(Skipped(MEMORY_RULES, "no model: give --model or --params (or a plan file)"))
        return
    if env.world is None or env.dp is None:
        if env.world is None:
            skipped.append(Skipped(MEMORY_RULES, "the world size is unknown: give --gpus"))
        return
    stage = view.stage
    if stage is None:
        return
    if env.sp > 1:
        skipped.append(Skipped(MEMORY_RULES, "sequence_parallel_size > 1 is not modelled by the planner"))
        return
    try:
        option = effective_option(stage, view.device("offload_optimizer"), view.device("offload_param"))
    except InputError as exc:
        skipped.append(Skipped(MEMORY_RULES, f"zeroplan does not model this offload combination: {exc.problem}"))
        return

    precision = "fp32" if element_bytes(view) == 4 else "mixed"
    buckets = config_buckets(view, stage) or Buckets(
        stage, DEEPSPEED_DEFAULTS["reduce_bucket_size"], DEEPSPEED_DEFAULTS["allgather_bucket_size"],
        DEEPSPEED_DEFAULTS["stage3_prefetch_bucket_size"], DEEPSPEED_DEFAULTS["stage3_max_live_parameters"], stage == 3)
    sub_group = view.count(("zero_optimization", "sub_group_size"))
    overlap = view.overlap_comm  # absent: the planner applies DeepSpeed's default per stage
    plan = build_plan(planning.estimate_inputs(
        context, world=env.world, tp=env.tp, pp=env.pp, precision=precision,
        optimizer=planning.optimizer_name(view.data, context), ep=env.ep, etp=env.etp if env.ep > 1 else None,
        micro_batch=_known(view, "train_micro_batch_size_per_gpu", env.micro_batch),
        grad_accum=_known(view, "gradient_accumulation_steps", env.grad_accum),
        buffers=planning.planner_buffers(buckets.reduce, buckets.allgather, buckets.prefetch, buckets.max_live,
                                         overlap if isinstance(overlap, bool) else None, sub_group)))
    assumptions.extend(plan.assumptions)
    request, recommendation = plan.request, plan.recommendation
    mine = evaluate_options(dataclasses.replace(request, options=(option,)))[0]
    if mine.fits and not mine.host_checked:
        skipped.append(Skipped(("ZP012", "ZP013"), "CPU RAM / NVMe capacity unknown: give --cluster, --cpu-memory "
                               "or --nvme"))
    if mine.fits:
        return
    units = context.units
    fix = _fix(recommendation, units, view)
    where = ("zero_optimization", "stage") if "stage" in view.zero else ()
    budget, cluster = request.budget, request.cluster
    if "gpu" in mine.limits:
        parts = mine.gpu_bytes
        yield Finding("ZP011", ERROR, f"{option.label} is predicted to need {format_bytes(parts['total'], units)} per "
                      f"GPU > {format_bytes(budget.usable_gpu_bytes, units)} usable on {cluster.gpu.name} "
                      f"(model states {format_bytes(mine.model_state_bytes, units)}{_expert_part(mine, request, units)}, buffers "
                      f"{format_bytes(parts['buffers'], units)}, activations {format_bytes(parts['activations'], units)})",
                      fix, where)
    # A cpu or nvme limit is only ever set against a known capacity (estimate._with_fit).
    cpu_usable = budget.usable_host_bytes(cluster.cpu_memory_bytes)
    if "cpu" in mine.limits and cpu_usable is not None:
        yield Finding("ZP012", ERROR, f"{option.label} is predicted to need {format_bytes(mine.cpu_bytes_per_node, units)}"
                      f" of CPU RAM per node > {format_bytes(cpu_usable, units)}"
                      " usable", fix, ("zero_optimization", "offload_optimizer")
                      if view.device("offload_optimizer") != "none" else where)
    if "nvme" in mine.limits and cluster.nvme_bytes is not None:
        yield Finding("ZP013", ERROR, f"{option.label} is predicted to need {format_bytes(mine.nvme_bytes_per_node, units)}"
                      f" of NVMe per node > {format_bytes(cluster.nvme_bytes, units)}", fix,
                      ("zero_optimization", "offload_optimizer"))


def _fix(recommendation, units: str, view: ConfigView) -> str:
    chosen = recommendation.option
    if chosen is None:
        return recommendation.reason
    text = f"{chosen.option.label} fits with {format_bytes(chosen.gpu_bytes['total'], units)} per GPU"
    if chosen.cpu_bytes_per_node:
        text += f" and {format_bytes(chosen.cpu_bytes_per_node, units)} CPU RAM per node"
    return f"{text}: {_change_text(chosen.option, view)}"


def _bucket_shard(context: CheckContext, tp: int, pp: int) -> tuple[int, int]:
    """(parameters on the most loaded shard, its largest layer) exactly as `zeroplan estimate` takes them."""
    model = planning.model_spec(context)
    largest = (parse_count(context.largest_layer_params, "largest_layer_params")
               if context.largest_layer_params is not None else model_largest_layer_params(model)[0])
    return shard_params(model, tp, pp), ceil_div(largest, tp)


def buckets(view: ConfigView, context: CheckContext, skipped: list[Skipped]) -> Iterator[Finding]:
    """ZP014: DeepSpeed's communication buffers (core.memory.deepspeed_buffers, the bytes ZP011 counts) against usable GPU
    memory."""
    stage = view.stage
    if stage is None or stage == 0:
        return
    usable = planning.usable_gpu_bytes(context)
    config = config_buckets(view, stage)
    if config is None:
        return  # an unresolved "auto" bucket size, noted already
    shard = layer = None
    if context.has_model and view.env.world is not None:
        shard, layer = _bucket_shard(context, view.env.tp, view.env.pp)
    size = element_bytes(view)
    parts = config.footprint(size, shard, layer)
    total = sum(parts.values())
    share = int(usable * BUDGET_SHARE)
    if total <= share:
        return
    units = context.units
    detail = ", ".join(f"{name} {format_bytes(value, units, 2)}" for name, value in parts.items())
    scaled = "reduce and all-gather buckets"
    scales = config.overlap_comm and stage in OVERLAPPED_STAGES
    overlap = f" with overlap_comm (4.5× the {scaled})" if scales else ""
    fixed = sum(v for k, v in parts.items() if k in FIXED_PARTS)
    suggestion = round_down(largest_bucket_within(share, stage, config.overlap_comm, size, fixed))
    keys = "reduce_bucket_size" + (" and allgather_bucket_size" if stage in (1, 2) else "")
    fix = f"set {keys} to {scientific(suggestion)}" if suggestion else "lower stage3_max_live_parameters"
    if scales and dataclasses.replace(config, overlap_comm=False).total(size, shard, layer) <= share:
        fix += ", or set overlap_comm to false"
    severity, limit = (ERROR, "all") if total > usable else (WARNING, "a quarter")
    key = ("zero_optimization", "reduce_bucket_size") if "reduce_bucket_size" in view.zero else ("zero_optimization",)
    yield Finding("ZP014", severity, f"communication buckets take {format_bytes(total, units)} per GPU{overlap} "
                  f"({detail}), more than {limit} of the {format_bytes(usable, units)} usable", fix, key)
