"""What transformers' Qwen3 and OLMo-2 decoder layers keep for backward: llama's layer with RMSNorms on the queries
and keys (qk-norm), and OLMo-2's post-norm layout (pure stdlib, integer bytes).

Derived from traces of the real code (`zeroplan trace`, docs/trace.md: every storage saved for backward, with the op
that made it) and pinned by tests/test_trace_new_families.py. Notation: T = s·b tokens, e the compute dtype's bytes,
h hidden, a heads, k KV heads, d head_dim, f ffn.

- qwen3 (Qwen3Attention): q_norm and k_norm are llama's RMSNorm over each head (d wide) before rotary; each keeps its
  fp32 input (an upcast copy of the projection's output in 16 bits), the fp32 rsqrt (4 B per head and token) and
  the normalised x cast to e (weight·x's saved input); the output goes to rotary, whose products by cos and sin keep
  only cos and sin. The rest of the layer is llama's.
- olmo2 (Olmo2DecoderLayer): no norm before attention or the MLP; q_norm and k_norm span all heads (a·d and k·d wide)
  and the two norms follow the attention and the MLP (h = x + norm(attn(x)); h + norm(mlp(h))). OLMo-2's RMSNorm
  multiplies by its weight in fp32 before casting, so each keeps its fp32 input, the fp32 rsqrt (4 B per token) and
  the fp32 normalised x: 8·w + 4 per token for a w-wide norm. The layer input (q, k and v projections' input) and
  the attention residual sum (gate and up projections' input) are kept, e·h each. Its rotary embedding returns cos
  and sin in fp32; in 16 bits the mixed-precision policy casts every decoder layer's inputs (FSDP2's
  cast_forward_inputs), so each layer keeps its own cast cos and sin (2·d·e per token), full recompute's checkpoint
  too, and the fp32 originals are not kept; in fp32 they are (2·d·4 per token, once).
- olmoe (core.memory.activations_moe_families): q_norm and k_norm are llama's RMSNorm over all heads (a·d and k·d
  wide): each its fp32 input, one fp32 rsqrt per token and the normalised x cast to e.
- qwen3_moe (every layer sparse): qwen3's attention, and the router and grouped experts Mixtral's are derived for,
  but the top-k weights are cast to the compute dtype (e per token-expert pair where Mixtral keeps 4) and normalised
  only with norm_topk_prob (transformers' default: not). The moments inside the experts' backward are Mixtral's.
"""

from __future__ import annotations

from zeroplan.core.memory.activations_gated_families import attention_core_bytes

QK_NORM_FAMILIES = ("qwen3", "olmo2", "qwen3_moe")
# qwen3's attention with transformers' grouped experts (core.memory.activations_gated_families.moe_bytes): the router's
# top-k weights cast to the compute dtype, normalised only with norm_topk_prob
QK_NORM_MOE_FAMILIES = ("qwen3_moe",)
POST_NORM_FAMILIES = ("olmo2",)
_FP32_BYTES = 4


def qk_norm_bytes_per_token(family: str | None, heads: int, kv_heads: int, head_dim: int, e: int) -> int:
    """What the query and key norms keep per token (0 for a family without them)."""
    if family in ("qwen3", "qwen3_moe"):  # per head: fp32 input, rsqrt, the normalised x cast to e
        return (heads + kv_heads) * ((_FP32_BYTES + e) * head_dim + _FP32_BYTES)
    if family == "olmo2":  # over all heads: fp32 input, one rsqrt per token, fp32 normalised x
        return 2 * _FP32_BYTES * (heads + kv_heads) * head_dim + 2 * _FP32_BYTES
    if family == "olmoe":  # llama's RMSNorm over all heads: fp32 input, one rsqrt per token, the normalised x cast to e
        return (heads + kv_heads) * head_dim * (_FP32_BYTES + e) + 2 * _FP32_BYTES
    return 0


def olmo2_norm_bytes_per_token(width: int) -> int:
    """OLMo-2's RMSNorm over `width` features: fp32 input, fp32 rsqrt, fp32 normalised x."""
    return 2 * _FP32_BYTES * width + _FP32_BYTES


def rotary_cast_bytes_per_token(head_dim: int, e: int) -> int:
    """Each OLMo-2 layer's own cos and sin cast to the compute dtype (16 bits; 0 in fp32)."""
    return 2 * head_dim * e if e < _FP32_BYTES else 0


def post_norm_layer_bytes(tokens: int, seq: int, e: int, h: int, a: int, k: int, d: int, f: int, recompute: str,
                          sdpa: bool) -> int:
    """Bytes one OLMo-2 decoder layer keeps for one micro-batch (see the module docstring). sdpa keeps q, k, v, the
    output (o_proj's input) and the logsumexp; eager llama's q, repeat_kv'd k and v, the o_proj input copy and the
    fp32 softmax output with its cast; selective recompute q, k, v and the output; full recompute the layer input
    and its cast cos and sin."""
    rotary = rotary_cast_bytes_per_token(d, e)
    if recompute == "full":
        return tokens * (e * h + rotary)
    core = attention_core_bytes(recompute, sdpa, e, a, k, d, seq)
    norms = 2 * olmo2_norm_bytes_per_token(h) + qk_norm_bytes_per_token("olmo2", a, k, d, e)
    return tokens * (2 * e * h + norms + core + 4 * e * f + rotary)
