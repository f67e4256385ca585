"""Properties of the plan search (hypothesis).

What is monotone when GPUs are added (N -> k·N, with the global batch a multiple of k·N and tensor
parallelism limited to divisors of the node size, so every layout check gives the same answer):
the least GPU memory any plan needs. Proof: take the plan that needs the least at N, (dp, tp, pp, option,
recompute, b). At k·N the plan (k·dp, tp, pp, option, recompute, b') exists, with b' the largest divisor of
the per-rank batch that is at most b. Its model states and buffers are ceil(x/dp) terms, non-increasing in
dp; its activations are (per term) proportional to b'·min(pp, m') = min(pp·b', G/dp') ≤ min(pp·b, G/dp),
and rounding each term up keeps the order. So it needs no more memory, and it fits wherever the old one did.
What is NOT monotone: the memory of the *fastest* plan (llama-2-13b: 61.0 GiB on 8 GPUs, 68.4 GiB on 16,
where ZeRO-3 with a larger micro-batch wins) — more GPUs buy speed, not always headroom.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import make_cluster
from zeroplan.core.model.families import model_spec_from_hf_config
from zeroplan.core.memory.budget import MemoryBudget
from zeroplan.core.parallel.rules import context_parallel_problem, model_layout_problem
from zeroplan.core.layout.space import SearchSpace, interleave_problem
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.precision import bytes_per_param
from zeroplan.core.layout.search import SearchRequest, search
from zeroplan.core.timing.step_time import LinkTable, Machine
from zeroplan.search.inputs import PlanInputs, resolve

GIB = 2**30


@st.composite
def setups(draw):
    heads = draw(st.sampled_from([4, 8, 16]))
    hidden = heads * draw(st.sampled_from([32, 64]))
    model = model_spec_from_hf_config({"model_type": "gpt2", "n_embd": hidden, "n_layer": draw(st.integers(2, 12)),
                                       "n_head": heads, "vocab_size": draw(st.integers(1000, 60000)),
                                       "n_positions": 1024}, "tiny")
    gpus = draw(st.sampled_from([1, 2, 4, 8, 16]))
    factor = draw(st.sampled_from([2, 4]))
    batch = gpus * factor * draw(st.integers(1, 3))
    memory = draw(st.integers(2, 12)) * GIB // 4
    return model, gpus, factor, batch, memory, draw(st.booleans()), draw(st.sampled_from([256, 1024]))


def request(model, gpus, batch, memory, offload, seq_len) -> SearchRequest:
    cluster = make_cluster(memory=memory, gpus_per_node=8)
    machine = Machine(cluster.gpu.bf16_flops, cluster.gpu.hbm_bandwidth_bytes_per_s,
                      cluster.pcie_bandwidth_bytes_per_s, cluster.nvme_bandwidth_bytes_per_s,
                      LinkTable(cluster.gpu.intra_node_link, cluster.inter_node_link))
    budget = MemoryBudget(memory, runtime_reserve=GIB // 8)
    space = SearchSpace(gpus, batch, seq_len, offload=offload, tp=(1, 2, 4, 8))
    return SearchRequest(model, cluster, bytes_per_param(), budget, space, machine, model.largest_layer_params)


def least_gpu_memory(result) -> int | None:
    on_gpu = [p.gpu_total for p in result.plans if "gpu" not in p.limits]
    return min(on_gpu) if on_gpu else None


@pytest.mark.slow  # hypothesis runs whole plan searches: seconds
@settings(max_examples=25, deadline=None)
@given(setups())
def test_adding_gpus_never_raises_the_least_memory_a_plan_needs(setup):
    model, gpus, factor, batch, memory, offload, seq_len = setup
    before = search(request(model, gpus, batch, memory, offload, seq_len))
    after = search(request(model, gpus * factor, batch, memory, offload, seq_len))
    assert min(p.gpu_total for p in after.plans) <= min(p.gpu_total for p in before.plans)
    least_before, least_after = least_gpu_memory(before), least_gpu_memory(after)
    if least_before is not None:  # whatever fits on N GPUs, something fits on k·N
        assert least_after is not None and least_after <= least_before


@settings(max_examples=25, deadline=None)
@given(setups())
def test_every_reported_plan_is_a_layout_of_the_gpus_that_fits(setup):
    model, gpus, _, batch, memory, offload, seq_len = setup
    result = search(request(model, gpus, batch, memory, offload, seq_len))
    usable = result.request.budget.usable_gpu_bytes
    for plan in result.feasible[:10] + result.best_per_layout():
        assert plan.dp * plan.tp * plan.pp == gpus
        assert plan.micro_batch * plan.grad_accum * plan.dp == batch
        assert plan.fits and plan.gpu_total <= usable
        assert plan.time.total > 0


def test_fastest_plan_memory_is_not_monotone():
    """The documented counter-example: more GPUs can make the fastest plan use more memory."""
    def fastest(gpus):
        resolved = resolve(PlanInputs.of(gpus=gpus, global_batch=64, seq_len=2048, model="llama-2-7b",
                                      cluster="dgx-a100"))
        return search(resolved.request).feasible[0]

    assert fastest(16).gpu_total > fastest(8).gpu_total


@st.composite
def free_searches(draw):
    """A llama-like model whose heads, key/value heads and layers make some layouts break the rules, a sequence
    that some tp and 2·cp do not divide, and a free search over tp, pp, cp, interleaving and FSDP with pp."""
    kv_heads = draw(st.sampled_from([1, 2, 3, 4, 4, 6, 8]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 3, 4]))
    hidden = heads * 32
    model = model_spec_from_hf_config({
        "model_type": "llama", "hidden_size": hidden, "intermediate_size": 3 * hidden,
        "num_hidden_layers": draw(st.integers(1, 10)), "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "vocab_size": draw(st.integers(500, 5000)),
        "max_position_embeddings": 4096}, "tiny-llama")
    gpus = draw(st.sampled_from([2, 4, 6, 8, 12, 16, 24, 32]))
    seq_len = draw(st.sampled_from([90, 96, 250, 258, 384, 1000, 1022, 1024]))  # some not divisible by 4 or 6
    per_node = draw(st.sampled_from([4, 8]))
    gpus = gpus if gpus <= per_node else gpus // per_node * per_node or per_node
    return (model, gpus, per_node, gpus * draw(st.integers(1, 4)), seq_len, draw(st.booleans()),
            draw(st.sampled_from([(1,), (1, 2), (1, 2, 4), (1, 3), (2, 3)])))


@pytest.mark.slow  # hypothesis runs whole plan searches: seconds
@settings(max_examples=60, deadline=None)
@given(free_searches())
def test_the_free_search_never_returns_a_plan_that_breaks_a_layout_rule(setup):
    """core/parallel/rules.py's rules hold for every plan the free search evaluates, so for every plan it returns:
    tp divides the attention and key/value heads, pp is at most the layers, sequence parallelism only with the
    sequence divisible by tp, context parallelism only with the sequence divisible by 2·cp, tp inside a node
    unless asked, and the plan fills exactly the GPUs asked for."""
    model, gpus, per_node, batch, seq_len, cross_node, cp = setup
    cluster = make_cluster(memory=80 * GIB, gpus_per_node=per_node)
    machine = Machine(cluster.gpu.bf16_flops, cluster.gpu.hbm_bandwidth_bytes_per_s,
                      cluster.pcie_bandwidth_bytes_per_s, cluster.nvme_bandwidth_bytes_per_s,
                      LinkTable(cluster.gpu.intra_node_link, cluster.inter_node_link))
    space = SearchSpace(gpus, batch, seq_len, virtual_stages=(1, 2), cp=cp, fsdp_pipeline=True,
                        allow_cross_node_tp=cross_node)
    request = SearchRequest(model, cluster, bytes_per_param(), MemoryBudget(80 * GIB, runtime_reserve=GIB),
                            space, machine, model.largest_layer_params)
    result = search(request)
    for plan in result.plans:
        parallel = ParallelDims(gpus, plan.tp, plan.pp, per_node)
        assert plan.world == gpus and parallel.dp == plan.dp * plan.cp
        assert model_layout_problem(model, parallel, seq_len=seq_len,
                                    sequence_parallel=plan.sequence_parallel) is None, plan
        assert context_parallel_problem(seq_len, plan.cp) is None, plan
        assert cross_node or parallel.tp_intra_node, plan
        # interleaving: pp > 1, whole rounds of pp micro-batches, a layer per chunk but for the first and last
        # (the embedding's and the head's, as Llama 3's schedule: pp × v up to layers + 2)
        assert interleave_problem(model.shape.layers, plan.pp, plan.virtual_stages, plan.grad_accum) is None, plan
        assert plan.virtual_stages == 1 or model.shape.layers + 2 >= plan.pp * plan.virtual_stages, plan
    # the rules do bite in this space: whatever was left out was counted under its reason
    if not result.plans:
        assert result.rejected_layouts or result.skipped
