"""Exhaustive plan search: every layout, ZeRO option, step shape and recompute mode, with its exact
per-GPU memory (core.layout.batch_memory) and its step time (core.timing.step_time); the rules: docs/formulas.md §17.

Nothing is pruned: every combination that passes the structural checks (core.layout.space) is
evaluated, and every one that does not is counted under its reason, so the report can say why the
rest of the space is infeasible. The work per layout is shared: model states once per option, the
one-sequence activation terms once per step shape, DP time once per (option, accumulation).
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from zeroplan.core.memory.deepspeed_buffers import BufferConfig
from zeroplan.core.evaluate.estimate import EstimateRequest, request_offload_traffic
from zeroplan.core.memory.budget import MemoryBudget
from zeroplan.core.hardware import ClusterSpec
from zeroplan.core.memory.finetune import storage_bytes_per_param
from zeroplan.core.model.adapters import FULL, Finetune
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.options import Option
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.parallel.rules import hybrid_expert_problem
from zeroplan.core.layout.batch_memory import ActivationTable, FixedMemory, fixed_memory
from zeroplan.core.layout.space import (EP_RANKS, EP_WITHOUT_SP, PIPELINE_STAGE, PIPELINE_STAGES, SearchSpace, expert_layouts,
                                        interleave_problem, layout_problem, layouts, micro_batch_choices)
from zeroplan.core.precision import BytesPerParam
from zeroplan.core.timing.dp_offload import (DpSeconds, gpu_optimizer_seconds, hybrid_dp_seconds, offload_seconds,
                                            zero_dp_seconds)
from zeroplan.core.model.pipeline_stages import layers_per_stage
from zeroplan.core.timing.step_time import (FlopModel, Layout, Machine, StepTime, ep_alltoall_layer_seconds,
                                            exposed_seconds, microbatch_seconds, moe_sync_seconds, pass_times,
                                            pp_intra_node, step_time)
from zeroplan.core.units import ceil_div

RECOMPUTE_ORDER = {"none": 0, "selective": 1, "selective-op": 2, "full": 3}
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
    finetune: Finetune = FULL  # fine-tuning: data-parallel layouts only (tp = pp = cp = 1)


FINETUNE_LAYOUT = "fine-tuning is modelled for data parallelism only (tp = pp = cp = 1)"


class PlanRecord(NamedTuple):
    """One evaluated plan (a named tuple: a search builds tens of thousands; compare plans by their fields)."""

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
    ep: int = 1  # expert parallelism, folded over the same GPUs (Megatron-Core)
    etp: int = 0  # expert tensor parallelism (0: as tp)
    dp_shard: int = 0  # hybrid sharding: ZeRO partitions over groups of this many of the dp·cp ranks; 0: all of them

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
        return (self.dp, self.tp, self.pp, self.cp, self.option.stage, self.ep, self.etp)

    def simplicity_key(self) -> tuple:
        """Fewer moving parts first: no offload, less model parallelism, a lower ZeRO stage, less recompute."""
        return (self.option.tier_rank, self.tp * self.pp * self.cp, self.pp, self.option.stage,
                RECOMPUTE_ORDER[self.recompute], self.sequence_parallel, self.virtual_stages, self.ep,
                self.dp_shard > 0)


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
    # A search builds a record per plan (about 10^5 for Llama 3 405B on 16,384 GPUs), none in a reference cycle:
    # the cyclic collector, run every few hundred allocations and now and then over every object alive, would
    # rescan the growing list of plans (a fifth of the search). Paused for the search, as it was found after.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _search(request, progress)
    finally:
        if collecting:
            gc.enable()


def _search(request: SearchRequest, progress: Callable[[int, int], None] | None) -> SearchResult:
    start = time.perf_counter()
    space, model = request.space, request.model
    flops = FlopModel.from_model(model, request.finetune)  # also checks the model has a shape
    options = space.options()
    plans: list[PlanRecord] = []
    rejected: Counter = Counter()
    skipped: Counter = Counter()
    candidates = [(tp, pp, cp, ep, etp) for tp, pp in layouts(space) for cp in space.cp
                  if (space.gpus // (tp * pp)) % cp == 0 for ep, etp in expert_layouts(space, tp)]
    tables: dict[int, ActivationTable] = {}
    grids: dict[tuple[int, ...], _Grid] = {}  # what every cp of one tp × pp (× ep × etp, × hybrid shard) shares
    micro_cache: dict = {}  # microbatch_seconds' per-shape pieces, for every layout
    for index, (tp, pp, cp, ep, etp) in enumerate(candidates):
        if (space.gpus // pp) % (ep * etp):
            rejected[EP_RANKS] += 1
            if progress is not None:
                progress(index + 1, len(candidates))
            continue
        grid = grids.get((tp, pp, ep, etp))
        if grid is None:
            grid = grids[(tp, pp, ep, etp)] = _Grid(
                request, ParallelDims(space.gpus, tp, pp, request.cluster.gpus_per_node, ep=ep, etp=etp), options)
        problem = layout_problem(model, grid.parallel, space, cp)  # its dp: the dp·cp ZeRO group
        if not problem and not request.finetune.trains_everything and tp * pp * cp > 1:
            problem = FINETUNE_LAYOUT
        if problem:
            rejected[problem] += 1
        else:
            if cp not in tables:  # each rank holds s/cp tokens of every sequence
                tables[cp] = ActivationTable(model, space.seq_len // cp, space.flash_attention,
                                             capacity_factor=space.capacity_factor, finetune=request.finetune)
            _search_layout(request, grid, flops, tables[cp], micro_cache, plans, skipped, cp)
            for shard in space.dp_shard:
                # hybrid sharding: ZeRO over `shard` ranks (with experts: over the shard group's expert ranks)
                issue = hybrid_shard_problem(grid.parallel, shard) or hybrid_expert_problem(grid.parallel, shard)
                if issue:
                    skipped[issue] += 1
                    continue
                hybrid = grids.get((tp, pp, ep, etp, shard))
                if hybrid is None:
                    hybrid = grids[(tp, pp, ep, etp, shard)] = _Grid(request, grid.parallel, options, shard)
                _search_layout(request, hybrid, flops, tables[cp], micro_cache, plans, skipped, cp)
        if progress is not None:
            progress(index + 1, len(candidates))
    return SearchResult(request, plans, dict(rejected), dict(skipped), len(candidates), time.perf_counter() - start)


def hybrid_shard_problem(parallel: ParallelDims, shard: int) -> str | None:
    """Why a hybrid shard group of `shard` ranks does not apply to this layout (None: it does). The group is
    `shard` consecutive ranks of the dp·cp ZeRO group; it must divide the group and be smaller than it (equal is full
    sharding), and span at least a node's GPUs with its model-parallel peers (shard·tp·pp ≥ GPUs per node, or the
    whole world), as FSDP2's HSDP and ZeRO++'s hpZ/MiCS groups are laid out."""
    if parallel.dp % shard or shard >= parallel.dp:
        return "hybrid shard group does not divide the ZeRO group (or is all of it)"
    if shard * parallel.tp * parallel.pp < min(parallel.gpus_per_node, parallel.world):
        return "hybrid shard group smaller than a node"
    return None


def _step_shapes(space: SearchSpace, tp: int, dp: int) -> list[tuple[int, bool, str, int]]:
    # Sequence parallelism splits over tp: with tp = 1 it is the same plan as without it.
    # Sequence parallelism needs tp > 1 and the sequence divisible by tp (Megatron scatters it).
    sequence_parallel = [sp for sp in space.sequence_parallel if not sp or (tp > 1 and space.seq_len % tp == 0)] or [False]
    return [(v, sp, recompute, b) for v in space.virtual_stages for sp in sequence_parallel
            for recompute in space.recompute for b in micro_batch_choices(space, dp)]


class _Grid:
    """What the layouts of one tp × pp share whatever their cp: the ZeRO group (dp·cp = GPUs / (tp·pp) ranks), so
    the options' fixed memory, the optimizer step and the DP/offload time of each (option, accumulation). Built
    lazily: a grid whose every cp is ruled out costs nothing."""

    def __init__(self, request: SearchRequest, parallel: ParallelDims, options: tuple[Option, ...],
                 shard: int = 0) -> None:
        self.request, self.parallel, self.pp = request, parallel, parallel.pp
        self.dp_shard = shard  # hybrid sharding: ZeRO-1..3 without offload, partitioned over `shard` ranks
        space = request.space
        self.options = tuple(o for o in options if parallel.pp == 1 or o.stage in PIPELINE_STAGES
                             or space.fsdp_pipeline)
        if shard:  # hybrid options only; the full-sharding grid counts what the pipeline rule leaves out
            self.options = tuple(o for o in self.options if o.stage >= 1 and not o.offloads)
        self.left_out = 0 if shard else len(options) - len(self.options)
        self._fixed: list[FixedMemory] | None = None
        self.per_step: dict[int, list[tuple]] = {}
        self._rows: dict[int, list[tuple]] = {}

    def fixed(self) -> list[FixedMemory]:
        """Per usable option: its fixed memory, the optimizer step's seconds (see _search_layout)."""
        if self._fixed is None:
            request, parallel = self.request, self.parallel
            if self.dp_shard:  # the ZeRO partitions of one shard group: its memory is a world of shard·tp·pp,
                # whose edp is the shard group's expert ranks, dp_shard·tp/(ep·etp) (ParallelDims.expert_shard)
                parallel = ParallelDims(self.dp_shard * parallel.tp * parallel.pp, parallel.tp, parallel.pp,
                                        parallel.gpus_per_node, ep=parallel.ep, etp=parallel.etp)
            estimate_request = EstimateRequest(
                model=request.model, cluster=request.cluster, parallel=parallel, per_param=request.per_param,
                budget=request.budget, options=self.options, largest_layer_params=request.largest_layer_params,
                activation_bytes=0, buffers=request.buffers, finetune=request.finetune)
            self._fixed = fixed_memory(estimate_request)
            self.estimate_request = estimate_request  # offload traffic: the one function estimate calls
            self.shard = estimate_request.trainable_shard_params  # what gradients and optimizer states cover
            self.stage3_gather = None
            counts = estimate_request.finetune_counts
            if counts is not None:
                self.stage3_gather = storage_bytes_per_param(request.model, request.finetune, counts,
                                                             request.per_param.params)
            self.split = estimate_request.expert_split  # (dense, experts) with EP, else None
            self.partition = (ceil_div(self.shard, parallel.dp) if self.split is None
                              else ceil_div(self.split[0], parallel.dp) + ceil_div(self.split[1], parallel.edp))
            self.optimizer = {f.option: gpu_optimizer_seconds(f.option, self.shard if f.option.stage == 0
                                                              else self.partition, request.per_param, request.machine)
                              for f in self._fixed}
        return self._fixed

    def dp_and_offload(self, micro_batches: int) -> list[tuple]:
        """Per usable option (fixed()'s order): (DpSeconds, OffloadSeconds) at this accumulation, computed once;
        rows(micro_batches) is what each plan takes from it."""
        if micro_batches not in self.per_step:
            self._per_accumulation(micro_batches)
        return self.per_step[micro_batches]

    def rows(self, micro_batches: int) -> list[tuple]:
        """Per usable option (fixed()'s order), what a plan at this accumulation takes from it: (option, params,
        gradients, optimizer states, buffers, the optimizer-step temporary, the GPU bytes that never change
        (params + gradients + optimizer states + buffers), CPU bytes per node, NVMe bytes per node, its host
        limits, those limits after "gpu", whether the host was checked, the optimizer step's seconds, the DP
        seconds in all)."""
        found = self._rows.get(micro_batches)
        if found is None:
            found = self._per_accumulation(micro_batches)
        return found

    def _per_accumulation(self, micro_batches: int) -> list[tuple]:
        parallel, steps, rows = self.parallel, [], []
        for f in self.fixed():
            dp_time, offload = _per_step(self.request, f, self.shard, self.partition, parallel.dp,
                                         parallel.gpus_in_busiest_node, parallel.dp_intra_node, micro_batches,
                                         parallel.tp, self.split, parallel, self.stage3_gather, self.dp_shard,
                                         self.estimate_request)
            steps.append((dp_time, offload))
            rows.append((f.option, f.params, f.gradients, f.optimizer_states, f.buffers, f.temporary,
                         f.params + f.gradients + f.optimizer_states + f.buffers, f.cpu_bytes_per_node,
                         f.nvme_bytes_per_node, f.host_limits, ("gpu",) + f.host_limits, f.host_checked,
                         self.optimizer[f.option], dp_time.total))
        self.per_step[micro_batches], self._rows[micro_batches] = steps, rows
        return rows


