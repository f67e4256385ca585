"""What transformers' Gemma 2, Gemma 3 (text) and gpt-oss decoder layers keep for backward: layers that alternate
sliding-window and global attention (pure stdlib, integer bytes). Reference: docs/formulas.md §8.5.

Derived from traces of the real code (`zeroplan trace`, docs/trace.md: every storage saved for backward, with the op
that made it) and pinned by tests/test_trace_sliding_families.py. Notation: T = s·b tokens, e the compute dtype's
bytes, h hidden, a heads, k KV heads, d head_dim, f ffn (gpt-oss: each expert's), E experts, r experts per token,
S = T·r token-expert pairs, V vocabulary.

- gemma2 (Gemma2DecoderLayer): Gemma's RMSNorm (fp32 input, rsqrt, fp32 normalised x and the fp32 (1 + weight) per
  norm, core.memory.activations_gated_families), four of them: input and pre-feedforward norms' cast outputs are
  kept by the projections they feed (e·h each), the post-attention and post-feedforward norms' go to the residual
  sums (not kept). GeGLU keeps 4·e·f as Gemma's. transformers has no sdpa path (attention logit soft-capping): eager
  keeps llama's q, repeat_kv'd k and v, the o_proj input copy and the fp32 softmax with its cast, and with
  attn_logit_softcapping tanh's output (e·a·s per token). The query_pre_attn_scalar scaling keeps nothing. With
  final_logit_softcapping the loss keeps tanh's output of the logits (T·V·e). Its sliding layers differ from the
  global ones only in the mask each attention adds (eager: no byte kept per layer).
- gemma3_text: Gemma 2's layer without soft-capping (transformers' default) and with q_norm and k_norm, Gemma's
  RMSNorm over each head (fp32 input, rsqrt, fp32 normalised x: (a + k)·(8·d + 4) per token, the fp32 (1 + weight)
  2·4·d per layer; their cast outputs go to rotary, which keeps only cos and sin). sdpa runs; a sliding layer whose
  window is no longer than the sequence gets the explicit mask, so its k and v are repeated over every head and the
  mask converted to the compute dtype is kept (core.memory.activations' masked sdpa); global layers run maskless.
  Each layer type has its own rotary embedding: cos and sin twice when both types are present.
- gpt_oss (GptOssDecoderLayer): llama's RMSNorm but multiplying by its weight in fp32 before casting (fp32 input,
  rsqrt, fp32 normalised x, 8·h + 4 per token, and the cast output kept by the projections it feeds). Attention
  sinks run eager only: q, repeat_kv'd k and v, the o_proj copy, the max's int64 indices (8·a per token) and the
  softmax over the scores with the sink column, in the compute dtype (a·(s + 1)·e per token, no fp32 copy).
  cos and sin are d/2 wide. The router keeps its top-k indices and softmax output (8·r + e·r per token); the
  grouped experts (transformers' default "grouped_mm", with biases) keep per pair four int64 index vectors, the
  gathered input and the down output (2·e·h), gate_up's output (2·e·f), the clamped SwiGLU's five f-wide tensors
  (clamped gate, sigmoid, up + 1, their product's operand and the down input: 5·e·f) and the routing weight (e);
  the int32 group offsets 4·E per layer. Every size is fixed by S whatever the router picks.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.memory.activations_gated_families import (
    LayerMoments,
    attention_core_bytes,
    norm_bytes_per_layer,
    norm_bytes_per_token,
)
from zeroplan.core.memory.activations_gated_families import layer_moments as layer_moments_of

SLIDING_FAMILIES = ("gemma2", "gemma3_text", "gpt_oss")
_FP32_BYTES = 4
_INDEX_BYTES = 8
_GROUP_OFFSET_BYTES = 4


@dataclass(frozen=True)
class SlidingTraits:
    """What a Gemma 2 / Gemma 3 / gpt-oss config.json sets beyond the shape that changes the bytes."""

    windows: tuple[int | None, ...]  # each layer's sliding window (None: global)
    attention_softcap: bool = False  # attn_logit_softcapping: tanh's output kept per layer (eager)
    final_softcap: bool = False  # final_logit_softcapping: tanh's output of the logits kept
    activation: str = "gelu_pytorch_tanh"
    bidirectional: bool = False
    experts_implementation: str = "grouped_mm"
    router_logits_output: bool = False

    @property
    def layer_types(self) -> int:
        """How many attention kinds (sliding, global) the layers use: each has its own rotary embedding (Gemma 3)
        and its own mask."""
        return len({window is None for window in self.windows})


_SOFTCAP_DEFAULTS = {"gemma2": (50.0, 30.0)}  # Gemma2Config's attn_logit_softcapping, final_logit_softcapping


def sliding_traits(config: dict, family: str | None, windows: tuple[int | None, ...]) -> SlidingTraits | None:
    """The traits of one of SLIDING_FAMILIES' config.json (None for the other families)."""
    if family not in SLIDING_FAMILIES:
        return None
    attention, final = _SOFTCAP_DEFAULTS.get(family, (None, None))
    activation = str(config.get("hidden_activation") or config.get("hidden_act") or "gelu_pytorch_tanh")
    return SlidingTraits(
        windows=windows,
        attention_softcap=config.get("attn_logit_softcapping", attention) is not None,
        final_softcap=config.get("final_logit_softcapping", final) is not None,
        activation="silu" if family == "gpt_oss" else activation,
        bidirectional=bool(config.get("use_bidirectional_attention", False)),
        experts_implementation=str(config.get("experts_implementation") or "grouped_mm"),
        router_logits_output=bool(config.get("output_router_logits", False)))


