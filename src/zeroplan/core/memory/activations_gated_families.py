"""Activation bytes of transformers' Gemma, Phi-3 and Mixtral decoder layers, in exact integer bytes (pure stdlib).
Reference: docs/formulas.md §8.5.

The llama-style families (core.memory.activations) share one decoder layer; these three differ from it in what their
code keeps for backward, read off traces of transformers' own code (`zeroplan trace`, docs/trace.md: every
storage saved for backward, with the op that made it) and written out term by term. Notation: T = s·b tokens,
e the compute dtype's bytes, h hidden, a heads, k KV heads, d head_dim, f ffn, V vocabulary.

- gemma (GemmaDecoderLayer): RMSNorm computes x·rsqrt in fp32 and multiplies by (1 + weight) in fp32 before
  casting, so each norm keeps its fp32 input (an upcast copy in 16 bits), the fp32 rsqrt (4 B/token), the fp32
  normalised x (4h) and the cast output (e·h), plus the fp32 (1 + weight) (4h per norm, not per token); GeGLU
  (gelu_pytorch_tanh: one op) keeps 4·e·f as SwiGLU; head_dim is the config's (256 by default), not h/a.
  Attention as llama (rotary keeps the query's layout, so the attention output needs no copy).
- phi3 (Phi3DecoderLayer): fused qkv_proj and gate_up_proj. v is a view of the qkv output, so sdpa keeps the
  whole qkv storage (e·(a+2k)·d) beside the rotated q and k; rotary ends in a cat, so the query is
  heads-major and the attention output (made like the query) is copied for o_proj (e·a·d more). gate_up's
  chunk views keep its 2·e·f output; silu's output and the product add 2·e·f (4·e·f in all). A partial rotary
  factor only narrows cos/sin (the rotated q and k are whole again after the cat).
- mixtral (MixtralSparseMoeBlock, transformers' default experts implementation "grouped_mm"): the router keeps
  its fp32 softmax (4·E per token), the top-k indices (8·r), the normalising sum (4) and the clone of the top-k
  weights its in-place division makes (4·r); the experts sort all S = T·r token-expert pairs into two grouped
  matmuls and keep, per pair, three int64 index vectors (24), the gathered input and the down output (2·e·h),
  gate_up's output, silu's output and the product (4·e·f), the routing weight (4); plus the int32 group
  offsets (4·E per layer). Every size is fixed by T·r whatever the router picks, so the bytes hold for any
  routing (no balanced-routing assumption; no expert parallelism). transformers' "eager" experts loop
  (nonzero/where on the routing) is data-dependent: it cannot be traced and is not derived.
"""

from __future__ import annotations

from dataclasses import dataclass

GATED_FAMILIES = ("gemma", "phi3", "mixtral")
_FP32_BYTES = 4
_INDEX_BYTES = 8  # int64 indices
_GROUP_OFFSET_BYTES = 4  # grouped_mm's int32 offsets, one per expert
# Activations transformers runs as one op (which keeps only its input): the MLP's 4·e·f holds for these.
_ONE_OP_ACTIVATIONS = ("silu", "swish", "gelu", "gelu_pytorch_tanh", "relu")


@dataclass(frozen=True)
class GatedTraits:
    """What a Gemma/Phi-3/Mixtral config.json sets beyond the shape that changes the bytes (or the derivation)."""

    activation: str
    rotary_dim: int  # width of cos/sin: head_dim × partial_rotary_factor (Phi-3), else head_dim
    bidirectional: bool = False  # gemma's use_bidirectional_attention
    experts_implementation: str = "grouped_mm"
    router_logits_output: bool = False  # mixtral's output_router_logits (the load-balancing loss)
    router_jitter: float = 0.0


def gated_traits(config: dict, family: str | None, head_dim: int) -> GatedTraits | None:
    """The traits of a gated family's config.json (None for the other families)."""
    if family not in GATED_FAMILIES:
        return None
    default_activation = "gelu_pytorch_tanh" if family == "gemma" else "silu"
    activation = str(config.get("hidden_act") or config.get("hidden_activation") or default_activation)
    if family == "gemma" and activation == "gelu":  # GemmaConfig maps the legacy "gelu" to the tanh approximation
        activation = "gelu_pytorch_tanh"
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    nested = rope.get("partial_rotary_factor", 1.0) if isinstance(rope, dict) else 1.0
    factor = config.get("partial_rotary_factor", nested)
    return GatedTraits(
        activation=activation, rotary_dim=int(head_dim * float(factor or 1.0)),
        bidirectional=bool(config.get("use_bidirectional_attention", False)),
        experts_implementation=str(config.get("experts_implementation") or "grouped_mm"),
        router_logits_output=bool(config.get("output_router_logits", False)),
        router_jitter=float(config.get("router_jitter_noise", 0.0) or 0.0))


