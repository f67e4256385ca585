"""The step-time model: FLOPs, α-β collectives, the bubble, overlap rules, offload (core.timing.step_time, core.timing.dp_offload)."""

from __future__ import annotations

import pytest

from zeroplan.core.model.families import model_spec_from_hf_config
from zeroplan.core.errors import InputError
from zeroplan.core.hardware import Link
from zeroplan.core.model.spec import ModelShape, ModelSpec
from zeroplan.core.options import Option
from zeroplan.core.timing.dp_offload import (DpSeconds, OffloadSeconds, gpu_optimizer_seconds, offload_seconds, zero_dp_seconds,
                                   offload_traffic)
from zeroplan.core.precision import bytes_per_param
from zeroplan.core.timing.step_time import (COMM_OVERLAPS, DP_OVERLAP, NCCL_LAUNCH_S, comm_overlap, NIC_EFFICIENCY, NVLINK_EFFICIENCY, FlopModel, Layout, LinkTable,
                                     Machine, check_efficiency, collective_seconds, compose, gemm_efficiency,
                                     layer_seconds, microbatch_seconds, narayanan_flops_per_iteration, pp_intra_node,
                                     ring_seconds, stage_flops, train_seconds)
from zeroplan.core.memory.deepspeed_buffers import BufferConfig

NVLINK = Link(300_000_000_000, 3e-6)
IB = Link(25_000_000_000, 5e-6)
MACHINE = Machine(peak_flops=312e12, hbm_bytes_per_s=2e12, pcie_bytes_per_s=31.5e9, nvme_bytes_per_s=25e9,
                  links=LinkTable(NVLINK, IB), efficiency=0.5)
NO_DP = DpSeconds(0.0, 0.0, 0.0, 0.0)
NO_OFFLOAD = OffloadSeconds(0.0, 0, 0.0, 0.0)


def gpt(hidden=12288, layers=96, heads=96, vocab=51200) -> ModelSpec:
    return model_spec_from_hf_config({"model_type": "gpt2", "n_embd": hidden, "n_layer": layers, "n_head": heads,
                                      "vocab_size": vocab, "n_positions": 2048}, "gpt")


def layout(dp=1, tp=1, pp=1, v=1, seq=2048, b=1, m=1, recompute="none", sp=False, intra=(True, True, True), cp=1,
           flash=True):
    return Layout(dp, tp, pp, v, seq, b, m, recompute, sp, *intra, cp=cp, flash_attention=flash)


def test_flops_per_token_follow_the_formulas_reference():
    """docs/formulas.md §14.1: 6Ψ per token, attention's 12·L·h·s, recompute's extra forward."""
    flops = FlopModel.from_model(gpt())
    s, L, h = 2048, 96, 12288
    assert flops.model_flops_per_token() == 6 * flops.params
    assert flops.hardware_flops_per_token(s, "none") == 6 * flops.params + 12 * L * h * s
    assert flops.hardware_flops_per_token(s, "selective") == 6 * flops.params + 16 * L * h * s
    full = flops.hardware_flops_per_token(s, "full")
    assert full == 6 * flops.params + 2 * flops.layer_params * L + 16 * L * h * s
    # Narayanan's per-token count with full recompute (B = 1, one sequence) agrees within 1%.
    narayanan = narayanan_flops_per_iteration(1, s, L, h, 51200) / s
    assert full == pytest.approx(narayanan, rel=0.01)


def test_narayanan_formula_is_exact_integer_form():
    B, s, L, h, V = 2304, 2048, 80, 12288, 51200
    expected = 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    assert narayanan_flops_per_iteration(B, s, L, h, V) == pytest.approx(expected, rel=1e-12)


def test_moe_counts_only_the_experts_a_token_meets():
    mixtral = ModelSpec(params=46_702_792_704, shape=ModelShape.of(
        layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000, experts=8, experts_per_token=2,
        gated_mlp=True))
    flops = FlopModel.from_model(mixtral)
    idle = 6 * 3 * 4096 * 14336 * 32  # 6 idle experts per layer
    assert flops.params == mixtral.params - idle
    assert 12e9 < flops.params < 14e9  # Mixtral's ~12.9B active parameters


def test_shape_is_required():
    with pytest.raises(InputError, match="shape"):
        FlopModel.from_model(ModelSpec(params=13 * 10**9))


def test_ring_collectives_alpha_beta():
    n, size = 8, 1_000_000_000
    assert ring_seconds(size, 1, NVLINK, allreduce=True) == 0.0
    gather = ring_seconds(size, n, NVLINK, allreduce=False)
    assert gather == pytest.approx((n - 1) * 3e-6 + (n - 1) / n * size / 300e9)
    assert ring_seconds(size, n, NVLINK, allreduce=True) == pytest.approx(2 * gather)