def gap(family: str, traits: SlidingTraits, flash_attention: bool) -> str:
    """Why the derivation does not cover this config ("" when it does)."""
    if family in ("gemma2", "gpt_oss") and flash_attention:
        why = "attention sinks" if family == "gpt_oss" else "attention logit soft-capping"
        return (f"transformers runs {family}'s attention eager only ({why}: no sdpa path); it is derived for eager "
                "attention (no flash attention): Megatron's formula is used")
    if family == "gemma3_text" and traits.attention_softcap:
        return "gemma3 with attn_logit_softcapping runs eager only and is not derived: Megatron's formula is used"
    if family != "gpt_oss" and traits.activation != "gelu_pytorch_tanh":
        return (f"{family}'s activation '{traits.activation}' is not derived (gelu_pytorch_tanh is): Megatron's "
                "formula is used")
    if traits.bidirectional:
        return "bidirectional attention is not derived: Megatron's formula is used"
    if family == "gpt_oss" and (traits.experts_implementation != "grouped_mm" or traits.router_logits_output):
        return (f"gpt_oss's experts_implementation '{traits.experts_implementation}' or output_router_logits is not "
                "derived (transformers' default grouped_mm without the load-balancing loss is): Megatron's formula is "
                "used (balanced routing assumed)")
    return ""


def gpt_oss_norm_bytes_per_token(hidden: int) -> int:
    """gpt-oss's RMSNorm: fp32 input, fp32 rsqrt, fp32 normalised x (its cast output is counted where it is kept)."""
    return 2 * _FP32_BYTES * hidden + _FP32_BYTES


def gpt_oss_core_bytes(recompute: str, e: int, a: int, k: int, d: int, seq: int) -> int:
    """Per token, gpt-oss's eager attention with sinks: q, repeat_kv'd k and v, the o_proj copy, the max's int64
    indices, the softmax over s + 1 columns in the compute dtype; selective recompute: the checkpoint's q, k, v and
    its output."""
    if recompute == "selective":
        return 2 * e * a * d + 2 * e * k * d
    return 4 * e * a * d + _INDEX_BYTES * a + a * (seq + 1) * e


