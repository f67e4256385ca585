"""The plan search: the fast memory path agrees with evaluate_options to the byte, every plan is a valid
layout of the GPUs and the batch, and everything not evaluated is counted under its reason."""

from __future__ import annotations

import dataclasses
import gc
import random

import pytest

from zeroplan.core.layout import space as plan_space
from zeroplan.core.memory.activations import ActivationConfig
from zeroplan.core.evaluate.estimate import EstimateRequest, evaluate_options
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.layout.search import rank, search
from zeroplan.search.inputs import PlanInputs, resolve


def request_for(**values):
    return resolve(PlanInputs.of(**values)).request


def reference(request, plan):
    """The same configuration through the estimate core, the slow way."""
    space = request.space
    parallel = ParallelDims(space.gpus, plan.tp, plan.pp, request.cluster.gpus_per_node, ep=plan.ep,
                            etp=plan.etp or None)
    activations = ActivationConfig(
        seq_len=space.seq_len, micro_batch=plan.micro_batch, recompute=plan.recompute,
        flash_attention=space.flash_attention, sequence_parallel=plan.sequence_parallel, tp=plan.tp, pp=plan.pp,
        virtual_stages=plan.virtual_stages, num_micro_batches=plan.grad_accum, ep=plan.ep,
        capacity_factor=space.capacity_factor)
    estimate_request = EstimateRequest(
        model=request.model, cluster=request.cluster, parallel=parallel, per_param=request.per_param,
        budget=request.budget, options=(plan.option,), largest_layer_params=request.largest_layer_params,
        activations=activations, micro_batches_per_step=plan.grad_accum, global_batch=space.global_batch,
        buffers=request.buffers)
    return evaluate_options(estimate_request)[0]