def gap(family: str, traits: GatedTraits) -> str:
    """Why the derivation does not cover this config ("" when it does)."""
    if traits.activation not in _ONE_OP_ACTIVATIONS:
        return (f"{family}'s activation '{traits.activation}' is not derived (derived: "
                f"{', '.join(_ONE_OP_ACTIVATIONS)}): Megatron's formula is used")
    if traits.bidirectional:
        return "bidirectional attention is not derived: Megatron's formula is used"
    if family == "mixtral":
        if traits.experts_implementation != "grouped_mm":
            return (f"mixtral's experts_implementation '{traits.experts_implementation}' is not derived (transformers' "
                    "default 'grouped_mm' is): Megatron's formula is used (balanced routing assumed)")
        if traits.router_logits_output or traits.router_jitter > 0:
            return ("mixtral with output_router_logits (the load-balancing loss) or router_jitter_noise is not "
                    "derived: Megatron's formula is used (balanced routing assumed)")
    return ""


def norm_bytes_per_token(family: str, hidden: int, e: int) -> int:
    """What one RMSNorm keeps per token: llama-style fp32 input, rsqrt and two e·h tensors; Gemma's fp32 input,
    rsqrt, fp32 normalised x and its cast output."""
    if family == "gemma":
        return 8 * hidden + _FP32_BYTES + e * hidden
    return 4 * hidden + _FP32_BYTES + 2 * e * hidden


def norm_bytes_per_layer(family: str, hidden: int) -> int:
    """Per norm and not per token: Gemma's fp32 (1 + weight)."""
    return _FP32_BYTES * hidden if family == "gemma" else 0


def final_norm_and_embedding_scale(family: str, hidden: int, e: int) -> tuple[int, int, int]:
    """(the final norm's bytes per token, its bytes per step, the embedding scale kept for backward): Gemma
    multiplies the embeddings by sqrt(h) held as an fp32 buffer, cast to e bytes (saved; fp32: the buffer)."""
    scale = e if family == "gemma" and e < _FP32_BYTES else 0
    return norm_bytes_per_token(family, hidden, e), norm_bytes_per_layer(family, hidden), scale


def attention_core_bytes(recompute: str, sdpa: bool, e: int, a: int, k: int, d: int, seq: int) -> int:
    """Bytes per token a separate-projection attention keeps (recompute none or selective): selective keeps the
    checkpoint's rotated q and k, v and the core's output; sdpa also keeps its output for o_proj and the fp32
    logsumexp per head; eager keeps q, k, v, the output and the probabilities (fp32 softmax and its e-byte cast)."""
    if recompute == "selective":
        return 2 * e * a * d + 2 * e * k * d
    if sdpa:
        return 2 * e * a * d + 2 * e * k * d + _FP32_BYTES * a
    return 4 * e * a * d + a * seq * (_FP32_BYTES + (e if e < _FP32_BYTES else 0))


def layer_bytes(family: str, tokens: int, seq: int, e: int, hidden: int, heads: int, kv_heads: int, head_dim: int,
                ffn: int, experts: int, experts_per_token: int, recompute: str, sdpa: bool) -> int:
    """Bytes one decoder layer keeps for one micro-batch (recompute none or selective; full keeps T·e·h)."""
    h, a, k, d, f = hidden, heads, kv_heads, head_dim, ffn
    norms = 2 * norm_bytes_per_token(family, h, e)
    if family == "phi3":
        qkv = e * (a + 2 * k) * d  # the fused output, kept whole by the v view
        if recompute == "selective":  # the checkpoint's inputs (q, k rotated; v) and its output (o_proj's input)
            core = e * a * d + e * k * d + qkv + e * a * d
        elif sdpa:  # rotated q and k, qkv, the output and its copy for o_proj, fp32 logsumexp
            core = e * a * d + e * k * d + qkv + 2 * e * a * d + _FP32_BYTES * a
        else:  # q, repeat_kv'd k and v (MHA: the rotated k and the qkv view), o_proj's copy, softmax fp32 + cast
            kept_kv = 2 * e * a * d if k != a else e * k * d + qkv
            core = 2 * e * a * d + kept_kv + a * seq * (_FP32_BYTES + (e if e < _FP32_BYTES else 0))
    else:
        core = attention_core_bytes(recompute, sdpa, e, a, k, d, seq)
    per_layer = 2 * norm_bytes_per_layer(family, h)
    if family == "mixtral":
        return tokens * (norms + core) + moe_bytes(tokens, e, h, f, experts, experts_per_token) + per_layer
    return tokens * (norms + core + 4 * e * f) + per_layer


@dataclass(frozen=True)
class LayerMoments:
    """Where a decoder layer's backward moments (core.memory.activations.transformers_peak_moments) differ from llama's."""

    mlp_weight_gradients: int  # every MLP weight gradient, alive after the MLP's backward
    mlp_moment: int | None = None  # replaces llama's MLP moment (its excess over the activations freed)
    norm_backward_freed: int | None = None  # replaces what llama's post-attention norm moment has freed
    other_moments: tuple[int, ...] = ()  # the family's other moments, each an excess


