"""Which option to export, with which batch and bucket sizes: the planner's recommendation, or the option
the user fixed with --stage/--offload-* (or a plan file's zero: section)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from zeroplan.deepspeed import planning
from zeroplan.deepspeed.batch import Batch, consistent
from zeroplan.deepspeed.buckets import BUDGET_SHARE, Buckets, largest_bucket_within, round_down, FIXED_PARTS
from zeroplan.deepspeed.context import CheckContext
from zeroplan.deepspeed.keys import DEEPSPEED_DEFAULTS
from zeroplan.core.evaluate.estimate import OptionEstimate, evaluate_options
from zeroplan.core.errors import InputError, RunFailed, ref
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.precision import check_precision_on_gpu
from zeroplan.planning.estimate_plan import build_plan

PRECISIONS = ("bf16", "fp16", "fp32")


class ExportError(RunFailed):
    """Nothing to export: no option fits (exit status 1, like a failed check)."""


@dataclass(frozen=True)
class Choice:
    context: CheckContext
    estimate: OptionEstimate
    batch: Batch
    precision: str  # bf16, fp16 or fp32
    buckets: Buckets
    persistence_threshold: int
    hidden: int | None
    world: int
    tp: int
    pp: int
    ep: int = 1
    etp: int | None = None

    @property
    def element_bytes(self) -> int:
        return 4 if self.precision == "fp32" else 2


def _bucket_sizes(hidden: int | None) -> tuple[int, int, int]:
    """(reduce/all-gather, prefetch, persistence threshold): Hugging Face's rule when the hidden size is
    known (h², 0.9·h², 10·h), DeepSpeed's defaults otherwise."""
    if hidden is None:
        return (DEEPSPEED_DEFAULTS["reduce_bucket_size"], DEEPSPEED_DEFAULTS["stage3_prefetch_bucket_size"],
                DEEPSPEED_DEFAULTS["stage3_param_persistence_threshold"])
    return hidden * hidden, 9 * hidden * hidden // 10, 10 * hidden


def _fit_buckets(request, estimate: OptionEstimate, reduce: int, prefetch: int, element_bytes: int) -> Buckets:
    """overlap_comm where its 4.5× copies fit both the bucket share of the GPU and the plan (at stages 1-2
    the planner counts them too); smaller buckets where even without it they crowd the GPU."""
    stage, live = estimate.option.stage, DEEPSPEED_DEFAULTS["stage3_max_live_parameters"]
    shard, layer = request.shard_params, request.shard_largest_layer_params  # the estimate's own figures
    share = int(request.budget.usable_gpu_bytes * BUDGET_SHARE)
    allgather = reduce if stage in (1, 2) else DEEPSPEED_DEFAULTS["allgather_bucket_size"]
    for overlap in ((True, False) if stage > 0 else (False,)):
        candidate = Buckets(stage, reduce, allgather, prefetch, live, overlap)
        if candidate.total(element_bytes, shard, layer) > share:
            continue
        if overlap and stage in (1, 2):
            trial = dataclasses.replace(request, options=(estimate.option,),
                                        buffers=dataclasses.replace(request.buffers, overlap_comm=True))
            if not evaluate_options(trial)[0].fits:
                continue
        return candidate
    fixed = sum(v for k, v in candidate.footprint(element_bytes, shard, layer).items() if k in FIXED_PARTS)
    smaller = max(1, round_down(largest_bucket_within(share, stage, False, element_bytes, fixed)))
    return Buckets(stage, smaller, smaller if stage in (1, 2) else allgather, prefetch, live, False)


def choose(context: CheckContext, *, stage: int | None = None, offload_optimizer: str | None = None,
           offload_params: str | None = None, force: bool = False) -> Choice:
    # bf16 by default, fp16 on GPUs without bf16 (V100): an fp16 config needs DeepSpeed's loss scaling.
    gpu = planning.gpu_spec(context)
    check_precision_on_gpu(context.precision, gpu.name, gpu.supports_bf16)
    precision = (context.precision or ("bf16" if gpu.supports_bf16 else "fp16")).strip().lower()
    if precision not in PRECISIONS:
        raise InputError("precision", f"unknown precision '{context.precision}'", "use bf16, fp16 or fp32")
    world, tp, pp, ep = context.gpus or 1, context.tp or 1, context.pp or 1, context.ep or 1
    # DeepSpeed's AutoEP keeps experts whole (expert_tensor_parallel_size 1 is all it supports)
    etp = context.etp or (1 if ep > 1 else None)
    if ep > 1 and etp != 1:
        raise InputError("etp", f"DeepSpeed's AutoEP supports expert_tensor_parallel_size 1 only, asked {etp}",
                         f"use {ref('etp', 1)} (plan Megatron-Core layouts with `zeroplan plan --etp`)")
    dims = ParallelDims(world=world, tp=tp, pp=pp, ep=ep, etp=tp if etp is None else etp)  # validates divisibility
    batch = consistent(dims.dp, context.micro_batch, context.grad_accum, context.global_batch)
    hidden = planning.hidden_size(context)
    reduce, prefetch, persistence = _bucket_sizes(hidden)
    live = DEEPSPEED_DEFAULTS["stage3_max_live_parameters"]
    plan = build_plan(planning.estimate_inputs(
        context, world=world, tp=tp, pp=pp, precision="fp32" if precision == "fp32" else "mixed",
        optimizer=context.optimizer or "adam", stage=stage, offload_optimizer=offload_optimizer,
        offload_params=offload_params, micro_batch=batch.micro_batch, grad_accum=batch.accumulation,
        buffers=planning.planner_buffers(reduce, reduce, prefetch, live, None), ep=ep, etp=etp if ep > 1 else None))
    request, estimates, recommendation = plan.request, plan.estimates, plan.recommendation
    estimate = recommendation.option
    if estimate is None:
        if not force:
            raise ExportError(f"nothing to export: {recommendation.reason} (--force writes the closest option "
                              "anyway)")
        estimate = min(estimates, key=lambda e: (e.gpu_bytes["total"], e.option.tier_rank))
    buckets = _fit_buckets(request, estimate, reduce, prefetch, 4 if precision == "fp32" else 2)
    return Choice(context, estimate, batch, precision, buckets, persistence, hidden, world, tp, pp, ep, etp)
