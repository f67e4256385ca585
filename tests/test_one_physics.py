"""One physics, declared once: estimate, plan (search), check and export give identical numbers on shared
scenarios, and the formulas that used to live in two places (offload traffic, bucket bytes, α-β link
time, default largest layer and sequence length, linked tables) are computed by one function."""

from __future__ import annotations

import json

import pytest

from zeroplan.check.hardware_rules import _bucket_shard
from zeroplan.check.runner import check_file
from zeroplan.core.memory.deepspeed_buffers import (
    BufferConfig,
    communication_buffer_bytes,
    stage3_gathered_params,
)
from zeroplan.core.timing.collectives import ring_time
from zeroplan.core.timing.dp_traffic import Collective
from zeroplan.core.hardware import Link
from zeroplan.core.options import Option
from zeroplan.core.precision import bytes_per_param
from zeroplan.core.timing.step_time import LinkTable, Machine, ring_seconds
from zeroplan.core.timing.dp_offload import offload_seconds, offload_traffic
from zeroplan.core.units import format_bytes
from zeroplan.deepspeed.buckets import Buckets
from zeroplan.deepspeed.choose import choose
from zeroplan.deepspeed.context import from_flags
from zeroplan.deepspeed.keys import DEEPSPEED_DEFAULTS
from zeroplan.planning.estimate_plan import build_plan
from zeroplan.inputs.estimate_inputs import EstimateInputs
from zeroplan.search.inputs import PlanInputs, resolve

MIXED = bytes_per_param("mixed", "adam")
COMM_BUFFERS = ("reduce_bucket", "allgather_bucket", "gathered_parameters", "gathered_layer_gradients")


def _estimate(option: Option, **flags):
    flags.setdefault("stage", option.stage)
    plan = build_plan(EstimateInputs.of(offload_optimizer=option.offload_optimizer,
                                     offload_params=option.offload_params, **flags))
    [estimate] = [e for e in plan.estimates if e.option == option]
    return plan, estimate


def _bucket_bytes(estimate) -> dict[str, int]:
    return {k.rsplit("/", 1)[1]: v for k, v in estimate.breakdown.items()
            if k.startswith("gpu/buffers/") and k.rsplit("/", 1)[1] in COMM_BUFFERS}


# --- offload traffic: one record, priced serially by estimate and overlapped by plan ---------------------

# The scenario: an 8e9-parameter shard over dp 8, 8 GPUs per node, 4 micro-batches.
SCENARIO = dict(gpus=8, params="8e9", gpus_per_node=8, grad_accum=4, nvme="100TB", nvme_bandwidth="10GB/s",
                cpu_memory="100TB")


@pytest.mark.parametrize("option, pcie, nvme_io", [
    # gradients down every micro-batch (4 × 2 GB) + parameters fetched forward and backward (8 × 2 GB);
    # no upload after the step: the parameters live on the host (counting it too was plan's 26 GB).
    (Option(3, "cpu", "cpu"), 24 * 10**9, 0),
    # NVMe: states + fp32 gradients (16 B × 1e9 × 8 GPUs) read and written once = 256 GB; parameters read
    # for 8 passes (8 × 16 GB) and written back once (16 GB) = 144 GB: 400 GB (plan had 320 GB).
    (Option(3, "nvme", "nvme"), 24 * 10**9, 400 * 10**9),
    (Option(2, "cpu"), 4 * 2 * 10**9 + 2 * 10**9, 0),
    (Option(1, "cpu"), 2 * 10**9 + 2 * 10**9, 0),
])
def test_estimate_and_plan_price_the_same_offload_bytes(option, pcie, nvme_io):
    plan, estimate = _estimate(option, **SCENARIO)
    request = plan.request
    traffic = offload_traffic(option, request.shard_params, request.parallel.dp, request.per_param,
                              request.parallel.gpus_in_busiest_node, request.micro_batches_per_step)
    assert estimate.breakdown["traffic/pcie/bytes_per_gpu"] == traffic.pcie_bytes_per_gpu == pcie
    assert (estimate.breakdown["traffic/nvme/read_bytes_per_node"]
            + estimate.breakdown["traffic/nvme/write_bytes_per_node"]) == nvme_io
    # plan's pricing of the same record: with the CPU step free and nothing hidden, it is estimate's time.
    cluster = request.cluster
    machine = Machine(peak_flops=1e15, hbm_bytes_per_s=1e12, pcie_bytes_per_s=cluster.pcie_bandwidth_bytes_per_s,
                      nvme_bytes_per_s=cluster.nvme_bandwidth_bytes_per_s,
                      links=LinkTable(cluster.gpu.intra_node_link, cluster.inter_node_link),
                      cpu_adam_params_per_s=float("inf"))
    priced = offload_seconds(traffic, request.shard_params // request.parallel.dp,
                             request.parallel.gpus_in_busiest_node, machine, option.offload_optimizer != "none")
    assert priced.total(request.micro_batches_per_step) == pytest.approx(estimate.offload_seconds_per_step)


