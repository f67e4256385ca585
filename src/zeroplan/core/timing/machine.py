"""The throughput side of the hardware a step runs on (Machine), and the calibrated constants it carries:
the share of peak a GEMM reaches, attention and element-wise memory traffic, the DP overlap share (fitted on the
calibration set only: benchmarks/fit_step_time.py) and the CPU Adam rate. core.timing.step_time prices a step
on it; core.timing.dp_offload prices data-parallel, offload and optimizer time on it. Formulas
and fitted values: docs/formulas.md §14."""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError
from zeroplan.core.timing.collectives import LinkTable

# Five constants fitted on the calibration set only (refitted 2026-12-01 after the GEMM rows' weight read, the
# head-dim share of flash attention and torchtitan's op-level recompute entered the model; benchmarks/fit_step_time.py,
# benchmarks/data/calibration_runs.json: 29 A100 runs from Narayanan 2021 Tables 1-2, MT-NLG, Korthikanti 2022
# Table 5, BLOOM, OPT, 57 MosaicML MPT runs, 125M-70B, 2k-64k, on A100 and H100, and 5 DGXC Llama 3.1 FP8 runs on
# H100): GEMM_SHARE_OF_MAX, GEMM_EPILOGUE_BYTES, FLASH_SHARE_OF_MAX, ATTENTION_SCORE_BYTES, DP_OVERLAP, least squares
# on ln(predicted/published); in-sample and leave-one-out by band in docs/plan.md (in-sample mean |ln| 0.070 with
# the constants before, 0.065 refitted; before: 0.7948, 9.921, 0.9296, 5.831, 0.2763). The GEMM
# ceiling is checked against measured maxima: large bf16 GEMMs reach 0.87 of peak on A100 and 0.80 on H100
# (stas00/ml-engineering "Maximum Achievable Matmul FLOPS"); the fit lands below that since end-to-end kernels are
# not all ideal shapes.
GEMM_SHARE_OF_MAX = 0.8202  # share of the measured GEMM maximum (below) a large training GEMM reaches
# Measured maximum achievable bf16 matmul throughput / dense peak (stas00/ml-engineering, compute/accelerator
# "Maximum Achievable Matmul FLOPS"): A100 SXM 271.2/312, H100 SXM 794.5/989 (the table: "H200 is the same": the
# same die at the same 700 W, so H200 takes H100's share), GH200 (the 900 W module) 828.6/989, B200 SXM 1745.0/2250,
# B300 SXM 1769.0/2250, GB200 1822.0/2500 (the same table's FP8 rows agree: B200 76.3%, GB200 72.3%). GB200's peak is 11%
# above B200's (NVIDIA's NVL72 and HGX sheets) but its measured maximum only 4.4%: the Blackwell GPU of a GB200
# reaches a smaller share of its higher peak. Other GPUs (GB300 and B300 among them: GB300 is not measured, and
# GB200 against B200 shows a share does not carry from an HGX part to its superchip sibling): the A100/H100 mean.
# The calibration set has A100 and H100 runs; other GPUs carry this ratio, not a fit.
MAX_MATMUL_SHARE = {"a100": 0.869, "a800": 0.869, "h100": 0.803, "h800": 0.803, "h200": 0.803, "gh200": 0.838,
                    "b200": 0.776, "b300": 0.786, "gb200": 0.729}
