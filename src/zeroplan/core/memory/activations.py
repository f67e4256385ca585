"""Activation bytes per GPU on the most loaded pipeline stage, in exact integer bytes (docs/formulas.md §8).

Two implementations (ActivationConfig.implementation):
- "transformers" (the default of `estimate`): what Hugging Face transformers' modeling code keeps, derived
  from traces of the real code (`zeroplan trace`, docs/trace.md) and exact to the byte per layer for the
  families in TRANSFORMERS_FAMILIES; the total is the peak moment of the step (backward start: every
  layer's activations, the final norm, fp32 log-softmax and the loss gradient's fp32 temporaries).
  Families whose code is not derived fall back to "megatron" (applied_implementation says so).
- "megatron": Megatron-LM's theoretical memory (fused kernels), described below.

Per layer: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv 2205.05198), Table 2, written out term by term so it also covers real shapes (ffn != 4h,
grouped-query attention, head_dim != h/a, gated MLPs, MoE) and reduces to Table 2 exactly for a
GPT-3 shape. Embedding and output/loss terms and the pipeline factors follow Megatron-LM
megatron/training/theoretical_memory_usage.py (the first stage is the most loaded one).

Everything is an exact Fraction until the end: each breakdown entry is rounded up to whole bytes
once, and the total is the sum of the entries.

Assumptions, where the sources leave a choice:
- Dropout masks (1 byte per element) are counted as in Table 2, even for models trained without dropout.
- Flash attention stores no s×s score matrix, softmax output or its dropout mask (the whole 5as/h term);
  its per-row softmax statistics (4 bytes × a·s·b, well under 1% of a layer) are left out.
- MoE layers (experts_per_token = k): the router input is stored once, the token copies dispatched to
  the k experts and each expert's MLP internals k times, plus fp32 router probabilities (s·b·E · 4 bytes).
  Routing is taken as balanced with no capacity padding or dropped tokens, so per-GPU tokens stay s·b: with
  every expert on every rank (ep = 1) a rank's routed tokens are its own. With expert parallelism (ep > 1) the
  most loaded EP rank receives more than the average s·b·k token copies: dropless routing (Megatron-Core's
  default) is given MOE_DROPLESS_ALLOWANCE more (a stated allowance, not a bound: a router that collapses
  onto few experts exceeds it); a capacity factor c caps every expert at c × its even share, the most a rank
  can receive (and what Megatron's pad-to-capacity holds on every rank). The excess of the routed terms (the
  k dispatched copies and the experts' inner activations) is "activations/moe_imbalance" (docs/formulas.md §20.3).
- Full recompute stores each layer's input (the checkpoint, split by t under sequence parallelism) and,
  during the backward pass, one layer's full working set for the micro-batch being recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from fractions import Fraction
from functools import lru_cache
from math import ceil
from operator import attrgetter
from typing import Any

from zeroplan.core.memory import activations_gated_families as gated
from zeroplan.core.memory import activations_layernorm_families as layernorm_families
from zeroplan.core.memory import activations_moe_families as moe_families
from zeroplan.core.memory import activations_qk_norm_families as qk_norm
from zeroplan.core.memory import activations_sliding_families as sliding
from zeroplan.core.memory.activations_qk_norm_families import QK_NORM_FAMILIES
from zeroplan.core.errors import InputError, ref
from zeroplan.core.parallel.rules import MAX_SEQ_LEN
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.memory.activations_gated_families import (
    GATED_FAMILIES,
    GatedTraits,
    gated_traits,
)
from zeroplan.core.units import ceil_div

# "selective-op": torch's op-level selective activation checkpointing (torch.utils.checkpoint with a policy, as
# torchtitan's selective_ac_option="op"): matmul and attention-kernel outputs are saved, pointwise ops (norms,
# activation functions, dropout, residual adds) are recomputed in backward from the layer input (_op_saved_bytes).
RECOMPUTE_MODES = ("none", "selective", "full", "selective-op")
IMPLEMENTATIONS = ("transformers", "megatron")
# Families whose sliding window is derived where it makes transformers build a mask (every layer windowed).
WINDOW_DERIVED = ("mistral", "mixtral", "phi3")
# Families whose transformers decoder layer is derived to the byte (RMSNorm + rotary + SwiGLU, qwen3's qk-norm; GPT-2's block;
# Gemma, Phi-3 and Mixtral in core.memory.activations_gated_families; GPT-NeoX, OPT and Falcon in
# core.memory.activations_layernorm_families).
LLAMA_STYLE_FAMILIES = ("llama", "mistral", "qwen2") + QK_NORM_FAMILIES
# OLMoE, Qwen2-MoE and DeepSeek-V2/V3 (shared experts, latent attention, dense and sparse layers mixed) in
# core.memory.activations_moe_families; Gemma 2, Gemma 3 and gpt-oss (sliding and global layers) in
# core.memory.activations_sliding_families
TRANSFORMERS_FAMILIES: tuple[str, ...] = (LLAMA_STYLE_FAMILIES + ("gpt2",) + GATED_FAMILIES + layernorm_families.FAMILIES
                                          + moe_families.FAMILIES + sliding.SLIDING_FAMILIES)
DEFAULT_SEQ_LEN_CAP = 4096  # the default sequence length: the model's context, at most this


def default_seq_len(model: ModelSpec) -> int:
    """The sequence length every command assumes when none is given: the model's context, capped."""
    context = model.shape.max_seq_len if model.shape is not None else None
    return min(context or DEFAULT_SEQ_LEN_CAP, DEFAULT_SEQ_LEN_CAP)
ACTIVATION_DTYPE_BYTES = (1, 2, 4)
_TOKEN_ID_BYTES = 8  # int64 input ids, as Megatron counts them
_MASK_BYTES = 1  # one byte per dropout-mask element
_FP32_BYTES = 4  # router probabilities and the logits fed to the loss
_GPT2_POSITIONS = 1024  # GPT-2's n_positions when a config leaves it out
# The most loaded EP rank's routed tokens above the average with dropless routing (see the module docstring).
MOE_DROPLESS_ALLOWANCE = Fraction(1, 10)
MOE_IMBALANCE_KEY = "activations/moe_imbalance"
BREAKDOWN_KEYS = ("activations/layers", "activations/embedding", "activations/output_and_loss",
                  "activations/recompute_working_set")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class ActivationConfig:
    """How one training step lays activations out on a GPU.

    num_micro_batches: micro-batches per pipeline flush (gradient accumulation steps); None means at
    least pp, so the first stage of a 1F1B pipeline holds pp micro-batches in flight.
    virtual_stages: model chunks per GPU for Megatron's interleaved schedule (1 = plain 1F1B).
    """

    seq_len: int
    micro_batch: int = 1
    recompute: str = "none"
    flash_attention: bool = False
    sequence_parallel: bool = False
    tp: int = 1
    pp: int = 1
    virtual_stages: int = 1
    num_micro_batches: int | None = None
    dtype_bytes: int = 2
    implementation: str = "megatron"
    ep: int = 1  # expert parallelism: the most loaded EP rank receives more than its share of routed tokens
    capacity_factor: float | None = None  # None: dropless (MOE_DROPLESS_ALLOWANCE); else each expert's cap

    def __post_init__(self) -> None:
        problems: dict[str, str] = {}
        if not _is_count(self.ep):
            problems["ep"] = f"must be a positive whole number, got {self.ep!r}"
        if self.capacity_factor is not None and (isinstance(self.capacity_factor, bool) or not
                                                 isinstance(self.capacity_factor, (int, float))
                                                 or not 1 <= self.capacity_factor <= 64):
            problems["capacity_factor"] = f"must be a number from 1 to 64, got {self.capacity_factor!r}"
        counts = (("seq_len", self.seq_len), ("micro_batch", self.micro_batch), ("tp", self.tp),
                  ("pp", self.pp), ("virtual_stages", self.virtual_stages))
        for name, value in counts:
            if not _is_count(value):
                problems[name] = f"must be a positive whole number, got {value!r}"
        if self.num_micro_batches is not None and not _is_count(self.num_micro_batches):
            problems["num_micro_batches"] = \
                f"must be a positive whole number, got {self.num_micro_batches!r}"
        if _is_count(self.seq_len) and self.seq_len > MAX_SEQ_LEN:
            problems["seq_len"] = f"{self.seq_len} is beyond any real run (more than {MAX_SEQ_LEN})"
        if self.recompute not in RECOMPUTE_MODES:
            problems["recompute"] = f"must be one of {', '.join(RECOMPUTE_MODES)}, got {self.recompute!r}"
        for name, value in (("flash_attention", self.flash_attention),
                            ("sequence_parallel", self.sequence_parallel)):
            if not isinstance(value, bool):
                problems[name] = f"must be true or false, got {value!r}"
        if self.dtype_bytes not in ACTIVATION_DTYPE_BYTES or isinstance(self.dtype_bytes, bool):
            problems["activation_bytes"] = \
                f"must be 1, 2 or 4 bytes per element, got {self.dtype_bytes!r}"
        if self.implementation not in IMPLEMENTATIONS:
            problems["activations"] = f"must be one of {', '.join(IMPLEMENTATIONS)}, got {self.implementation!r}"
        if "virtual_stages" not in problems and "pp" not in problems \
                and self.virtual_stages > 1 and self.pp == 1:
            problems["virtual_stages"] = f"interleaving needs a pipeline: {ref('pp')} must be above 1"
        if len(problems) == 1:
            ((name, text),) = problems.items()
            raise InputError(name, text)
        if problems:
            details = "; ".join(f"{ref(name)} {text}" for name, text in problems.items())
            raise InputError(", ".join(problems), details, "correct each input named")