def _search_layout(request: SearchRequest, grid: _Grid, flops: FlopModel, activations: ActivationTable,
                   micro_cache: dict, plans: list[PlanRecord], skipped: Counter, cp: int = 1) -> None:
    space, machine, parallel = request.space, request.machine, grid.parallel
    zero_ranks, tp, pp = parallel.dp, parallel.tp, parallel.pp  # ZeRO partitions over dp·cp ranks
    dp = zero_ranks // cp
    shapes = _step_shapes(space, tp, dp)
    if parallel.ep > 1 and tp > 1:  # Megatron-Core runs MoE with tp > 1 under sequence parallelism only
        kept = [shape for shape in shapes if shape[1]]
        if len(kept) < len(shapes):
            skipped[EP_WITHOUT_SP] += (len(shapes) - len(kept)) * (len(grid.options) + grid.left_out)
        shapes = kept
    if grid.left_out:
        skipped[PIPELINE_STAGE] += grid.left_out * len(shapes)
    if not grid.options or not shapes:
        return
    option_count = len(grid.options)
    usable_gpu = request.budget.usable_gpu_bytes
    tp_intra_node, dp_intra_node = parallel.tp_intra_node, parallel.dp_intra_node
    pp_intra = pp_intra_node(parallel.world, parallel.gpus_per_node)
    ep, etp = parallel.ep, parallel.etp
    etp_field = etp if parallel.has_experts_grid else 0  # PlanRecord.etp: 0 when experts follow tp
    ep_per_node = parallel.ep_ranks_per_node
    # Interleaving changes neither the accumulation nor the compute DP traffic hides behind: the exposed DP and
    # offload seconds of each option are computed once per (sequence parallelism, recompute, micro-batch).
    exposed_by_shape: dict[tuple[bool, str, int], list[tuple[float, float]]] = {}
    per_rank, seq_len, flash, layers = space.global_batch // dp, space.seq_len, space.flash_attention, flops.layers
    hidden, overlap, append, record = flops.hidden, machine.dp_overlap, plans.append, tuple.__new__
    for v, sp, recompute, b in shapes:
        m = per_rank // b
        issue = interleave_problem(layers, pp, v, m)
        if issue:
            skipped[issue] += option_count
            continue
        act = activations.bytes(tp, pp, v, sp, recompute, m, b, ep)
        layout = Layout(dp, tp, pp, v, seq_len, b, m, recompute, sp, tp_intra_node, dp_intra_node, pp_intra,
                        cp, flash, ep, ep_per_node)
        passes = pass_times(layout, microbatch_seconds(layout, flops, hidden, machine, micro_cache), overlap)
        rows = grid.rows(m)
        exposed = exposed_by_shape.get((sp, recompute, b))
        if exposed is None:
            exposed = exposed_by_shape[(sp, recompute, b)] = [
                exposed_seconds(passes, dp_time, offload, row[0].stage)
                for row, (dp_time, offload) in zip(rows, grid.dp_and_offload(m))]
        for (option, params, gradients, optimizer_states, buffers, temporary, states, cpu, nvme, host_limits,
             gpu_limits, host_checked, optimizer, dp_total), hidden_not in zip(rows, exposed):
            # FixedMemory.gpu_parts, inlined: the optimizer step's temporary beyond the activations sits in the
            # buffers, and the GPU holds the fixed states plus the larger of the two
            if temporary > act:
                gpu = (params, gradients, optimizer_states, act, buffers + (temporary - act))
                limits = gpu_limits if states + temporary > usable_gpu else host_limits
            else:
                gpu = (params, gradients, optimizer_states, act, buffers)
                limits = gpu_limits if states + act > usable_gpu else host_limits
            # PlanRecord(...) without the named tuple's keyword layer: its fields in order
            append(record(PlanRecord, (dp, tp, pp, v, option, b, m, recompute, sp, gpu, cpu, nvme, limits,
                                       host_checked, step_time(passes, dp_total, hidden_not, optimizer), cp, ep,
                                       etp_field, grid.dp_shard)))