DEFAULT_MAX_MATMUL_SHARE = 0.836
# A fixed time per GEMM kernel (launch, partial last wave) was fitted too: the calibration runs drive it to 0
# (their GEMMs are large), so it stays 0 and out of the fit until runs with small GEMMs support a value.
GEMM_OVERHEAD_S = 0.0
# A GEMM's shape (docs/formulas.md §14.2): each output tile runs a main loop of 2·K FLOPs per
# output element over its contraction length K, and outside it (prologue loads, the epilogue's store, fp32 gradient
# accumulation) moves GEMM_EPILOGUE_BYTES per output element at HBM bandwidth, not overlapped: a K-long contraction
# runs at K/(K + K0) of the large-GEMM rate, K0 = GEMM_EPILOGUE_BYTES/2 × the GPU's ridge point (peak·efficiency /
# HBM bandwidth in FLOP/byte: ~108 on A100, ~190 on H100 at the fitted efficiency). A layer's weight of inner × outer
# is contracted over inner (forward), outer (data gradient) and the tokens (weight gradient, 2k-128k in every run:
# long), and its output tiles span the same widths, so each of its GEMMs is priced at 1 + K0·(1/inner + 1/outer)/2
# times the large-GEMM time: small hidden sizes and narrow tp splits run further from peak, the more so on a GPU
# whose ridge is high (H100's tensor cores outgrew its HBM more than A100's did). Fitted.
GEMM_EPILOGUE_BYTES = 10.48
# A GEMM's rows m (the tokens it multiplies; a routed expert's share of them): docs/formulas.md §14.2.
# - Row tiles: the kernel covers m in tiles of GEMM_ROW_TILE rows (CUTLASS's Hopper grouped GEMM, the kind
#   Megatron-Core's grouped experts run: examples/57_hopper_grouped_gemm tiles 128 rows per CTA in its pingpong
#   config, TileShape 128 x 128, and 256 in its cooperative one, 256 x 128 x 128; a Hopper WGMMA instruction is 64
#   rows), so a GEMM of m rows costs ceil(m/128)·128 rows' FLOPs (the smaller tile: a stated lower bound); in a
#   grouped GEMM each expert's rows are tiled on their own. Stated, not fitted: a dense GEMM's m (micro-batch x sequence) is a multiple of 128 in every
#   published run, so only few-row expert GEMMs move.
# - Weight reads: every GEMM streams its k x n weight (each expert's in a grouped GEMM) from HBM once, at HBM
#   bandwidth, added like the epilogue (the large-GEMM efficiency was fitted on GEMMs whose m made that read a few
#   per cent of their time); GEMM_WEIGHT_BYTES per weight element: bf16, 1 byte for a linear layer's FP8 GEMM.
GEMM_ROW_TILE = 128
GEMM_WEIGHT_BYTES = 2
ATTENTION_SCORE_BYTES = 4.18  # memory traffic per attention score element, forward, without flash attention
# Flash attention (fused, causal: the masked half skipped): the kernel's measured ceiling on the GPU, times a fitted
# share, times s/(s + FLASH_SEQ_HALF): short sequences leave the kernel's tiles and SMs partly idle (FlashAttention-2,
# Dao 2023, arXiv 2307.08691 Figs. 4-7: throughput rises with sequence length and saturates past a few thousand).
# Ceilings (share of dense bf16 peak), by kernel family (--attention-kernel):
# - fa2 (flash-attn 2, torch SDPA's flash backend): up to 73% of A100 peak (arXiv 2307.08691 abstract) but only
#   35% of H100's (FlashAttention-3, Shah et al. 2024, arXiv 2407.08608 abstract);
# - fa3 (Hopper kernels built on its asynchrony: flash-attn 3, cuDNN's fused attention that Transformer Engine
#   calls): 75% of H100 peak (same source); on Ampere they are FlashAttention-2's algorithm: its 73%;
# - fa1 (flash-attn 1 and the Triton flash-attention kernel of its time, e.g. MosaicML's attn_impl triton):
#   25-40% of A100 peak (arXiv 2307.08691 abstract: 40%); on H100 not measured: FlashAttention-2's H100/A100
#   ratio applied to it (0.40 x 0.35/0.73 = 0.19), a stated assumption.
# Which kernel a run gets is its framework's (core.timing.step_time.CommOverlap.attention_kernel) unless given.
FLASH_MAX_SHARE = {("ampere", "fa1"): 0.40, ("ampere", "fa2"): 0.73, ("ampere", "fa3"): 0.73,
                   ("hopper", "fa1"): 0.19, ("hopper", "fa2"): 0.35, ("hopper", "fa3"): 0.75}
DEFAULT_FLASH_MAX_SHARE = 0.55  # other GPUs: the mean of the A100 and H100 fa2/fa3 ceilings, not measured
# Blackwell Ultra (GB300, B300): the same dense bf16 tensor rate as Blackwell, but twice the special-function
# units' exponential throughput (MUFU.EX2) that a flash kernel's softmax waits on between its two matmuls; NVIDIA
# measured ~35% more attention forward throughput on GB300 than GB200 from it ("Making Softmax More Efficient with
# NVIDIA Blackwell Ultra", NVIDIA technical blog, 2026: FP8 attention FPROP, DeepSeek-V3). Blackwell's own
# ceiling is not measured (the default above); Blackwell Ultra's is that default × 1.35, for every kernel family.
BLACKWELL_ULTRA_ATTENTION_SPEEDUP = 1.35
FLASH_MAX_SHARE.update({("blackwell_ultra", kernel): DEFAULT_FLASH_MAX_SHARE * BLACKWELL_ULTRA_ATTENTION_SPEEDUP
                        for kernel in ("fa1", "fa2", "fa3")})