@dataclass(frozen=True)
class MoETraits:
    """What a qwen3_moe config.json sets beyond the shape that changes the bytes (or the derivation)."""

    normalised: bool = False  # norm_topk_prob (transformers' default: False)
    every_layer_sparse: bool = True  # no mlp_only_layers, decoder_sparse_step 1
    experts_implementation: str = "grouped_mm"
    router_logits_output: bool = False


def _moe_traits(config: dict, family: str | None) -> MoETraits | None:
    if family not in qk_norm.QK_NORM_MOE_FAMILIES:
        return None
    return MoETraits(normalised=bool(config.get("norm_topk_prob", False)),
                     every_layer_sparse=not config.get("mlp_only_layers") and (config.get("decoder_sparse_step") or 1) == 1,
                     experts_implementation=str(config.get("experts_implementation") or "grouped_mm"),
                     router_logits_output=bool(config.get("output_router_logits", False)))


@dataclass(frozen=True)
class _Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    gated_mlp: bool
    experts: int
    experts_per_token: int  # 1 for a dense model
    family: str | None = None
    dropout_masks: tuple[int, int] = (0, 0)  # GPT-2's, OPT's residual dropouts per layer, embedding dropouts (T·h each)
    sliding_window: int | None = None  # attention window of the config.json (mistral's default 4096), if any
    tied: bool = False  # the LM head shares the input embedding's weight (GPT-2's default)
    position_rows: int = 0  # rows of a learned position table (GPT-2's n_positions); 0 for rotary positions
    gated: GatedTraits | None = None  # gemma, phi3, mixtral: what their config.json sets beyond the shape
    layernorm: layernorm_families.Layout | None = None  # gpt_neox, opt, falcon: what their config.json sets
    moe_traits: MoETraits | None = None  # qwen3_moe: what its config.json sets beyond the shape
    moe_layout: moe_families.Layout | None = None  # olmoe, qwen2_moe, deepseek_v2/v3: layers, router, latent attention
    sliding: sliding.SlidingTraits | None = None  # gemma2, gemma3_text, gpt_oss: each layer's window, soft-capping


def _shape(model: ModelSpec) -> _Shape:
    shape = model.require_shape("model", f"activation memory needs the shape of '{model.name}' "
                                "(layers, hidden, heads, vocab); a parameter count alone does not give it",
                                f"use {ref('model')} with a preset or a config.json")
    experts, per_token = shape.experts, shape.experts_per_token
    return _Shape(
        layers=shape.layers, hidden=shape.hidden, heads=shape.heads, kv_heads=shape.kv_heads,
        head_dim=shape.head_dim, ffn=shape.ffn, vocab=shape.vocab, gated_mlp=shape.gated_mlp,
        experts=experts if experts and per_token else 0, experts_per_token=per_token if experts and per_token else 1,
        family=shape.family,
        dropout_masks=dropout_masks({"model_type": shape.family, **(model.extra.get("hf_config") or {})}),
        sliding_window=_sliding_window(model.extra.get("hf_config") or {}, _layer_windows(model)),
        tied=shape.tied_embeddings if shape.tied_embeddings is not None else shape.family == "gpt2",
        position_rows=_position_rows(shape.family, shape.max_seq_len),
        layernorm=(layernorm_families.layout({"model_type": shape.family, **(model.extra.get("hf_config") or {})},
                                             shape.hidden, shape.head_dim)
                   if shape.family in layernorm_families.FAMILIES else None),
        gated=gated_traits(model.extra.get("hf_config") or {}, shape.family, shape.head_dim),
        moe_traits=_moe_traits(model.extra.get("hf_config") or {}, shape.family),
        moe_layout=_moe_layout(model),
        sliding=_sliding_traits(model.extra.get("hf_config") or {}, shape.family, _layer_windows(model)))


def _moe_layout(model: ModelSpec) -> moe_families.Layout | None:
    shape = model.shape
    if shape is None or shape.family not in moe_families.FAMILIES or shape.moe is None:
        return None
    moe = shape.moe
    return moe_families.layout(model.extra.get("hf_config") or {}, shape.family or "",
                               moe.pattern or (True,) * shape.layers, moe.dense_ffn or 0, moe.expert_ffn,
                               shape.experts or 0, shape.experts_per_token or 1, moe.shared_expert_ffn or 0)


def _layer_windows(model: ModelSpec) -> tuple[int | None, ...]:
    """Each layer's sliding window (None: global), as the config.json reader gave them (ModelShape.attention_spans:
    layer_types, or transformers' default pattern); () where the shape carries no spans."""
    spans = model.shape.attention_spans if model.shape is not None else None
    if spans is None:
        return (None,) * model.shape.layers if model.shape is not None else ()
    return tuple(span[1] if span is not None and span[0] == "sliding" else None for span in spans)


def _sliding_traits(config: dict, family: str | None, windows: tuple[int | None, ...]) -> sliding.SlidingTraits | None:
    if family not in sliding.SLIDING_FAMILIES:
        return None
    return sliding.sliding_traits(config, family, windows)


def _position_rows(family: str | None, max_seq_len: int | None) -> int:
    """Rows of the learned position table: GPT-2's n_positions, OPT's max_position_embeddings + 2 (its offset)."""
    if family == "gpt2":
        return max_seq_len or _GPT2_POSITIONS
    if family == "opt":
        return (max_seq_len or layernorm_families.OPT_POSITIONS) + layernorm_families.OPT_POSITION_OFFSET
    return 0


_remembered: tuple[ModelSpec, _Shape] | None = None


def _last_shape(model: ModelSpec) -> _Shape:
    """_shape(model), remembered for the last model asked by identity (ModelSpec is frozen; the config.json in its
    extra is read once, never changed): the plan search asks for one model's activation terms thousands of times."""
    global _remembered
    remembered = _remembered  # one read: another thread may replace it
    if remembered is not None and remembered[0] is model:
        return remembered[1]
    shape = _shape(model)
    _remembered = (model, shape)
    return shape