def test_stage_flops_busiest_stage():
    flops = FlopModel.from_model(gpt(hidden=1024, layers=10, heads=16))
    whole = stage_flops(flops, 1024, "none", 1)
    split = stage_flops(flops, 1024, "none", 4)  # 3, 3, 2, 2 layers: first stage or last + head
    assert split.forward < whole.forward
    assert split.backward == 2 * split.forward
    full = stage_flops(flops, 1024, "full", 4)
    assert full.backward > 2 * full.forward


def test_tensor_parallel_allreduces_per_layer():
    flops = FlopModel.from_model(gpt(layers=8))
    _, _, tp4, _ = microbatch_seconds(layout(tp=8), flops, 12288, MACHINE)
    _, _, tp6, _ = microbatch_seconds(layout(tp=8, recompute="full"), flops, 12288, MACHINE)
    message = 2048 * 12288 * 2
    # A ring AllReduce inside the node: 2·7/8 of the message at NVLink's ring efficiency, 14 hops of 3 µs, a launch.
    allreduce = 2 * 7 / 8 * message / (300e9 * NVLINK_EFFICIENCY) + 14 * 3e-6 + NCCL_LAUNCH_S
    assert tp4 == pytest.approx(8 * 4 * allreduce)
    assert tp6 == pytest.approx(tp4 * 6 / 4)
    _, _, cross, _ = microbatch_seconds(layout(tp=8, intra=(False, True, True)), flops, 12288, MACHINE)
    assert cross > 5 * tp4  # the slow link


def test_pipeline_transfers_and_bubble():
    flops = FlopModel.from_model(gpt(layers=8))
    micro = microbatch_seconds(layout(tp=8, pp=4, m=16, intra=(True, True, False)), flops, 12288, MACHINE)
    per_transfer = 5e-6 + 2048 * 12288 * 2 / 8 / (25e9 * NIC_EFFICIENCY)
    assert micro[3] == pytest.approx(2 * per_transfer)
    step = compose(layout(tp=8, pp=4, m=16), micro, NO_DP, NO_OFFLOAD, 0.0, 1)
    stage_time = sum(micro)
    assert step.bubble == pytest.approx(3 * stage_time)  # (p-1)/m of the m stage-times
    assert step.total == pytest.approx(19 * stage_time)
    interleaved = compose(layout(tp=8, pp=4, v=2, m=16), micro, NO_DP, NO_OFFLOAD, 0.0, 1)
    assert interleaved.bubble == pytest.approx(1.5 * stage_time)


def test_overlap_rules():
    micro = (1.0, 2.0, 0.0, 0.0)  # forward 1 s, backward 2 s
    dp = DpSeconds(reduce=1.5, gather_forward=0.0, gather_backward=0.0, gather_after_step=0.5)
    # With whole overlap: stage 0's AllReduce (both halves) hides behind the last backward.
    assert compose(layout(dp=8, m=4), micro, dp, NO_OFFLOAD, 0.0, 0, overlap=1.0).dp_exposed == 0.0
    # Stage 1: the reduce hides behind backward, the post-step AllGather behind the next forward.
    assert compose(layout(dp=8, m=4), micro, dp, NO_OFFLOAD, 0.0, 1, overlap=1.0).dp_exposed == 0.0
    # The same rule for every stage: with half the compute usable, stage 1 exposes (1.5 - 1) + (0.5 - 0.5).
    assert compose(layout(dp=8, m=4), micro, dp, NO_OFFLOAD, 0.0, 1, overlap=0.5).dp_exposed == pytest.approx(0.5)
    # A pipeline reduces after the flush: everything exposed.
    assert compose(layout(dp=8, pp=2, m=4), micro, dp, NO_OFFLOAD, 0.0, 1).dp_exposed == pytest.approx(2.0)
    # Stage 3: per micro-batch gathers beyond the compute they overlap are exposed.
    zero3 = DpSeconds(reduce=4.0, gather_forward=8.0, gather_backward=4.0, gather_after_step=0.0)
    step = compose(layout(dp=8, m=4), micro, zero3, NO_OFFLOAD, 0.0, 3, overlap=1.0)
    assert step.dp_exposed == pytest.approx(4 * (max(0, 2 - 1) + max(0, 2 - 2)))
    half = compose(layout(dp=8, m=4), micro, zero3, NO_OFFLOAD, 0.0, 3, overlap=0.5)
    assert half.dp_exposed == pytest.approx(4 * ((2 - 0.5) + (2 - 1)))