def gpt_oss_moe_bytes(tokens: int, e: int, hidden: int, ffn: int, experts: int, experts_per_token: int) -> int:
    """What gpt-oss's router and grouped experts keep for one micro-batch (see the module docstring)."""
    r = experts_per_token
    per_pair = 4 * _INDEX_BYTES + 2 * e * hidden + 7 * e * ffn + e
    return tokens * r * (_INDEX_BYTES + e) + tokens * r * per_pair + _GROUP_OFFSET_BYTES * experts


def layer_bytes(family: str, traits: SlidingTraits, tokens: int, seq: int, e: int, hidden: int, heads: int,
                kv_heads: int, head_dim: int, ffn: int, experts: int, experts_per_token: int, recompute: str,
                sdpa: bool) -> int:
    """Bytes one decoder layer keeps for one micro-batch (recompute none or selective; full keeps T·e·h), beside
    what a sliding layer's explicit sdpa mask adds (core.memory.activations' masked sdpa)."""
    h, a, k, d, f = hidden, heads, kv_heads, head_dim, ffn
    if family == "gpt_oss":
        norms = 2 * (gpt_oss_norm_bytes_per_token(h) + e * h)
        core = gpt_oss_core_bytes(recompute, e, a, k, d, seq)
        return tokens * (norms + core) + gpt_oss_moe_bytes(tokens, e, h, f, experts, experts_per_token)
    # four Gemma norms, two of whose cast outputs are kept (by q/k/v and by gate/up), each with its fp32 (1 + weight)
    norms = 2 * norm_bytes_per_token("gemma", h, e) + 2 * (norm_bytes_per_token("gemma", h, e) - e * h)
    per_layer = 4 * norm_bytes_per_layer("gemma", h)
    core = attention_core_bytes(recompute, sdpa, e, a, k, d, seq)
    if traits.attention_softcap and recompute != "selective":
        core += e * a * seq  # tanh's output of the scores
    if family == "gemma3_text":  # q_norm and k_norm: Gemma's norm over each head, fp32 (1 + weight) each
        core += (a + k) * (norm_bytes_per_token("gemma", d, e) - e * d)
        per_layer += 2 * norm_bytes_per_layer("gemma", d)
    return tokens * (norms + core + 4 * e * f) + per_layer


def embedding_bytes(family: str, traits: SlidingTraits, tokens: int, seq: int, micro_batch: int, e: int,
                    head_dim: int, sdpa: bool) -> int:
    """Beyond the int64 ids and labels: cos and sin (Gemma 3: one pair per layer type; gpt-oss: d/2 wide), Gemma's
    embedding scale cast to the compute dtype (16 bits), and eager attention's masks (one per layer type, alive
    through the decoder's forward: transformers builds both whatever the layers use)."""
    rotary_width = head_dim // 2 if family == "gpt_oss" else head_dim
    sets = traits.layer_types if family == "gemma3_text" else 1
    scale = e if family != "gpt_oss" and e < _FP32_BYTES else 0
    masks = 0 if sdpa else 2 * micro_batch * seq * seq * e
    return 2 * tokens * rotary_width * e * sets + scale + masks


def final_norm_bytes(family: str, hidden: int, e: int) -> tuple[int, int]:
    """(the final norm's bytes per token, its bytes per step): Gemma's (its fp32 (1 + weight)), gpt-oss's."""
    if family == "gpt_oss":
        return gpt_oss_norm_bytes_per_token(hidden) + e * hidden, 0
    return norm_bytes_per_token("gemma", hidden, e), norm_bytes_per_layer("gemma", hidden)


def loss_bytes(traits: SlidingTraits, tokens: int, vocab: int, e: int) -> int:
    """Beyond transformers' loss: final_logit_softcapping's tanh output of the logits (T·V·e)."""
    return tokens * vocab * e if traits.final_softcap else 0


