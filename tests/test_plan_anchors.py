"""Published anchors for `zeroplan plan`: Narayanan et al. 2021 (arXiv 2104.04473), Tables 1 and 2, on
Selene (DGX A100 80GB nodes, 8 × 200 Gb/s HDR per node: the dgx-a100 preset), and plain data parallelism
for a small model on one node."""

from __future__ import annotations

import pytest

from zeroplan.core.model.families import model_spec_from_hf_config
from zeroplan.core.memory.budget import MemoryBudget
from zeroplan.core.layout.space import SearchSpace
from zeroplan.core.precision import bytes_per_param
from zeroplan.core.layout.search import SearchRequest, search
from zeroplan.core.timing.step_time import LinkTable, Machine, narayanan_flops_per_iteration
from zeroplan.inputs import presets
from zeroplan.search.inputs import PlanInputs, resolve

SEQ, VOCAB = 2048, 51200  # every model in both tables
# Table 1: (billions, heads, hidden, layers, t, p, GPUs, batch, achieved teraFLOP/s per GPU).
TABLE_1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
# Table 2, 174.6B model, batch 1536: GPUs -> teraFLOP/s per GPU (ZeRO-3 without model parallelism, PTD-P t=8 p=12).
TABLE_2_ZERO3 = {384: 144, 768: 88, 1536: 44}
TABLE_2_PTDP = {384: 153, 768: 149, 1536: 141}
# The step-time constants were fitted on these runs among others (benchmarks/fit_step_time.py); this test
# searches micro-batches freely and runs 1F1B where the paper interleaved, so it allows ±20%.
TOLERANCE = 0.20


def gpt(hidden: int, layers: int, heads: int):
    return model_spec_from_hf_config({"model_type": "gpt2", "n_embd": hidden, "n_layer": layers, "n_head": heads,
                                      "vocab_size": VOCAB, "n_positions": SEQ}, f"gpt-{hidden}x{layers}")


def selene_request(model, gpus: int, batch: int, **space) -> SearchRequest:
    space.setdefault("flash_attention", False)  # 2021: none of these runs had flash attention
    cluster = presets.cluster("dgx-a100")
    machine = Machine(cluster.gpu.bf16_flops, cluster.gpu.hbm_bandwidth_bytes_per_s,
                      cluster.pcie_bandwidth_bytes_per_s, cluster.nvme_bandwidth_bytes_per_s,
                      LinkTable(cluster.gpu.intra_node_link, cluster.inter_node_link))
    return SearchRequest(model, cluster, bytes_per_param(), MemoryBudget(cluster.gpu.memory_bytes),
                         SearchSpace(gpus, batch, SEQ, **space), machine, model.largest_layer_params)


def tflops_per_gpu(plan, batch: int, layers: int, hidden: int) -> float:
    """Narayanan's accounting: F (full recompute) / (step time × GPUs)."""
    return narayanan_flops_per_iteration(batch, SEQ, layers, hidden, VOCAB) / (plan.time.total * plan.world) / 1e12


@pytest.mark.parametrize("row", TABLE_1, ids=[f"{r[0]}B" for r in TABLE_1])
def test_table_1_configurations_fit_and_their_throughput_is_close(row):
    billions, heads, hidden, layers, t, p, gpus, batch, published = row
    model = gpt(hidden, layers, heads)
    assert model.params / 1e9 == pytest.approx(billions, abs=0.1)
    # The paper's runs recompute activations (its FLOP formula counts the recomputed forward).
    request = selene_request(model, gpus, batch, tp=(t,), pp=(p,), stages=(0, 1), offload=False, recompute=("full",))
    result = search(request)
    assert result.feasible, result.infeasible_by_limit()
    best = min(result.feasible, key=lambda plan: plan.time.total)
    assert (best.tp, best.pp, best.dp) == (t, p, gpus // (t * p))
    ratio = tflops_per_gpu(best, batch, layers, hidden) / published
    assert 1 - TOLERANCE <= ratio <= 1 + TOLERANCE, ratio


def test_table_1_145b_ratio():
    """The row the issue names: 145.6B, t = 8, p = 8, 1536 GPUs: published 148 teraFLOP/s (47% of peak)."""
    request = selene_request(gpt(12288, 80, 96), 1536, 2304, tp=(8,), pp=(8,), stages=(0, 1), offload=False,
                             recompute=("full",))
    best = min(search(request).feasible, key=lambda plan: plan.time.total)
    ratio = tflops_per_gpu(best, 2304, 80, 12288) / 148
    assert 0.85 < ratio < 1.15


def _best(model, gpus: int, **space):
    result = search(selene_request(model, gpus, 1536, **space))
    return min(result.feasible, key=lambda plan: plan.time.total)


def test_table_2_with_the_papers_settings():
    """Table 2 as the paper ran it: ZeRO-3 without model parallelism at micro-batches 4/2/1 (384/768/1536 GPUs),
    PTD-P (t = 8, p = 12) at micro-batch 1, both with full recompute. Published: PTD-P 1.06×, 1.69×, 3.20× the
    ZeRO-3 throughput."""
    model = gpt(12288, 96, 96)  # 174.6B
    ptdp = {n: _best(model, n, tp=(8,), pp=(12,), stages=(0, 1), micro_batches=(1,), recompute=("full",),
                     offload=False) for n in TABLE_2_PTDP}
    zero3 = {n: _best(model, n, tp=(1,), pp=(1,), stages=(3,), micro_batches=(mb,), recompute=("full",),
                      offload=False) for n, mb in ((384, 4), (768, 2), (1536, 1))}
    speedup = {n: zero3[n].time.total / ptdp[n].time.total for n in TABLE_2_PTDP}
    published = {n: TABLE_2_PTDP[n] / TABLE_2_ZERO3[n] for n in TABLE_2_PTDP}  # 1.06, 1.69, 3.20
    assert all(s > 1 for s in speedup.values())  # PTD-P ahead at every size
    assert speedup[384] < speedup[768] < speedup[1536]  # and further ahead the more GPUs
    for n in TABLE_2_PTDP:
        assert 1 / 1.25 <= speedup[n] / published[n] <= 1.25, (n, speedup[n], published[n])
        for plans, table in ((ptdp, TABLE_2_PTDP), (zero3, TABLE_2_ZERO3)):
            ratio = tflops_per_gpu(plans[n], 1536, 96, 12288) / table[n]
            assert 1 / 1.25 <= ratio <= 1.25, (n, ratio)


def test_unrestricted_search_at_1536_gpus_picks_model_parallelism():
    model = gpt(12288, 96, 96)
    result = search(selene_request(model, 1536, 1536))
    best = result.feasible[0]
    assert best.tp * best.pp > 1
    data_parallel_only = [p for p in result.feasible if p.tp == p.pp == 1]
    assert not data_parallel_only or min(p.time.total for p in data_parallel_only) >= 2 * best.time.total


@pytest.mark.parametrize("model", ["llama-2-7b", "gpt2-xl"])
def test_small_model_on_one_node_gets_plain_data_parallelism(model):
    resolved = resolve(PlanInputs.of(gpus=8, global_batch=64, model=model, cluster="dgx-a100"))
    best = search(resolved.request).feasible[0]
    assert (best.tp, best.pp, best.dp) == (1, 1, 8)
    assert best.option.stage in (1, 2) and not best.option.offloads