def _sliding_window(config: dict, windows: tuple[int | None, ...] = ()) -> int | None:
    """The attention window a config.json applies (transformers' defaults: mistral 4096, qwen2 only with
    use_sliding_window), or None; `windows`: each layer's, as the reader gave them (the sliding families')."""
    family = config.get("model_type")
    if family == "mistral":
        return config.get("sliding_window", 4096)
    if family in ("qwen2", "qwen3") and config.get("use_sliding_window"):
        return config.get("sliding_window", 4096)
    if family in ("mixtral", "phi3"):  # no window unless the config sets one (Phi-3-mini-4k: 2047)
        return config.get("sliding_window")
    if family in sliding.SLIDING_FAMILIES:  # the sliding layers' window (the others are global)
        return min((window for window in windows if window is not None), default=None)
    return None


def dropout_masks(config: dict) -> tuple[int, int]:
    """(dropout masks per decoder layer, on the embedding side), each over T·h elements, of a GPT-2 or OPT config.json
    that trains with dropout (transformers' defaults: GPT-2's resid_pdrop and embd_pdrop 0.1, OPT's dropout 0.1):
    GPT-2 drops the attention's and the MLP's outputs (resid_pdrop) and the embeddings (embd_pdrop), OPT the
    attention's and fc2's outputs. Attention dropout (GPT-2's attn_pdrop, OPT's attention_dropout) runs inside the
    fused sdpa kernel, which on a GPU keeps only its random-number state: no mask."""
    family = config.get("model_type")
    if family == "gpt2":
        return (2 if _positive(config, "resid_pdrop", 0.1) else 0), (1 if _positive(config, "embd_pdrop", 0.1) else 0)
    if family == "opt":
        return (2 if _positive(config, "dropout", 0.1) else 0), 0
    return 0, 0


def _positive(config: dict, key: str, default: float) -> bool:
    return float(config.get(key, default) or 0.0) > 0.0


def dropout_note(model: ModelSpec) -> str:
    """What the transformers estimate assumes about a config's dropout ("" when it trains without)."""
    if model.shape is None or model.shape.family not in ("gpt2", "opt"):
        return ""
    per_layer, embedding = dropout_masks({"model_type": model.shape.family, **(model.extra.get("hf_config") or {})})
    if not per_layer + embedding:
        return ""
    return ("dropout: a GPU's kernels keep one byte per dropped element (CPU kernels, and so `zeroplan trace`, keep the "
            "mask in the compute dtype); attention dropout inside sdpa's fused kernel keeps only its random-number "
            "state on a GPU (the CPU trace runs the math kernel instead)")


def applied_implementation(model: ModelSpec, config: ActivationConfig) -> tuple[str, str]:
    """(the implementation whose formula applies, why when it is not the one asked for)."""
    if config.implementation == "megatron":
        return "megatron", ""
    reason = _transformers_gap(_shape(model), config)
    return ("megatron", reason) if reason else ("transformers", "")


def _transformers_gap(shape: _Shape, config: ActivationConfig) -> str:
    """Why the transformers formula does not cover this case ("" when it does)."""
    if config.recompute == "selective-op":
        return ("op-level selective checkpointing (selective-op) is not derived for transformers' layers: "
                "Megatron's formula with its op-level rows is used")
    if shape.family not in TRANSFORMERS_FAMILIES:
        return (f"transformers' {shape.family or 'unknown'} layers are not derived yet: Megatron's formula is used "
                f"(derived: {', '.join(TRANSFORMERS_FAMILIES)})")
    if config.tp > 1 or config.pp > 1 or config.sequence_parallel:
        return "transformers runs no tensor or pipeline parallelism: Megatron's formula is used with --tp/--pp"
    if config.ep > 1:
        return "transformers runs no expert parallelism: Megatron's formula is used with --ep"
    if shape.sliding is not None:  # their sliding layers are derived with or without the window's mask
        return sliding.gap(shape.family or "", shape.sliding, config.flash_attention)
    if _windowed(shape, config) and (shape.family not in WINDOW_DERIVED or config.recompute == "selective"):
        return (f"a sliding attention window ({shape.sliding_window}) no longer than the sequence ({config.seq_len}) "
                f"makes transformers build an explicit mask; {shape.family} with it is derived for "
                f"{', '.join(WINDOW_DERIVED)} without selective recompute only: Megatron's formula is used")
    if shape.gated is not None and (reason := gated.gap(shape.family or "", shape.gated)):
        return reason
    if shape.moe_traits is not None and (reason := _moe_gap(shape.family or "", shape.moe_traits)):
        return reason
    if shape.family in moe_families.FAMILIES:
        return moe_families.gap(shape.moe_layout, config.seq_len) if shape.moe_layout is not None else \
            f"{shape.family} without experts is not derived: Megatron's formula is used"
    if shape.family in layernorm_families.FAMILIES:
        return layernorm_families.gap(_layernorm_layout(shape), config.flash_attention)
    if shape.family == "gpt2" and not config.flash_attention:
        return ("GPT-2 is derived for sdpa attention only (eager attention was asked): Megatron's formula is used")
    return ""


def _moe_gap(family: str, traits: MoETraits) -> str:
    if not traits.every_layer_sparse:
        return (f"{family} with dense layers (mlp_only_layers, decoder_sparse_step) is not derived: Megatron's formula "
                "is used (balanced routing assumed)")
    if traits.experts_implementation != "grouped_mm" or traits.router_logits_output:
        return (f"{family}'s experts_implementation '{traits.experts_implementation}' or output_router_logits is not "
                "derived (transformers' default grouped_mm without the load-balancing loss is): Megatron's formula is "
                "used (balanced routing assumed)")
    return ""


def _windowed(shape: _Shape, config: ActivationConfig) -> bool:
    """Whether transformers builds an explicit attention mask for the sliding window: a window no longer than the
    sequence (masking_utils skips the mask only while every key is inside the window)."""
    return shape.sliding_window is not None and config.seq_len >= shape.sliding_window


def _masked_sdpa_bytes(shape: _Shape, config: ActivationConfig) -> int:
    """What sdpa keeps beyond its causal (maskless) case when transformers gives it a window's explicit mask, per
    layer and micro-batch (0 without one, or with eager attention, whose mask is counted once on the embedding side).
    With a mask transformers repeats the KV heads itself (use_gqa_in_sdpa: only maskless calls use enable_gqa, on
    CUDA as on CPU), so k and v are kept over all a heads (2·e·(a - k)·d more per token), and the fused kernel keeps
    the (b, 1, s, s) mask converted to the compute dtype (b·s²·e): CUDA's memory-efficient kernel, the one that
    takes a mask, saves the converted bias as the CPU kernel does. The bool mask itself lives through the forward
    (with full recompute, every checkpoint keeps it: b·s², once)."""
    if not _windowed(shape, config) or not config.flash_attention:
        return 0
    e, tokens, a, k, d = config.dtype_bytes, config.seq_len * config.micro_batch, shape.heads, shape.kv_heads, shape.head_dim
    mask = config.micro_batch * config.seq_len ** 2 * e
    if shape.family == "phi3" and k < a:
        # Phi-3's maskless sdpa keeps the rotated k and the fused qkv (v is its view); the repeated k and v replace both
        return tokens * e * (2 * a * d - k * d - (a + 2 * k) * d) + mask
    return 2 * e * (a - k) * d * tokens + mask


def _layernorm_layout(shape: _Shape) -> layernorm_families.Layout:
    if shape.layernorm is None:  # only asked for a family of layernorm_families.FAMILIES, whose layout _shape read
        raise ValueError(f"{shape.family} is not a LayerNorm family")
    return shape.layernorm


def _norm_bytes_per_token(shape: _Shape, e: int) -> int:
    """What one of transformers' norms keeps per token: GPT-2's LayerNorm its input, mean and rstd (e each on CPU
    kernels) and output; an RMSNorm its fp32 input (an upcast copy in 16 bits), fp32 rsqrt, x and x·weight."""
    h = shape.hidden
    if shape.family in GATED_FAMILIES:  # Gemma's keeps its fp32 normalised x and a cast output instead
        return gated.norm_bytes_per_token(shape.family or "", h, e)
    if shape.family in qk_norm.POST_NORM_FAMILIES:  # OLMo-2's fp32 normalised x; its cast output (the head's input)
        return qk_norm.olmo2_norm_bytes_per_token(h) + e * h
    return 2 * e * h + 2 * e if shape.family == "gpt2" else 4 * h + 4 + 2 * e * h