def layer_moments(family: str, traits: SlidingTraits, tokens: int, seq: int, e: int, hidden: int, heads: int,
                  kv_heads: int, head_dim: int, ffn: int, experts: int, experts_per_token: int, recompute: str,
                  layer_at_backward: int, sdpa: bool) -> LayerMoments:
    """The terms of a decoder layer's backward moments (core.memory.activations.transformers_peak_moments), each
    the layer's weight gradients alive and its gradient temporaries (the residual gradient T·h·e first) less the
    activations its backward has freed (of layer_at_backward: its own, or recomputed with full recompute).

    Eager attention's softmax backward: of the layer, the input norm's activations, q and the repeat_kv'd k kept
    (selective recompute: q, k, v and the recomputed core), the probabilities' gradient and the softmax's
    gradient alive beside the repeat_kv'd v's gradient; the MLP, the later norms and o_proj's weight gradients.
    Gemma 2: the fp32 softmax output and its fp32 gradient, the gradient of the scores in the compute dtype, and
    tanh's output kept (soft-capping); gpt-oss: the softmax over s + 1 columns and its gradient, both in the
    compute dtype, beside the gradient of the sliced scores, and the max's indices kept."""
    h, a, k, d, f, t = hidden, heads, kv_heads, head_dim, ffn, tokens
    input_norm = (gpt_oss_norm_bytes_per_token(h) + e * h) if family == "gpt_oss" else norm_bytes_per_token("gemma", h, e)
    if recompute == "selective":  # the checkpoint's q, k, v, and the recomputed core's repeat_kv'd k
        kept_core = e * a * d + 2 * e * k * d + (e * a * d if k < a else 0)
    else:
        kept_core = 2 * e * a * d
    if recompute == "full" and e == _FP32_BYTES:
        input_norm -= h * e  # the input norm's fp32 input is the checkpoint itself, not recomputed
    if family == "gpt_oss":
        weights = experts * (3 * h * f + 2 * f + h) * e + (experts * h + experts) * e
        # the clamped SwiGLU's sigmoid backward: the down projection's weight and bias gradients, the residual
        # gradient, the routing weights' gradient (e per pair), and six f-wide gradient temporaries per pair (the up
        # branch's gradient of gate_up, 2f, awaiting the gate branch's; the gate's and the sigmoid's gradients, the
        # sigmoid backward's 1 - y and its output); freed the down output, the routing weight, the down input, up + 1,
        # glu, the clamped gate and the last index vector
        pairs = tokens * experts_per_token
        # the post-attention norm's backward frees the router and experts whole, its fp32 normalised x, cast output
        # and rsqrt
        norm_freed = gpt_oss_moe_bytes(t, e, h, f, experts, experts_per_token) + t * (4 * h + e * h + _FP32_BYTES)
        swiglu = (experts * (f * h + h) * e + t * h * e + pairs * e + 6 * pairs * f * e
                  - pairs * (e * h + e + 4 * e * f + _INDEX_BYTES))
        probabilities = a * (seq + 1) * e
        kept = t * (input_norm + kept_core + _INDEX_BYTES * a + probabilities)
        weights += (h + h * a * d + h) * e  # the post-attention norm's, o_proj's weight and bias
        if recompute == "selective":
            # the core recomputed in backward up to the maximum's subtraction: the repeat_kv'd v, the scores with the
            # sink column and their difference (the masked scores and the maximum already freed, read off the
            # traces); the residual's and o_proj input's gradients alive
            recomputed = t * (h * e + e * a * d + 2 * e * a * (seq + 1) + e * a * d)
            return LayerMoments(weights, swiglu, norm_freed,
                                other_moments=(weights + recomputed - (layer_at_backward - kept),))
        softmax = weights + t * (h * e + e * a * d + 2 * probabilities)
        moments = [softmax - (layer_at_backward - kept)]
        if recompute == "full":
            # the layer's forward recomputed in backward, at its attention's maximum: what the forward holds there, the
            # residual gradient, and two more T·h·e read off the traces (bf16 and fp32, stages 0-3, sequences
            # 512-2048; their origin is not pinned down)
            alive = forward_attention_bytes(family, tokens, seq, e, h, a, k, d, "none") + 2 * t * h * e
            moments.append(alive - layer_at_backward)
        return LayerMoments(weights, swiglu, norm_freed, other_moments=tuple(moments))
    gemma = layer_moments_of("gemma", tokens, e, h, f, experts, experts_per_token)
    probabilities = _FP32_BYTES * a * seq
    tanh = e * a * seq if traits.attention_softcap else 0
    cast = e * a * seq if e < _FP32_BYTES else 0  # the probabilities cast to the compute dtype, still alive
    kept = t * (input_norm + kept_core + probabilities + cast + tanh) + norm_bytes_per_layer("gemma", h)
    if family == "gemma3_text":
        kept += t * (a + k) * (norm_bytes_per_token("gemma", d, e) - e * d) + 2 * norm_bytes_per_layer("gemma", d)
    weights = gemma.mlp_weight_gradients + (3 * h + h * a * d) * e  # three norms' and o_proj's
    softmax = weights + t * (h * e + e * a * d + probabilities + e * a * seq)
    # the post-feedforward norm's backward, first in the layer's: the residual gradient and five fp32 T·h
    # temporaries, its fp32 normalised x, rsqrt and (1 + weight) freed, its weight gradient alive; by the MLP's
    # moment it has freed its fp32 input too
    post_norm = norm_bytes_per_token("gemma", h, e) - e * h
    post_feedforward = (t * (h * e + 5 * _FP32_BYTES * h - _FP32_BYTES * h - _FP32_BYTES)
                        - norm_bytes_per_layer("gemma", h) + h * e)
    mlp = (gemma.mlp_weight_gradients // 3 + t * h * e + 2 * t * f * e - t * post_norm
           - norm_bytes_per_layer("gemma", h) + h * e)
    # the pre-feedforward norm's moment (Gemma's post-attention one): the post-feedforward norm freed too
    pre_feedforward_freed = (gemma.norm_backward_freed or 0) + t * post_norm + norm_bytes_per_layer("gemma", h)
    return LayerMoments(gemma.mlp_weight_gradients, mlp, norm_backward_freed=pre_feedforward_freed,
                        other_moments=(post_feedforward,) if sdpa else (softmax - (layer_at_backward - kept),
                                                                        post_feedforward))