def test_zero_dp_seconds_repeat_per_micro_batch():
    per_param = bytes_per_param()
    links = LinkTable(NVLINK, IB)
    once = zero_dp_seconds(Option(1), 10**9, 8, per_param, True, 4, BufferConfig(), links)
    stage2 = zero_dp_seconds(Option(2), 10**9, 8, per_param, True, 4, BufferConfig(), links)
    assert stage2.reduce == pytest.approx(4 * once.reduce)
    stage3 = zero_dp_seconds(Option(3), 10**9, 8, per_param, True, 4, BufferConfig(), links)
    assert stage3.gather_forward > 0 and stage3.gather_backward > 0 and stage3.gather_after_step == 0
    measured = LinkTable(NVLINK, IB, {"reduce_scatter/intra_node": Link(30_000_000_000, 3e-6)})
    slower = zero_dp_seconds(Option(1), 10**9, 8, per_param, True, 4, BufferConfig(), measured)
    assert slower.reduce > 5 * once.reduce and slower.gather_after_step == once.gather_after_step


def test_offload_and_optimizer_step():
    per_param = bytes_per_param()
    partition = 10**9
    def priced(option):
        traffic = offload_traffic(option, 8 * partition, 8, per_param, 8, 4)
        return offload_seconds(traffic, partition, 8, MACHINE, option.offload_optimizer != "none")

    cpu = priced(Option(2, "cpu"))
    assert cpu.gradient_repeats == 4
    assert cpu.exposed == pytest.approx(partition * 2 / 31.5e9 + 8 * partition / MACHINE.cpu_adam_params_per_s)
    nvme = priced(Option(3, "nvme", "nvme"))
    assert nvme.exposed > cpu.exposed and nvme.param_fetch > 0
    assert priced(Option(3)) == NO_OFFLOAD
    assert gpu_optimizer_seconds(Option(1), partition, per_param, MACHINE) == pytest.approx(28 * partition / 2e12)
    assert gpu_optimizer_seconds(Option(1, "cpu"), partition, per_param, MACHINE) == 0.0


def test_small_helpers():
    assert pp_intra_node(8, 8) and not pp_intra_node(16, 8)
    assert train_seconds(10.0, 1000, 2500) == 30.0  # three whole steps
    assert check_efficiency(1.0) == 1.0
    for bad in (0, -0.1, 1.5):
        with pytest.raises(InputError, match="^efficiency: "):
            check_efficiency(bad)


def test_offload_exposure_is_reported_apart_from_dp():
    micro = (1.0, 2.0, 0.0, 0.0)
    gathers = DpSeconds(reduce=0.0, gather_forward=2.0, gather_backward=0.0, gather_after_step=0.0)
    fetching = OffloadSeconds(gradients_down=0.0, gradient_repeats=0, exposed=0.25, param_fetch=1.0)
    step = compose(layout(dp=8, m=4), micro, gathers, fetching, 0.0, 3, overlap=1.0)
    # Per micro-batch: forward hides 1 s of (0.5 s gather + 1 s fetch): 0.5 s exposed, charged to offload.
    assert step.dp_exposed == 0.0
    assert step.offload == pytest.approx(4 * 0.5 + 0.25)
    assert step.total == pytest.approx(4 * 3.0 + 4 * 0.5 + 0.25)
    streaming = OffloadSeconds(gradients_down=3.0, gradient_repeats=4, exposed=0.0, param_fetch=0.0)
    assert compose(layout(dp=8, m=4), micro, NO_DP, streaming, 0.0, 2, overlap=1.0).offload == pytest.approx(4 * 1.0)
    assert compose(layout(dp=8, pp=2, m=4), micro, NO_DP, streaming, 0.0, 1).offload == pytest.approx(12.0)


def test_collectives_pay_hop_latency_once_per_phase_not_per_bucket():
    links = LinkTable(NVLINK, IB)
    one = collective_seconds("all_gather", 10**9, 1024, links, 8, calls=1)
    many = collective_seconds("all_gather", 10**9, 1024, links, 8, calls=20)
    assert many - one == pytest.approx(19 * NCCL_LAUNCH_S)  # each extra bucket: a launch, not a ring of hops
    # Across nodes the per-GPU NIC is the bottleneck; inside a node NVLink.
    inside = collective_seconds("reduce_scatter", 10**9, 8, links, 8)
    across = collective_seconds("reduce_scatter", 10**9, 16, links, 8)
    assert inside == pytest.approx(7 / 8 * 1e9 / (300e9 * NVLINK_EFFICIENCY) + 7 * 3e-6 + NCCL_LAUNCH_S)
    assert across > 8 * inside
    # A large AllReduce takes the tree's latency: log2(nodes) network hops rather than a hop per rank.
    big = collective_seconds("all_reduce", 8, 4096, links, 8)
    assert big < 2 * (8 * 3e-6 + 9 * 5e-6) + 2 * NCCL_LAUNCH_S
    # Measured links are used as measured, without the preset efficiency.
    measured = LinkTable(NVLINK, IB, {"all_gather/intra_node": Link(100_000_000_000, 3e-6, source="bench")})
    assert collective_seconds("all_gather", 10**9, 8, measured, 8) == pytest.approx(
        7 / 8 * 1e9 / 100e9 + 7 * 3e-6 + NCCL_LAUNCH_S)