def _transformers_layer_bytes(shape: _Shape, config: ActivationConfig) -> int:
    """Bytes one decoder layer keeps for one micro-batch in transformers' code (exact on CPU kernels).

    e = bytes of the compute dtype, T = s·b tokens, a heads, k KV heads, d head_dim, f ffn.
    Llama-style (RMSNorm, rotary, SwiGLU): each RMSNorm keeps its fp32 input (an upcast copy in 16 bits), the
    fp32 rsqrt (4 B/token), the normalised x and x·weight (e·h each); the MLP keeps gate, up, silu(gate) and
    the down_proj input (4·e·f). sdpa keeps q, k, v (KV heads: enable_gqa), the output (the o_proj input) and
    the fp32 logsumexp (4·a); eager keeps q, the repeat_kv'd k and v (a heads), the o_proj input copy and the
    fp32 softmax output plus its cast to e (fp32: the softmax output only). Selective recompute keeps q, k, v
    and the output; full recompute keeps the layer input.
    GPT-2 (sdpa, no dropout): LayerNorm keeps input, mean and rstd (e each on CPU kernels) and output; the
    fused qkv output, the attention output, the logsumexp; gelu_new keeps four f-wide tensors, c_proj's input.
    """
    tokens, e, seq = config.seq_len * config.micro_batch, config.dtype_bytes, config.seq_len
    h, a, k, d, f = shape.hidden, shape.heads, shape.kv_heads, shape.head_dim, shape.ffn
    if shape.family in layernorm_families.FAMILIES:
        masks = tokens * _MASK_BYTES * shape.dropout_masks[0] * h if config.recompute != "full" else 0
        return layernorm_families.layer_bytes(_layernorm_layout(shape), config.seq_len, config.micro_batch, e, h, a, k,
                                              d, f, config.recompute) + masks
    if shape.family in qk_norm.POST_NORM_FAMILIES:
        return qk_norm.post_norm_layer_bytes(tokens, seq, e, h, a, k, d, f, config.recompute, config.flash_attention)
    if shape.moe_layout is not None:  # the last layer (_transformers_layers gives every layer's)
        return _moe_family_layer_bytes(shape, config, shape.layers - 1)
    if shape.sliding is not None:
        return max(_transformers_layers(shape, config))
    if config.recompute == "full":
        return tokens * e * h
    if shape.family in GATED_FAMILIES:
        return gated.layer_bytes(shape.family or "", tokens, seq, e, h, a, k, d, f, shape.experts,
                                 shape.experts_per_token, config.recompute, config.flash_attention) \
            + _masked_sdpa_bytes(shape, config)
    norm = _norm_bytes_per_token(shape, e)
    if shape.family == "gpt2":
        core = 4 * e * h + (4 * a if config.recompute == "none" else 0)
        return tokens * (2 * norm + core + 5 * e * f + _MASK_BYTES * shape.dropout_masks[0] * h)
    if config.recompute == "selective":
        core = 2 * e * a * d + 2 * e * k * d
    elif config.flash_attention:
        core = 2 * e * a * d + 2 * e * k * d + 4 * a
    else:
        core = 4 * e * a * d + a * seq * (4 + (e if e != 4 else 0))
    if shape.family in qk_norm.QK_NORM_MOE_FAMILIES:
        traits = shape.moe_traits or MoETraits()
        return (tokens * (2 * norm + core + _qk_norm_bytes_per_token(shape, e))
                + gated.moe_bytes(tokens, e, h, f, shape.experts, shape.experts_per_token, e, traits.normalised))
    return tokens * (2 * norm + core + _qk_norm_bytes_per_token(shape, e) + 4 * e * f) + _masked_sdpa_bytes(shape, config)


def _moe_family_layer_bytes(shape: _Shape, config: ActivationConfig, index: int) -> int:
    """Layer `index` of an OLMoE, Qwen2-MoE, DeepSeek or Llama 4 model (core.memory.activations_moe_families)."""
    lay = shape.moe_layout
    if lay is None:  # only asked for a family whose layout _shape read
        raise ValueError(f"{shape.family} has no MoE layout")
    return moe_families.layer_bytes(lay, index, config.seq_len * config.micro_batch, config.seq_len,
                                    config.dtype_bytes, shape.hidden, shape.heads, shape.kv_heads, shape.head_dim,
                                    config.recompute, config.flash_attention,
                                    _qk_norm_bytes_per_token(shape, config.dtype_bytes))


def _transformers_layers(shape: _Shape, config: ActivationConfig) -> tuple[int, ...]:
    """Bytes each decoder layer keeps for one micro-batch: one layer's for every layer, or, where layers differ
    (DeepSeek's first_k_dense_replace, Qwen2-MoE's mlp_only_layers, Llama 4's interleaving and layers without
    rotary; Gemma 3's sliding layers with sdpa, whose window's explicit mask makes them keep more), each layer's."""
    if shape.moe_layout is not None:
        return tuple(_moe_family_layer_bytes(shape, config, index) for index in range(shape.layers))
    if shape.sliding is None:
        return (_transformers_layer_bytes(shape, config),) * shape.layers
    tokens, e, h = config.seq_len * config.micro_batch, config.dtype_bytes, shape.hidden
    if config.recompute == "full":
        return (tokens * e * h,) * shape.layers
    plain = sliding.layer_bytes(shape.family or "", shape.sliding, tokens, config.seq_len, e, h, shape.heads,
                                shape.kv_heads, shape.head_dim, shape.ffn, shape.experts, shape.experts_per_token,
                                config.recompute, config.flash_attention)
    # selective recompute repeats k and v and converts the mask inside the checkpoint: recomputed, not kept
    masked = _masked_sdpa_bytes(shape, config) if config.recompute == "none" else 0
    return tuple(plain + (masked if window is not None and window <= config.seq_len else 0)
                 for window in shape.sliding.windows)


def _rotary_width(shape: _Shape) -> int:
    """The rotary embedding's width: Phi-3's partial rotary, DeepSeek's rope_dim, else head_dim."""
    if shape.gated is not None:
        return shape.gated.rotary_dim
    if shape.moe_layout is not None:
        return moe_families.rotary_width(shape.moe_layout, shape.head_dim)
    return shape.head_dim


def _qk_norm_bytes_per_token(shape: _Shape, e: int) -> int:
    """What the query and key norms keep per token (core.memory.activations_qk_norm_families; 0 without them)."""
    return qk_norm.qk_norm_bytes_per_token(shape.family, shape.heads, shape.kv_heads, shape.head_dim, e)