def layer_moments(family: str, tokens: int, e: int, hidden: int, ffn: int, experts: int,
                  experts_per_token: int, routing_weight_bytes: int = _FP32_BYTES, normalised: bool = True) -> LayerMoments:
    """The terms of a decoder layer's backward moments where these families differ from llama.

    Each moment: the layer's weight gradients alive, its gradient temporaries (the residual gradient T·h·e
    first), less the activations its backward has freed.
    - gemma: its post-attention norm's backward frees the fp32 normalised x and (1 + weight) as well.
    - phi3: beside llama's moment (SwiGLU's two products), gate_up_proj's backward: the three MLP weight
      gradients, the cat of the gate and up gradients (T·2f·e) and the input gradient; the MLP freed whole.
    - mixtral, in the experts' backward: (a) the first grouped matmul's, after the second's: both expert weight
      gradients (E·3·f·h·e), the cat of gate and up gradients (S·2f·e), the input gradient (S·h·e), the
      routing weights' gradient (4·S); freed the down output and routing weight, the expert MLP, inv_perm;
      (b) the routing-weight product's: its two fp32 S·h gradients, the fp32 un-permuted gradient (S·h·4)
      and, in 16 bits, the cast gradient (S·h·e); freed inv_perm; (c) SwiGLU's two products, as llama's: the
      down weight gradient (E·h·f·e), its input gradient and the two products (3·S·f·e), the routing
      weights' gradient; freed the down output and routing weight, the product, inv_perm. The
      post-attention norm's backward has the router's weight gradient (E·h·e) beside the experts' and frees
      the whole sparse block.
    - qwen3_moe (the same experts, routing_weight_bytes = e): the routing weights in the compute dtype keep the
      product with the down output in it too, so (b) holds the two product gradients and the un-permuted one in e
      bytes (3·S·h·e, inv_perm still alive), read off its traces.
    """
    h, f, t = hidden, ffn, tokens
    if family == "gemma":
        return LayerMoments(3 * h * f * e, norm_backward_freed=4 * t * f * e + t * (4 * h + e * h + _FP32_BYTES)
                            + _FP32_BYTES * h)
    if family == "phi3":
        gate_up_backward = 3 * h * f * e + 2 * t * h * e + 2 * t * f * e - 4 * t * f * e
        return LayerMoments(3 * h * f * e, other_moments=(gate_up_backward,))
    if family not in ("mixtral", "qwen3_moe"):
        return LayerMoments(3 * h * f * e)
    pairs, weights, w = tokens * experts_per_token, experts * 3 * f * h * e, routing_weight_bytes
    if w == _FP32_BYTES:
        routing_product = (t * h * e + pairs * h * (3 * _FP32_BYTES + (e if e < _FP32_BYTES else 0))
                           - pairs * _INDEX_BYTES)
    else:
        routing_product = t * h * e + pairs * h * 3 * e
    products = (experts * h * f * e + t * h * e + pairs * (3 * f * e + w)
                - pairs * (e * h + w + e * f + _INDEX_BYTES))
    norm = 2 * e * h + _FP32_BYTES  # llama-style: the two e·h tensors and the rsqrt its backward frees
    return LayerMoments(
        weights + experts * h * e,
        mlp_moment=(weights + t * h * e + pairs * (2 * f * e + h * e + w)
                    - pairs * (e * h + w + 4 * e * f + _INDEX_BYTES)),
        norm_backward_freed=moe_bytes(t, e, h, f, experts, experts_per_token, w, normalised) + t * norm,
        other_moments=(routing_product, products))


def moe_bytes(tokens: int, e: int, hidden: int, ffn: int, experts: int, experts_per_token: int,
              routing_weight_bytes: int = _FP32_BYTES, normalised: bool = True) -> int:
    """What Mixtral's router and experts keep for one micro-batch (see the module docstring). Qwen3-MoE's router
    casts the top-k weights to the compute dtype (routing_weight_bytes = e) and normalises them only with
    norm_topk_prob (normalised: the sum and the in-place division's clone)."""
    r = experts_per_token
    router = _FP32_BYTES * experts + _INDEX_BYTES * r + ((_FP32_BYTES * r + _FP32_BYTES) if normalised else 0)
    per_pair = 3 * _INDEX_BYTES + 2 * e * hidden + 4 * e * ffn + routing_weight_bytes
    return tokens * router + tokens * r * per_pair + _GROUP_OFFSET_BYTES * experts


def routing_note(family: str | None) -> str:
    """What a Mixtral estimate or trace assumes about routing ("" for the dense families)."""
    if family != "mixtral":
        return ""
    return ("routing: transformers' grouped_mm experts run all tokens × top-k token-expert pairs, so every size is "
            "fixed whatever the router picks (fake tensors know no routing; the bytes hold for any routing)")