def _per_step(request: SearchRequest, fixed: FixedMemory, shard: int, partition: int, dp: int, gpus_in_node: int,
              dp_intra_node: bool, micro_batches: int, tp: int = 1, split: tuple[int, int] | None = None,
              parallel: ParallelDims | None = None, stage3_gather: tuple[int, int] | None = None,
              dp_shard: int = 0, estimate_request: EstimateRequest | None = None) -> tuple:
    """estimate_request: the grid's (its parallel dims, fine-tuning); its offload traffic is
    core.evaluate.estimate.request_offload_traffic, what `zeroplan estimate` reports."""
    option, buffers, machine = fixed.option, request.buffers, request.machine
    assert estimate_request is not None
    per_node = request.cluster.gpus_per_node
    dp_per_node = max(1, per_node // tp) if tp <= per_node else 1
    if dp_shard:  # hybrid sharding: ZeRO's collectives inside the shard group, an AllReduce across its replicas
        if split is None or parallel is None:
            dp_time = hybrid_dp_seconds(option, shard, dp, dp_shard, tp, per_node, request.per_param, micro_batches,
                                        buffers, machine.links)
        else:  # two groups, one set of replicas: dense over dp_shard (tp apart), experts over the shard group's
            # dp_shard·tp/(ep·etp) expert ranks (ep·etp apart); both AllReduce across dp/dp_shard replicas
            replicas, stride = dp // dp_shard, parallel.ep * parallel.etp
            dense = hybrid_dp_seconds(option, split[0], dp, dp_shard, tp, per_node, request.per_param,
                                      micro_batches, buffers, machine.links)
            experts = hybrid_dp_seconds(option, split[1], parallel.edp, parallel.edp // replicas, stride, per_node,
                                        request.per_param, micro_batches, buffers, machine.links)
            dp_time = DpSeconds(*(a + b for a, b in zip(dataclasses.astuple(dense), dataclasses.astuple(experts))))
        offload = offload_seconds(request_offload_traffic(estimate_request, option, micro_batches), partition,
                                  gpus_in_node, machine, False)
        return dp_time, offload
    if split is None or parallel is None:
        dp_time = zero_dp_seconds(option, shard, dp, request.per_param, dp_intra_node, micro_batches, buffers,
                                  machine.links, dp_per_node, stage3_gather)
    else:  # two groups: the dense parameters over dp, the routed experts over edp
        stride = parallel.ep * parallel.etp
        edp_per_node = max(1, per_node // stride) if stride <= per_node else 1
        dense = zero_dp_seconds(option, split[0], dp, request.per_param, dp_intra_node, micro_batches, buffers,
                                machine.links, dp_per_node)
        experts = zero_dp_seconds(option, split[1], parallel.edp, request.per_param, parallel.edp_intra_node,
                                  micro_batches, buffers, machine.links, edp_per_node)
        dp_time = DpSeconds(*(a + b for a, b in zip(dataclasses.astuple(dense), dataclasses.astuple(experts))))
    traffic = request_offload_traffic(estimate_request, option, micro_batches)
    offload = offload_seconds(traffic, partition, gpus_in_node, machine, option.offload_optimizer != "none")
    return dp_time, offload


def plan_alltoall_seconds(request: SearchRequest, plan: PlanRecord) -> float:
    """The expert-parallel all-to-all seconds inside a plan's step (part of its tp_comm, exposed): every
    micro-batch's MoE layers on the busiest stage (core.timing.step_time.ep_alltoall_layer_seconds)."""
    if plan.ep <= 1:
        return 0.0
    flops = FlopModel.from_model(request.model)
    parallel = ParallelDims(plan.world, plan.tp, plan.pp, request.cluster.gpus_per_node, ep=plan.ep,
                            etp=plan.etp or plan.tp)
    ep_per_node = parallel.ep_ranks_per_node
    layout = Layout(plan.dp, plan.tp, plan.pp, plan.virtual_stages, request.space.seq_len, plan.micro_batch,
                    plan.grad_accum, plan.recompute, plan.sequence_parallel, parallel.tp_intra_node,
                    parallel.dp_intra_node, False, plan.cp, request.space.flash_attention, plan.ep, ep_per_node)
    layers = max(layers_per_stage(flops.layers, plan.pp))
    alltoall = ep_alltoall_layer_seconds(layout, flops, request.machine) * layers * flops.moe_layers / flops.layers
    if request.machine.moe_a2a_hidden:  # --moe-a2a-overlap: hidden behind up to the stage's compute
        forward, backward, _, _ = microbatch_seconds(layout, flops, flops.hidden, request.machine)
        alltoall = max(0.0, alltoall - forward - backward + layers * moe_sync_seconds(flops, request.machine))
    return plan.grad_accum * alltoall