def test_compute_follows_gemm_shapes_and_attention_kernel():
    flops = FlopModel.from_model(gpt(layers=8))
    forward, backward, core = layer_seconds(layout(), flops, MACHINE)
    # The four GEMMs of a GPT layer at 12·h² FLOPs per token each direction: forward at the efficiency.
    gemms = 2 * 2048 * 12 * 12288**2 / (312e12 * 0.5)
    assert gemms < forward < 1.2 * gemms
    assert backward > 2 * gemms
    # Without flash attention the score matrix costs memory traffic and the masked half is computed.
    plain = layer_seconds(layout(flash=False), flops, MACHINE)
    assert plain[2] > core
    # Context parallelism: each GPU works on s/cp tokens; tensor parallelism splits the GEMMs. The layer's 12·h²
    # bf16 weights are read once per GEMM whatever its rows (docs/formulas.md §14.2): that part does not halve.
    split = layer_seconds(layout(cp=2), flops, MACHINE)
    reads = 12 * 12288**2 * 2 / MACHINE.hbm_bytes_per_s
    assert split[0] == pytest.approx((forward - reads) / 2 + reads, rel=0.01)
    tp8 = layer_seconds(layout(tp=8, sp=True), flops, MACHINE)
    assert forward / 8 < tp8[0] < 1.2 * forward / 8  # narrower GEMMs contract over h/8 in the row-parallel ones


def test_gemm_shape_costs_its_weight_widths_against_the_gpu_ridge():
    """Issue 21: a layer GEMM with an inner × outer weight costs 1 + K0·(1/inner + 1/outer)/2 times the large-GEMM
    time, K0 = GEMM_EPILOGUE_BYTES/2 × ridge (peak·efficiency/HBM): a 768-wide model is far from peak, a 12288-wide
    one near it; the same shape costs more on a GPU whose ridge is higher (H100's tensor cores outgrew its HBM more
    than A100's)."""
    import dataclasses

    from zeroplan.core.timing.step_time import GEMM_EPILOGUE_BYTES, gemm_seconds

    flops = 2 * 8192 * 768 * 3072
    plain = gemm_seconds(flops, MACHINE)
    ridge = MACHINE.peak_flops * MACHINE.efficiency / MACHINE.hbm_bytes_per_s
    k0 = GEMM_EPILOGUE_BYTES / 2 * ridge
    assert gemm_seconds(flops, MACHINE, 768, 3072) == pytest.approx(plain * (1 + k0 * (1 / 768 + 1 / 3072) / 2))
    assert gemm_seconds(flops, MACHINE, 12288, 49152) / plain < 1.05 < gemm_seconds(flops, MACHINE, 768, 3072) / plain
    hopper = dataclasses.replace(MACHINE, peak_flops=989e12, hbm_bytes_per_s=3.35e12)
    assert (gemm_seconds(flops, hopper, 768, 3072) / gemm_seconds(flops, hopper)
            > gemm_seconds(flops, MACHINE, 768, 3072) / plain)


def test_gemm_rows_tile_to_128_and_each_group_reads_its_weight():
    """A GEMM's rows m (docs/formulas.md §14.2, core.timing.machine GEMM_ROW_TILE): CUTLASS's Hopper grouped
    GEMM (pingpong) tiles 128 rows, so m rows cost ceil(m/128)·128 rows' FLOPs, each expert of a grouped GEMM tiled
    on its own; every group's k × n weight is read from HBM once (2 bytes bf16, 1 in an FP8 GEMM). Hand-computed
    on A100 figures (312 TFLOP/s, 2.039 TB/s, efficiency 0.691)."""
    import dataclasses

    from zeroplan.core.timing.step_time import gemm_k0, gemm_seconds

    a100 = dataclasses.replace(MACHINE, peak_flops=312e12, efficiency=0.691, hbm_bytes_per_s=2.039e12,
                               gemm_overhead_s=0.0, fp8_flops=0.0)
    k, n = 2048, 1536
    rate = 312e12 * 0.691
    shape = 1 + gemm_k0(a100) * (1 / k + 1 / n) / 2
    weight = k * n * 2 / 2.039e12  # 6.29 MB of bf16 weight at 2.039 TB/s: 3.09 µs
    # 4096 rows: whole tiles; only the weight read is added
    assert gemm_seconds(2 * 4096 * k * n, a100, k, n, rows=4096) == pytest.approx(
        2 * 4096 * k * n / rate * shape + weight)
    # 200 rows run as 256: 1.28x the FLOPs
    assert gemm_seconds(2 * 200 * k * n, a100, k, n, rows=200) == pytest.approx(
        2 * 256 * k * n / rate * shape + weight)
    # a grouped GEMM: 16 experts of 100 rows each (1600 rows) run as 16 x 128 rows and read 16 weights
    assert gemm_seconds(2 * 1600 * k * n, a100, k, n, rows=1600, groups=16) == pytest.approx(
        2 * 16 * 128 * k * n / rate * shape + 16 * weight)
    # one GEMM of the same 1600 rows: 13 tiles (1664 rows), one weight: far cheaper than the grouped one
    assert gemm_seconds(2 * 1600 * k * n, a100, k, n, rows=1600) == pytest.approx(
        2 * 1664 * k * n / rate * shape + weight)
    # FP8: the weight is read as 1 byte per element
    fp8 = dataclasses.replace(a100, fp8_flops=624e12)
    assert gemm_seconds(2 * 4096 * k * n, fp8, k, n, linear=True, rows=4096) == pytest.approx(
        2 * 4096 * k * n / (624e12 * 0.691) * (1 + gemm_k0(fp8, 624e12 * 0.691) * (1 / k + 1 / n) / 2) + weight / 2)
    # no rows given (attention's batched GEMMs, adapters): unchanged
    assert gemm_seconds(2 * 200 * k * n, a100, k, n) == pytest.approx(2 * 200 * k * n / rate * shape)


