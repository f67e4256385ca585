"""The optimised search (core.layout.search: shared per-layout pieces, cached per-shape times, cheap records)
returns exactly what a straightforward evaluation returns: every plan, field by field and bit for bit, in the
same order, the same reasons counted, the same ranking.

The straightforward evaluation below walks the same space plan by plan and prices each one from scratch
through the public core functions (evaluate_options for memory, microbatch_seconds / zero_dp_seconds /
offload_seconds / gpu_optimizer_seconds / compose for time), sharing nothing between plans.
"""

from __future__ import annotations

from collections import Counter

import pytest

from zeroplan.core.layout import space as plan_space
from zeroplan.core.memory.activations import ActivationConfig
from zeroplan.core.evaluate.estimate import EstimateRequest, evaluate_options
from zeroplan.core.layout.search import PlanRecord, rank, search
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.timing.step_time import (
    FlopModel,
    Layout,
    StepTime,
    compose,
    microbatch_seconds,
    pp_intra_node,
)
from zeroplan.core.timing.dp_offload import (
    gpu_optimizer_seconds,
    offload_seconds,
    offload_traffic,
    zero_dp_seconds,
)
from zeroplan.core.units import ceil_div
from zeroplan.search.inputs import PlanInputs, resolve


def straightforward(request):
    """(plans as field tuples in evaluation order, rejected layouts, skipped combinations)."""
    space, model, machine, per_param = request.space, request.model, request.machine, request.per_param
    flops = FlopModel.from_model(model)
    plans, rejected, skipped = [], Counter(), Counter()
    for tp, pp in plan_space.layouts(space):
        for cp in space.cp:
            if (space.gpus // (tp * pp)) % cp:
                continue
            parallel = ParallelDims(space.gpus, tp, pp, request.cluster.gpus_per_node)
            problem = plan_space.layout_problem(model, parallel, space, cp)
            if problem:
                rejected[problem] += 1
                continue
            zero_ranks, dp = parallel.dp, parallel.dp // cp
            sequence_parallel = [sp for sp in space.sequence_parallel
                                 if not sp or (tp > 1 and space.seq_len % tp == 0)] or [False]
            shapes = [(v, sp, recompute, b) for v in space.virtual_stages for sp in sequence_parallel
                      for recompute in space.recompute for b in plan_space.micro_batch_choices(space, dp)]
            options = [o for o in space.options()
                       if pp == 1 or o.stage in plan_space.PIPELINE_STAGES or space.fsdp_pipeline]
            skipped[plan_space.PIPELINE_STAGE] += (len(space.options()) - len(options)) * len(shapes)
            if not options or not shapes:
                continue
            for v, sp, recompute, b in shapes:
                m = space.global_batch // dp // b
                issue = plan_space.interleave_problem(flops.layers, pp, v, m)
                if issue:
                    skipped[issue] += len(options)
                    continue
                layout = Layout(dp, tp, pp, v, space.seq_len, b, m, recompute, sp, parallel.tp_intra_node,
                                parallel.dp_intra_node, pp_intra_node(parallel.world, parallel.gpus_per_node),
                                cp=cp, flash_attention=space.flash_attention)
                micro = microbatch_seconds(layout, flops, flops.hidden, machine)
                for option in options:
                    activations = ActivationConfig(
                        seq_len=space.seq_len // cp, micro_batch=b, recompute=recompute,
                        flash_attention=space.flash_attention, sequence_parallel=sp, tp=tp, pp=pp,
                        virtual_stages=v, num_micro_batches=m)
                    (memory,) = evaluate_options(EstimateRequest(
                        model=model, cluster=request.cluster, parallel=parallel, per_param=per_param,
                        budget=request.budget, options=(option,), largest_layer_params=request.largest_layer_params,
                        activations=activations, micro_batches_per_step=m, global_batch=space.global_batch,
                        buffers=request.buffers))
                    shard = EstimateRequest(model=model, cluster=request.cluster, parallel=parallel,
                                            per_param=per_param, budget=request.budget, options=(option,),
                                            largest_layer_params=request.largest_layer_params).shard_params
                    partition = ceil_div(shard, zero_ranks)
                    per_node = request.cluster.gpus_per_node
                    dp_per_node = max(1, per_node // tp) if tp <= per_node else 1
                    dp_time = zero_dp_seconds(option, shard, zero_ranks, per_param, parallel.dp_intra_node, m,
                                              request.buffers, machine.links, dp_per_node)
                    traffic = offload_traffic(option, shard, zero_ranks, per_param, parallel.gpus_in_busiest_node, m)
                    offload = offload_seconds(traffic, partition, parallel.gpus_in_busiest_node, machine,
                                              option.offload_optimizer != "none")
                    optimizer = gpu_optimizer_seconds(option, shard if option.stage == 0 else partition, per_param,
                                                      machine)
                    step = compose(layout, micro, dp_time, offload, optimizer, option.stage, machine.dp_overlap)
                    gpu = tuple(memory.gpu_bytes[k] for k in ("params", "gradients", "optimizer_states",
                                                              "activations", "buffers"))
                    plans.append((dp, tp, pp, cp, v, option, b, m, recompute, sp, gpu, memory.cpu_bytes_per_node,
                                  memory.nvme_bytes_per_node, tuple(memory.limits), memory.host_checked,
                                  seconds(step)))
    return plans, dict(rejected), dict(skipped)


TIME_FIELDS = ("compute", "tp_comm", "pp_comm", "bubble", "dp_comm", "dp_exposed", "offload", "optimizer", "total")


def seconds(step):
    return tuple(getattr(step, name) for name in TIME_FIELDS)


def fields(plan):
    return (plan.dp, plan.tp, plan.pp, plan.cp, plan.virtual_stages, plan.option, plan.micro_batch, plan.grad_accum,
            plan.recompute, plan.sequence_parallel, plan.gpu, plan.cpu_bytes_per_node, plan.nvme_bytes_per_node,
            plan.limits, plan.host_checked, seconds(plan.time))


CASES = {
    # interleaving, cp, FSDP with the pipeline, sequence parallelism: every step-time branch but offload limits
    "llama-2-13b cp v fsdp-pp": dict(model="llama-2-13b", gpus=16, global_batch=32, seq_len=4096, cp="1,2",
                                     virtual_stages="1,2", fsdp_pipeline=True, micro_batches="1,2",
                                     recompute="none,selective,full"),
    # offload tiers against small host memory and NVMe: host limits, every offload path
    "tight host memory": dict(model="llama-2-13b", gpus=8, global_batch=32, seq_len=2048, cpu_memory="120GB",
                              nvme="300GB", micro_batches="1,2", recompute="none,full"),
    # pipelines deeper than the accumulation (fewer micro-batches in flight than stages), interleaving with its
    # skip reasons, cp up to 8, an uneven split ruled out: the pieces the search keeps per micro-batch and pipeline
    "deep pipelines": dict(model="llama-2-13b", cluster="dgx-h100", gpus=64, global_batch=32, seq_len=4096,
                           cp="1,2,8", virtual_stages="1,2,4", fsdp_pipeline=True, micro_batches="1,2",
                           recompute="none,full", tp="2", stages="1,3"),
    # no flash attention, a workstation without NVLink between nodes
    "gpt2 workstation": dict(model="gpt2", cluster="workstation-4x3090", gpus=4, global_batch=16, seq_len=1024,
                             flash_attention=False, recompute="none,selective,full"),
}


# The two largest cases evaluate thousands of plans one by one (seconds): the quick loop runs the others.
_SLOW_CASES = ("llama-2-13b cp v fsdp-pp", "deep pipelines")


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in _SLOW_CASES else name
                                  for name in CASES])
def test_optimised_search_is_the_straightforward_evaluation(name):
    request = resolve(PlanInputs.of(**CASES[name])).request
    result = search(request)
    expected, rejected, skipped = straightforward(request)
    assert expected  # a case that evaluates nothing would prove nothing
    assert [fields(p) for p in result.plans] == expected
    assert result.rejected_layouts == rejected
    assert {k: v for k, v in result.skipped.items() if v} == {k: v for k, v in skipped.items() if v}
    # the same ranking: rank() over records built from the straightforward plans gives the same order
    records = [PlanRecord(dp, tp, pp, v, option, b, m, recompute, sp, gpu, cpu, nvme, limits, checked,
                          StepTime(**dict(zip(TIME_FIELDS, times))), cp)
               for dp, tp, pp, cp, v, option, b, m, recompute, sp, gpu, cpu, nvme, limits, checked, times in expected]
    ranked = rank(records, request.tie_tolerance)
    assert ranked and [fields(p) for p in result.feasible] == [fields(p) for p in ranked]
