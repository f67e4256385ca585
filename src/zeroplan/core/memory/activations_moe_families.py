"""What transformers' OLMoE, Qwen2-MoE and DeepSeek-V2/V3 decoder layers keep for backward: llama's layer with
transformers' grouped experts (core.memory.activations_gated_families.moe_bytes), shared experts, DeepSeek's routers
and multi-head latent attention, dense and sparse layers mixed (pure stdlib, integer bytes).
Reference: docs/formulas.md §8.5.

Derived from traces of the real code (`zeroplan trace`, docs/trace.md: every storage saved for backward, with the op
that made it) and pinned by tests/test_trace_moe_families.py. Notation: T = s·b tokens, e the compute dtype's bytes,
h hidden, a heads, k KV heads, d head_dim, E routed experts, r top-k, f an expert's width, S = T·r token-expert pairs.

- olmoe (every layer sparse): llama's layer; q_norm and k_norm are llama's RMSNorm over all heads (a·d and k·d wide),
  each its fp32 input, rsqrt and the normalised x cast to e ((4 + e) per element, 4 per token); the router and
  experts are Qwen3-MoE's (the top-k weights cast to e, normalised only with norm_topk_prob).
- qwen2_moe: Qwen3-MoE's router and experts without qk-norm, plus the shared expert, a llama MLP of
  shared_expert_intermediate_size (4·e·f_s), whose output (e·h) and sigmoid gate (e) the product keeps.
- deepseek_v2 / deepseek_v3 (first_k_dense_replace dense layers, then sparse ones):
  * multi-head latent attention: q_a_layernorm (over q_lora_rank) and kv_a_layernorm (over kv_lora_rank) are llama's
    RMSNorm; in fp32 kv_a_layernorm's input is a view of kv_a_proj_with_mqa's output, so the rope part (4·rope_dim)
    is kept too. Queries and keys are qk_head_dim = nope + rope wide, values v_head_dim; the values are a view of
    kv_b_proj's output, so their storage is a·(nope + v) wide. o_proj keeps its input copy (e·a·v). sdpa on CPU runs
    the math kernel when query and value widths differ (the fused CPU kernel needs them equal): it keeps fp32 q and k
    (4·a·qk each), fp32 values (16 bits: a 4·a·v copy; fp32: the a·(nope + v) storage) and the fp32 softmax output
    (4·a·s); a GPU's fused kernels keep less (said where the estimate is shown). Eager attention keeps q, k, the
    value storage and the softmax (fp32, and its cast in 16 bits). The rotary embedding: V3's cos and sin rope_dim
    wide (2·T·rope·e, shared by all layers), V2's complex64 frequencies (4·T·rope).
  * the router reads the input in fp32 (16 bits: a 4·h copy, and the fp32 copy of its weight, 4·E·h per layer); keeps
    its sigmoid (V3) or softmax (V2) output (4·E) and the top-k indices (8·r); V2's group_limited_greedy also the bool
    mask of the chosen groups (E), which its top-k reads. V3's noaux_tc grouping saves indices and a mask too, but
    only the choice of experts reads them (the weights are gathered from the sigmoid output): no gradient reaches
    them, so they are freed in the forward. With norm_topk_prob the sum and the in-place division's clone
    (4 + 4·r). The top-k weights stay fp32 (4 per pair), as Mixtral's.
  * in fp32 transformers runs its grouped-matmul fallback (torch's grouped_mm takes bf16), which keeps the
    offsets once more (4·E per sparse layer, read off the traces).
  * shared experts: a llama MLP of moe_intermediate_size × n_shared_experts (4·e·f_s). Dense layers: llama's MLP.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from zeroplan.core.memory.activations_gated_families import attention_core_bytes, moe_bytes, norm_bytes_per_token

FAMILIES = ("olmoe", "qwen2_moe", "deepseek_v2", "deepseek_v3", "llama4_text")
LATENT_FAMILIES = ("deepseek_v2", "deepseek_v3")
_FP32_BYTES = 4
_INDEX_BYTES = 8
_GROUP_OFFSET_BYTES = 4  # the grouped matmul's int32 offsets, one per expert
_COMPLEX_BYTES = 8  # complex64: DeepSeek-V2's rotary frequencies
_Q_LORA_DEFAULT = 1536  # transformers' DeepseekV2Config/DeepseekV3Config default when config.json leaves it out


@dataclass(frozen=True)
class Layout:
    """What an OLMoE, Qwen2-MoE or DeepSeek config.json sets that changes the bytes (or the derivation)."""

    family: str
    pattern: tuple[bool, ...]  # per layer: True where its MLP is routed
    dense_ffn: int
    expert_ffn: int
    experts: int
    top_k: int
    shared_ffn: int = 0
    normalised: bool = False  # norm_topk_prob
    router: str = "softmax"  # "softmax" (olmoe, qwen2_moe), "greedy", "group_limited_greedy" (V2), "noaux_tc" (V3)
    groups: int = 1
    topk_group: int = 1
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    rope_dim: int = 0
    nope_dim: int = 0
    v_head_dim: int = 0
    not_derived: str = ""  # why a setting of the config is not derived ("" when everything is)
    rope_layers: tuple[bool, ...] = ()  # Llama 4: per layer, True where it applies rotary (and its qk L2 norm)
    qk_l2_norm: bool = False  # Llama 4's use_qk_norm
    temperature_tuning: bool = False  # Llama 4's attn_temperature_tuning (on its layers without rotary)
    chunk: int | None = None  # Llama 4's attention_chunk_size


def layout(config: dict, family: str, pattern: tuple[bool, ...], dense_ffn: int, expert_ffn: int, experts: int,
           top_k: int, shared_ffn: int) -> Layout:
    """The layout of a config.json of these families (its pattern and widths as core.model.families read them)."""
    implementation = str(config.get("experts_implementation") or "grouped_mm")
    reasons = []
    if implementation != "grouped_mm":
        reasons.append(f"experts_implementation '{implementation}'")
    if config.get("output_router_logits"):
        reasons.append("output_router_logits (the load-balancing loss)")
    if family == "olmoe" and config.get("clip_qkv") is not None:
        reasons.append("clip_qkv")
    if family == "qwen2_moe" and config.get("use_sliding_window"):
        reasons.append("use_sliding_window")
    activation = str(config.get("hidden_act") or "silu")
    if activation != "silu":
        reasons.append(f"hidden_act '{activation}'")
    common = Layout(family=family, pattern=pattern, dense_ffn=dense_ffn, expert_ffn=expert_ffn, experts=experts,
                    top_k=top_k, shared_ffn=shared_ffn)
    if family == "llama4_text":
        interval = int(config.get("no_rope_layer_interval") or 4)
        listed = config.get("no_rope_layers")
        rope_layers = (tuple(bool(flag) for flag in listed[:len(pattern)]) if isinstance(listed, list)
                       and len(listed) >= len(pattern)
                       else tuple((index + 1) % interval != 0 for index in range(len(pattern))))
        chunk = config.get("attention_chunk_size", 8192)
        return replace(common, not_derived=", ".join(reasons), rope_layers=rope_layers,
                       qk_l2_norm=bool(config.get("use_qk_norm", True)),
                       temperature_tuning=bool(config.get("attn_temperature_tuning", True)),
                       chunk=None if chunk is None else int(chunk))
    if family not in LATENT_FAMILIES:
        return replace(common, normalised=bool(config.get("norm_topk_prob", False)),
                       not_derived=", ".join(reasons))
    v3 = family == "deepseek_v3"
    router = "noaux_tc" if v3 else str(config.get("topk_method") or "greedy")
    if router not in ("noaux_tc", "greedy", "group_limited_greedy"):
        reasons.append(f"topk_method '{router}'")
    q_lora = config["q_lora_rank"] if "q_lora_rank" in config else _Q_LORA_DEFAULT
    nope, rope, v = int(config["qk_nope_head_dim"]), int(config["qk_rope_head_dim"]), int(config["v_head_dim"])
    if nope + rope == v:
        reasons.append("queries as wide as values (the fused CPU attention kernel)")
    return replace(common, normalised=bool(config.get("norm_topk_prob", v3)), router=router,
                   groups=int(config.get("n_group") or (8 if v3 else 1)),
                   topk_group=int(config.get("topk_group") or (4 if v3 else 1)),
                   q_lora_rank=None if q_lora is None else int(q_lora), kv_lora_rank=int(config["kv_lora_rank"]),
                   rope_dim=rope, nope_dim=nope, v_head_dim=v, not_derived=", ".join(reasons))


def gap(lay: Layout, seq: int) -> str:
    """Why the derivation does not cover this config ("" when it does)."""
    if lay.chunk is not None and seq > lay.chunk and not all(lay.rope_layers):
        return (f"llama4_text's chunked attention ({lay.chunk} tokens) shorter than the sequence ({seq}) makes "
                "transformers build a mask, not derived: Megatron's formula is used")
    if lay.not_derived:
        return (f"{lay.family} with {lay.not_derived} is not derived (transformers' default grouped_mm experts "
                "without the load-balancing loss is): Megatron's formula is used (balanced routing assumed)")
    return ""


def latent_attention_bytes(lay: Layout, recompute: str, sdpa: bool, e: int, heads: int, seq: int) -> int:
    """What multi-head latent attention keeps per token (recompute none or selective; see the module docstring)."""
    a, qk, nope, v, rope = heads, lay.nope_dim + lay.rope_dim, lay.nope_dim, lay.v_head_dim, lay.rope_dim
    norms = norm_bytes_per_token("deepseek", lay.kv_lora_rank, e) + (_FP32_BYTES * rope if e == _FP32_BYTES else 0)
    if lay.q_lora_rank is not None:
        norms += norm_bytes_per_token("deepseek", lay.q_lora_rank, e)
    values, o_proj_input = e * a * (nope + v), e * a * v
    if recompute == "selective":  # the checkpoint's q, k and value storage; o_proj's input
        return norms + 2 * e * a * qk + values + o_proj_input
    if sdpa:  # CPU's math kernel: fp32 q, k, values and softmax output
        fp32_values = _FP32_BYTES * a * (v if e < _FP32_BYTES else nope + v)
        return norms + 2 * _FP32_BYTES * a * qk + fp32_values + _FP32_BYTES * a * seq + o_proj_input
    softmax = a * seq * (_FP32_BYTES + (e if e < _FP32_BYTES else 0))
    return norms + 2 * e * a * qk + values + o_proj_input + softmax


def _router_bytes(lay: Layout, e: int, hidden: int) -> tuple[int, int]:
    """(per token, per layer) what DeepSeek's routers keep beyond moe_bytes' softmax, top-k and normalisation."""
    if lay.family not in LATENT_FAMILIES:
        return 0, 0
    upcast = e < _FP32_BYTES
    per_token = _FP32_BYTES * hidden if upcast else 0
    if lay.router == "group_limited_greedy":  # the top-k reads the masked scores: masked_fill keeps its bool mask
        per_token += lay.experts
    return per_token, (_FP32_BYTES * lay.experts * hidden if upcast else 0)


def _llama4_moe_bytes(lay: Layout, tokens: int, e: int, hidden: int) -> int:
    """Llama 4's sparse block: every token through every expert (the router's scores are 0 off its top-k)."""
    per_expert = 2 * e * hidden + e + 4 * e * lay.expert_ffn  # repeated input, its product, gate_up, silu, product
    router = _INDEX_BYTES * lay.top_k + _FP32_BYTES * lay.experts  # top-k indices, fp32 sigmoid output
    return tokens * (router + lay.experts * per_expert + 4 * e * lay.shared_ffn)


def mlp_bytes(lay: Layout, sparse: bool, tokens: int, e: int, hidden: int) -> int:
    """What one layer's MLP keeps for one micro-batch: llama's dense MLP, or the router, experts and shared experts."""
    if not sparse:
        return tokens * 4 * e * lay.dense_ffn
    if lay.family == "llama4_text":
        return _llama4_moe_bytes(lay, tokens, e, hidden)
    weight_bytes = _FP32_BYTES if lay.family in LATENT_FAMILIES else e
    total = moe_bytes(tokens, e, hidden, lay.expert_ffn, lay.experts, lay.top_k, weight_bytes, lay.normalised)
    per_token, per_layer = _router_bytes(lay, e, hidden)
    shared = 4 * e * lay.shared_ffn if lay.shared_ffn else 0
    if lay.family == "qwen2_moe":  # the gated product keeps the shared expert's output and its sigmoid gate
        shared += e * hidden + e
    # transformers' grouped_mm fallback (weights not in bf16) keeps the experts' offsets for its backward again
    fallback_offsets = _GROUP_OFFSET_BYTES * lay.experts if e == _FP32_BYTES else 0
    return total + tokens * (per_token + shared) + per_layer + fallback_offsets


def layer_bytes(lay: Layout, index: int, tokens: int, seq: int, e: int, hidden: int, heads: int, kv_heads: int,
                head_dim: int, recompute: str, sdpa: bool, qk_norm: int = 0) -> int:
    """Bytes decoder layer `index` (dense or sparse) keeps for one micro-batch; full recompute keeps its input.
    qk_norm: what the query and key norms keep per token (core.memory.activations_qk_norm_families)."""
    if recompute == "full":
        return tokens * e * hidden
    norms = 2 * norm_bytes_per_token(lay.family, hidden, e)
    per_layer = 0
    if lay.family in LATENT_FAMILIES:
        core = latent_attention_bytes(lay, recompute, sdpa, e, heads, seq)
    else:
        core = attention_core_bytes(recompute, sdpa, e, heads, kv_heads, head_dim, seq)
    if lay.family == "llama4_text":
        rope = lay.rope_layers[index]
        if rope and lay.qk_l2_norm:  # the L2 norm on q and k: fp32 input and rsqrt per head
            qk_norm = _FP32_BYTES * (heads + kv_heads) * (head_dim + 1)
        if not rope and lay.temperature_tuning:  # the fp32 scales the query is multiplied by, one per position
            per_layer += _FP32_BYTES * seq
        if not sdpa and recompute == "none" and e < _FP32_BYTES:  # its eager softmax stays in the compute dtype
            core -= heads * seq * _FP32_BYTES
    return tokens * (norms + core + qk_norm) + mlp_bytes(lay, lay.pattern[index], tokens, e, hidden) + per_layer


def last_layer(lay: Layout, sparse: bool) -> int:
    """The index of the last dense (sparse False) or sparse layer (-1 if none)."""
    return max((index for index, routed in enumerate(lay.pattern) if routed == sparse), default=-1)


def rotary_bytes(lay: Layout, tokens: int, e: int, head_dim: int) -> int:
    """The rotary embedding's outputs, shared by all layers: cos and sin (2·T·d·e; DeepSeek-V3's rope_dim wide),
    DeepSeek-V2's and Llama 4's complex64 frequencies (8 bytes per rope_dim / 2, head_dim / 2)."""
    if lay.family == "deepseek_v2":
        return tokens * _COMPLEX_BYTES * (lay.rope_dim // 2)
    if lay.family == "llama4_text":
        return tokens * _COMPLEX_BYTES * (head_dim // 2) if any(lay.rope_layers) else 0
    return 2 * tokens * (lay.rope_dim if lay.family == "deepseek_v3" else head_dim) * e


def rotary_width(lay: Layout, head_dim: int) -> int:
    """The width of the rotary embedding's inv_freq (twice its length)."""
    return lay.rope_dim if lay.family in LATENT_FAMILIES else head_dim