def test_routed_expert_gemms_are_grouped_over_the_local_experts():
    """The routed experts' GEMMs run as one grouped GEMM over the rank's experts / ep local experts (top-k rows per
    token in all); attention and shared experts' GEMMs as one each."""
    from zeroplan.core.timing.step_time import linear_shapes

    moe = FlopModel(params=0, layer_params=0, layers=1, hidden=2048, attention_width=4096, kv_width=512, ffn=768,
                    gated=True, experts_per_token=8, moe_layers=1, experts=128, shared_ffn=1024)
    import dataclasses

    shapes = linear_shapes(dataclasses.replace(layout(tp=1, seq=4096), ep=8), moe)
    assert [groups for *_mkn, groups in shapes] == [1, 1, 16, 16, 1, 1]
    assert shapes[2] == (4096 * 8, 2048, 2 * 768, 16)  # 4096 tokens x top-8 over 16 experts: 2048 rows each
    dense = dataclasses.replace(moe, experts_per_token=1, moe_layers=0, experts=0, shared_ffn=0)
    assert [groups for *_mkn, groups in linear_shapes(layout(tp=1), dense)] == [1, 1, 1, 1]


def test_flash_attention_ceiling_follows_gpu_and_kernel():
    """FlashAttention-2 reaches 73% of A100 peak but 35% of H100's; Hopper-native kernels (FA3, cuDNN) 75%
    (arXiv 2307.08691, 2407.08608): the same fitted share of each ceiling; the framework picks the kernel."""
    from zeroplan.core.timing.step_time import FLASH_SHARE_OF_MAX, flash_efficiency

    assert flash_efficiency("a100-80g") == pytest.approx(FLASH_SHARE_OF_MAX * 0.73)
    assert flash_efficiency("h100-80g") == pytest.approx(FLASH_SHARE_OF_MAX * 0.35)
    assert flash_efficiency("h100-80g", "fa3") == pytest.approx(FLASH_SHARE_OF_MAX * 0.75)
    assert flash_efficiency("h200-141g", "fa1") < flash_efficiency("a100-40g", "fa1")
    assert COMM_OVERLAPS["megatron"].attention_kernel == "fa3" and COMM_OVERLAPS["fsdp"].attention_kernel == "fa2"
    # Blackwell Ultra: the same tensor rates as Blackwell, twice the softmax's exponential throughput; NVIDIA
    # measured ~35% more attention forward throughput on GB300 than on GB200 (docs/formulas.md §14.2)
    for kernel in ("fa2", "fa3"):
        assert flash_efficiency("gb300-288g", kernel) == pytest.approx(1.35 * flash_efficiency("gb200", kernel))
        assert flash_efficiency("b200", kernel) == flash_efficiency("gb200", kernel)


def test_gemm_efficiency_per_gpu_from_measured_maxima():
    assert gemm_efficiency("a100-80g") > gemm_efficiency("h100-80g") > 0.5
    assert gemm_efficiency("a100-40g") == gemm_efficiency("a100-80g")
    # stas00/ml-engineering's MAMF table: H100 SXM 794.5 of 989 ("H200 is the same"), GH200 (900 W) 828.6 of 989
    assert gemm_efficiency("h200-141g") == gemm_efficiency("h100-80g")
    assert gemm_efficiency("gh200") / gemm_efficiency("h100-80g") == pytest.approx(828.6 / 794.5, rel=2e-3)