def _transformers_terms(shape: _Shape, config: ActivationConfig) -> dict[str, int]:
    """The breakdown at the step's peak moment, the start of backward: every layer's activations; the
    embedding side (int64 ids and labels, rotary cos/sin or the learned positions' int64 indices (one row,
    broadcast over the micro-batch), the eager causal mask); the final norm, fp32 log-softmax output and the two fp32 vocabulary-wide temporaries of the loss
    gradient (the 16-bit logits are freed by then); with full recompute, the excess of the last layer's
    recomputed working set over the loss temporaries it follows."""
    tokens, e, seq, b = config.seq_len * config.micro_batch, config.dtype_bytes, config.seq_len, config.micro_batch
    d, v = shape.head_dim, shape.vocab
    layers = sum(_transformers_layers(shape, config))
    embedding = 2 * _TOKEN_ID_BYTES * tokens
    final_norm, final_norm_fixed = _norm_bytes_per_token(shape, e), 0
    loss = _loss_temporaries(tokens, v)
    if shape.sliding is not None:
        final_norm, final_norm_fixed = sliding.final_norm_bytes(shape.family or "", shape.hidden, e)
        embedding += sliding.embedding_bytes(shape.family or "", shape.sliding, tokens, seq, b, e, d,
                                             config.flash_attention)
        loss += sliding.loss_bytes(shape.sliding, tokens, v, e)
    elif shape.family in layernorm_families.FAMILIES:
        final_norm = layernorm_families.final_norm_bytes(_layernorm_layout(shape), e, shape.hidden)
        embedding += layernorm_families.embedding_bytes(_layernorm_layout(shape), tokens, seq, e)
    elif shape.family == "gpt2":
        embedding += _TOKEN_ID_BYTES * seq  # the learned positions' int64 indices, kept for their backward
        embedding += tokens * _MASK_BYTES * shape.dropout_masks[1] * shape.hidden  # embd_pdrop's mask
    else:
        if shape.gated is not None:  # Gemma's norm and scaled embeddings; Phi-3's partial rotary narrows cos and sin
            final_norm, final_norm_fixed, scale = gated.final_norm_and_embedding_scale(shape.family or "",
                                                                                       shape.hidden, e)
            embedding += scale
            d = shape.gated.rotary_dim
        if shape.moe_layout is not None:  # DeepSeek's rotary: rope_dim wide (V2: complex64)
            embedding += moe_families.rotary_bytes(shape.moe_layout, tokens, e, d)
        elif shape.family not in qk_norm.POST_NORM_FAMILIES or e == _FP32_BYTES:  # OLMo-2's 16-bit: in the layers
            embedding += 2 * tokens * d * e  # rotary cos and sin, shared by all layers
        if not config.flash_attention:
            embedding += b * seq * seq * e  # the eager causal mask
    output_and_loss = tokens * final_norm + final_norm_fixed + loss
    working_set = 0
    if config.recompute == "full":
        whole = replace(config, recompute="none")
        largest = _transformers_layer_bytes(shape, whole)
        if shape.moe_layout is not None:
            largest = max(_moe_family_layer_bytes(shape, whole, index) for index in range(shape.layers))
        working_set = max(0, largest - loss)
    return dict(zip(BREAKDOWN_KEYS, (layers, embedding, output_and_loss, working_set)))


def _loss_temporaries(tokens: int, vocab: int) -> int:
    """transformers' loss at the start of backward: the fp32 log-softmax output and its gradient's two fp32
    vocabulary-wide temporaries."""
    return 3 * _FP32_BYTES * tokens * vocab


def decoder_layer_bytes(model: ModelSpec, config: ActivationConfig) -> tuple[int, int]:
    """(bytes one decoder layer keeps for one micro-batch under config.recompute, the same without recompute),
    in the implementation applied_implementation picks, rounded up to whole bytes; and, for the full-recompute
    working set, the loss temporaries it overlaps (loss_overlap_bytes). core.memory.finetune adjusts these for
    frozen and adapted layers."""
    shape = _last_shape(model)
    if applied_implementation(model, config)[0] == "transformers":
        return (_transformers_layer_bytes(shape, config),
                _transformers_layer_bytes(shape, replace(config, recompute="none")))
    return ceil(_row_bytes(shape, config)), ceil(_layer_bytes(shape, config, keep_scores=True))


def loss_overlap_bytes(model: ModelSpec, config: ActivationConfig) -> int:
    """What the full-recompute working set overlaps at the peak: the transformers loss temporaries (0 for megatron,
    whose working set is counted whole)."""
    if applied_implementation(model, config)[0] != "transformers":
        return 0
    return _loss_temporaries(config.seq_len * config.micro_batch, _last_shape(model).vocab)


def _layer_bytes(shape: _Shape, config: ActivationConfig, keep_scores: bool) -> Fraction:
    """Bytes one layer keeps for one micro-batch without full recompute (Table 2, term by term)."""
    tokens = config.seq_len * config.micro_batch
    element, t = config.dtype_bytes, config.tp
    k = shape.experts_per_token
    # Not split by tensor parallelism (split by t only under sequence parallelism): the two norm
    # inputs, the attention input, the MLP input (plus k dispatched copies for MoE), two dropout masks.
    mlp_inputs = shape.hidden * (k + 1 if shape.experts else 1)
    unsplit = tokens * (element * (3 * shape.hidden + mlp_inputs) + _MASK_BYTES * 2 * shape.hidden)
    if shape.experts:
        unsplit += tokens * shape.experts * _FP32_BYTES  # router probabilities
    # Split by tensor parallelism: Q, K, V, the attention output, the MLP's inner activations
    # (plain: activation input + fc2 input; gated: gate and up outputs + fc2 input), k times for MoE.
    query, key_value = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    mlp_inner = (3 if shape.gated_mlp else 2) * shape.ffn * k
    split = tokens * element * (2 * query + 2 * key_value + mlp_inner)
    if keep_scores and not config.flash_attention:
        # softmax output and dropout output (dtype) + dropout mask (1 byte): Table 2's 5as/h term.
        split += tokens * shape.heads * config.seq_len * (2 * element + _MASK_BYTES)
    if config.sequence_parallel:
        return Fraction(unsplit + split, t)
    return unsplit + Fraction(split, t)


def _checkpoint_bytes(shape: _Shape, config: ActivationConfig) -> Fraction:
    """Full recompute keeps each layer's input only: 2·s·b·h at 16 bits, split by t under SP."""
    stored = config.dtype_bytes * config.seq_len * config.micro_batch * shape.hidden
    return Fraction(stored, config.tp) if config.sequence_parallel else Fraction(stored)


def _op_saved_bytes(shape: _Shape, config: ActivationConfig) -> Fraction:
    """Op-level selective checkpointing keeps, per layer: the layer input (the checkpoint pointwise ops are
    recomputed from), the outputs of the column-parallel matmuls and the attention kernel (Q, K, V, attention
    output; the MLP's first matmul outputs: gate and up, or fc1), split by t, and the two row-parallel matmul
    outputs (attention projection, fc2) as full s·b·h tensors (split by t only under sequence parallelism).
    Norm outputs, activation-function outputs, dropout masks and scores are recomputed, not kept."""
    tokens = config.seq_len * config.micro_batch
    element, t, k = config.dtype_bytes, config.tp, shape.experts_per_token
    unsplit = tokens * element * 3 * shape.hidden  # layer input, attention projection output, fc2 output
    if shape.experts:
        unsplit += tokens * shape.experts * _FP32_BYTES  # router probabilities
    query, key_value = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    mlp_matmul = (2 if shape.gated_mlp else 1) * shape.ffn * k
    split = tokens * element * (2 * query + 2 * key_value + mlp_matmul)
    if config.sequence_parallel:
        return Fraction(unsplit + split, t)
    return unsplit + Fraction(split, t)


def _interleave_penalty(config: ActivationConfig) -> Fraction:
    """Megatron's interleaved-schedule factor 1 + (p-1)/(p·v); 1 without interleaving."""
    if config.virtual_stages == 1:
        return Fraction(1)
    return 1 + Fraction(config.pp - 1, config.pp * config.virtual_stages)


def micro_batches_in_flight(config: ActivationConfig) -> Fraction:
    """Micro-batches whose activations the first stage holds at its peak (fractional when interleaved)."""
    if config.pp == 1:
        return Fraction(1)
    if config.virtual_stages == 1 and config.num_micro_batches is not None:
        return Fraction(min(config.pp, config.num_micro_batches))
    return config.pp * _interleave_penalty(config)


def layers_on_first_stage(layers: int, config: ActivationConfig) -> int:
    """Layers held by the first pipeline stage: ceil(L/p), or v chunks of ceil(L/(p·v)) when interleaved."""
    return ceil_div(layers, config.pp * config.virtual_stages) * config.virtual_stages


def layer_bytes(model: ModelSpec, config: ActivationConfig) -> Fraction:
    """Exact bytes one layer stores for one micro-batch under config.recompute (Table 2's row)."""
    return _row_bytes(_shape(model), config)


