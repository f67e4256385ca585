"""Time of one optimizer step: compute, tensor/context/pipeline/data-parallel communication, the pipeline
bubble, offload transfers and the optimizer step (docs/formulas.md §9-§14). Standard library only.

Compute: what each GPU multiplies. Per layer and micro-batch, the GEMMs after the tp/cp splits (tokens
T = micro-batch × sequence / cp): QKV (T × h × (w + 2·w_kv)/tp), the output projection (T × w/tp × h), the MLP
(gated: T × h × 2f/tp and T × f/tp × h; plain: f instead of 2f), the LM head on the last stage
(T × h × V/tp); backward runs two GEMMs of the same size for each (data and weight gradients). A GEMM of F
FLOPs with an inner × outer weight takes F / (peak × efficiency) × (1 + K0·(1/inner + 1/outer)/2): the efficiency
is the share of dense peak GEMMs with large weights reach, K0 = GEMM_EPILOGUE_BYTES/2 × the GPU's FLOP/byte ridge
(core.timing.machine), so small hidden sizes and narrow tp splits run further from peak, more so where the ridge is
high (H100). Under --precision fp8 the linear layers' GEMMs run at the FP8 peak plus their casts at HBM bandwidth.
Attention's core (QKᵀ and AV, 4·b·(s/cp)·s·w/tp FLOPs forward) runs without flash as batched GEMMs plus the score
matrix's memory traffic (ATTENTION_SCORE_BYTES per score element, forward; twice that backward); with flash
attention as one fused kernel skipping the masked half of a causal sequence, at the machine's flash efficiency:
a fitted share of the kernel family's measured ceiling on the GPU (core.timing.machine FLASH_MAX_SHARE; the
framework's kernel, CommOverlap.attention_kernel). Element-wise work (norms, activations, dropout, residuals) is memory
bound: ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN · T · h bytes forward (split over tp as Korthikanti's activation
terms are: 10 + 24/t without, 34/t with sequence parallelism), twice that backward, at HBM bandwidth; under
--torch-compile each fused region's inputs and outputs once (fused_elementwise_elements).
Recompute: full re-runs each layer's forward, selective the attention core, selective-op (torch's op-level
selective checkpointing with torchtitan's policy) the element-wise ops at HBM bandwidth and every second linear
GEMM of the layer's forward (op_sac_recompute_shapes: the key, output and up projections). The constants were fitted on the
calibration set only (benchmarks/fit_step_time.py; see the constants below for the fit and its sources).

Communication as NCCL behaves (docs/formulas.md §9.3, §11): every collective is a ring over its group, priced
on the slowest span it crosses: inside a node the GPU link (NVLink) at NVLINK_EFFICIENCY of its rate; across nodes the per-GPU
NIC bandwidth at NIC_EFFICIENCY (capped by the GPU link). Latency: NCCL pipelines a buffer in chunks, so a ring's hop latencies are paid once per
collective phase, not per bucket; each further bucket costs NCCL_LAUNCH_S. AllReduce takes the lower of the
ring's latency and a tree's (2·(k-1) hops in the node + 2·log2(nodes) hops across).
- TP (Megatron): 4 AllReduces of T·h per layer and micro-batch (6 with full recompute); sequence
  parallelism replaces each by AllGather + ReduceScatter (same bytes). Not overlapped with compute, except
  under the megatron framework rule (CommOverlap: tp_comm_overlap hides them behind the stage's GEMMs) and under
  PyTorch's async TP (--async-tp: what its compiler pass fuses hides behind its GEMM, tp_async_exposed).
- CP (ring / all-gather attention): keys and values of the other cp−1 chunks gathered in forward (again in a
  full recompute), their gradients reduce-scattered in backward; hidden behind the attention core up to its
  time. Under PyTorch's experimental ring (the torchtitan rule, CommOverlap.cp_ring "torch", docs/formulas.md §24)
  the keys and values are repeated to the query heads, the gather hides behind the first step's kernel only, the
  fp32 key/value gradients travel the ring one send per step (the last exposed) and the eager fp32 merges add
  memory-bound traffic (cp_exposed_seconds, cp_merge_seconds).
- PP: one activation forward and one gradient backward per boundary per micro-batch (×v with interleaving),
  point to point; with tp > 1 each rank sends 1/t of it (Megatron's scatter/gather). Not overlapped, except
  under the megatron rule with interleaving (overlap_p2p_comm).
- EP (mixture of experts, ep > 1): per MoE layer and micro-batch an all-to-all dispatch and an all-to-all combine
  forward, the same two backward (and again forward under full recompute), each of the rank's tokens (T/tp:
  Megatron-Core runs MoE with tp > 1 under sequence parallelism) × top-k × hidden 16-bit elements, over the EP
  group (core.timing.collectives' all-to-all: NVLink inside a node, the NICs across), with balanced routing.
  Overlap: exposed under every CommOverlap rule (Megatron-Core's default), unless machine.moe_a2a_hidden
  (--moe-a2a-overlap): Megatron-Core's overlap_moe_expert_parallel_comm (--overlap-moe-expert-parallel-comm) runs
  one micro-batch's forward beside another's backward and puts each one's dispatch and combine behind the other's
  compute, as DeepSeek-V3's DualPipe does (arXiv 2412.19437 §3.2.1); the stage's all-to-all then hides behind up
  to the stage's compute, like tp_comm_overlap. Expert compute: each rank runs its experts' share of the routed
  tokens as one grouped GEMM per matrix, the same FLOPs as the T·k/tp dense-equivalent GEMMs (balanced routing).
  Dropless routing through an all-to-all dispatcher syncs the host once per MoE layer forward
  (moe_sync_seconds: core.timing.machine MOE_DROPLESS_SYNC_S; none with a capacity factor or HybridEP).
- DP: ZeRO's collectives from core.timing.dp_traffic over the dp·cp ranks that share the ZeRO partitions; with
  EP the routed experts' collectives run over the edp ranks instead.
Overlap, the same rule for every ZeRO stage: a gradient reduction hides behind the backward pass that
produces it and a parameter gather behind the forward pass that needs it, each up to DP_OVERLAP of that
compute (communication kernels share the GPU and wait on hooks, so overlap is never whole); the rest is
exposed. DP_OVERLAP is fitted on the calibration runs (DeepSpeed, Megatron-LM 2021-22); frameworks that
prefetch (FSDP, Megatron-Core's overlapped distributed optimizer) hide up to the whole pass: CommOverlap.
Gradients are reduced in the backward of the last micro-batch (stages 0-1) or of every micro-batch (2-3); stage 3 gathers parameters for every micro-batch's forward and backward; stages 1-2 gather
the updated parameters once, hidden behind the next step's first forward. With a pipeline (pp > 1) the
gradient reductions wait for the flush and parameter gathers of stages 1-2 are exposed (Megatron's and
DeepSpeed's pipeline engines), stage 3's per-micro-batch gathers still hide behind their stage's forward.

Pipeline (1F1B, docs/formulas.md §12): m micro-batches take (m + (p-1)/v) stage-times on the busiest stage;
uneven stages (first/last with fewer layers) are priced by the busiest one.
Offload (docs/formulas.md §13): gradients stream to the host during backward (hidden up to the backward
time), updated parameters come back after the CPU optimizer step (exposed), the CPU Adam step runs at
`cpu_adam_params_per_s` per node, NVMe swaps are exposed; offloaded parameters are fetched over PCIe
(and from NVMe) for forward and backward of every micro-batch, overlapped like stage-3 gathers.
GPU optimizer step: memory bound, reading and writing the optimizer states once per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, comb
from typing import ClassVar, NamedTuple

from zeroplan.core.errors import InputError, ref
from zeroplan.core.hardware import Link
from zeroplan.core.model.adapters import (
    Finetune, adapted_experts, adapted_linears, finetune_counts, quantised_linears, quantised_storage,
)
from zeroplan.core.model.experts import active_params, expert_params
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.model.pipeline_stages import layers_per_stage
from zeroplan.core.timing.collectives import (  # noqa: F401 - collective pricing lives there; re-exported for callers
    ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, NCCL_LAUNCH_S, NIC_EFFICIENCY, NVLINK_EFFICIENCY, LinkTable, alpha_beta_seconds,
    collective_seconds, group_bandwidth, link_bandwidth, ring_time,
)

from zeroplan.core.timing.dp_offload import DpSeconds, OffloadSeconds
from zeroplan.core.timing.flash_blocks import span_keys, span_share
from zeroplan.core.timing.machine import (  # noqa: F401 - re-exported for callers
    ACTIVATION_ELEMENT_BYTES, ATTENTION_SCORE_BYTES, DEFAULT_CPU_ADAM_PARAMS_PER_S, DEFAULT_EFFICIENCY, DP_OVERLAP,
    ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN, FLASH_ATTENTION_EFFICIENCY, FLASH_BACKWARD_RATIO, FLASH_SHARE_OF_MAX, FP8_CAST_BYTES,
    FP8_OTHER_AXIS_BYTES, GEMM_EPILOGUE_BYTES, GEMM_OVERHEAD_S, GEMM_ROW_TILE, GEMM_WEIGHT_BYTES, GEMM_SHARE_OF_MAX, LOGIT_BYTES,
    MAX_MATMUL_SHARE, MOE_DISPATCH_COPIES, MOE_DROPLESS_SYNC_S, EAGER_BLOCK_BYTES, Machine, check_efficiency, flash_efficiency,
    flash_head_dim_share, gemm_efficiency,
)


# Context parallelism's implementations (CommOverlap.cp_ring; docs/formulas.md §24):
# - "p2p": Megatron-Core's ring (Transformer Engine's attention with cp_comm_type p2p): each step's KV exchange runs
#   beside the previous step's attention kernel, the partial outputs merged in the kernels' epilogues.
# - "torch": PyTorch's experimental context_parallel (torch.distributed.tensor.experimental._attention, the torch
#   2.6 nightlies torchtitan's Dec 2024 benchmarks ran: _templated_ring_attention and its backward). Its eager
#   bookkeeping, counted from the source as bytes moved per element of the rank's local query-side tensor (tokens/cp
#   × w/tp; K and V have as many after the model's repeat_kv) on the busiest rank (the last CP rank: every step
#   after the first takes the i <= rank branch, whole query, half the keys):
#   forward, once: key/value .contiguous() (the model transposes them: read 2 + write 2, each: 8), the first
#   output's fp32 upcast (6) and the final downcast (read 4, write 2: 6) = 20; per further step (cp-1): the K/V
#   concatenation sent to the next rank (8), the block output's fp32 upcast (6), the _SDPAMerger update in fp32
#   (out - block_out: 12, sigmoid(lse difference) * that: 8, out - product: 12) = 46.
#   backward, once: key/value .contiguous() (8), fp32 zeros for dQ, dK, dV (12), the first step's dK, dV
#   accumulation (grad += bf16 grad: read 6, write 4, each: 20), its dK/dV flatten, a copy each (zeros_like kept the
#   transposed key's layout: read 4, write 4, each: 16), its fp32 dK/dV concatenation (16), dQ += (10) and K/V
#   concatenation (8), the final dQ and dK/dV downcasts (6 + 12), less the K/V concatenation the last step skips (8)
#   = 100; per further step (cp-1): _partial_update of dK and dV (the first half += bf16: 5, the torch.cat back: 8,
#   each: 26), the fp32 dK/dV concatenation sent on (read 8, write 8: 16), dQ += the block's (10), the K/V
#   concatenation (8) = 60.
#   Both counts are what PyTorch's own functions move, op by op, on the last of cp ranks
#   (tests/test_cp_ring_trace.py runs them on a fake process group and counts every aten op's bytes). Eager ops:
#   torchtitan compiled each block with fullgraph=True, so Inductor may have fused part of them (an upper bound).
CP_RINGS = ("p2p", "torch")
# The element-wise count of an eager (uncompiled) layer (CommOverlap.eager_block; elementwise_seconds):
# - "korthikanti": Korthikanti et al.'s stored activations, each written and read (ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN;
#   fitted frameworks: Megatron's fused kernels, DeepSpeed, llm-foundry);
# - "torchtitan": torchtitan's Llama block op by op (core.timing.machine TORCHTITAN_EAGER_BYTES, docs/formulas.md §25)
#   for a dense gated (SwiGLU) layer; other layers keep Korthikanti's count;
# - "transformers": Hugging Face transformers' LlamaDecoderLayer op by op (core.timing.machine TRANSFORMERS_EAGER_BYTES,
#   docs/formulas.md §26), the model code PyTorch FSDP runs (fsdp rule), for a dense gated layer likewise.
ELEMENTWISE_BLOCKS = ("korthikanti", "torchtitan", "transformers")
CP_TORCH_FORWARD_BYTES = (46, 20)  # (per step after the first, once), bytes per local query-side element
CP_TORCH_BACKWARD_BYTES = (60, 100)
CP_TORCH_GRAD_BYTES = 4  # the dK/dV ring accumulates and sends in fp32 (_ContextParallelOptions.convert_to_f32)


@dataclass(frozen=True)
class CommOverlap:
    """Which communication a training framework hides behind compute (--comm-overlap). The calibration runs
    (Megatron-LM 2021-22, DeepSpeed, Megatron-DeepSpeed) are all "baseline": DP collectives hide behind a fitted
    share of a pass's compute, TP and PP transfers are exposed. The others are stated from the frameworks' own
    documentation, not fitted (no calibration run used them):
    - fsdp: PyTorch FSDP/FSDP2 prefetch the next layer's AllGather on a separate stream while the current layer
      computes (forward and backward prefetch) and ReduceScatter each layer's gradients while the backward of the
      layer before it runs (Zhao et al. 2023, "PyTorch FSDP", arXiv 2304.11277 §3.3-3.4; torch.distributed.fsdp
      docs, backward_prefetch / forward_prefetch; FSDP2 prefetches implicitly): DP collectives hide behind up to
      the whole pass that needs or produces them.
    - megatron: Megatron-Core as NeMo's performance recipes run it (dgxc-benchmarking / NeMo 24.x configs):
      the distributed optimizer with overlap_grad_reduce and overlap_param_gather (Megatron-Core
      distrib_optimizer docs) hides DP collectives like fsdp; tp_comm_overlap (Transformer Engine userbuffers)
      splits each TP GEMM and pipelines its AllGather/ReduceScatter chunks behind it, so TP collectives inside
      a node (userbuffers use NVLink) hide behind the stage's GEMMs; overlap_p2p_comm hides the interleaved
      schedule's transfers (v > 1) behind the other chunks' compute. With pp > 1 the gradient reductions still
      wait for the pipeline flush (every rule).
    The attention kernel each framework calls by default (core.timing.machine FLASH_MAX_SHARE): baseline and fsdp
    reach FlashAttention-2 ("fa2": flash-attn 2, or torch's scaled_dot_product_attention, whose flash backend is
    FlashAttention-2: torch docs "torch.nn.functional.scaled_dot_product_attention"); MosaicML's llm-foundry with
    attn_impl triton runs the FlashAttention-1-era Triton kernel ("fa1", given per run);
    megatron runs Transformer Engine's DotProductAttention, which calls cuDNN's fused attention (TE docs, "Attention
    backends"), the Hopper-native kernel class of FlashAttention-3 ("fa3"). --attention-kernel overrides it.
    Cross-node bandwidth of a group with k ranks per node (core.timing.collectives.group_bandwidth): baseline keeps
    one NIC per rank, what the calibration set's DeepSpeed ZeRO-3 runs (Narayanan 2021 Table 2: 175B on 384-1536
    A100, step time flat from 768 GPUs as if each rank's gathers ran at one 25 GB/s NIC) support; fsdp and megatron
    (2023-24 stacks, NCCL >= 2.12 with PXN) spread each ring over the k NICs, which MosaicML's FSDP tables show:
    MPT-13B without recompute at 4767-4811 tokens/s/GPU, flat from 8 to 64 H100 (llm-foundry benchmarking README),
    where one NIC per rank would put FULL_SHARD's 3 × 25.7 GB per GPU per 0.85 s step on 50 GB/s NICs.
    - torchtitan: fsdp's rule (FSDP2) with context parallelism as PyTorch's experimental context_parallel runs it
      (cp_ring "torch": CP_RINGS, cp_exposed_seconds, cp_merge_seconds); the other rules use Megatron-Core's p2p
      ring ("p2p"). Without cp it prices as fsdp, except its eager element-wise work (eager_block "torchtitan",
      ELEMENTWISE_BLOCKS: torchtitan's own Llama block, whose norms and rotary embedding run unfused in fp32).
    fsdp's eager element-wise work is Hugging Face transformers' LlamaDecoderLayer's (eager_block "transformers"): an
    assumption, stated in the plan, that PyTorch FSDP runs Hugging Face's model code (accelerate, the Trainer; IBM's
    fms block moves 8% more: docs/formulas.md §26) unless --torch-compile; the calibration set's FSDP runs
    (MosaicML's MPT, ungated) keep the fitted count."""

    name: str
    dp_overlap: float | None  # share of a pass's compute DP collectives hide behind; None: the fitted DP_OVERLAP
    tp_hidden: bool = False  # TP collectives hide behind the stage's compute
    pp_hidden: bool = False  # with v > 1, pipeline transfers hide behind the other chunks' compute
    attention_kernel: str = "fa2"  # the flash-attention kernel family (core.timing.machine.flash_efficiency)
    node_rails: bool = False  # cross-node rings over every NIC of a node (core.timing.collectives.group_bandwidth)
    cp_ring: str = "p2p"  # how context parallelism runs (CP_RINGS; cp_exposed_seconds, cp_merge_seconds)
    eager_block: str = "korthikanti"  # the eager element-wise count (ELEMENTWISE_BLOCKS; elementwise_seconds)
    float8_gather: bool = False  # FSDP2 gathers tensorwise-FP8 weights in FP8 (torchao enable_fsdp_float8_all_gather)


COMM_OVERLAPS = {rule.name: rule for rule in (
    CommOverlap("baseline", None),
    CommOverlap("fsdp", 1.0, node_rails=True, eager_block="transformers", float8_gather=True),
    CommOverlap("torchtitan", 1.0, node_rails=True, cp_ring="torch", eager_block="torchtitan", float8_gather=True),
    CommOverlap("megatron", 1.0, tp_hidden=True, pp_hidden=True, attention_kernel="fa3", node_rails=True),
)}
DEFAULT_COMM_OVERLAP = "baseline"


def comm_overlap(name: str | None) -> CommOverlap:
    rule = COMM_OVERLAPS.get(name or DEFAULT_COMM_OVERLAP)
    if rule is None:
        raise InputError("comm_overlap", f"unknown framework overlap '{name}'",
                         f"use one of {', '.join(COMM_OVERLAPS)}")
    return rule




@dataclass(frozen=True)
class FinetuneFlops:
    """What fine-tuning changes in a layer's compute (docs/formulas.md §21): a frozen linear's backward runs the
    data-gradient GEMM only (no weight gradient); each LoRA adapter adds two small GEMMs forward (x·Aᵀ, then ·Bᵀ)
    and four backward (data and weight gradients of each), each paying the per-kernel overhead; QLoRA dequantises
    every quantised linear to 16 bits before its matmul, forward and again backward (and in a recomputed forward):
    reading the packed weight and writing the 16-bit copy, memory bound.

    LoRA on a mixture of experts' fused expert tensors (PEFT's ParamWrapper, docs/formulas.md §23.4) folds
    W + s·B·A into one E × out × in weight each forward (a baddbmm: 2·E·r·in·out FLOPs, reading W and writing the
    merged copy), and PEFT 0.21 runs each fold twice forward (its kernels on fake tensors show two baddbmm per
    adapted tensor, one or both tensors adapted; one copy reaches the graph). Backward the
    experts' grouped GEMM computes the merged weight's gradient (2·T·k·in·out FLOPs over the T·k routed rows, the
    weight-gradient GEMM a frozen tensor skips) and the baddbmm the two factors' gradients from it (2 × 2·E·r·in·out,
    each reading it). Counted against PEFT's own kernels on fake tensors in tests/test_finetune_qlora_trace.py."""

    frozen_layers: int  # layers whose base linears are frozen (every layer under lora/qlora)
    inert_layers: int  # frozen layers before anything trainable: no backward at all
    adapters: tuple[tuple[int, int], ...]  # (in, out) of each adapted linear of a layer
    rank: int
    dequant_bytes: int  # per layer and pass: packed weights read + 16-bit copies written (0 without qlora)
    trainable: int = 0  # parameters that get gradients
    expert_adapters: tuple[tuple[int, int, int], ...] = ()  # (in, out, experts) of each adapted fused expert tensor

    def expert_adapter_gemms(self, routed_tokens: float, ep: int = 1) -> list[tuple[float, float, int, int, float]]:
        """Per adapted expert tensor of a layer, one micro-batch: (fold FLOPs, the merged weight's gradient FLOPs,
        in, out, the rank's merged-weight elements); routed_tokens = T·k rows reach the rank's E/ep experts."""
        return [(2 * experts / ep * self.rank * fan_in * fan_out, 2 * routed_tokens * fan_in * fan_out, fan_in,
                 fan_out, experts / ep * fan_in * fan_out) for fan_in, fan_out, experts in self.expert_adapters]

    forward_folds: ClassVar[int] = 2  # how often PEFT 0.21 folds each expert tensor in one forward

    def expert_adapter_flops(self, routed_tokens: float, ep: int = 1) -> tuple[float, float]:
        """(forward, backward) FLOPs one layer's expert adapters add for one micro-batch: the folds forward; the
        merged weight's gradient and the two factors' gradients (a fold's FLOPs each) backward."""
        gemms = self.expert_adapter_gemms(routed_tokens, ep)
        return self.forward_folds * sum(g[0] for g in gemms), sum(g[1] + 2 * g[0] for g in gemms)

    @classmethod
    def of(cls, model: ModelSpec, finetune: Finetune) -> FinetuneFlops:
        counts = finetune_counts(model, finetune)
        shape = model.require_shape("finetune", "", "")
        adapters = tuple((l.in_features, l.out_features) for l in adapted_linears(shape, finetune)) \
            if finetune.adapters else ()
        dequant = 0
        if finetune.storage is not None:
            packed, constants = quantised_storage(shape, finetune.storage, finetune.double_quant)
            dequantised = sum(linear.numel * copies for linear, copies in quantised_linears(shape))
            dequant = (packed + constants + 2 * dequantised) // shape.layers
        frozen = shape.layers if finetune.adapters else counts.frozen_layers
        experts = tuple((e.in_features, e.out_features, e.experts) for e in adapted_experts(shape, finetune))
        return cls(frozen, counts.inert_layers, adapters, finetune.rank, dequant, counts.trainable, experts)


@dataclass(frozen=True)
class FlopModel:
    """The shape FLOP counting needs: per-token parameters and the attention width."""

    params: int  # Ψ a token meets (total for dense models)
    layer_params: int  # per transformer layer, active
    layers: int
    hidden: int
    attention_width: int  # heads × head_dim
    kv_width: int = 0  # key/value heads × head_dim (0: as attention_width)
    ffn: int = 0  # MLP width (0: 4 × hidden)
    gated: bool = False
    vocab: int = 0
    experts_per_token: int = 1
    heads: int = 0
    moe_layers: int = 0  # layers whose MLP is routed (0: a dense model)
    # a MoE description's attention projections, (inner, outer) each (latent attention); (): from the widths
    attention_linears: tuple[tuple[int, int], ...] = ()
    shared_ffn: int = 0  # a MoE layer's shared experts' summed width, run on every token (0: none)
    finetune: FinetuneFlops | None = None  # frozen base, adapters, dequantisation (None: every parameter trains)
    # the description's GEMMs of a layer (ModelShape.gemms, from Decoder.tp_gemms); (): from the widths above
    gemms: tuple[tuple[int, int, int, bool], ...] = ()
    experts: int = 0  # routed experts of a MoE layer (0: a dense model)
    route_groups: tuple[int, int] | None = None  # group-limited routing (n_group, topk_group); None: unlimited
    # each layer's attention span (ModelShape.attention_spans: a sliding window or a chunk, None global); (): every
    # layer attends to its whole causal prefix
    attention_spans: tuple[tuple[str, int] | None, ...] = ()

    @classmethod
    def from_model(cls, model: ModelSpec, finetune: Finetune | None = None) -> FlopModel:
        shape = model.require_shape("model", f"the step time needs the shape of '{model.name}' (layers, hidden, "
                                    "heads, vocab)",
                                    f"use {ref('model')} with a preset or config.json, or give "
                                    f"{ref('layers')}/{ref('hidden')}/{ref('heads')}")
        layers, hidden, head_dim = shape.layers, shape.hidden, shape.head_dim
        if shape.layout is not None:
            layer = shape.layout.layer_params
        else:  # embeddings (and an untied head) aside, the rest is in the layers
            outside = shape.vocab * hidden * (1 if shape.tied_embeddings else 2)
            layer = max(1, (model.params - outside) // layers)
        params = active_params(model)  # a MoE model's: less the routed experts a token is not sent to
        tuned = None
        if finetune is not None and not finetune.trains_everything:
            tuned = FinetuneFlops.of(model, finetune)
        split = expert_params(shape)
        if shape.moe is not None and shape.layout is not None:
            # the description's active count (dense and MoE layers differ): per layer, the average
            layer = (params - shape.layout.input_params - shape.layout.output_params) // layers
        elif split is not None:
            layer -= (split.experts - split.experts_per_token) * split.expert_params  # per layer, not met
        kv = shape.kv_heads * head_dim
        moe = shape.moe
        return cls(params, layer, layers, hidden, shape.heads * head_dim, kv, shape.ffn, shape.gated_mlp,
                   shape.vocab, (shape.experts_per_token or 1) if shape.experts else 1, shape.heads,
                   sum(split.moe_layers) if split is not None else 0,
                   (moe.attention_linears or ()) if moe is not None else (),
                   (moe.shared_expert_ffn or 0) if moe is not None else 0, tuned, shape.gemms or (),
                   experts=shape.experts or 0, route_groups=moe.route_groups if moe is not None else None,
                   attention_spans=shape.attention_spans or ())

    def model_flops_per_token(self) -> int:
        """The MFU numerator: 6Ψ (forward 2Ψ, backward 4Ψ). Fine-tuning: 4Ψ (forward, and the data gradients
        backward) plus 2 per trainable parameter for its weight gradient; adapters, which are extra parameters,
        also count their forward and data-gradient 4 (docs/formulas.md §21)."""
        tuned = self.finetune
        if tuned is None:
            return 6 * self.params
        return 4 * self.params + (6 if tuned.adapters else 2) * tuned.trainable

    def hardware_flops_per_token(self, seq_len: int, recompute: str) -> int:
        """What the GPUs execute: 6Ψ + attention 12·L·w·s, plus the recomputed forward. Every query is counted
        against its whole span, the causal mask not subtracted (Megatron's convention): s keys on a global layer,
        min(window or chunk, s) on a sliding-window or chunked one (core.timing.flash_blocks.span_keys)."""
        attention = 4 * self.layers * self.attention_width * seq_len  # forward QKᵀ and AV
        if self.attention_spans:
            spans = self.attention_spans
            attention = 4 * self.attention_width * span_keys(spans, seq_len) * self.layers // len(spans)
        total = 6 * self.params + 3 * attention
        if recompute == "full":
            total += 2 * self.layer_params * self.layers + attention
        elif recompute == "selective":
            total += attention
        elif recompute == "selective-op":  # every second linear GEMM of the forward (op_sac_recompute_shapes)
            kv = self.kv_width or self.attention_width
            total += 2 * self.layers * (self.hidden * kv + self.attention_width * self.hidden
                                        + self.experts_per_token * self.hidden * (self.ffn or 4 * self.hidden))
        return total


@dataclass(frozen=True)
class StageFlops:
    """Per-token FLOPs of the busiest pipeline stage (before the split over tp)."""

    forward: int
    backward: int  # including recompute


def stage_flops(flops: FlopModel, seq_len: int, recompute: str, pp: int) -> StageFlops:
    """The busiest stage: the first holds the most layers, the last the layers plus the LM head."""
    attention = 4 * flops.attention_width * seq_len
    if flops.attention_spans:  # per layer on average, as hardware_flops_per_token counts them
        attention = 4 * flops.attention_width * span_keys(flops.attention_spans, seq_len) // len(flops.attention_spans)
    layer_forward = 2 * flops.layer_params + attention
    rest_forward = 2 * (flops.params - flops.layer_params * flops.layers)  # embedding + head, on the last stage
    recompute_per_layer = {"full": layer_forward, "selective": attention}.get(recompute, 0)
    counts = layers_per_stage(flops.layers, pp)
    candidates = [(counts[0], 0 if pp > 1 else rest_forward), (counts[-1], rest_forward)]
    forward, layers = max((n * layer_forward + extra, n) for n, extra in candidates)
    return StageFlops(forward, 2 * forward + layers * recompute_per_layer)


def ring_seconds(buffer_bytes: float, ranks: int, link: Link, allreduce: bool) -> float:
    """Plain α-β ring on one link: AllGather/ReduceScatter ((n-1) steps, (n-1)/n·S) or AllReduce (twice both):
    core.timing.collectives'."""
    return ring_time(ALL_REDUCE if allreduce else ALL_GATHER, buffer_bytes, ranks, link.latency_s,
                     link.bandwidth_bytes_per_s)


@dataclass(frozen=True)
class Layout:
    """Where a plan's ranks sit and how a step is cut up."""

    dp: int
    tp: int
    pp: int
    virtual_stages: int
    seq_len: int
    micro_batch: int
    grad_accum: int
    recompute: str
    sequence_parallel: bool
    tp_intra_node: bool
    dp_intra_node: bool
    pp_intra_node: bool
    cp: int = 1
    flash_attention: bool = True
    ep: int = 1  # expert parallelism: the all-to-all group of each MoE layer
    ep_per_node: int = 1  # ranks of an EP group inside one node (ep when the group fits a node)


def gemm_seconds(flops: float, machine: Machine, inner: float = 0, outer: float = 0, linear: bool = False,
                 rows: float = 0, groups: int = 1) -> float:
    """A GEMM of `flops` FLOPs with an inner × outer weight matrix, forward or either backward GEMM: at the machine's
    efficiency, slowed by 1 + K0·(1/inner + 1/outer)/2, K0 = GEMM_EPILOGUE_BYTES/2 × the GPU's ridge point
    (peak·efficiency / HBM bandwidth): core.timing.machine GEMM_EPILOGUE_BYTES, docs/formulas.md §14.2. No weight
    shape given: no shape cost. linear: a linear layer's GEMM, on the FP8 tensor cores under
    --precision fp8 (machine.fp8_flops).
    rows: the GEMM's rows m (its tokens), run as `groups` GEMMs of m/groups rows each with its own weight (a grouped
    GEMM over a rank's local experts): each group's rows are tiled to GEMM_ROW_TILE (ceil(m/g / 128)·128 rows'
    FLOPs) and each group's inner × outer weight is read from HBM once (GEMM_WEIGHT_BYTES per element, 1 in an FP8
    GEMM): core.timing.machine GEMM_ROW_TILE, docs/formulas.md §14.2. No rows given: neither."""
    fp8 = bool(linear and machine.fp8_flops)
    rate = (machine.fp8_flops if fp8 else machine.peak_flops) * machine.efficiency
    if rows and inner and outer:
        each = rows / groups
        flops *= groups * ceil(each / GEMM_ROW_TILE) * GEMM_ROW_TILE / rows
    seconds = flops / rate + machine.gemm_overhead_s
    if inner and outer:
        seconds += flops / rate * gemm_k0(machine, rate) * (1 / inner + 1 / outer) / 2
        if rows:
            seconds += groups * inner * outer * (1 if fp8 else GEMM_WEIGHT_BYTES) / machine.hbm_bytes_per_s
    return seconds


def gemm_k0(machine: Machine, rate: float = 0.0) -> float:
    """K0 of gemm_seconds: GEMM_EPILOGUE_BYTES/2 × the ridge point (rate / HBM bandwidth; rate: the large-GEMM rate,
    bf16's by default)."""
    return machine.gemm_epilogue_bytes / 2 * (rate or machine.peak_flops * machine.efficiency) / machine.hbm_bytes_per_s


def flash_seconds(core_flops: float, seq_len: int, machine: Machine) -> float:
    """Causal flash attention's forward over `core_flops` (QKᵀ and AV of the whole sequence; the masked half skipped)
    at the machine's long-sequence flash efficiency, slowed at short sequences by s/(s + FLASH_SEQ_HALF)."""
    rate = machine.peak_flops * machine.flash_efficiency * seq_len / (seq_len + machine.flash_seq_half)
    return core_flops / 2 / rate


def local_experts(layout: Layout, flops: FlopModel) -> int:
    """The routed experts one rank holds (experts / ep), the groups of its grouped expert GEMMs; 1 for a dense
    model."""
    return max(1, flops.experts // layout.ep) if flops.experts and flops.moe_layers else 1


def linear_shapes(layout: Layout, flops: FlopModel) -> list[tuple[float, float, float, int]]:
    """(tokens, inner, outer, groups) of each linear GEMM one layer runs forward for one micro-batch after the tp
    split: QKV, the output projection, the MLP's input and output GEMMs (then a MoE description's shared experts);
    backward's data- and weight-gradient GEMMs have the same weight shape, so they cost twice the forward. groups:
    the routed experts' GEMMs run as one grouped GEMM over the rank's local experts (local_experts; the tokens the
    rank's experts receive from the ep group, top-k per token, balanced: tokens·k in all), every other GEMM as one.
    The attention block's column-parallel GEMMs come first and its row-parallel one last, then the MLP's
    (tp_async_exposed pairs them with the TP collectives around them). A model with an architecture description
    takes them from it (core.model.architecture.Decoder.tp_gemms, the same list its FLOPs are counted from: blocks
    attention, MLP, shared experts, each ended by its row-parallel GEMM); a shape given by its widths alone, from the
    widths."""
    tp = layout.tp
    tokens = layout.micro_batch * layout.seq_len / layout.cp
    routed = local_experts(layout, flops)
    if flops.gemms:  # the architecture description's (Decoder.tp_gemms): row-parallel split inner, column outer
        found, block = [], 0
        for inner, outer, rows, row in flops.gemms:
            found.append((tokens * rows, inner / tp if row else inner, outer if row else outer / tp,
                          routed if block == 1 else 1))
            block += 1 if row else 0
        return found
    h, w, kv, f = flops.hidden, flops.attention_width, flops.kv_width or flops.attention_width, flops.ffn or 4 * flops.hidden
    mlp_in = (2 if flops.gated else 1) * f
    experts = flops.experts_per_token
    shapes = [(tokens, h, (w + 2 * kv) / tp, 1), (tokens, w / tp, h, 1),
              (tokens * experts, h, mlp_in / tp, routed), (tokens * experts, f / tp, h, routed)]
    if flops.attention_linears:  # the description's projections (latent attention): column-parallel, the last row
        *columns, (inner, outer) = flops.attention_linears
        shapes[:2] = [(tokens, k, n / tp, 1) for k, n in columns] + [(tokens, inner / tp, outer, 1)]
    if flops.shared_ffn:  # shared experts: a dense MLP every token runs
        shapes += [(tokens, h, (2 if flops.gated else 1) * flops.shared_ffn / tp, 1),
                   (tokens, flops.shared_ffn / tp, h, 1)]
    return shapes


def linear_gemm_seconds(shape: tuple[float, float, float, int], machine: Machine) -> float:
    """One linear GEMM of linear_shapes' (tokens, inner, outer, groups), forward: gemm_seconds with its rows."""
    m, k, n, groups = shape
    return gemm_seconds(2 * m * k * n, machine, k, n, linear=True, rows=m, groups=groups)


def op_sac_recompute_shapes(layout: Layout, flops: FlopModel) -> list[tuple[float, float, float, int]]:
    """(tokens, inner, outer, groups) of the linear GEMMs op-level selective checkpointing (selective-op) runs again in
    backward, per layer and micro-batch after the tp split. torchtitan's policy (selective_ac_option = "op",
    torchtitan/models/llama3/infra/parallelize.py and its successors' _custom_policy: "Saves output of all compute
    ops, except every second mm") counts the matmuls of each layer's forward in call order and recomputes every
    second one. A Llama layer calls wq, wk, wv, wo, then w1, w3, w2 (FeedForward: w2(silu(w1(x)) * w3(x))), so wk,
    wo and w3 run again: the key projection, the output projection and the MLP's up projection (a plain MLP's
    second matmul is its output GEMM, of the same size). The recomputed GEMMs' inputs (the norm output, the attention
    output) are saved or pointwise, and the collectives' outputs are saved: no TP collective runs again."""
    tp = layout.tp
    tokens = layout.micro_batch * layout.seq_len / layout.cp
    h, w, f = flops.hidden, flops.attention_width, flops.ffn or 4 * flops.hidden
    kv = flops.kv_width or w
    routed, groups = tokens * flops.experts_per_token, local_experts(layout, flops)
    mlp = (routed, h, f / tp, groups) if flops.gated else (routed, f / tp, h, groups)
    return [(tokens, h, kv / tp, 1), (tokens, w / tp, h, 1), mlp]


def tp_async_exposed(layout: Layout, flops: FlopModel, machine: Machine, all_reduce: float) -> float:
    """One layer's exposed TP seconds for one micro-batch under PyTorch's async TP (--async-tp; torchtitan's
    enable_async_tensor_parallel), forward, backward and a full recompute's forward, from what its compiler pass fuses
    (torch/_inductor/fx_passes/micro_pipeline_tp.py): an all-gather whose output feeds matmuls
    (fuse_all_gather_matmul, one all-gather into several matmuls allowed: q, k, v) and a reduce-scatter whose input is
    one matmul's output (fuse_matmul_reduce_scatter). Each fused pair runs as tp micro-pipelined steps
    (torch.distributed._symmetric_memory: the local shard's matmul first while the remote shards are copied one at a
    time), so the collective hides behind the matmul's other (tp-1)/tp and only what exceeds it is exposed.
    Forward (and its recompute): the sequence-parallel all-gathers before QKV and the MLP's input GEMM and the
    reduce-scatters after the output projection and the MLP's output GEMM all fuse. Backward: the all-gathers of the
    output gradient before the row-parallel layers' data-gradient GEMMs fuse; the reduce-scatters of the input gradient
    after the column-parallel ones do not, since that gradient is a sum over q, k and v (gate and up), not one matmul's
    output: they stay exposed. That is why PyTorch measured ~20% faster forward passes but ~8% faster steps for Llama 3
    70B (dev-discuss.pytorch.org "Introducing Async Tensor Parallelism in PyTorch", 2024; docs/formulas.md §22.1).
    all_reduce: one TP AllReduce
    of the layer's activations; an all-gather or reduce-scatter of it costs half. Sequence parallelism only: without
    it TP runs AllReduces, which the pass leaves alone (_stage_seconds keeps them exposed)."""
    half = all_reduce / 2
    shapes = linear_shapes(layout, flops)
    shapes = shapes[:len(shapes) - 2] if flops.shared_ffn else shapes  # the collectives pair with the layer's own MLP
    gemms = [linear_gemm_seconds(shape, machine) for shape in shapes]
    attention_in, attention_out = sum(gemms[:-3]), gemms[-3]  # the attention block's column GEMMs, its row GEMM
    mlp_in, mlp_out = gemms[-2:]
    share = 1 - 1 / layout.tp  # the first step's matmul runs on the local shard, before any copy has landed
    forward = sum(max(0.0, half - share * gemm) for gemm in (attention_in, attention_out, mlp_in, mlp_out))
    backward = sum(max(0.0, half - share * gemm) for gemm in (attention_out, mlp_out)) + 2 * half
    return (2 if layout.recompute == "full" else 1) * forward + backward


def layer_seconds(layout: Layout, flops: FlopModel, machine: Machine) -> tuple[float, float, float]:
    """(forward, backward without recompute, attention-core forward) seconds of one layer, one micro-batch."""
    tp = layout.tp
    tokens = layout.micro_batch * layout.seq_len / layout.cp
    w = flops.attention_width
    shapes = linear_shapes(layout, flops)
    forward = sum(linear_gemm_seconds(shape, machine) for shape in shapes)
    forward += machine.layer_overhead_s
    backward = 2 * forward
    tuned = flops.finetune
    if tuned is not None:  # averaged over the layers: frozen ones skip weight gradients, inert ones all backward
        frozen, inert = tuned.frozen_layers / flops.layers, tuned.inert_layers / flops.layers
        backward = forward * (2 * (1 - frozen) + (frozen - inert))
        adapters = sum(gemm_seconds(2 * tokens * fan_in * tuned.rank, machine)
                       + gemm_seconds(2 * tokens * tuned.rank * fan_out, machine) for fan_in, fan_out in tuned.adapters)
        dequant = tuned.dequant_bytes / machine.hbm_bytes_per_s
        trained = 1 - inert if tuned.adapters else 1.0
        expert_forward = expert_backward = 0.0
        for fold, weight_gradient, fan_in, fan_out, merged in tuned.expert_adapter_gemms(
                tokens * flops.experts_per_token, layout.ep):  # FinetuneFlops: the fold, three GEMMs backward
            copy = ACTIVATION_ELEMENT_BYTES * merged / machine.hbm_bytes_per_s  # the merged weight in 16 bits
            expert_forward += tuned.forward_folds * (gemm_seconds(fold, machine) + 2 * copy)  # W in, the merged out
            expert_backward += (gemm_seconds(weight_gradient, machine, fan_in, fan_out, linear=True)
                                + 2 * (gemm_seconds(fold, machine) + copy))  # each factor reads the gradient
        forward += trained * (adapters + expert_forward) + dequant
        backward += trained * (2 * adapters + expert_backward) + (1 - inert) * dequant
    if machine.fp8_flops:  # FP8 casts of every linear operand (core.timing.machine FP8_CAST_BYTES)
        cast, other_axis = FP8_CAST_BYTES[machine.fp8_recipe], FP8_OTHER_AXIS_BYTES[machine.fp8_recipe]
        inputs = sum(m * k + k * n for m, k, n, _groups in shapes)  # activations in, weights
        gradients = sum(m * n for m, k, n, _groups in shapes)  # output gradients, backward
        forward += cast * inputs / machine.hbm_bytes_per_s
        backward += (cast * gradients + other_axis * inputs) / machine.hbm_bytes_per_s
    core = 4 * tokens * layout.seq_len * w / tp  # QKᵀ and AV over the whole (gathered) sequence
    if layout.flash_attention:
        attention = flash_seconds(core, layout.seq_len, machine)  # causal: half the blocks
        if flops.attention_spans:  # sliding-window and chunked layers: the key tiles their kernel runs
            attention *= span_share(flops.attention_spans, layout.seq_len, machine.attention_kernel,
                                    w // max(1, flops.heads))
        attention /= flash_head_dim_share(w // max(1, flops.heads), machine.attention_kernel)
        attention_backward = FLASH_BACKWARD_RATIO * attention  # FlashAttention's backward recomputes the scores
    else:
        elements = tokens * layout.seq_len * max(1, flops.heads) / tp  # the score matrix, per GPU
        memory = elements * machine.attention_score_bytes / machine.hbm_bytes_per_s
        attention = 2 * gemm_seconds(core / 2, machine) + memory
        attention_backward = 2 * attention
    dispatch = moe_dispatch_seconds(layout, flops, machine)
    elementwise = elementwise_seconds(layout, flops, machine) + dispatch
    elementwise_backward = elementwise_seconds(layout, flops, machine, backward=True) + 2 * dispatch
    merge_forward, merge_backward = cp_merge_seconds(layout, flops, machine)
    return (forward + attention + elementwise + merge_forward + moe_sync_seconds(flops, machine),
            backward + attention_backward + elementwise_backward + merge_backward, attention)


def cp_merge_seconds(layout: Layout, flops: FlopModel, machine: Machine) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's context-parallel bookkeeping for one micro-batch, memory bound
    at HBM bandwidth: PyTorch's ring (machine.cp_ring "torch", CP_TORCH_FORWARD_BYTES / CP_TORCH_BACKWARD_BYTES
    per element of the rank's local query-side tensor, tokens/cp × w/tp); 0 for the p2p ring, whose merge is fused
    into its attention kernels' epilogues (docs/formulas.md §24)."""
    if layout.cp <= 1 or machine.cp_ring != "torch":
        return 0.0, 0.0
    elements = cp_local_query_elements(layout, flops)
    steps = layout.cp - 1
    forward = CP_TORCH_FORWARD_BYTES[0] * steps + CP_TORCH_FORWARD_BYTES[1]
    backward = CP_TORCH_BACKWARD_BYTES[0] * steps + CP_TORCH_BACKWARD_BYTES[1]
    return (forward * elements / machine.hbm_bytes_per_s, backward * elements / machine.hbm_bytes_per_s)


def cp_local_query_elements(layout: Layout, flops: FlopModel) -> float:
    """Elements of a CP rank's local query-side tensor for one micro-batch (tokens/cp × w/tp): what PyTorch's ring
    merges, and, after the model's repeat_kv, the size of each of its key and value chunks (docs/formulas.md §24)."""
    return layout.micro_batch * layout.seq_len / layout.cp * flops.attention_width / layout.tp


def moe_sync_seconds(flops: FlopModel, machine: Machine) -> float:
    """The host sync of dropless routing through an all-to-all dispatcher, per layer and micro-batch averaged over
    the layers (dense layers have none): machine.moe_sync_s per MoE layer (core.timing.machine MOE_DROPLESS_SYNC_S;
    0 with a capacity factor or the HybridEP dispatcher), charged to the forward, so a recomputed forward pays it
    again (docs/formulas.md §20.4)."""
    if not flops.moe_layers:
        return 0.0
    return machine.moe_sync_s * flops.moe_layers / flops.layers


def moe_dispatch_seconds(layout: Layout, flops: FlopModel, machine: Machine) -> float:
    """A MoE layer's memory-bound token handling for one micro-batch, forward, averaged over the layers (dense
    layers have none), at HBM bandwidth; backward twice. Each of the rank's T/tp tokens is routed to k experts and
    its k copies of the hidden vector are copied MOE_DISPATCH_COPIES times (core.timing.machine), and the experts'
    gated activation reads 2·f and writes f per copy (f without gating: 2 passes), 16-bit elements."""
    if not flops.moe_layers:
        return 0.0
    copies = layout.micro_batch * layout.seq_len / layout.cp / layout.tp * flops.experts_per_token
    f = flops.ffn or 4 * flops.hidden
    elements = copies * (MOE_DISPATCH_COPIES * flops.hidden + (3 if flops.gated else 2) * f)
    return elements * ACTIVATION_ELEMENT_BYTES / machine.hbm_bytes_per_s * flops.moe_layers / flops.layers


def elementwise_seconds(layout: Layout, flops: FlopModel, machine: Machine, backward: bool = False) -> float:
    """One layer's element-wise work (norms, activations, dropout, residuals) for one micro-batch, at HBM bandwidth,
    forward (what op-level selective checkpointing, "selective-op", recomputes in backward besides every second
    linear GEMM: op_sac_recompute_shapes) or, with backward, its backward. Eager frameworks (machine.eager_block,
    ELEMENTWISE_BLOCKS): ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN per token × hidden, split over tp as Korthikanti's
    activation terms are, twice that backward; torchtitan's or transformers' Llama block (a dense gated layer):
    eager_block_bytes per token.
    Compiled (--torch-compile, machine.elementwise_fused): fused_elementwise_elements per token, 16-bit, twice that
    backward."""
    tokens = layout.micro_batch * layout.seq_len / layout.cp
    passes = 2 if backward else 1
    if machine.elementwise_fused:
        elements = fused_elementwise_elements(layout, flops)
        return passes * elements * ACTIVATION_ELEMENT_BYTES * tokens / machine.hbm_bytes_per_s
    block = eager_block_of(flops, machine)
    if block is not None:
        return eager_block_bytes(layout, flops, block, backward) * tokens / machine.hbm_bytes_per_s
    split = 34 / layout.tp if layout.sequence_parallel else 10 + 24 / layout.tp
    return passes * ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN / 34 * split * tokens * flops.hidden / machine.hbm_bytes_per_s


def eager_block_of(flops: FlopModel, machine: Machine) -> str | None:
    """The eager block whose op-by-op count prices this model's element-wise work (EAGER_BLOCK_BYTES), or None for
    Korthikanti's count: the framework's block (machine.eager_block) for a dense gated (SwiGLU) model run uncompiled;
    compiled runs, ungated and MoE models keep their counts (elementwise_seconds)."""
    if machine.elementwise_fused or machine.eager_block not in EAGER_BLOCK_BYTES:
        return None
    return machine.eager_block if flops.gated and not flops.moe_layers else None


def eager_block_bytes(layout: Layout, flops: FlopModel, block: str, backward: bool = False) -> float:
    """Bytes per token an eager Llama block moves outside its GEMMs and attention kernel, forward or backward, by the
    block's table counted from its aten ops (core.timing.machine EAGER_BLOCK_BYTES: torchtitan's, docs/formulas.md §25;
    Hugging Face transformers', docs/formulas.md §26): the residual stream's norms and adds on h (÷tp under sequence
    parallelism), the input-gradient sums on h (backward), the rotary embedding on the query and key widths,
    grouped-query attention's repeat_kv copies, the SwiGLU activation on f; everything but the stream's and the
    input-gradient sums' split over tp."""
    table = EAGER_BLOCK_BYTES[block]
    i = 1 if backward else 0
    h, w = flops.hidden, flops.attention_width
    kv, f = flops.kv_width or w, flops.ffn or 4 * h
    tp = layout.tp
    stream = table["stream"][i] * h / (tp if layout.sequence_parallel else 1)
    heads = table["rope"][i] * (w + kv)
    if kv < w:
        heads += table["repeat_kv"][i] * (w + kv)
    heads += table["mlp"][i] * f
    return stream + table["input_grads"][i] * h + heads / tp


def fused_elementwise_elements(layout: Layout, flops: FlopModel) -> float:
    """16-bit elements per token one compiled layer's element-wise kernels move forward (docs/formulas.md §22.2):
    torch.compile's TorchInductor fuses the pointwise and reduction ops between two GEMMs into one kernel that reads
    its inputs once and writes its outputs once (Ansel et al. 2024, "PyTorch 2", ASPLOS, §TorchInductor; torchtitan
    compiles each TransformerBlock, torchtitan/models/llama3/parallelize.py apply_compile). A layer has three such
    regions: before attention, the residual add and the norm (read the stream and the last block's output, write the
    new stream and the normalised input: 4·h); the same before the MLP (4·h); the MLP's activation between its two
    GEMMs (gated: read gate and up, write their product, 3·f; plain: read f, write f). The residual regions run on
    h/tp per rank with sequence parallelism, on all of h without it; the activation on f/tp."""
    h, f = flops.hidden, flops.ffn or 4 * flops.hidden
    residual = 8 * h / (layout.tp if layout.sequence_parallel else 1)
    activation = (3 if flops.gated else 2) * f * flops.experts_per_token / layout.tp
    return residual + activation


def head_seconds(layout: Layout, flops: FlopModel, machine: Machine) -> tuple[float, float]:
    """LM head and loss on the last stage: forward, backward."""
    if not flops.vocab:
        return 0.0, 0.0
    tokens = layout.micro_batch * layout.seq_len / layout.cp
    vocab = flops.vocab / layout.tp
    gemm = gemm_seconds(2 * tokens * flops.hidden * vocab, machine, flops.hidden, vocab, rows=tokens)
    loss = tokens * flops.vocab / layout.tp * LOGIT_BYTES / machine.hbm_bytes_per_s
    return gemm + loss / 2, 2 * gemm + loss / 2


def microbatch_seconds(layout: Layout, flops: FlopModel, hidden: int, machine: Machine,
                       cache: dict | None = None) -> tuple[float, float, float, float]:
    """(forward, backward, TP+CP comm, PP comm) seconds of one micro-batch on the busiest stage.

    cache: a dict the caller keeps for one model and machine (the plan search): everything but the pipeline
    transfers' count is the same for every interleaving degree, so it is computed once per shape."""
    if cache is None:
        forward, backward, comm, per_transfer = _stage_seconds(layout, flops, hidden, machine)
    else:
        key = (layout.tp, layout.cp, layout.pp, layout.micro_batch, layout.seq_len, layout.recompute,
               layout.sequence_parallel, layout.tp_intra_node, layout.pp_intra_node, layout.flash_attention,
               layout.ep, layout.ep_per_node)
        found = cache.get(key)
        if found is None:
            found = cache[key] = _stage_seconds(layout, flops, hidden, machine, cache)
        forward, backward, comm, per_transfer = found
    hidden_transfers = machine.pp_hidden and layout.virtual_stages > 1  # overlap_p2p_comm: interleaved only
    pp_seconds = 2 * layout.virtual_stages * per_transfer if layout.pp > 1 and not hidden_transfers else 0.0
    return forward, backward, comm, pp_seconds


def _stage_seconds(layout: Layout, flops: FlopModel, hidden: int, machine: Machine,
                   cache: dict | None = None) -> tuple[float, float, float, float]:
    """microbatch_seconds without the interleaving degree: the last entry is one pipeline transfer. cache:
    microbatch_seconds', which also keeps _layer_pieces for every pp."""
    key = ("layer", layout.tp, layout.cp, layout.micro_batch, layout.seq_len, layout.recompute,
           layout.sequence_parallel, layout.tp_intra_node, layout.flash_attention, layout.ep, layout.ep_per_node)
    pieces = None if cache is None else cache.get(key)
    if pieces is None:
        pieces = _layer_pieces(layout, flops, hidden, machine)
        if cache is not None:
            cache[key] = pieces
    forward_layer, backward_layer, core, recompute, head_forward, head_backward, message, tp_each, cp_exposed, tp_async \
        = pieces
    counts = layers_per_stage(flops.layers, layout.pp)
    candidates = [(counts[0], 0.0, 0.0) if layout.pp > 1 else (counts[0], head_forward, head_backward),
                  (counts[-1], head_forward, head_backward)]
    layers, forward, backward = max(((n, n * forward_layer + hf, n * (backward_layer + recompute) + hb)
                                     for n, hf, hb in candidates), key=lambda c: c[1] + c[2])
    comm = 0.0
    if layout.tp > 1:
        collectives = 6 if layout.recompute == "full" else 4
        tp_seconds = layers * collectives * tp_each
        if machine.tp_hidden and layout.tp_intra_node:  # userbuffers exchange over NVLink (CUDA IPC) only
            comm += max(0.0, tp_seconds - forward - backward)
        elif machine.tp_async and layout.tp_intra_node and layout.sequence_parallel:
            comm += layers * tp_async  # symmetric memory over NVLink only; without sequence parallelism TP runs
            # AllReduces, which the pass does not fuse (it matches all-gathers and reduce-scatters only)
        else:
            comm += tp_seconds
    if layout.cp > 1:
        passes = 2 if layout.recompute == "full" else 1
        exposed_forward, exposed_backward = cp_exposed
        comm += layers * (passes * exposed_forward + exposed_backward)
    if layout.ep > 1 and flops.moe_layers:
        alltoall = ep_alltoall_layer_seconds(layout, flops, machine) * layers * flops.moe_layers / flops.layers
        # --moe-a2a-overlap: each micro-batch's all-to-all hides behind another micro-batch's compute on the stage
        # (its kernels, not the host's sync stalls, which launch nothing)
        compute = forward + backward - layers * moe_sync_seconds(flops, machine)
        comm += max(0.0, alltoall - compute) if machine.moe_a2a_hidden else alltoall
    per_transfer = 0.0
    if layout.pp > 1:
        link = machine.links.link("p2p", layout.pp_intra_node)
        bandwidth = link_bandwidth(link, layout.pp_intra_node)
        per_transfer = link.latency_s + message / layout.tp / bandwidth
    return forward, backward, comm, per_transfer


def _layer_pieces(layout: Layout, flops: FlopModel, hidden: int, machine: Machine) -> tuple:
    """What _stage_seconds takes from one layer whatever the pipeline: (forward, backward, attention core,
    recompute seconds of a layer, LM head forward and backward, the activation message's bytes, one TP AllReduce,
    one CP AllGather, the TP seconds async TP leaves exposed per layer)."""
    forward_layer, backward_layer, core = layer_seconds(layout, flops, machine)
    recompute = {"full": forward_layer, "selective": core}.get(layout.recompute, 0.0)
    if layout.recompute == "selective-op":  # pointwise ops and every second linear GEMM; no TP collective again
        recompute = elementwise_seconds(layout, flops, machine) + sum(
            linear_gemm_seconds(shape, machine) for shape in op_sac_recompute_shapes(layout, flops))
    head_forward, head_backward = head_seconds(layout, flops, machine)
    tokens = layout.seq_len * layout.micro_batch // layout.cp
    message = tokens * hidden * ACTIVATION_ELEMENT_BYTES
    per_node = machine.gpus_per_node
    tp_each = tp_async = 0.0
    cp_exposed = (0.0, 0.0)
    if layout.tp > 1:
        tp_per_node = layout.tp if layout.tp_intra_node else min(per_node, max(1, layout.tp // 2))
        tp_each = collective_seconds("all_reduce", message, layout.tp, machine.links, tp_per_node)
        if machine.tp_async:
            tp_async = tp_async_exposed(layout, flops, machine, tp_each)
    if layout.cp > 1:
        cp_exposed = cp_exposed_seconds(layout, flops, machine, core)
    return (forward_layer, backward_layer, core, recompute, head_forward, head_backward, message, tp_each, cp_exposed,
            tp_async)


def cp_exposed_seconds(layout: Layout, flops: FlopModel, machine: Machine, core: float) -> tuple[float, float]:
    """One layer's exposed context-parallel communication for one micro-batch: (each forward pass, the backward)
    (docs/formulas.md §24). core: the attention core's forward seconds (layer_seconds). The CP ranks of a node:
    gpus_per_node / tp when tp fits a node (torchtitan's and Megatron's meshes put tp innermost, cp next), else 1.
    - "p2p" (machine.cp_ring; Megatron-Core's ring, the default): the keys and values of the other cp−1 chunks
      (kv heads, 16-bit) gathered in forward, hidden behind up to the whole attention core; their gradients
      reduce-scattered in backward, hidden behind up to twice the core.
    - "torch" (PyTorch's experimental context_parallel as torchtitan ran it; CP_RINGS): the model repeats K and V
      to the query heads before SDPA, so the exchange carries w/tp wide keys and values, not the kv heads; the
      default "allgather" rotation gathers them once and waits for the whole buffer before the second step's kernel,
      so the gather hides behind the first (local, causal) step only: 1/cp of the core (forward, and again in the
      backward, which re-gathers the keys and values, behind 1/cp of the backward core); the backward passes the
      accumulated dK, dV around the ring in fp32 (convert_to_f32), one point-to-point send per step (all-to-all
      with one peer, ft_c.permute_tensor), each hidden behind the next step's backward kernel and the last one
      waited after the loop, exposed whole."""
    per_node = machine.gpus_per_node
    cp_per_node = max(1, per_node // layout.tp) if layout.tp <= per_node else 1
    if machine.cp_ring != "torch":
        kv_bytes = layout.seq_len * layout.micro_batch * 2 * (flops.kv_width or flops.attention_width) / layout.tp \
            * ACTIVATION_ELEMENT_BYTES
        gather = collective_seconds("all_gather", kv_bytes, layout.cp, machine.links, cp_per_node)
        return max(0.0, gather - core), max(0.0, gather - 2 * core)
    local = cp_local_query_elements(layout, flops)
    gather = collective_seconds("all_gather", layout.cp * 2 * local * ACTIVATION_ELEMENT_BYTES, layout.cp,
                                machine.links, cp_per_node)
    step_forward = core / layout.cp
    step_backward = FLASH_BACKWARD_RATIO * step_forward
    grads = 2 * local * CP_TORCH_GRAD_BYTES
    across = layout.cp > cp_per_node  # the ring's next rank sits in another node somewhere along it
    send = collective_seconds(ALL_TO_ALL, grads, layout.cp, machine.links, cp_per_node,
                              split=(0.0, grads) if across else (grads, 0.0))
    forward = max(0.0, gather - step_forward)
    backward = (max(0.0, gather - step_backward) + (layout.cp - 1) * max(0.0, send - step_backward) + send)
    return forward, backward




def ep_alltoall_layer_seconds(layout: Layout, flops: FlopModel, machine: Machine) -> float:
    """One MoE layer's all-to-all seconds for one micro-batch, forward and backward (see the module docstring):
    dispatch and combine forward and backward, and forward again under full recompute; exposed
    (docs/formulas.md §20.4)."""
    if layout.ep <= 1 or not flops.moe_layers:
        return 0.0
    tokens = layout.micro_batch * layout.seq_len / layout.cp / layout.tp
    buffer = tokens * flops.experts_per_token * flops.hidden * ACTIVATION_ELEMENT_BYTES
    split = None
    if machine.moe_node_dedup and layout.ep > layout.ep_per_node:
        per_node, k = layout.ep_per_node, flops.experts_per_token
        remote = expected_remote_nodes(flops, layout.ep // per_node)
        # over NVLink: the copies for the other GPUs of its node, and forwarding the copies other nodes sent it to
        # the GPUs of its node holding their experts (per rank, symmetric)
        forwarded = k * (layout.ep - per_node) / layout.ep * (per_node - 1) / per_node
        token_bytes = tokens * flops.hidden * ACTIVATION_ELEMENT_BYTES
        split = (token_bytes * (k * (per_node - 1) / layout.ep + forwarded), token_bytes * remote)
    each = collective_seconds(ALL_TO_ALL, buffer, layout.ep, machine.links, layout.ep_per_node, split=split)
    return (6 if layout.recompute == "full" else 4) * each


def expected_remote_nodes(flops: FlopModel, nodes: int) -> float:
    """The other nodes of an EP group spanning `nodes` nodes that one token reaches, on average, under balanced
    routing (docs/formulas.md §20.4): each node holds E/nodes experts in contiguous blocks (Megatron-Core's expert
    placement), a node is missed when none of the token's k experts sits on it: C(E − E/nodes, k) / C(E, k). With
    group-limited routing (DeepSeek-V3's n_group, topk_group) and whole groups per node (n_group a multiple of the
    nodes), the token picks topk_group of the n_group groups (each of them holding at least one of its k experts,
    as DeepSeek-V3's router picks groups by their top experts), and a node holding g of them is missed with
    C(n_group − g, topk_group) / C(n_group, topk_group): DeepSeek-V3's 8 groups over EP 64 on 8 nodes send each
    token to at most 4 nodes, 3.5 of them remote on average (arXiv 2412.19437 §3.2.2), where unlimited top-8
    routing reaches 4.6 (and the alltoall dispatcher sends all 7 of its 8 copies that leave the node)."""
    if nodes <= 1:
        return 0.0
    groups = flops.route_groups
    if groups is not None and groups[0] % nodes == 0:
        count, chosen = groups[0], groups[1]
        missed = comb(count - count // nodes, chosen) / comb(count, chosen)
    else:
        count, chosen = flops.experts, flops.experts_per_token
        missed = comb(count - count // nodes, chosen) / comb(count, chosen) if count >= nodes else 0.0
    return (nodes - 1) * (1 - missed)


class StepTime(NamedTuple):
    """One step's time and its parts (a named tuple: the plan search builds one per plan)."""

    compute: float  # forward + backward (+ recompute) of every micro-batch, busiest stage
    tp_comm: float
    pp_comm: float
    bubble: float
    dp_comm: float  # all DP collective time, hidden or not
    dp_exposed: float
    offload: float  # exposed host/NVMe time and the CPU optimizer step
    optimizer: float  # GPU optimizer step
    total: float

    def parts(self) -> dict[str, float]:
        return {"compute": self.compute, "tp_comm": self.tp_comm, "pp_comm": self.pp_comm, "bubble": self.bubble,
                "dp_exposed": self.dp_exposed, "offload": self.offload, "optimizer": self.optimizer}


class PassTimes(NamedTuple):
    """The part of a step that does not depend on the ZeRO option: the passes of every micro-batch on the busiest
    stage, the bubble, and what DP traffic can hide behind (compose's first half)."""

    grad_accum: int
    pipelined: bool  # pp > 1
    compute: float  # m × (forward + backward)
    tp_comm: float  # m × TP/CP communication
    pp_comm: float  # m × pipeline transfers
    bubble: float
    passes: float  # m × stage time + bubble
    forward: float  # overlap × one micro-batch's forward compute
    backward: float  # overlap × one micro-batch's backward compute


def pass_times(layout: Layout, micro: tuple[float, float, float, float], overlap: float = DP_OVERLAP) -> PassTimes:
    forward_compute, backward_compute, tp_comm, pp_comm = micro
    m = layout.grad_accum
    stage_time = forward_compute + backward_compute + tp_comm + pp_comm
    bubble = (layout.pp - 1) / layout.virtual_stages * stage_time
    return PassTimes(m, layout.pp > 1, m * (forward_compute + backward_compute), m * tp_comm, m * pp_comm, bubble,
                     m * stage_time + bubble, overlap * forward_compute, overlap * backward_compute)


def exposed_seconds(passes: PassTimes, dp: DpSeconds, offload: OffloadSeconds, stage: int) -> tuple[float, float]:
    """(exposed DP, exposed offload) seconds of a step: the overlap rule of the module docstring, the same for
    every ZeRO stage."""
    m, pipelined = passes.grad_accum, passes.pipelined
    forward, backward = passes.forward, passes.backward  # what communication can hide behind
    reduce_repeats = m if stage >= 2 else 1
    gather_repeats = m if stage == 3 else 1
    fetch = offload.param_fetch
    gradients_down = offload.gradient_repeats * offload.gradients_down
    if pipelined:  # reductions (and the host copy of gradients) after the flush
        reduce_exposed = dp.reduce
        down_exposed = gradients_down
    else:
        reduce_exposed = reduce_repeats * max(0.0, dp.reduce / reduce_repeats - backward)
        down_exposed = offload.gradient_repeats * max(0.0, offload.gradients_down - backward)
    if stage == 3:  # per micro-batch: gathers behind forward; the backward gather and the reduction behind backward
        gather_forward = dp.gather_forward / gather_repeats
        behind_backward = dp.gather_backward / gather_repeats + (0.0 if pipelined else dp.reduce / m)
        gathers = gather_repeats * (max(0.0, gather_forward - forward) + max(0.0, behind_backward - backward))
        with_fetch = gather_repeats * (max(0.0, gather_forward + fetch - forward)
                                       + max(0.0, behind_backward + fetch - backward))
        fetch_exposed = with_fetch - gathers
        if not pipelined:
            reduce_exposed = 0.0  # counted with the backward gather
    else:
        after = dp.gather_after_step  # stage 0: the AllReduce's second half, with the reduction
        if stage == 0:
            gathers = after if pipelined else max(0.0, (dp.reduce + after) - backward) - reduce_exposed
            gathers = max(0.0, gathers)
        else:
            gathers = after if pipelined else max(0.0, after - forward)
        fetch_exposed = 0.0
    return reduce_exposed + gathers, down_exposed + fetch_exposed + offload.exposed


def step_time(passes: PassTimes, dp_total: float, exposed: tuple[float, float], optimizer_seconds: float) -> StepTime:
    """compose's second half: the passes, the exposed DP and offload time (exposed_seconds) and the optimizer."""
    dp_exposed, offload_exposed = exposed
    # StepTime(...) without the named tuple's keyword layer (the plan search builds one per plan): fields in order
    return tuple.__new__(StepTime, (passes.compute, passes.tp_comm, passes.pp_comm, passes.bubble, dp_total, dp_exposed,
                                    offload_exposed, optimizer_seconds,
                                    passes.passes + dp_exposed + offload_exposed + optimizer_seconds))


def compose(layout: Layout, micro: tuple[float, float, float, float], dp: DpSeconds, offload: OffloadSeconds,
            optimizer_seconds: float, stage: int, overlap: float = DP_OVERLAP) -> StepTime:
    """One step from its per-micro-batch pieces and its per-step DP/offload pieces, with the overlap rule of the
    module docstring (the same for every ZeRO stage). The plan search calls the halves (pass_times once per step
    shape, exposed_seconds once per option and shape) and step_time per plan."""
    passes = pass_times(layout, micro, overlap)
    return step_time(passes, dp.total, exposed_seconds(passes, dp, offload, stage), optimizer_seconds)


def pp_intra_node(world: int, gpus_per_node: int) -> bool:
    """Every pipeline group holds one rank per tp·dp block, so with more than one node some boundary
    crosses nodes and the slowest boundary sets the pace."""
    return world <= gpus_per_node


def train_seconds(step_seconds: float, tokens_per_step: int, training_tokens: int) -> float:
    """Whole optimizer steps to cover training_tokens."""
    return ceil(training_tokens / tokens_per_step) * step_seconds


def narayanan_flops_per_iteration(batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> int:
    """Narayanan et al. 2021: F = 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)) per iteration with full recompute,
    multiplied out: B·s·h·(96·L·h + 16·L·s + 6·V), an exact integer."""
    return batch * seq_len * hidden * (96 * layers * hidden + 16 * layers * seq_len + 6 * vocab)
