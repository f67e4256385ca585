"""Exhaustive plan search: every layout, ZeRO option, step shape and recompute mode, with its exact
per-GPU memory (core.plan_memory) and its step time (core.step_time).

Nothing is pruned: every combination that passes the structural checks (core.plan_space) is
evaluated, and every one that does not is counted under its reason, so the report can say why the
rest of the space is infeasible. The work per layout is shared: model states once per option, the
one-sequence activation terms once per step shape, DP time once per (option, accumulation).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from zeroplan.core.buffers import BufferConfig
from zeroplan.core.estimate import EstimateRequest
from zeroplan.core.fit import MemoryBudget
from zeroplan.core.hardware import ClusterSpec
from zeroplan.core.model import ModelSpec
from zeroplan.core.options import Option
from zeroplan.core.parallel import ParallelDims
from zeroplan.core.layout_memory import ActivationTable, FixedMemory, fixed_memory
from zeroplan.core.layout_space import (PIPELINE_STAGE, PIPELINE_STAGES, SearchSpace, interleave_problem, layout_problem,
                                      layouts, micro_batch_choices)
from zeroplan.core.precision import BytesPerParam
from zeroplan.core.traffic import gpu_optimizer_seconds, offload_seconds, zero_dp_seconds, offload_traffic
from zeroplan.core.step_time import FlopModel, Layout, Machine, StepTime, compose, microbatch_seconds, pp_intra_node
from zeroplan.core.units import ceil_div

RECOMPUTE_ORDER = {"none": 0, "selective": 1, "full": 2}
# Step times closer than this (relative to the fastest) are within the model's resolution: it ignores
# kernel-shape effects, launch overheads and imperfect overlap. Such ties go to the simpler plan.
DEFAULT_TIE_TOLERANCE = 0.02


@dataclass(frozen=True)
class SearchRequest:
    model: ModelSpec
    cluster: ClusterSpec
    per_param: BytesPerParam
    budget: MemoryBudget
    space: SearchSpace
    machine: Machine
    largest_layer_params: int
    buffers: BufferConfig = field(default_factory=BufferConfig)
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE


@dataclass(frozen=True)
class PlanRecord:
    """One evaluated plan."""

    dp: int
    tp: int
    pp: int
    virtual_stages: int
    option: Option
    micro_batch: int
    grad_accum: int
    recompute: str
    sequence_parallel: bool
    gpu: tuple[int, int, int, int, int]  # params, gradients, optimizer states, activations, buffers
    cpu_bytes_per_node: int
    nvme_bytes_per_node: int
    limits: tuple[str, ...]  # "gpu", "cpu", "nvme": what does not fit
    host_checked: bool
    time: StepTime
    cp: int = 1  # context parallelism: dp × tp × pp × cp GPUs

    @property
    def gpu_total(self) -> int:
        return sum(self.gpu)

    @property
    def fits(self) -> bool:
        return not self.limits

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def layout_key(self) -> tuple:
        """What tells plans apart in a top list: the grid and the ZeRO stage (not the step's details)."""
        return (self.dp, self.tp, self.pp, self.cp, self.option.stage)

    def simplicity_key(self) -> tuple:
        """Fewer moving parts first: no offload, less model parallelism, a lower ZeRO stage, less recompute."""
        return (self.option.tier_rank, self.tp * self.pp * self.cp, self.pp, self.option.stage,
                RECOMPUTE_ORDER[self.recompute], self.sequence_parallel, self.virtual_stages)


def rank(plans: list[PlanRecord], tolerance: float = DEFAULT_TIE_TOLERANCE) -> list[PlanRecord]:
    """Fitting plans, best first: by step time in bands of `tolerance` relative to the fastest, and within a
    band the simpler plan first, then the faster, then the one with less memory."""
    fitting = [p for p in plans if p.fits]
    if not fitting:
        return []
    fastest = min(p.time.total for p in fitting)

    def key(plan: PlanRecord) -> tuple:
        # With no tolerance the "band" is the step time itself: a plain fastest-first order.
        band = int((plan.time.total / fastest - 1) / tolerance) if tolerance > 0 else plan.time.total
        return (band, *plan.simplicity_key(), plan.time.total, plan.gpu_total, -plan.micro_batch)

    return sorted(fitting, key=key)


@dataclass
class SearchResult:
    request: SearchRequest
    plans: list[PlanRecord]  # every evaluated plan, in evaluation order
    rejected_layouts: dict[str, int]  # reason -> layouts ruled out before evaluation
    skipped: dict[str, int]  # reason -> combinations of a valid layout not evaluated
    layouts_total: int
    seconds: float
    _ranked: list[PlanRecord] | None = field(default=None, repr=False)

    @property
    def feasible(self) -> list[PlanRecord]:
        """Every fitting plan, best first (see rank)."""
        if self._ranked is None:
            self._ranked = rank(self.plans, self.request.tie_tolerance)
        return self._ranked

    def infeasible_by_limit(self) -> dict[str, int]:
        """Evaluated plans that do not fit, by the first limit they break (gpu before cpu before nvme)."""
        return dict(Counter(p.limits[0] for p in self.plans if p.limits))

    def best_per_layout(self) -> list[PlanRecord]:
        """The best-ranked plan of each distinct (dp, tp, pp, ZeRO stage), in rank order."""
        seen, best = set(), []
        for plan in self.feasible:
            if plan.layout_key not in seen:
                seen.add(plan.layout_key)
                best.append(plan)
        return best


def search(request: SearchRequest, progress: Callable[[int, int], None] | None = None) -> SearchResult:
    start = time.perf_counter()
    space, model = request.space, request.model
    flops = FlopModel.from_model(model)  # also checks the model has a shape
    options = space.options()
    plans: list[PlanRecord] = []
    rejected: Counter = Counter()
    skipped: Counter = Counter()
    candidates = [(tp, pp, cp) for tp, pp in layouts(space) for cp in space.cp if (space.gpus // (tp * pp)) % cp == 0]
    tables: dict[int, ActivationTable] = {}
    for index, (tp, pp, cp) in enumerate(candidates):
        parallel = ParallelDims(space.gpus, tp, pp, request.cluster.gpus_per_node)  # its dp: the dp·cp ZeRO group
        problem = layout_problem(model, parallel, space, cp)
        if problem:
            rejected[problem] += 1
        else:
            if cp not in tables:  # each rank holds s/cp tokens of every sequence
                tables[cp] = ActivationTable(model, space.seq_len // cp, space.flash_attention)
            _search_layout(request, parallel, flops, tables[cp], options, plans, skipped, cp)
        if progress is not None:
            progress(index + 1, len(candidates))
    return SearchResult(request, plans, dict(rejected), dict(skipped), len(candidates), time.perf_counter() - start)


def _step_shapes(space: SearchSpace, tp: int, dp: int) -> list[tuple[int, bool, str, int]]:
    # Sequence parallelism splits over tp: with tp = 1 it is the same plan as without it.
    # Sequence parallelism needs tp > 1 and the sequence divisible by tp (Megatron scatters it).
    sequence_parallel = [sp for sp in space.sequence_parallel if not sp or (tp > 1 and space.seq_len % tp == 0)] or [False]
    return [(v, sp, recompute, b) for v in space.virtual_stages for sp in sequence_parallel
            for recompute in space.recompute for b in micro_batch_choices(space, dp)]


def _search_layout(request: SearchRequest, parallel: ParallelDims, flops: FlopModel, activations: ActivationTable,
                   options: tuple[Option, ...], plans: list[PlanRecord], skipped: Counter, cp: int = 1) -> None:
    space, machine, per_param = request.space, request.machine, request.per_param
    zero_ranks, tp, pp = parallel.dp, parallel.tp, parallel.pp  # ZeRO partitions over dp·cp ranks
    dp = zero_ranks // cp
    shapes = _step_shapes(space, tp, dp)
    usable = tuple(o for o in options if pp == 1 or o.stage in PIPELINE_STAGES or space.fsdp_pipeline)
    if len(usable) < len(options):
        skipped[PIPELINE_STAGE] += (len(options) - len(usable)) * len(shapes)
    if not usable or not shapes:
        return
    estimate_request = EstimateRequest(
        model=request.model, cluster=request.cluster, parallel=parallel, per_param=per_param, budget=request.budget,
        options=usable, largest_layer_params=request.largest_layer_params, activation_bytes=0,
        buffers=request.buffers)
    fixed = fixed_memory(estimate_request)
    shard = estimate_request.shard_params
    partition = ceil_div(shard, zero_ranks)
    gpus_in_node = parallel.gpus_in_busiest_node
    usable_gpu = request.budget.usable_gpu_bytes
    placement = (parallel.tp_intra_node, parallel.dp_intra_node, pp_intra_node(parallel.world, parallel.gpus_per_node))
    optimizer = {f.option: gpu_optimizer_seconds(f.option, shard if f.option.stage == 0 else partition, per_param,
                                                 machine) for f in fixed}
    per_step: dict[tuple[Option, int], tuple] = {}
    per_rank = space.global_batch // dp
    for v, sp, recompute, b in shapes:
        m = per_rank // b
        issue = interleave_problem(flops.layers, pp, v, m)
        if issue:
            skipped[issue] += len(fixed)
            continue
        act = activations.bytes(tp, pp, v, sp, recompute, m, b)
        layout = Layout(dp, tp, pp, v, space.seq_len, b, m, recompute, sp, *placement, cp=cp,
                        flash_attention=space.flash_attention)
        micro = microbatch_seconds(layout, flops, request.model.hidden, machine)
        for f in fixed:
            gpu = f.gpu_parts(act)
            limits = (("gpu",) if sum(gpu) > usable_gpu else ()) + f.host_limits
            key = (f.option, m)
            if key not in per_step:
                per_step[key] = _per_step(request, f, shard, partition, zero_ranks, gpus_in_node,
                                          parallel.dp_intra_node, m, tp)
            dp_time, offload = per_step[key]
            step = compose(layout, micro, dp_time, offload, optimizer[f.option], f.option.stage,
                           machine.dp_overlap)
            plans.append(PlanRecord(dp, tp, pp, v, f.option, b, m, recompute, sp, gpu, f.cpu_bytes_per_node,
                                    f.nvme_bytes_per_node, limits, f.host_checked, step, cp))


def _per_step(request: SearchRequest, fixed: FixedMemory, shard: int, partition: int, dp: int, gpus_in_node: int,
              dp_intra_node: bool, micro_batches: int, tp: int = 1) -> tuple:
    option, buffers, machine = fixed.option, request.buffers, request.machine
    per_node = request.cluster.gpus_per_node
    dp_per_node = max(1, per_node // tp) if tp <= per_node else 1
    dp_time = zero_dp_seconds(option, shard, dp, request.per_param, dp_intra_node, micro_batches, buffers,
                              machine.links, dp_per_node)
    traffic = offload_traffic(option, shard, dp, request.per_param, gpus_in_node, micro_batches)
    offload = offload_seconds(traffic, partition, gpus_in_node, machine, option.offload_optimizer != "none")
    return dp_time, offload