# Head dimension: the ceilings above are measured at head dim 128 (the FlashAttention-2/-3 papers' headline
# shapes). Narrower heads do fewer FLOPs per byte of Q, K, V moved and per softmax element, and run further from
# peak: FlashAttention-3's BF16 forward on H100 (arXiv 2407.08608 Fig. 5, sequence 8k) reaches 496 TFLOP/s at head
# dim 64 against 646 at 128 (FlashAttention-3) and 322 against 370 (FlashAttention-2): shares 0.77 and 0.87 of the
# head-dim-128 rate. Wider heads (256: 628 against 646) are taken as 128. Between 64 and 128 the share is
# interpolated linearly in the head dim; below 64 it stays at 64's. fa1 (no measurement): fa2's.
FLASH_HEAD_DIM_64_SHARE = {"fa1": 0.87, "fa2": 0.87, "fa3": 496 / 646}
# FlashAttention's backward runs ~2.5x its forward's time: it recomputes the scores and runs five matmuls to the
# forward's two (FlashAttention-2, Dao 2023, arXiv 2307.08691 §3.1.2 and Fig. 5-7: backward throughput ~0.8 of forward's)
FLASH_BACKWARD_RATIO = 2.5
FLASH_SHARE_OF_MAX = 0.9534  # fitted: share of the kernel's ceiling training shapes reach, forward and backward
FLASH_SEQ_HALF = 0.0  # the sequence length at which flash attention runs at half its long-sequence rate: fitted
# on 2026-12-01 to its lower bound (no slowdown the 2k-64k runs can see), so 0 and out of the fit
FLASH_ATTENTION_EFFICIENCY = FLASH_SHARE_OF_MAX * FLASH_MAX_SHARE[("ampere", "fa2")]
# A fixed host/launch cost per transformer layer and micro-batch pass (kernel launches, framework hooks: FSDP's
# per-layer pre/post hooks, autograd bookkeeping), forward; backward twice. Shows on small models and short steps.
LAYER_OVERHEAD_S = 0.0
# FP8 training (--precision fp8): the linear layers' GEMMs (QKV, output projection, MLP; not the attention core, the
# embeddings or the LM head: torchao's Float8Linear conversion and Transformer Engine's te.Linear) run on the GPU's
# FP8 tensor cores (presets: fp8_tflops) at the same fitted share of peak as bf16 (suite G's FP8 runs, NeMo 24.09 on
# H100, land at 0.93-1.06 with it: no FP8-only constant is fitted), and each operand is cast on the way in, memory bound, per element:
# read bf16 (2) + write FP8 (1) + the amax pass for a per-tensor or per-row scale (2) = 5 bytes; MXFP8 computes its
# 1x32 block scales in the cast's one pass (3 + 1/32). Backward casts the output gradient and needs the input and
# weight along the other axis: an FP8 transpose (1 byte read + 1 written) for tensorwise, a fresh cast for rowwise
# and mxfp8 (torchao float8 README, "float8 training" recipes; Transformer Engine's cast_transpose).
FP8_CAST_BYTES = {"tensorwise": 5.0, "rowwise": 5.0, "mxfp8": 3 + 1 / 32}
FP8_OTHER_AXIS_BYTES = {"tensorwise": 2.0, "rowwise": 5.0, "mxfp8": 3 + 1 / 32}
# Element-wise traffic: Korthikanti et al.'s stored activation bytes per layer (34·s·b·h, 10 of them not split
# by tp without sequence parallelism), each written once and read once.
ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN = 68
# torchtitan's eager Llama block (torchtitan/models/llama3/model.py at e7c0cae, June 2025; the 2024 runs' code is the
# same): bytes its non-GEMM, non-attention-kernel ops read and write per token, forward and backward, counted op by op
# from the aten ops torch runs (tests/test_torchtitan_eager_trace.py; docs/formulas.md §25). Per token, by the width
# each op runs on: h the residual stream, w the query width, kv the key/value width, f the MLP's hidden size.
# - "stream" (h, split by tp only under sequence parallelism): the two nn.RMSNorm, whose composite kernel upcasts to
#   fp32 (x.float() 6, pow 8, mean 4, x·rsqrt 8, ·weight 8, downcast 6: 40 each) and the two residual adds (6 each):
#   92 forward; backward the norms' autograd in fp32 (104 each) and the residual gradients' sums (6 each): 220.
# - "input_grads" (h, backward, never split: each rank sums its column-parallel GEMMs' input gradients over the whole
#   hidden width): the sums of the q/k/v (2) and gate/up (1) input gradients, 6 each: 18.
# - "rope" (w and kv): apply_rotary_emb's complex multiply in fp32: upcast 6, multiply 8, downcast 6 = 20 per element
#   of q and of k, forward and backward.
# - "repeat_kv" (w and kv, grouped-query attention only): the expand+reshape copy of K and V (read kv, write w, 2
#   bytes each: 2·w + 2·kv per tensor); backward the sum back over the repeats (the same bytes).
# - "mlp" (f): silu (4) and its product with the up projection (6) = 10 forward; backward 18 (two products and
#   silu_backward).
# The flash kernel's output needs no .contiguous() copy (it is stored in the layout the model transposes it to).
TORCHTITAN_EAGER_BYTES = {"stream": (92, 220), "input_grads": (0, 18), "rope": (20, 20), "repeat_kv": (4, 4),
                          "mlp": (10, 18)}