def router_buffer_bytes(lay: Layout) -> int:
    """DeepSeek-V3's e_score_correction_bias: an fp32 buffer of E per sparse layer (not a parameter)."""
    return _FP32_BYTES * lay.experts * sum(lay.pattern) if lay.family == "deepseek_v3" else 0


def latent_softmax_moment(lay: Layout, recompute: str, sdpa: bool, tokens: int, seq: int, e: int, hidden: int,
                          heads: int, mlp_weight_gradients: int, layer_at_backward: int, norm: int) -> int:
    """The excess over a latent-attention layer's activations inside its softmax's backward: the MLP's
    (mlp_weight_gradients: the experts', the router's and the shared experts'), the post-attention norm's and o_proj's
    weight gradients; the residual gradient, the values' gradient
    and the probabilities' two fp32 gradients alive; of the layer's activations only the first norm's, the latent
    norms', q, k and the softmax output kept."""
    a, qk, v = heads, lay.nope_dim + lay.rope_dim, lay.v_head_dim
    probabilities = _FP32_BYTES * tokens * a * seq
    weights = mlp_weight_gradients + (hidden + hidden * a * v) * e
    latent_norms = latent_attention_bytes(lay, "selective", sdpa, e, heads, seq) - e * a * (2 * qk + lay.nope_dim + 2 * v)
    qk_bytes = 2 * (_FP32_BYTES if sdpa else e) * a * qk
    kept = tokens * (norm + latent_norms + qk_bytes) + probabilities
    value_gradient = (_FP32_BYTES if sdpa else e) * a * v
    return weights + tokens * (hidden * e + value_gradient) + 2 * probabilities - (layer_at_backward - kept)


def routing_note(family: str | None) -> str:
    """What an estimate or trace of these families assumes ("" for the others)."""
    if family not in FAMILIES:
        return ""
    if family == "llama4_text":
        routing = ("routing: transformers' Llama 4 runs every token through every expert (the scores are 0 off its "
                   "top-k), so the bytes hold for any routing")
    else:
        routing = ("routing: transformers' grouped_mm experts run all tokens × top-k token-expert pairs, so every "
                   "size is fixed whatever the router picks (the bytes hold for any routing)")
    if family in LATENT_FAMILIES:
        routing += ("; latent attention: query and value widths differ, so sdpa runs CPU's math kernel (fp32 q, k, v "
                    "and probabilities), as the trace does; a GPU's fused kernels keep less")
    return routing