def test_plan_search_prices_offload_through_the_one_record(monkeypatch):
    """The search calls core.evaluate.estimate.request_offload_traffic (the record estimate reports), nothing of
    its own."""
    from zeroplan.core.layout import search as layout_search

    seen = []
    real = layout_search.request_offload_traffic

    def spy(*args):
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(layout_search, "request_offload_traffic", spy)
    resolved = resolve(PlanInputs.of(gpus=8, model="llama-2-7b", global_batch=32, gpu="a100-80g", stages="3",
                                  tp="1", pp="1", recompute="full", sequence_parallel="off"))
    layout_search.search(resolved.request)
    offloading = [t for t in seen if t.pcie_bytes_per_gpu]
    assert offloading, "the search priced no offloading option"


# --- buckets: estimate, check (ZP011 and ZP014) and export agree to the byte -------------------------

def test_llama2_7b_stage3_defaults_buckets_agree():
    _, estimate = _estimate(Option(3), gpus=8, model="llama-2-7b", gpu="a100-80g")
    context = from_flags(gpus=8, model="llama-2-7b", gpu="a100-80g")
    shard, layer = _bucket_shard(context, 1, 1)
    defaults = Buckets(3, *(DEEPSPEED_DEFAULTS[k] for k in ("reduce_bucket_size", "allgather_bucket_size",
                                                            "stage3_prefetch_bucket_size",
                                                            "stage3_max_live_parameters")), True)
    assert defaults.footprint(2, shard, layer) == _bucket_bytes(estimate)
    # one 5e8-element reduce bucket, the 131M-parameter embedding + 5e7 prefetch, the embedding's gradients
    assert sum(_bucket_bytes(estimate).values()) == 2 * (500_000_000 + 131_072_000 + 50_000_000 + 131_072_000)


def test_zp014_reports_the_estimates_bucket_bytes(tmp_path):
    config = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 2, "reduce_bucket_size": 2e9, "allgather_bucket_size": 2e9}}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    context = from_flags(gpus=8, model="llama-2-7b", gpu="rtx3090")
    [finding] = [f for f in check_file(path, context).findings if f.rule == "ZP014"]
    _, estimate = _estimate(Option(2), gpus=8, model="llama-2-7b", gpu="rtx3090", reduce_bucket_size="2e9",
                            allgather_bucket_size="2e9", overlap_comm=False)
    assert f"take {format_bytes(sum(_bucket_bytes(estimate).values()), context.units)} per GPU" in finding.message


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_export_bucket_choice_is_what_the_estimate_counts(stage):
    context = from_flags(gpus=8, model="llama-2-7b", gpu="a100-80g")
    choice = choose(context, stage=stage)
    buckets = choice.buckets
    _, estimate = _estimate(Option(stage), gpus=8, model="llama-2-7b", gpu="a100-80g",
                            reduce_bucket_size=str(buckets.reduce), allgather_bucket_size=str(buckets.allgather),
                            prefetch_bucket_size=str(buckets.prefetch), max_live_parameters=str(buckets.max_live),
                            overlap_comm=buckets.overlap_comm)
    request = build_plan(EstimateInputs.of(gpus=8, model="llama-2-7b", gpu="a100-80g")).request
    assert buckets.footprint(choice.element_bytes, request.shard_params,
                             request.shard_largest_layer_params) == _bucket_bytes(estimate)


def test_stage3_gathered_parameters_never_cut_the_largest_layer():
    # llama-3.1-405b's embedding: 128256 × 16384 = 2.1e9 parameters, above max_live_parameters (1e9).
    _, estimate = _estimate(Option(3), gpus=64, model="llama-3.1-405b")
    parts = _bucket_bytes(estimate)
    assert parts["gathered_parameters"] == parts["gathered_layer_gradients"] == 2 * 128256 * 16384
    config = BufferConfig()
    assert stage3_gathered_params(10**10, 2 * 10**9, config) == 2 * 10**9  # the whole module
    assert stage3_gathered_params(10**10, 97 * 10**7, config) == 10**9  # prefetch stops at max_live
    assert stage3_gathered_params(10**10, 10**8, config) == 10**8 + 5 * 10**7  # layer + prefetch bucket
    assert stage3_gathered_params(10**7, 10**8, config) == 10**7  # never beyond the shard