def _row_bytes(shape: _Shape, config: ActivationConfig) -> Fraction:
    if config.recompute == "full":
        return _checkpoint_bytes(shape, config)
    if config.recompute == "selective-op":
        return _op_saved_bytes(shape, config)
    return _layer_bytes(shape, config, keep_scores=config.recompute == "none")


def activation_terms(model: ModelSpec, config: ActivationConfig) -> dict[str, Fraction]:
    """Exact (fractional) bytes of each breakdown entry, before rounding up."""
    shape = _last_shape(model)
    layer, embedding, output_and_loss, working_set = _micro_batch_terms(shape, config)
    in_flight, layer_micro_batches = _first_stage_load(shape.layers, config.pp, config.virtual_stages,
                                                       config.num_micro_batches)
    # with a pipeline the output layer sits on the last, less loaded stage
    terms = dict(zip(BREAKDOWN_KEYS, (layer * layer_micro_batches, embedding * in_flight,
                                      output_and_loss if config.pp == 1 else Fraction(0), working_set)))
    if config.ep > 1 and shape.experts:
        terms[MOE_IMBALANCE_KEY] = moe_excess_share(config) * _routed_row_bytes(shape, config) * layer_micro_batches
    return terms


def moe_excess_share(config: ActivationConfig) -> Fraction:
    """How much more than the average routed tokens the most loaded EP rank holds (module docstring)."""
    if config.capacity_factor is None:
        return MOE_DROPLESS_ALLOWANCE
    return Fraction(config.capacity_factor) - 1


def _routed_row_bytes(shape: _Shape, config: ActivationConfig) -> Fraction:
    """The part of one layer's row that scales with the routed token copies (k of them): the row less the same
    row with no copy routed."""
    return _row_bytes(shape, config) - _row_bytes(replace(shape, experts_per_token=0), config)


@lru_cache(maxsize=1024)
def _first_stage_load(layers: int, pp: int, virtual_stages: int,
                      num_micro_batches: int | None) -> tuple[Fraction, Fraction]:
    """(micro-batches in flight, layers × micro-batches) on the first stage, for the pipeline fields they read."""
    pipeline = ActivationConfig(seq_len=1, pp=pp, virtual_stages=virtual_stages, num_micro_batches=num_micro_batches)
    in_flight = micro_batches_in_flight(pipeline)
    # With 1F1B the first stage holds in_flight micro-batches of its L/p layers: L layers' worth.
    return in_flight, layers_on_first_stage(layers, pipeline) * in_flight


# The terms of one micro-batch read every ActivationConfig field but the pipeline's, which only say how many
# micro-batches and layers the first stage holds: a plan search asks for thousands of pipelines over a few
# hundred of these, so they are kept, keyed by the shape and every other field (a field added later is in the key).
_PIPELINE_FIELDS = ("pp", "virtual_stages", "num_micro_batches")
_micro_batch_key = attrgetter(*(f.name for f in fields(ActivationConfig) if f.name not in _PIPELINE_FIELDS))
_MICRO_BATCH_TERMS: dict[tuple, tuple[Fraction, Fraction, Fraction, Fraction]] = {}
_MICRO_BATCH_TERMS_KEPT = 4096


def _micro_batch_terms(shape: _Shape, config: ActivationConfig) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """One micro-batch's (layer row, embedding, output and loss on the stage that holds them, recompute working
    set), whatever the pipeline."""
    key = (shape, _micro_batch_key(config))
    found = _MICRO_BATCH_TERMS.get(key)
    if found is not None:
        return found
    tokens = config.seq_len * config.micro_batch
    # Embedding stage: input token ids and the embedding dropout mask, per micro-batch in flight.
    embedding = Fraction(tokens * (_TOKEN_ID_BYTES + _MASK_BYTES * shape.hidden))
    if config.sequence_parallel:
        embedding /= config.tp
    hidden_inputs = Fraction(2 * config.dtype_bytes * tokens * shape.hidden)  # final norm + head inputs
    if config.sequence_parallel:
        hidden_inputs /= config.tp
    output_and_loss = hidden_inputs + Fraction(_FP32_BYTES * tokens * shape.vocab, config.tp)
    working_set = Fraction(0)
    if config.recompute == "full":
        working_set = _layer_bytes(shape, config, keep_scores=True)
    elif config.recompute == "selective-op":  # one layer's recomputed pointwise outputs, live in its backward
        working_set = max(Fraction(0), _layer_bytes(shape, config, keep_scores=False) - _op_saved_bytes(shape, config))
    if len(_MICRO_BATCH_TERMS) >= _MICRO_BATCH_TERMS_KEPT:
        _MICRO_BATCH_TERMS.clear()
    found = _MICRO_BATCH_TERMS[key] = (_row_bytes(shape, config), embedding, output_and_loss, working_set)
    return found


@dataclass(frozen=True)
class ActivationEstimate:
    breakdown: dict[str, int]
    layer_micro_batches: Fraction  # layers × micro-batches in flight on the first stage
    micro_batches_in_flight: Fraction

    @property
    def total(self) -> int:
        return sum(self.breakdown.values())


def activation_memory(model: ModelSpec, config: ActivationConfig) -> ActivationEstimate:
    """Activation bytes per GPU on the most loaded stage, each entry rounded up to whole bytes."""
    if applied_implementation(model, config)[0] == "transformers":
        return ActivationEstimate(breakdown=_transformers_terms(_shape(model), config),
                                  layer_micro_batches=Fraction(_layers(model)), micro_batches_in_flight=Fraction(1))
    terms = activation_terms(model, config)
    in_flight = micro_batches_in_flight(config)
    return ActivationEstimate(
        breakdown={key: ceil(value) for key, value in terms.items()},
        layer_micro_batches=layers_on_first_stage(_layers(model), config) * in_flight,
        micro_batches_in_flight=in_flight)


def _layers(model: ModelSpec) -> int:
    return model.shape.layers if model.shape is not None else 0