SCENARIOS = {
    "llama-2-13b interleaved": dict(model="llama-2-13b", gpus=16, global_batch=64, seq_len=4096,
                                    virtual_stages="1,2"),
    "mixtral moe gqa": dict(model="mixtral-8x7b", gpus=32, global_batch=64, seq_len=4096),
    "mixtral expert parallel": dict(model="mixtral-8x7b", gpus=64, global_batch=128, seq_len=4096, ep="1,4,8",
                                    etp="1,2", tp="1,2", pp="1,2", recompute="selective,full",
                                    capacity_factor=1.25),
    "gpt2 workstation": dict(model="gpt2", cluster="workstation-4x3090", gpus=4, global_batch=32, seq_len=1024,
                             flash_attention=False),
    "params with a shape": dict(params="20e9", layers=44, hidden=6144, heads=48, vocab=50000, gpus=16,
                                global_batch=32, seq_len=2048, gpu="h100-80g"),
    "tight host memory": dict(model="llama-2-13b", gpus=8, global_batch=32, seq_len=2048, cpu_memory="120GB",
                              nvme="300GB", micro_batches="1,2", stages="2,3"),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_fast_memory_is_byte_identical_to_evaluate_options(name):
    request = request_for(**SCENARIOS[name])
    result = search(request)
    assert result.plans
    sample = random.Random(name).sample(result.plans, min(40, len(result.plans)))
    for plan in sample:
        slow = reference(request, plan)
        parts = slow.gpu_bytes
        assert plan.gpu == tuple(parts[k] for k in ("params", "gradients", "optimizer_states", "activations",
                                                    "buffers")), plan
        assert plan.gpu_total == parts["total"]
        assert (plan.cpu_bytes_per_node, plan.nvme_bytes_per_node) == (slow.cpu_bytes_per_node,
                                                                        slow.nvme_bytes_per_node)
        assert plan.limits == slow.limits and plan.host_checked == slow.host_checked


def test_every_plan_is_a_valid_layout_and_batch():
    request = request_for(model="llama-2-13b", gpus=32, global_batch=128, seq_len=4096)
    result = search(request)
    space = request.space
    for plan in result.plans:
        assert plan.dp * plan.tp * plan.pp == space.gpus
        assert plan.micro_batch * plan.grad_accum * plan.dp == space.global_batch
        assert plan.pp == 1 or plan.option.stage <= 1
        assert plan.sequence_parallel is False or plan.tp > 1
    assert all(p.fits and not p.limits for p in result.feasible)
    assert len(result.feasible) == sum(p.fits for p in result.plans)
    keys = [p.layout_key for p in result.best_per_layout()]
    assert len(keys) == len(set(keys))


def test_layout_reasons_are_counted():
    # gpt2: 12 heads, 12 layers; 24 GPUs on 8-GPU nodes; global batch 32.
    request = request_for(model="gpt2", gpus=24, global_batch=32, seq_len=1024)
    result = search(request)
    rejected = result.rejected_layouts
    assert rejected[plan_space.TP_HEADS] > 0  # tp 8 and 24
    assert rejected[plan_space.TP_CROSSES_NODES] > 0  # tp 3 and 6 straddle nodes, 12 is bigger than one
    assert rejected[plan_space.PP_LAYERS] > 0  # pp 24 > 12 layers
    assert rejected[plan_space.PP_UNEVEN] > 0  # pp 8: 2 layers on the busiest stage of 1.5
    assert rejected[plan_space.DP_BATCH] > 0  # dp 3, 24, ... do not divide 32
    assert sum(rejected.values()) + len({(p.tp, p.pp) for p in result.plans}) <= result.layouts_total
    assert result.skipped[plan_space.PIPELINE_STAGE] > 0
    crossing = search(dataclasses.replace(request, space=dataclasses.replace(request.space, allow_cross_node_tp=True)))
    assert plan_space.TP_CROSSES_NODES not in crossing.rejected_layouts
    assert any(p.tp == 3 for p in crossing.plans)


def test_every_combination_of_a_valid_layout_is_evaluated_or_skipped():
    request = request_for(model="gpt2-xl", gpus=16, global_batch=64, seq_len=1024)
    result = search(request)
    space = request.space
    expected = 0
    for tp, pp in plan_space.layouts(space):
        parallel = ParallelDims(space.gpus, tp, pp, request.cluster.gpus_per_node)
        if plan_space.layout_problem(request.model, parallel, space) is None:
            sp = 2 if tp > 1 else 1
            expected += len(space.options()) * sp * len(space.recompute) * len(
                plan_space.micro_batch_choices(space, parallel.dp))
    assert len(result.plans) + sum(result.skipped.values()) == expected


def test_ties_go_to_the_simpler_plan():
    request = request_for(model="gpt2-xl", gpus=8, global_batch=64, seq_len=1024)
    result = search(request)
    strict = rank(result.plans, tolerance=0.0)
    banded = result.feasible
    fastest = strict[0].time.total
    assert banded[0].time.total <= fastest * (1 + request.tie_tolerance)
    assert banded[0].simplicity_key() <= strict[0].simplicity_key()
    assert sorted(map(id, banded)) == sorted(map(id, strict))  # the same plans, another order


def test_progress_reports_every_layout():
    request = request_for(model="gpt2", gpus=16, global_batch=32, seq_len=1024)
    calls = []
    result = search(request, lambda done, total: calls.append((done, total)))
    assert calls[-1] == (result.layouts_total, result.layouts_total)
    assert [done for done, _ in calls] == list(range(1, result.layouts_total + 1))


def test_micro_batches_reach_the_global_batch_exactly():
    space = plan_space.SearchSpace(gpus=8, global_batch=48, seq_len=1024)
    assert plan_space.micro_batch_choices(space, 4) == [1, 2, 3, 4, 6, 12]
    narrowed = dataclasses.replace(space, micro_batches=(2, 4, 5))
    assert plan_space.micro_batch_choices(narrowed, 4) == [2, 4]
    assert plan_space.interleave_problem(48, 4, 2, 8) is None
    assert plan_space.interleave_problem(48, 1, 2, 8) == plan_space.INTERLEAVE_PIPELINE
    assert plan_space.interleave_problem(44, 4, 2, 8) is None  # uneven chunks: the busiest stage sets the pace
    assert plan_space.interleave_problem(5, 4, 2, 8) == plan_space.INTERLEAVE_LAYERS
    # Llama 3 405B (arXiv 2407.21783 sec 3.3.2): 126 layers on 16 stages of 8 one-layer chunks, the first chunk
    # the embedding alone and the last the head alone
    assert plan_space.interleave_problem(126, 16, 8, 16) is None
    assert plan_space.interleave_problem(126, 16, 9, 16) == plan_space.INTERLEAVE_LAYERS
    assert plan_space.interleave_problem(48, 4, 2, 6) == plan_space.INTERLEAVE_MICRO_BATCHES


def test_narrowed_space_counts_what_it_cannot_run():
    request = request_for(model="gpt2", gpus=8, global_batch=16, seq_len=1024, micro_batches="3")
    result = search(request)
    assert not result.plans and result.rejected_layouts[plan_space.NO_MICRO_BATCH] > 0
    # "sequence parallelism on" still plans tp = 1 layouts (where it is the same plan without it).
    on = search(request_for(model="gpt2", gpus=4, global_batch=16, seq_len=1024, sequence_parallel="on"))
    assert any(p.tp == 1 and not p.sequence_parallel for p in on.plans)
    assert all(p.sequence_parallel for p in on.plans if p.tp > 1)


def test_llama3_405b_published_layout_is_expressible():
    """Llama 3 405B at 128k context (arXiv 2407.21783 Table 4): tp 8, pp 16 interleaved with uneven stages
    (126 layers), FSDP-style sharding with the pipeline, cp 16, on 16,384 H100s."""
    request = request_for(gpus=16384, global_batch=128, seq_len=131072, model="llama-3.1-405b", cluster="dgx-h100",
                          tp="8", pp="16", cp="16", virtual_stages="2", stages="3", fsdp_pipeline=True, offload=False,
                          recompute="none", micro_batches="1", sequence_parallel="on")
    result = search(request)
    assert not result.rejected_layouts and not result.skipped
    (plan,) = result.plans
    assert (plan.dp, plan.tp, plan.pp, plan.cp, plan.virtual_stages, plan.option.stage) == (8, 8, 16, 16, 2, 3)
    assert plan.world == 16384 and plan.grad_accum == 16
    assert plan.time.total > 0


def test_context_parallelism_rules_and_effects():
    base = dict(gpus=16, global_batch=16, model="llama-2-7b", cluster="dgx-a100", tp="1", pp="1", stages="1",
                offload=False, recompute="none", micro_batches="1")
    # 4094 is not divisible by 2·cp for cp = 2 (ring attention's 2·cp chunks): refused with its reason.
    refused = search(request_for(seq_len=4094, cp="2", **base))
    assert refused.rejected_layouts == {plan_space.CP_SEQUENCE: 1}
    plain = search(request_for(seq_len=4096, **base)).plans[0]
    split = search(request_for(seq_len=4096, cp="2", **base)).plans[0]
    assert (split.dp, split.cp, split.world) == (8, 2, 16)
    assert split.gpu[3] < plain.gpu[3]  # each rank holds half of every sequence's activations
    assert split.grad_accum == 2 * plain.grad_accum  # the batch is split over dp = GPUs / cp


def test_fsdp_with_pipeline_only_when_asked():
    base = dict(gpus=16, global_batch=32, seq_len=2048, model="llama-2-7b", cluster="dgx-a100", pp="2", tp="1",
                offload=False)
    without = search(request_for(**base))
    assert without.skipped[plan_space.PIPELINE_STAGE] > 0
    assert {p.option.stage for p in without.plans} == {0, 1}
    with_fsdp = search(request_for(fsdp_pipeline=True, **base))
    assert plan_space.PIPELINE_STAGE not in with_fsdp.skipped
    assert {p.option.stage for p in with_fsdp.plans} == {0, 1, 2, 3}


def test_faster_because_names_what_the_layout_saves():
    """search/reasons.savings and faster_because: a plan against the same layout with full recompute saves
    compute (and bubble) because it needs no recompute; the named parts cover the saving."""
    from zeroplan.search.reasons import faster_because, savings

    result = search(request_for(model="llama-2-7b", gpus=16, global_batch=64, seq_len=2048, cluster="dgx-a100",
                                tp="2", pp="2", stages="1", offload=False, micro_batches="1",
                                sequence_parallel="off"))
    by_recompute = {p.recompute: p for p in result.plans}
    fast, slow = by_recompute["none"], by_recompute["full"]
    saving = slow.time.total - fast.time.total
    assert saving > 0
    found = savings(fast, slow)
    assert found[0][0] == "compute" and "no recompute needed instead of full" in found[0][2]
    assert sum(delta for _, delta, cause in found if cause) >= 0.9 * saving
    text = faster_because(fast, slow)
    assert text.startswith(f"{saving / slow.time.total:.0%} faster: -") and "compute (no recompute needed" in text
    assert faster_because(slow, fast).endswith("slower")


@pytest.mark.parametrize("collecting", [True, False])
def test_search_leaves_the_garbage_collector_as_it_found_it(collecting):
    request = resolve(PlanInputs.of(model="llama-2-7b", gpus=8, global_batch=16, seq_len=2048)).request
    was = gc.isenabled()
    try:
        (gc.enable if collecting else gc.disable)()
        assert search(request).plans
        assert gc.isenabled() is collecting
    finally:
        (gc.enable if was else gc.disable)()