# Hugging Face transformers' eager LlamaDecoderLayer (transformers 5.24 models/llama/modeling_llama.py, sdpa attention,
# bf16 parameters as FSDP's MixedPrecision param_dtype casts them), counted the same way
# (tests/test_transformers_eager_trace.py; docs/formulas.md §26), by the same widths:
# - "stream": LlamaRMSNorm upcasts to fp32 but scales by the weight in bf16 (x.to(fp32) 6, pow 8, mean 4, x·rsqrt 8,
#   downcast 6, weight· 4: 36 each) and the two residual adds (6 each): 84 forward; backward the norms' autograd
#   (92 each: the fp32 chain of the composite ops, the weight's bf16 gradient) and the residual sums (6 each): 196.
# - "input_grads": as torchtitan's (q/k/v and gate/up input-gradient sums): 18.
# - "rope": apply_rotary_pos_emb in bf16, q·cos + rotate_half(q)·sin (mul 4, neg of half 2, cat 4, mul 4, add 6) =
#   20 per element of q and of k forward; backward 28 (two products, the neg, two slice_backwards, two adds) plus a
#   copy of q's and k's gradients (4: the slice_backwards leave them in the transposed layout, so the view back to
#   (b, s, heads·d) copies): 32.
# - "repeat_kv": 0. With no padding mask (create_causal_mask returns None, sdpa's is_causal path) transformers passes
#   enable_gqa=True to scaled_dot_product_attention (integrations/sdpa_attention.py use_gqa_in_sdpa; its flash
#   backend reads the shared K/V heads) instead of copying K and V; a padding mask falls back to repeat_kv (+4·(w+kv)
#   forward, +4·(w+kv)+4·kv backward).
# - "mlp": LlamaMLP's act_fn(gate)·up: as torchtitan's, 10 forward, 18 backward.
TRANSFORMERS_EAGER_BYTES = {"stream": (84, 196), "input_grads": (0, 18), "rope": (20, 32), "repeat_kv": (0, 0),
                            "mlp": (10, 18)}