def test_gb200_gemms_run_faster_than_b200_ones_by_the_measured_maximum_not_the_sheets_peak():
    """NVIDIA's sheets give the GB200's Blackwell 2500 dense BF16 TFLOP/s against the HGX B200's 2250 (+11%); the
    measured maximum achievable matmul (stas00/ml-engineering "Maximum Achievable Matmul FLOPS": B200 SXM 1745.0,
    GB200 1822.0 TFLOP/s BF16) is only 4.4% apart. A large GEMM's rate on each (peak x efficiency) keeps the measured
    ratio; GB300, not measured, keeps the default share."""
    from zeroplan.inputs import presets

    gb200, b200 = presets.gpu("gb200"), presets.gpu("b200")
    assert gb200.bf16_flops / b200.bf16_flops == pytest.approx(2500 / 2250)
    rate = {gpu.name: gpu.bf16_flops * gemm_efficiency(gpu.name) for gpu in (gb200, b200)}
    assert rate["gb200"] / rate["b200"] == pytest.approx(1822.0 / 1745.0, rel=2e-3)
    assert gemm_efficiency("b200") / gemm_efficiency("h100-80g") == pytest.approx((1745.0 / 2250) / (794.5 / 989),
                                                                                 rel=2e-3)
    assert gemm_efficiency("gb300") == gemm_efficiency("l40s")  # the unmeasured default


def test_op_level_selective_checkpointing_recomputes_elementwise_work_and_every_second_matmul():
    """selective-op (torch's op-level selective activation checkpointing with torchtitan's policy, "Saves output of
    all compute ops, except every second mm"): backward re-runs each layer's element-wise forward at HBM bandwidth
    and the second, fourth and sixth matmuls of a Llama layer's forward (wq wk wv wo w1 w3 w2: the key, output and
    up projections), no TP collective; torchtitan's published rows say the same: op-level SAC costs its Llama 2 13B
    12% of the no-AC tokens/s (1904 against 2162 on 64 A100, torchtitan's performance page),
    more than element-wise work alone.
    In memory it keeps less than no recompute and more than full recompute."""
    from zeroplan.core.memory.activations import ActivationConfig, activation_memory
    from zeroplan.core.timing.step_time import elementwise_seconds, linear_gemm_seconds, op_sac_recompute_shapes

    flops = FlopModel.from_model(gpt())
    none = microbatch_seconds(layout(tp=8), flops, 12288, MACHINE)
    op = microbatch_seconds(layout(tp=8, recompute="selective-op"), flops, 12288, MACHINE)
    full = microbatch_seconds(layout(tp=8, recompute="full"), flops, 12288, MACHINE)
    h, tokens = 12288, 2048  # the GPT-3 175B shape: plain MLP of 4h, no GQA
    shapes = op_sac_recompute_shapes(layout(tp=8), flops)
    assert shapes == [(tokens, h, h / 8, 1), (tokens, h / 8, h, 1), (tokens, 4 * h / 8, h, 1)]  # wk, wo, MLP out
    gemms = sum(linear_gemm_seconds(shape, MACHINE) for shape in shapes)
    extra = flops.layers * (elementwise_seconds(layout(tp=8), flops, MACHINE) + gemms)
    assert gemms > 0 and extra > 0
    assert op[0] == none[0] and op[1] == pytest.approx(none[1] + extra) and op[2] == none[2]
    assert op[1] < full[1] and op[2] < full[2]
    added = flops.hardware_flops_per_token(2048, "selective-op") - flops.hardware_flops_per_token(2048, "none")
    assert added == 2 * flops.layers * (h * h + h * h + h * 4 * h)
    llama = FlopModel(params=0, layer_params=0, layers=1, hidden=4096, attention_width=4096, kv_width=1024,
                      ffn=14336, gated=True)
    assert op_sac_recompute_shapes(layout(tp=1), llama) == [(2048, 4096, 1024, 1), (2048, 4096, 4096, 1),
                                                            (2048, 4096, 14336, 1)]  # wk, wo, w3
    memory = {mode: activation_memory(gpt(), ActivationConfig(seq_len=2048, micro_batch=1, recompute=mode, tp=8,
                                                              flash_attention=True, sequence_parallel=True)).total
              for mode in ("none", "selective", "full", "selective-op")}
    assert memory["full"] < memory["selective-op"] < memory["selective"] <= memory["none"]