def test_overlap_comm_scales_stage_1_2_buckets_only():
    on, off = BufferConfig(overlap_comm=True), BufferConfig(overlap_comm=False)
    for stage in (1, 2):
        scaled = communication_buffer_bytes(stage, 10**10, 0, 2, 2, on)
        assert scaled == {"reduce_bucket": 4_500_000_000, "allgather_bucket": 4_500_000_000}  # 5e8 × 2 B × 4.5
        assert communication_buffer_bytes(stage, 10**10, 0, 2, 2, off)["reduce_bucket"] == 1_000_000_000
    assert (communication_buffer_bytes(3, 10**10, 10**8, 2, 2, on)
            == communication_buffer_bytes(3, 10**10, 10**8, 2, 2, off))


# --- links, defaults --------------------------------------------------------------------------------

def test_every_collective_is_priced_by_one_alpha_beta_function():
    link = Link(100e9, 5e-6)
    ring = Collective("reduce_scatter_gradients", 10**9, 8, "intra_node")
    assert ring.seconds(link) == pytest.approx(ring_time("reduce_scatter", 10**9, 8, 5e-6, 100e9))
    assert ring_seconds(10**9, 8, link, allreduce=True) == pytest.approx(
        ring_time("all_reduce", 10**9, 8, 5e-6, 100e9))
    assert ring_seconds(10**9, 8, link, allreduce=True) == pytest.approx(2 * ring_seconds(10**9, 8, link, False))
    assert ring_time("all_gather", 10**9, 1, 5e-6, 100e9) == 0.0


def test_estimate_and_plan_read_one_link_table_from_a_calibration(tmp_path):
    from zeroplan.inputs.calibration import (
        Calibration,
        Measurement,
        build_fits,
        save_calibration,
    )

    rows = [Measurement(collective=collective, span=span, ranks=ranks, size_bytes=size,
                        time_s_median=ring_time(collective, size, ranks, alpha, bandwidth),
                        time_s_min=ring_time(collective, size, ranks, alpha, bandwidth),
                        time_s_max=ring_time(collective, size, ranks, alpha, bandwidth))
            for collective, span, ranks, alpha, bandwidth in (("all_gather", "inter_node", 16, 15e-6, 45e9),
                                                              ("reduce_scatter", "intra_node", 8, 5e-6, 180e9),
                                                              ("all_reduce", "intra_node", 8, 6e-6, 190e9))
            for size in (1 << k for k in range(16, 28, 2))]
    path = tmp_path / "calib.yaml"
    save_calibration(Calibration(created="2025-01-01T00:00:00+00:00", backend="nccl", dtype="bfloat16",
                                 world_size=16, nodes=2, gpus_per_node=8, hostnames=["a", "b"], device="H200",
                                 torch_version="2.13.0", fits=build_fits(rows, "nccl"), measurements=rows), path)
    plan = build_plan(EstimateInputs.of(gpus=16, model="llama-2-7b", cluster="dgx-h100", calibration=str(path)))
    searched = resolve(PlanInputs.of(gpus=16, model="llama-2-7b", cluster="dgx-h100", global_batch=64,
                                  calibration=str(path)))
    estimate_table, plan_table = plan.request.link_table, searched.request.machine.links
    for kind in ("all_gather", "reduce_scatter"):
        for intra in (True, False):
            assert estimate_table.link(kind, intra) == plan_table.link(kind, intra)
    assert plan_table.measured["all_gather/inter_node"].bandwidth_bytes_per_s == pytest.approx(45e9, rel=0.01)


@pytest.mark.parametrize("flags", [dict(model="llama-2-7b"), dict(model="llama-3.1-405b"),
                                   dict(model="gpt3-175b")])
def test_estimate_plan_and_check_take_the_same_defaults(flags):
    plan = build_plan(EstimateInputs.of(gpus=8, **flags))
    searched = resolve(PlanInputs.of(gpus=8, global_batch=8, **flags))
    assert plan.request.largest_layer_params == searched.request.largest_layer_params
    assert plan.request.activations.seq_len == searched.request.space.seq_len
    _, layer = _bucket_shard(from_flags(gpus=8, **flags), 1, 1)
    assert layer == plan.request.shard_largest_layer_params


def test_a_shape_without_a_largest_layer_uses_the_embedding_or_mlp_everywhere():
    flags = dict(params="7e9", layers=32, hidden=4096, heads=32, vocab=32000)
    searched = resolve(PlanInputs.of(gpus=8, global_batch=8, **flags))
    assert searched.request.largest_layer_params == 32000 * 4096  # the embedding beats the 4096 × 16384 MLP
    assert any("largest layer" in note for note in searched.assumptions)