def forward_attention_bytes(family: str, tokens: int, seq: int, e: int, hidden: int, heads: int, kv_heads: int,
                            head_dim: int, recompute: str) -> int:
    """What the last decoder layer holds inside its attention's forward when gpt-oss's eager attention with sinks
    subtracts the row maximum (the forward moment that holds the peak at long sequences; 0 for the other
    families): the layer input (the residual), the input norm's saved tensors (not under full recompute) and its
    output, the rotated q and k and v, the repeat_kv'd k and v (the transposed k a view), and the temporaries: the
    masked scores (e·a·s), the scores with the sink column and their difference from the maximum (two
    e·a·(s + 1)), the maximum and its int64 indices."""
    if family != "gpt_oss" or recompute == "selective":  # selective: the recomputed core in backward instead
        return 0
    if recompute == "full":  # lower than the layer recomputed in backward (layer_moments)
        return 0
    h, a, k, d = hidden, heads, kv_heads, head_dim
    residual = e * h if e < _FP32_BYTES or recompute == "full" else 0  # fp32: the norm's saved input itself
    norm = gpt_oss_norm_bytes_per_token(h) if recompute != "full" else 0
    projections = e * (a * d + 2 * k * d) + 2 * e * a * d
    return tokens * (residual + norm + e * h + projections + _forward_core_temporaries(e, a, seq))


def _forward_core_temporaries(e: int, a: int, seq: int) -> int:
    """Per token, gpt-oss's attention temporaries when the row maximum is subtracted: the masked scores, the scores
    with the sink column and their difference, the maximum and its int64 indices."""
    return e * a * seq + 2 * e * a * (seq + 1) + e * a + _INDEX_BYTES * a