def test_framework_overlap_rules_hide_tp_and_interleaved_pp_transfers():
    assert comm_overlap(None) is COMM_OVERLAPS["baseline"] and COMM_OVERLAPS["baseline"].dp_overlap is None
    assert COMM_OVERLAPS["fsdp"].dp_overlap > DP_OVERLAP  # prefetch hides more than the fitted 2021 frameworks
    with pytest.raises(InputError, match="^comm_overlap: "):
        comm_overlap("nccl")
    from dataclasses import replace
    flops = FlopModel.from_model(gpt(layers=8))
    megatron = replace(MACHINE, tp_hidden=True, pp_hidden=True)
    forward, backward, tp_comm, _ = microbatch_seconds(layout(tp=8), flops, 12288, MACHINE)
    assert tp_comm > 0
    hidden = microbatch_seconds(layout(tp=8), flops, 12288, megatron)
    assert hidden[:2] == (forward, backward) and hidden[2] == 0.0  # the AllReduces are shorter than the GEMMs
    # Only what outlasts the stage's compute is exposed: on a GPU 1000x faster the TP time shows again, less the
    # (now tiny) compute.
    fast = replace(megatron, peak_flops=MACHINE.peak_flops * 1000, hbm_bytes_per_s=MACHINE.hbm_bytes_per_s * 1000)
    fast_forward, fast_backward, fast_tp, _ = microbatch_seconds(layout(tp=8), flops, 12288, fast)
    assert fast_tp == pytest.approx(tp_comm - fast_forward - fast_backward)
    # Userbuffers exchange over NVLink: TP across nodes stays exposed.
    across = layout(tp=8, intra=(False, True, True))
    assert microbatch_seconds(across, flops, 12288, megatron)[2] == microbatch_seconds(across, flops, 12288, MACHINE)[2]
    # overlap_p2p_comm is the interleaved schedule's: v = 1 still pays the transfers.
    crossing = (True, True, False)
    assert microbatch_seconds(layout(tp=8, pp=4, intra=crossing), flops, 12288, megatron)[3] > 0
    assert microbatch_seconds(layout(tp=8, pp=4, v=2, intra=crossing), flops, 12288, megatron)[3] == 0.0
    assert microbatch_seconds(layout(tp=8, pp=4, v=2, intra=crossing), flops, 12288, MACHINE)[3] > 0


def test_fp8_moves_only_the_linear_gemms_to_the_fp8_peak_and_adds_their_casts():
    """--precision fp8: QKV, output projection and MLP GEMMs at the FP8 peak, each operand cast at HBM bandwidth
    (5 bytes per element: bf16 read, FP8 write, amax pass); the attention core and the LM head stay bf16."""
    import dataclasses

    from zeroplan.core.timing.step_time import FP8_CAST_BYTES, head_seconds
    from zeroplan.inputs import presets

    assert presets.gpu("h100-80g").fp8_flops == 1_978_900_000_000_000 and presets.gpu("a100-80g").fp8_flops is None
    assert presets.gpu("b200").supports_mxfp8 and not presets.gpu("h100-80g").supports_mxfp8
    flops = FlopModel.from_model(gpt(layers=8))
    fp8 = dataclasses.replace(MACHINE, fp8_flops=2 * MACHINE.peak_flops, fp8_recipe="tensorwise")
    bf16_forward, bf16_backward, core = layer_seconds(layout(), flops, MACHINE)
    fp8_forward, fp8_backward, fp8_core = layer_seconds(layout(), flops, fp8)
    assert fp8_core == core and head_seconds(layout(), flops, fp8) == head_seconds(layout(), flops, MACHINE)
    assert bf16_forward / 2 < fp8_forward < bf16_forward and bf16_backward / 2 < fp8_backward < bf16_backward
    # The casts: tensorwise's 5 bytes per operand element forward against MXFP8's one-pass 3 + 1/32.
    h, tokens = 12288, 2048
    inputs = tokens * (h + h + h + 4 * h) + (h * 3 * h + h * h + h * 4 * h + 4 * h * h)  # x and w of each linear
    mx = layer_seconds(layout(), flops, dataclasses.replace(fp8, fp8_recipe="mxfp8"))[0]
    assert FP8_CAST_BYTES["tensorwise"] == 5
    assert fp8_forward - mx == pytest.approx((5 - FP8_CAST_BYTES["mxfp8"]) * inputs / MACHINE.hbm_bytes_per_s)