def largest_micro_batch_that_fits(budget_bytes: int, fixed_bytes: int, model: ModelSpec,
                                  config: ActivationConfig) -> int:
    """The largest micro-batch whose activations fit in budget_bytes - fixed_bytes; 0 if none does.

    Every term is linear in the micro-batch, so the exact answer is floor(room / bytes per sample);
    rounding each entry up adds under one byte per entry, which only the last few candidates can feel.
    """
    room = budget_bytes - fixed_bytes
    if applied_implementation(model, config)[0] == "transformers":
        fits = [mb for mb in _candidates(room, model, config)
                if activation_memory(model, replace(config, micro_batch=mb)).total <= room]
        return max(fits, default=0)
    per_sample = sum(activation_terms(model, replace(config, micro_batch=1)).values())
    if room <= 0 or per_sample == 0:
        return 0
    upper = int(room // per_sample)
    # `lower` fits even with every entry rounded up, so only (lower, upper] needs checking.
    lower = max(0, int((room - len(BREAKDOWN_KEYS)) // per_sample))
    for micro_batch in range(upper, lower, -1):
        if activation_memory(model, replace(config, micro_batch=micro_batch)).total <= room:
            return micro_batch
    return lower


def _candidates(room: int, model: ModelSpec, config: ActivationConfig) -> range:
    """Micro-batches to try for the transformers implementation: every term is linear in the micro-batch except
    the full-recompute working set's max(), so bisection over a monotone total finds the largest that fits."""
    if room <= 0:
        return range(0)
    low, high = 0, 1
    while activation_memory(model, replace(config, micro_batch=high)).total <= room and high < 1 << 30:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if activation_memory(model, replace(config, micro_batch=middle)).total <= room:
            low = middle
        else:
            high = middle
    return range(low, low + 1) if low else range(0)


def transformers_peak_moments(model: ModelSpec, config: ActivationConfig) -> dict[str, Any] | None:
    """Bytes transformers' code holds at the step's other candidate peak moments, beside the backward start that
    activation_memory counts (None where they are not derived: not a derived family, selective-op, tp/pp).

    Read off torch's tracker on traces of the real code (docs/trace.md, every storage live at the peak with the
    module and op that made it); exact to the byte on the shapes tested (tests/test_trace.py). Llama-style layers
    (RMSNorm, rotary, SwiGLU) and GPT-2's block (LayerNorm with bias, Conv1D with bias, gelu_new, learned
    positions, tied head) have the same moments with their own sizes; GPT-NeoX, OPT and Falcon bring their own
    layer_backward_moments, forward_locals, module buffers, positions and recomputed layer
    (core.memory.activations_layernorm_families.peak_moments) and share the rest:
    - "loss_forward_beyond_backward_start": the end of the forward pass, inside the loss, minus the backward
      start's loss term: logits in the compute dtype T·V·e (plus their fp32 upcast in 16 bits), the fp32
      log-softmax T·V·4, the shifted labels 8·b·(s+1), two fp32 scalars; the backward start's 12·T·V replaced.
    - inside a decoder layer's backward ("layer_backward_moments", each the excess of the layer's gradient
      temporaries and weight gradients over its activations freed by then; core.memory.torch_buffers adds the head's
      gradients (V·h + h)·e, GPT-2's LayerNorm (V·h + 2·h)·e ("head_gradients"), two fp32 scalars, the layer
      recomputed and the layers done, and frees the final norm and the loss ("output_and_loss")):
      (a) the MLP's, after the two products of its activation's gradient (SwiGLU's silu(gate)·up, gelu_new's
          0.5·x·(1 + tanh(u))): the down-projection input (T·f·e) freed; alive the residual gradient T·h·e, the
          down-projection input gradient and the two product gradients 3·T·f·e, the down-projection weight
          gradient h·f·e (GPT-2: and its bias's h·e);
      (b) llama-style in 16 bits, the post-attention RMSNorm's, after the MLP's: its fp32 input kept, the rest of
          its activations and the MLP's freed; alive the residual gradient, five fp32 T·h temporaries of the
          norm's gradient, its weight gradient and the three MLP weight gradients (GPT-2's fused LayerNorm
          backward makes no such temporaries);
      (c) llama-style with eager attention, the softmax's backward: of the layer's activations only the first
          norm's, q, the repeat_kv'd k and the fp32 softmax output kept (selective recompute: q, k and v kept,
          the softmax output and the repeat_kv'd k recomputed); alive the residual gradient T·h·e, the gradient
          of the repeat_kv'd v T·a·d·e, the fp32 gradient of the probabilities and the softmax gradient
          (2·4·a·s per token), the MLP's, the norm's and o_proj's weight gradients.
    - the forward of the last decoder layer, when its parameters have just been gathered: the activations of
      the layers before it, the hidden state T·h·e ("hidden_state"), the embedding outputs the decoder's forward
      keeps in locals ("forward_locals") and, llama-style, the int64 positions ("position_ids"; GPT-2's are kept
      for the whole step by its position embedding, an activation); the first layer's: the embedding side's
      activations ("embedding") with the same hidden state, locals and positions;
    - the end of backward: the root's unsharded gradients ("root_gradients": embeddings, untied head, learned
      positions, final norm), at the input embedding's backward with a tied weight's two gradients beside
      their sum ("embedding_backward_gradients"), and after the root's reduction the last of them
      ("last_root_gradient": an untied head's, else the final norm's last parameter); the inputs ("inputs") and
      the two fp32 scalars alive, as at the optimizer step;
    - at every moment: the rotary embedding's two fp32 module buffers (inv_freq and its original), d/2 each.
    Selective recompute changes only the attention core's activations (the layer's bytes); full recompute keeps
    each layer's input ("layer") and, inside a layer's backward, that layer recomputed whole but for the input
    its first norm reads, the checkpoint itself (not in 16-bit llama, whose RMSNorm upcasts a copy)
    ("recomputed_layer"); the backward start's "working_set" is replaced at every other moment. With either,
    llama-style checkpoints keep the int64 positions alive for the whole step ("kept_position_ids"); with full
    recompute they keep eager attention's causal mask too.
    Stage 3 with full recompute peaks low in the backward (a layer's activations are only its input, while
    the sharded gradients grow), so every layer j is a candidate; j = 0 prefetches nothing."""
    if applied_implementation(model, config)[0] != "transformers" or config.recompute not in ("none", "selective", "full"):
        return None  # op-level selective checkpointing is not traced
    shape = _shape(model)
    if shape.family not in TRANSFORMERS_FAMILIES:
        return None
    gpt2 = shape.family == "gpt2"
    layernorm = shape.family in layernorm_families.FAMILIES
    tokens, e, seq = config.seq_len * config.micro_batch, config.dtype_bytes, config.seq_len
    h, f, v, a, d = shape.hidden, shape.ffn, shape.vocab, shape.heads, shape.head_dim
    terms = _transformers_terms(shape, config)
    loss_forward = tokens * v * (e + (_FP32_BYTES if e < _FP32_BYTES else 0) + _FP32_BYTES)
    loss_forward += _TOKEN_ID_BYTES * config.micro_batch * (seq + 1) + 2 * _FP32_BYTES
    norm_params = 2 * h if gpt2 or layernorm else h  # LayerNorm's weight and bias; RMSNorm's weight
    positions = 0 if gpt2 else _TOKEN_ID_BYTES * seq  # beyond the activations: GPT-2 counts them there
    # the first norm reads the checkpoint itself, except a 16-bit RMSNorm, which upcasts a copy to fp32
    norm_reads_checkpoint = gpt2 or e == _FP32_BYTES

    def layer_terms(index: int | None) -> tuple[int, int, list[int]]:
        """(a layer's activations, the same recomputed in its backward under full recompute, its backward moments):
        the family's layer, or layer `index` of a model whose layers differ (core.memory.activations_moe_families)."""
        if index is None:
            layer = _transformers_layer_bytes(shape, config)
            whole_layer = _transformers_layer_bytes(shape, replace(config, recompute="none"))
        else:
            layer = _moe_family_layer_bytes(shape, config, index)
            whole_layer = _moe_family_layer_bytes(shape, replace(config, recompute="none"), index)
        lay = shape.moe_layout
        sparse = lay is None or index is None or lay.pattern[index]
        f_layer = lay.dense_ffn if lay is not None and not sparse else f  # a dense layer's MLP beside sparse ones
        recomputed_layer = whole_layer - (tokens * h * e if norm_reads_checkpoint else 0) if config.recompute == "full" else 0
        if config.recompute == "full" and shape.family in qk_norm.POST_NORM_FAMILIES:
            recomputed_layer = whole_layer - layer  # OLMo-2's checkpoint (its input, cast cos and sin) not recomputed
        # the layer's activations alive when its backward begins: its own (none, selective) or recomputed ones (full)
        layer_at_backward = recomputed_layer if config.recompute == "full" else layer
        mlp_weights = h * f_layer * e + (h * e if gpt2 else 0)  # the down projection's weight (and bias) gradient
        # Gemma's, Phi-3's and Mixtral's differ where their code does (core.memory.activations_gated_families)
        if shape.moe_traits is not None:  # qwen3_moe: the routing weights in the compute dtype
            family = gated.layer_moments(shape.family or "", tokens, e, h, f, shape.experts, shape.experts_per_token, e,
                                         shape.moe_traits.normalised)
        elif lay is not None and sparse and lay.family != "llama4_text":
            # the same grouped experts: fp32 routing weights (DeepSeek) as Mixtral's
            latent = lay.family in moe_families.LATENT_FAMILIES
            family = gated.layer_moments("mixtral" if latent else "qwen3_moe", tokens, e, h, lay.expert_ffn, lay.experts,
                                         lay.top_k, _FP32_BYTES if latent else e, lay.normalised)
        elif shape.family in qk_norm.POST_NORM_FAMILIES:
            family = qk_norm.post_norm_layer_moments(tokens, e, h, f)
        elif shape.sliding is not None:
            family = sliding.layer_moments(shape.family or "", shape.sliding, tokens, seq, e, h, a, shape.kv_heads, d,
                                           f, shape.experts, shape.experts_per_token, config.recompute,
                                           layer_at_backward, config.flash_attention)
        else:
            family = gated.layer_moments(shape.family or "", tokens, e, h, f_layer, shape.experts,
                                         shape.experts_per_token)
        moments = [mlp_weights + tokens * h * e + 3 * tokens * f_layer * e - tokens * f_layer * e]
        if family.mlp_moment is not None:
            moments = [family.mlp_moment]
        if not gpt2 and e < _FP32_BYTES:
            norm_freed = 4 * tokens * f_layer * e + 2 * e * tokens * h + _FP32_BYTES * tokens
            moments.append(family.mlp_weight_gradients + tokens * h * e + 5 * _FP32_BYTES * tokens * h + h * e
                           - (norm_freed if family.norm_backward_freed is None else family.norm_backward_freed))
        moments.extend(family.other_moments)
        if lay is not None and lay.family in moe_families.LATENT_FAMILIES:
            # latent attention's softmax backward (sdpa runs the math kernel on CPU): the MLP's (and shared
            # experts'), the post-attention norm's and o_proj's weight gradients alive
            shared = 3 * h * lay.shared_ffn * e if sparse else 0
            moments.append(moe_families.latent_softmax_moment(
                lay, config.recompute, config.flash_attention, tokens, seq, e, h, a,
                family.mlp_weight_gradients + shared, layer_at_backward, _norm_bytes_per_token(shape, e)))
        elif not gpt2 and not config.flash_attention and shape.sliding is None:
            probabilities = _FP32_BYTES * tokens * a * seq  # one fp32 a·s·s tensor
            if config.recompute == "selective":
                # the layer's q, k and v kept (k, v: KV heads) and the core recomputed: its fp32 softmax output and,
                # with grouped-query attention, its repeat_kv'd k
                kept = tokens * (_norm_bytes_per_token(shape, e) + _qk_norm_bytes_per_token(shape, e) + e * a * d
                                 + 2 * e * shape.kv_heads * d)
                kept += probabilities + (tokens * e * a * d if shape.kv_heads < a else 0)
            else:
                kept = tokens * (_norm_bytes_per_token(shape, e) + _qk_norm_bytes_per_token(shape, e) + 2 * e * a * d)
                kept += probabilities
                if config.recompute == "full" and norm_reads_checkpoint:
                    kept -= tokens * h * e  # the first norm's fp32 input is the checkpoint, not recomputed
            # the MLP's, the post-attention norm's, o_proj's
            weights = family.mlp_weight_gradients + (h + h * a * d) * e
            moments.append(weights + tokens * h * e + tokens * a * d * e + 2 * probabilities - (layer_at_backward - kept))
        return layer, recomputed_layer, moments

    # one layer's terms; where layers differ (dense and sparse, with and without rotary), each layer's
    per_layer = None
    if shape.moe_layout is None:
        layer, recomputed_layer, moments = layer_terms(None)
        if shape.sliding is not None and len(set(each := _transformers_layers(shape, config))) > 1:
            per_layer = tuple((kept, recomputed_layer, moments) for kept in each)  # Gemma 3's masked sliding layers
    else:
        kinds: dict[tuple, tuple[int, int, list[int]]] = {}
        lay_of = shape.moe_layout
        for index in range(shape.layers):
            key = (lay_of.pattern[index], lay_of.rope_layers[index] if lay_of.rope_layers else True)
            if key not in kinds:
                kinds[key] = layer_terms(index)
        per_layer = tuple(kinds[(lay_of.pattern[index], lay_of.rope_layers[index] if lay_of.rope_layers else True)]
                          for index in range(shape.layers))
        layer, recomputed_layer, moments = per_layer[-1]
    # the decoder's forward keeps its embedding outputs in locals: GPT-2's token and position embeddings (the first
    # block reads their sum), llama-style's token embeddings where the first RMSNorm keeps an fp32 copy instead
    # (not with full recompute: they are the first layer's checkpoint)
    if gpt2:
        forward_locals = tokens * h * e + seq * h * e
    else:
        forward_locals = 0 if norm_reads_checkpoint or config.recompute == "full" else tokens * h * e
    # the root's unsharded gradients (compute dtype): embedding (and head, untied), learned positions, final norm
    root_gradients = (v * h * (1 if shape.tied else 2) + shape.position_rows * h + norm_params) * e
    # a sliding window's explicit bool mask (b·s²): kept by full recompute's checkpoints all step, else alive in the
    # decoder's forward only
    window_mask = config.micro_batch * seq * seq if _windowed(shape, config) and config.flash_attention else 0
    window_mask_kept = window_mask if config.recompute == "full" else 0
    forward_locals += window_mask - window_mask_kept
    moments_of = {"loss_forward_beyond_backward_start": loss_forward - 3 * _FP32_BYTES * tokens * v,
                  "layer": layer, "layers": shape.layers, "output_and_loss": terms["activations/output_and_loss"],
                  "layer_backward_moments": moments, "head_gradients": (v * h + norm_params) * e,
                  "scalars": 2 * _FP32_BYTES, "inputs": 2 * _TOKEN_ID_BYTES * tokens,
                  "root_gradients": root_gradients,
                  "embedding_backward_gradients": root_gradients + (2 * v * h * e if shape.tied else 0),
                  "last_root_gradient": (norm_params // 2 if shape.tied else v * h) * e,
                  # the rotary embedding's inv_freq and its original (Phi-3's partial rotary: narrower); Gemma's fp32
                  # embedding scale
                  "module_buffers": 0 if gpt2 else 2 * _FP32_BYTES * (_rotary_width(shape) // 2)
                  * (shape.sliding.layer_types if shape.family == "gemma3_text" and shape.sliding else 1)
                  + (_FP32_BYTES if shape.family in ("gemma", "gemma2", "gemma3_text") else 0)
                  + (moe_families.router_buffer_bytes(shape.moe_layout) if shape.moe_layout is not None else 0),
                  "hidden_state": tokens * h * e, "position_ids": positions,
                  "embedding": terms["activations/embedding"], "forward_locals": forward_locals,
                  "working_set": terms["activations/recompute_working_set"],
                  # eager attention's causal mask lives through the decoder's forward only (counted in the embedding),
                  # unless the checkpoints of full recompute keep it
                  "eager_mask": (0 if config.flash_attention or config.recompute == "full"
                                 else config.micro_batch * seq ** 2 * e * (2 if shape.sliding else 1)),
                  "kept_position_ids": (positions if config.recompute != "none" else 0) + window_mask_kept,
                  "recomputed_layer": recomputed_layer,
                  # where layers differ: each layer's (activations, recomputed, backward moments), first to last
                  "per_layer": per_layer,
                  # the last layer's attention forward (gpt-oss's eager attention with sinks), beyond its activations
                  "forward_attention": 0}
    if shape.sliding is not None and not config.flash_attention:
        alive = sliding.forward_attention_bytes(shape.family or "", tokens, seq, e, h, a, shape.kv_heads, d,
                                                config.recompute)
        moments_of["forward_attention"] = alive - layer if alive else 0
    if layernorm:  # their own moments inside a layer's backward, positions and buffers (the rest is the same code)
        moments_of.update(layernorm_families.peak_moments(
            _layernorm_layout(shape), seq, config.micro_batch, e, h, a, shape.kv_heads, d, f, config.recompute))
    if shape.dropout_masks[0]:
        # inside the layer's backward the MLP's dropout mask (the first backward op) is freed
        in_layer = moments_of["layer_backward_moments"]
        if isinstance(in_layer, list):
            moments_of["layer_backward_moments"] = [moment - tokens * h * _MASK_BYTES for moment in in_layer]
    return moments_of