# The eager blocks counted op by op (core.timing.step_time ELEMENTWISE_BLOCKS, eager_block_bytes).
EAGER_BLOCK_BYTES = {"torchtitan": TORCHTITAN_EAGER_BYTES, "transformers": TRANSFORMERS_EAGER_BYTES}
# MoE token handling (not fitted: counted from Megatron-Core's MoEAlltoAllTokenDispatcher, token_dispatcher.py, and
# moe_utils.permute/unpermute/sort_chunks_by_idxs): a routed token's hidden vector is read and written by the permute
# before the dispatch all-to-all, the sort into local-expert order after it, the unsort before the combine
# all-to-all and the unpermute (weighted sum into the token) after it: 4 copies, each a read and a write.
MOE_DISPATCH_COPIES = 8
# Dropless routing through an all-to-all dispatcher syncs the host once per MoE layer forward: the all-to-all's
# output sizes and the grouped GEMM's rows per expert are only known on the GPU, so Megatron-Core's
# MoEAlltoAllTokenDispatcher copies the token counts to the host and synchronises the stream (token_dispatcher.py:
# cuda_dtoh_point / cuda_sync_point; no sync when it drops and pads to a capacity, moe_pad_expert_input_to_capacity),
# and torchtitan's all_to_all_single takes its split sizes as host lists the same way. The host cannot queue work
# ahead of the sync, so each MoE layer's kernel launches after it (the rest of the layer, the backward that follows)
# run exposed instead of hidden behind the GPU's queue. Priced per MoE layer and micro-batch (charged to the forward,
# again in a recomputed forward) at the difference a paired published measurement shows: the Megatron-Bridge
# performance summary ran the same layouts on the same DGX-B200 systems token-dropping (25.09 container) and
# dropless (25.11), both with the alltoall dispatcher: Qwen3-30B-A3B (8 GPUs, ep 8, micro-batch 1) went from 18,066
# to 9,299 tokens/s/GPU, 4.45 ms more per MoE layer and micro-batch (64 micro-batches x 48 layers); Qwen3-235B-A22B
# (64 GPUs, pp 8, vp 2, ep 8, FP8-MX) from 4,275 to 3,269, 2.99 ms more (131.5 pipeline slots x 12 layers). The
# 235B pair's two sides differ by one more trait: the dropless run's recipe overlaps the all-to-all with the other
# micro-batch's compute (Megatron-Bridge v0.2.0 QWEN3_235B_A22B_B200_FP8_CS_BASE_CONFIG moe_a2a_overlap=True) and the
# token-drop run's does not (v0.1.0rc3 scripts/performance/run_script.py: apply_moe_token_drop, no
# overlap_moe_expert_parallel_comm), so its difference is the sync less the all-to-all the overlap hid:
# MOE_DROPLESS_SYNC_HIDDEN_A2A, the layout's exposed all-to-all as core.timing.step_time.ep_alltoall_layer_seconds
# prices it (dispatch and combine, forward and backward, 4,096 tokens x 8 copies x 4,096 wide over the DGX-B200's
# NVLink; tests/test_benchmarks_run.py recomputes it). Corrected, the two pairs agree (4.45 and 4.37 ms); their mean is taken.
# (The 25.09 Qwen3-30B-A3B row names no precision; had it been BF16 against 25.11's FP8-MX, the
# dropless cost would be larger, not smaller.) The flex dispatcher with HybridEP shows no such cost (Qwen3-30B-A3B on 8 GB200: 23,723 token-drop,
# 23,766 dropless), so --moe-dispatcher hybridep pays none. Not fitted on any residual; the H100 pair of the same
# tables (Qwen3-30B-A3B FP8-CS, 16 GPUs: 10,494 -> 5,275) shows 16 ms, far more than this: see docs/plan.md.
MOE_DROPLESS_SYNC_HIDDEN_A2A = {"qwen3-235b-a22b dgx-b200": 1.384e-3}
MOE_DROPLESS_SYNC_PAIRS = {"qwen3-30b-a3b dgx-b200": 4.45e-3,
                           "qwen3-235b-a22b dgx-b200": 2.99e-3 + MOE_DROPLESS_SYNC_HIDDEN_A2A["qwen3-235b-a22b dgx-b200"]}
MOE_DROPLESS_SYNC_S = sum(MOE_DROPLESS_SYNC_PAIRS.values()) / len(MOE_DROPLESS_SYNC_PAIRS)
LOGIT_BYTES = 12  # cross entropy over the vocabulary: fp32 logits written, read, gradient written
DP_OVERLAP = 0.259  # share of a pass's compute that DP collectives can hide behind (fitted, see above)


# DeepSpeed CPU Adam, per node: the step is memory bound (~30 bytes per parameter read or written), so a
# two-socket server streaming 50-100 GB/s manages a few 1e9 parameters/s; the ZeRO-Offload paper's CPU-Adam
# latencies sit near 1 s per 1e9 parameters. 1e9 per node is the conservative default (--cpu-adam-rate).
DEFAULT_CPU_ADAM_PARAMS_PER_S = 1_000_000_000
ACTIVATION_ELEMENT_BYTES = 2  # TP/PP messages carry 16-bit activations
def gemm_efficiency(gpu_name: str) -> float:
    """Share of dense peak a large GEMM reaches on this GPU: the fitted share of its measured maximum."""
    key = gpu_name.lower().split("-")[0]
    return GEMM_SHARE_OF_MAX * MAX_MATMUL_SHARE.get(key, DEFAULT_MAX_MATMUL_SHARE)