def test_async_tp_hides_what_its_compiler_pass_fuses():
    """--async-tp (PyTorch micro-pipelined TP, torch/_inductor/fx_passes/micro_pipeline_tp.py): an all-gather feeding
    matmuls and a reduce-scatter of one matmul's output hide behind (tp-1)/tp of that matmul; the backward's
    input-gradient reduce-scatters (a sum over q/k/v and gate/up, not one matmul's output) stay exposed."""
    import dataclasses

    from zeroplan.core.timing.step_time import linear_gemm_seconds, linear_shapes, tp_async_exposed

    flops = FlopModel(params=70_000_000_000, layer_params=800_000_000, layers=80, hidden=8192, attention_width=8192,
                      kv_width=1024, ffn=28672, gated=True, vocab=128256, heads=64)
    layout = Layout(dp=1, tp=8, pp=1, virtual_stages=1, seq_len=8192, micro_batch=1, grad_accum=1, recompute="none",
                    sequence_parallel=True, tp_intra_node=True, dp_intra_node=True, pp_intra_node=True)
    machine = MACHINE
    tiny = 1e-9  # every fused collective hides: only the backward's two reduce-scatters (one AllReduce) remain
    assert tp_async_exposed(layout, flops, machine, tiny) == pytest.approx(tiny)
    full = dataclasses.replace(layout, recompute="full")
    assert tp_async_exposed(full, flops, machine, tiny) == pytest.approx(tiny)  # the recomputed forward hides too
    huge = 1.0  # nothing can hide all of it: each collective exposes what (tp-1)/tp of its GEMM cannot cover
    gemms = [linear_gemm_seconds(shape, machine) for shape in linear_shapes(layout, flops)]
    share = 7 / 8
    hidden = share * (sum(gemms) + gemms[1] + gemms[3])  # forward: all four; backward: the two all-gathers
    assert tp_async_exposed(layout, flops, machine, huge) == pytest.approx(4 * huge - hidden)


def test_torch_compile_prices_each_fused_region_once():
    """--torch-compile (docs/formulas.md §22.2): a compiled layer's element-wise traffic is its three fused regions'
    inputs and outputs (residual + norm twice, 4·h each; the gated MLP's activation, 3·f), 16-bit: Llama 3 8B's
    75,776 elements a token at t = 1; with sequence parallelism the residual regions split over tp like the MLP's."""
    import dataclasses

    from zeroplan.core.timing.step_time import elementwise_seconds, fused_elementwise_elements

    flops = FlopModel(params=8_000_000_000, layer_params=218_000_000, layers=32, hidden=4096, attention_width=4096,
                      kv_width=1024, ffn=14336, gated=True, vocab=128256, heads=32)
    layout = Layout(dp=8, tp=1, pp=1, virtual_stages=1, seq_len=8192, micro_batch=2, grad_accum=1, recompute="none",
                    sequence_parallel=False, tp_intra_node=True, dp_intra_node=True, pp_intra_node=True)
    assert fused_elementwise_elements(layout, flops) == 8 * 4096 + 3 * 14336 == 75_776
    split = dataclasses.replace(layout, tp=4, sequence_parallel=True)
    assert fused_elementwise_elements(split, flops) == 75_776 / 4
    compiled = dataclasses.replace(MACHINE, elementwise_fused=True)
    eager, fused = elementwise_seconds(layout, flops, MACHINE), elementwise_seconds(layout, flops, compiled)
    assert fused == pytest.approx(2 * 75_776 * 2 * 8192 / MACHINE.hbm_bytes_per_s)
    assert eager == pytest.approx(68 * 4096 * 2 * 8192 / MACHINE.hbm_bytes_per_s) and fused < eager
def test_flash_attention_runs_narrow_heads_at_the_measured_share_of_the_head_dim_128_rate():
    """FlashAttention-3 paper Fig. 5 (BF16 forward, H100, sequence 8k): 496 TFLOP/s at head dim 64 against 646 at 128
    (FlashAttention-3), 322 against 370 (FlashAttention-2). The same attention FLOPs with 64-wide heads take
    1/share as long; 128 and wider are unchanged."""
    import dataclasses

    from zeroplan.core.hardware import Link
    from zeroplan.core.timing.collectives import LinkTable
    from zeroplan.core.timing.machine import Machine, flash_head_dim_share
    from zeroplan.core.timing.step_time import FlopModel, Layout, layer_seconds

    assert flash_head_dim_share(64, "fa3") == pytest.approx(496 / 646)
    assert flash_head_dim_share(64, "fa2") == pytest.approx(0.87) == flash_head_dim_share(32, "fa2")
    assert flash_head_dim_share(96, "fa3") == pytest.approx((496 / 646 + 1) / 2)
    assert flash_head_dim_share(128, "fa3") == flash_head_dim_share(256, "fa2") == 1.0
    machine = Machine(peak_flops=989e12, hbm_bytes_per_s=3.35e12, pcie_bytes_per_s=63e9, nvme_bytes_per_s=None,
                      links=LinkTable(Link(450e9, 3e-6, "preset"), Link(50e9, 5e-6, "preset")), attention_kernel="fa3")
    wide = FlopModel(1, 1, 1, 4096, 4096, heads=32)  # head dim 128
    narrow = dataclasses.replace(wide, heads=64)  # the same width in 64-wide heads: the same attention FLOPs
    layout = Layout(1, 1, 1, 1, 8192, 1, 1, "none", False, True, True, True)
    _, _, core_wide = layer_seconds(layout, wide, machine)
    _, _, core_narrow = layer_seconds(layout, narrow, machine)
    assert core_narrow == pytest.approx(core_wide * 646 / 496)