DEFAULT_EFFICIENCY = gemm_efficiency("a100")
GPU_ARCHITECTURES = {"a100": "ampere", "a800": "ampere", "a10": "ampere", "a40": "ampere", "a6000": "ampere",
                     "h100": "hopper", "h800": "hopper", "h200": "hopper", "gh200": "hopper",
                     "gb300": "blackwell_ultra", "b300": "blackwell_ultra"}


def flash_efficiency(gpu_name: str, kernel: str = "fa2") -> float:
    """Share of dense peak flash attention reaches on long sequences on this GPU with this kernel: the fitted share of
    the kernel's measured ceiling (FLASH_MAX_SHARE)."""
    architecture = GPU_ARCHITECTURES.get(gpu_name.lower().split("-")[0])
    return FLASH_SHARE_OF_MAX * FLASH_MAX_SHARE.get((architecture or "", kernel), DEFAULT_FLASH_MAX_SHARE)


def flash_head_dim_share(head_dim: int, kernel: str) -> float:
    """The flash kernel's rate at this head dimension relative to head dim 128 (FLASH_HEAD_DIM_64_SHARE)."""
    if head_dim >= 128 or head_dim <= 0:
        return 1.0
    low = FLASH_HEAD_DIM_64_SHARE.get(kernel, FLASH_HEAD_DIM_64_SHARE["fa2"])
    return low + (1.0 - low) * (max(head_dim, 64) - 64) / 64


def check_efficiency(value: float) -> float:
    if not 0.001 <= value <= 1:  # below 0.1% of peak no step-time figure means anything (and may underflow)
        raise InputError("efficiency", f"must be a fraction in [0.001, 1], got {value:g}", "write e.g. 0.5")
    return value


@dataclass(frozen=True)
class Machine:
    """The throughput side of the hardware."""

    peak_flops: float  # dense bf16 per GPU
    hbm_bytes_per_s: float
    pcie_bytes_per_s: float
    nvme_bytes_per_s: float | None  # per node
    links: LinkTable
    efficiency: float = DEFAULT_EFFICIENCY  # share of peak a large GEMM reaches
    cpu_adam_params_per_s: float = DEFAULT_CPU_ADAM_PARAMS_PER_S  # per node
    gemm_overhead_s: float = GEMM_OVERHEAD_S
    attention_score_bytes: float = ATTENTION_SCORE_BYTES
    flash_efficiency: float = FLASH_ATTENTION_EFFICIENCY  # long-sequence share of peak (flash_efficiency())
    gemm_epilogue_bytes: float = GEMM_EPILOGUE_BYTES
    flash_seq_half: float = FLASH_SEQ_HALF
    layer_overhead_s: float = LAYER_OVERHEAD_S
    moe_sync_s: float = 0.0  # per MoE layer and micro-batch: MOE_DROPLESS_SYNC_S when the dispatcher syncs, else 0
    moe_a2a_hidden: bool = False  # the EP all-to-all hides behind another micro-batch's compute (--moe-a2a-overlap)
    attention_kernel: str = "fa2"  # the flash kernel family flash_efficiency was taken for (its head-dim share)
    moe_node_dedup: bool = False  # the dispatcher sends a token once per remote node, NVLink forwards it (HybridEP, DeepEP)
    fp8_flops: float = 0.0  # dense FP8 peak the linear layers run at under --precision fp8; 0: bf16 throughout
    fp8_recipe: str = ""  # core.precision.FP8_RECIPES
    gpus_per_node: int = 8
    dp_overlap: float = DP_OVERLAP
    tp_hidden: bool = False  # CommOverlap.tp_hidden
    tp_async: bool = False  # PyTorch async TP (--async-tp): core.timing.step_time.tp_async_exposed
    elementwise_fused: bool = False  # torch.compile (--torch-compile): core.timing.step_time.elementwise_seconds
    pp_hidden: bool = False  # CommOverlap.pp_hidden
    cp_ring: str = "p2p"  # CommOverlap.cp_ring: how context parallelism runs (core.timing.step_time.CP_RINGS)
    eager_block: str = "korthikanti"  # CommOverlap.eager_block: the eager element-wise count (ELEMENTWISE_BLOCKS)

    @property
    def flops_per_s(self) -> float:
        return self.peak_flops * self.efficiency
