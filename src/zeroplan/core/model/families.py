"""Readers from a Hugging Face config.json dict into the one description of a decoder-only model
(core.model.architecture.Decoder), and the ModelSpec derived from it (docs/formulas.md §2.1).

Counts follow how transformers (5.x) builds each model: a tied head is the embedding's own weight, so it counts
once; biases, norms and learned positions count where the family has them; a layer's routed experts are one module
holding them stacked (transformers >= 5). Every reader is checked in tests/test_model_families.py against
transformers' own model built on the meta device, to the parameter and to DeepSpeed's largest layer.

Multi-token-prediction modules (DeepSeek-V3, GLM-4.5: num_nextn_predict_layers) are not built by transformers;
the count leaves them out, as transformers does, and says so (extra["mtp_params"], extra["notes"]).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zeroplan.core.errors import InputError, ref
from zeroplan.core.model.architecture import (
    MLP,
    Attention,
    Decoder,
    Experts,
    Latent,
    Layer,
    LinearAttention,
    Module,
    Norm,
)
from zeroplan.core.model.spec import ModelShape, ModelSpec, MoEShape, ParamLayout
from zeroplan.core.units import shown

_LLAMA_LIKE = ("llama", "mistral", "mixtral", "qwen2", "gemma")
# The ten families counted before the architecture description existed (each with a published total in tests).
SUPPORTED_FAMILIES = _LLAMA_LIKE + ("phi3", "gpt2", "gpt_neox", "opt", "falcon")
# Each size field of a config.json (hidden_size, vocab_size, ...) is at most this: far past real models,
# and it keeps derived counts within MAX_COUNT.
MAX_CONFIG_FIELD = 2**31
_PARAMS_FIX = f"or give the count with {ref('params')} (and {ref('largest_layer_params')}) instead"

__all__ = ["Module", "Architecture", "DESCRIBED_FAMILIES", "SUPPORTED_FAMILIES", "architecture_from_hf_config",
           "is_described", "model_spec_from_hf_config", "parameter_layout", "text_model_config"]


@dataclass(frozen=True)
class Architecture:
    """A family's normalised shape plus every parameter-owning module."""

    family: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    max_seq_len: int
    tied_embeddings: bool
    gated_mlp: bool
    modules: tuple[Module, ...]
    experts: int | None = None
    experts_per_token: int | None = None
    extra: dict = field(default_factory=dict, compare=False)
    decoder: Decoder | None = field(default=None, compare=False)  # the description everything is derived from

    @property
    def params(self) -> int:
        return sum(module.params * module.copies for module in self.modules)

    @property
    def description(self) -> Decoder:
        """The Decoder this view was made from (every reader makes one)."""
        if self.decoder is None:
            raise ValueError(f"{self.family}: an Architecture built without its Decoder")
        return self.decoder

    @property
    def largest_module(self) -> Module:
        return max(self.modules, key=lambda module: module.params)


class _Fields:
    """Reads config.json fields; a missing or malformed one becomes an InputError naming it."""

    def __init__(self, config: dict, family: str, source: str) -> None:
        self.config, self.family, self.source = config, family, source

    def _check(self, key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(self.source, f"'{key}' must be a positive whole number, got {shown(value)}",
                             f"fix the config.json, {_PARAMS_FIX}")
        if value > MAX_CONFIG_FIELD:
            raise InputError(self.source, f"'{key}' is {shown(value)}, beyond any real model (at most 2^31)",
                             f"fix the config.json, {_PARAMS_FIX}")
        return value

    def count(self, key: str) -> int:
        if self.config.get(key) is None:
            raise InputError(self.source,
                             f"config.json with model_type '{self.family}' has no '{key}'",
                             f"add '{key}' from the model's published config.json, {_PARAMS_FIX}")
        return self._check(key, self.config[key])

    def optional_count(self, key: str, default: int) -> int:
        value = self.config.get(key)
        return default if value is None else self._check(key, value)

    def shape(self) -> tuple[int, int, int, int]:
        """hidden_size, num_hidden_layers, num_attention_heads, vocab_size: required everywhere."""
        keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
        return tuple(self.count(key) for key in keys)  # type: ignore[return-value]

    def flag(self, key: str, default: bool) -> bool:
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InputError(self.source, f"'{key}' must be true or false, got {value!r}",
                             f"fix the config.json, {_PARAMS_FIX}")
        return value




# --- building blocks shared by the readers -------------------------------------------------------------------

# model_type -> the head_dim transformers' config class uses when config.json leaves it out (None: hidden / heads).
_HEAD_DIM_DEFAULTS = {"gemma": 256, "gemma2": 256, "gemma3_text": 256, "qwen3": 128, "glm4": 128, "ernie4_5": 128,
                      "ernie4_5_moe": 128, "llama4_text": 128, "gpt_oss": 64, "qwen3_5_text": 256,
                      "qwen3_5_moe_text": 256}
# model_type -> tie_word_embeddings' default in transformers' config class.
_TIED_BY_DEFAULT = frozenset({"gemma", "gemma2", "gemma3_text", "starcoder2", "cohere", "cohere2", "smollm3",
                              "ernie4_5", "ernie4_5_moe", "gpt2", "opt", "falcon", "bloom", "gpt_bigcode"})


def _attention_shape(fields: _Fields) -> tuple[int, int, int, int, int]:
    """hidden, layers, heads, kv_heads, head_dim."""
    hidden, layers, heads, _vocab = fields.shape()
    kv_heads = fields.optional_count("num_key_value_heads", heads)
    head_dim = fields.optional_count("head_dim", _HEAD_DIM_DEFAULTS.get(fields.family, hidden // heads))
    return hidden, layers, heads, kv_heads, head_dim


def _windows(fields: _Fields, layers: int, default: int | None = None) -> list[int | None]:
    """Each layer's sliding window (None: global attention), from layer_types or the family's pattern."""
    window = fields.config.get("sliding_window", default)
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    types = fields.config.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return [window if kind == "sliding_attention" else None for kind in types]
    pattern = fields.config.get("sliding_window_pattern", fields.config.get("_sliding_window_pattern"))
    if window is not None and isinstance(pattern, int) and pattern > 0:
        return [None if (index + 1) % pattern == 0 else window for index in range(layers)]
    if fields.family in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") and not fields.config.get("use_sliding_window"):
        return [None] * layers
    return [window] * layers


def _experts(fields: _Fields, count_key: str, top_key: str, ffn: int, **options) -> Experts:
    count, top_k = fields.count(count_key), fields.count(top_key)
    if top_k > count:
        raise InputError(fields.source, f"'{top_key}' is {top_k}, more than the {count} experts ('{count_key}')",
                         f"fix the config.json, {_PARAMS_FIX}")
    return Experts(count, top_k, ffn, **options)


def _route_groups(fields: _Fields) -> tuple[int, int] | None:
    """DeepSeek's group-limited routing (config n_group, topk_group; transformers' DeepseekV3TopkRouter keeps the
    top-k experts of the best topk_group of n_group groups): (n_group, topk_group), or None when it limits nothing."""
    groups, chosen = fields.config.get("n_group"), fields.config.get("topk_group")
    if not isinstance(groups, int) or not isinstance(chosen, int) or not 0 < chosen < groups:
        return None
    return groups, chosen


def _first_key(fields: _Fields, *keys: str) -> str:
    """The first of `keys` the config.json has (the last one when none: the error then names it)."""
    return next((key for key in keys if fields.config.get(key) is not None), keys[-1])


@dataclass(frozen=True)
class _Style:
    """How one llama-style family differs from Llama: the knobs its config.json or code sets."""

    norms: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
    norm_kind: str = "rms"
    qkv_bias: str | bool = "attention_bias"  # a config key, or always / never
    out_bias: str | bool = "attention_bias"
    mlp_bias: str | bool = False
    qk_norm: str | None = None  # "head", "full" (over all heads), "cohere" (per head, a row each), "layernorm"
    qk_norm_key: str | None = None  # the config key that turns it on (None: always when qk_norm is set)
    qk_norm_names: tuple[str, str] = ("q_norm", "k_norm")
    fused_gate_up: str | None = None
    plain_mlp: tuple[str, str] | None = None  # non-gated MLP module names
    final_norm: str = "norm"
    bias_default: bool = False  # what a missing bias key means (transformers' config class default)


_STYLES: dict[str, _Style] = {
    "llama": _Style(mlp_bias="mlp_bias"),
    "mistral": _Style(qkv_bias=False, out_bias=False),
    "ministral": _Style(qkv_bias=False, out_bias=False),
    "mixtral": _Style(qkv_bias=False, out_bias=False),
    "qwen2": _Style(qkv_bias=True, out_bias=False),
    "gemma": _Style(),
    "gemma2": _Style(norms=("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                            "post_feedforward_layernorm")),
    "gemma3_text": _Style(norms=("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                 "post_feedforward_layernorm"), qk_norm="head"),
    "qwen3": _Style(qk_norm="head"),
    "qwen3_moe": _Style(qk_norm="head"),
    "qwen2_moe": _Style(qkv_bias="qkv_bias", out_bias=False, bias_default=True),
    "olmo": _Style(norm_kind="none"),
    "olmo2": _Style(norms=("post_attention_layernorm", "post_feedforward_layernorm"), qk_norm="full"),
    "olmo3": _Style(norms=("post_attention_layernorm", "post_feedforward_layernorm"), qk_norm="full"),
    "olmoe": _Style(qk_norm="full"),
    "starcoder2": _Style(norm_kind="layer", qkv_bias="use_bias", out_bias="use_bias", mlp_bias="use_bias",
                         plain_mlp=("c_fc", "c_proj")),
    "cohere": _Style(norms=("input_layernorm",), norm_kind="layer_no_bias", qk_norm="cohere",
                     qk_norm_key="use_qk_norm"),
    "cohere2": _Style(norms=("input_layernorm",), norm_kind="layer_no_bias"),
    "granite": _Style(mlp_bias="mlp_bias"),
    "granitemoe": _Style(),
    "glm4": _Style(norms=("input_layernorm", "post_attention_layernorm", "post_self_attn_layernorm",
                          "post_mlp_layernorm"), out_bias=False, fused_gate_up="gate_up_proj"),
    "glm4_moe": _Style(out_bias=False, qk_norm="head", qk_norm_key="use_qk_norm"),
    "smollm3": _Style(mlp_bias="mlp_bias"),
    "ernie4_5": _Style(qkv_bias="use_bias", out_bias="use_bias", mlp_bias="use_bias"),
    "ernie4_5_moe": _Style(qkv_bias="use_bias", out_bias="use_bias", mlp_bias="use_bias"),
    "exaone4": _Style(norms=("post_attention_layernorm", "post_feedforward_layernorm"), qkv_bias=False,
                      out_bias=False, qk_norm="head"),
    # transformers builds Hunyuan's query/key norms whatever use_qk_norm says (its forward always applies them).
    "hunyuan_v1_dense": _Style(qk_norm="head", qk_norm_names=("query_layernorm", "key_layernorm")),
    "hunyuan_v1_moe": _Style(qk_norm="head", qk_norm_names=("query_layernorm", "key_layernorm")),
    "phimoe": _Style(norm_kind="layer"),
    "gpt_oss": _Style(bias_default=True),
    "llama4_text": _Style(),
    "qwen3_5_text": _Style(qk_norm="head"),
    "qwen3_5_moe_text": _Style(qk_norm="head"),
    "deepseek_v2": _Style(),
    "deepseek_v3": _Style(),
}


def _flag_or(fields: _Fields, setting: str | bool, default: bool = False) -> bool:
    return setting if isinstance(setting, bool) else fields.flag(setting, default)


def _qk_norm(style: _Style, fields: _Fields, heads: int, head_dim: int) -> Norm | None:
    if style.qk_norm is None or (style.qk_norm_key is not None and not fields.flag(style.qk_norm_key, False)):
        return None
    if style.qk_norm == "full":
        return Norm(heads * head_dim, style.norm_kind)
    if style.qk_norm == "cohere":
        return Norm(head_dim, "layer_no_bias", heads)
    return Norm(head_dim, "rms")


def _moe_layer_indices(fields: _Fields, layers: int) -> set[int]:
    """Which layers hold experts, per the family's config keys."""
    config, family = fields.config, fields.family
    if family in ("deepseek_v2", "deepseek_v3", "glm4_moe"):
        first = fields.optional_count("first_k_dense_replace", 0) if config.get("first_k_dense_replace") else 0
        return set(range(first, layers))
    if family in ("qwen2_moe", "qwen3_moe"):
        step = fields.optional_count("decoder_sparse_step", 1)
        dense = set(config.get("mlp_only_layers") or [])
        return {index for index in range(layers) if index not in dense and (index + 1) % step == 0}
    if family == "llama4_text":
        listed = config.get("moe_layers")
        if isinstance(listed, list):
            return {index for index in listed if isinstance(index, int)}
        step = fields.optional_count("interleave_moe_layer_step", 1)
        return set(range(step - 1, layers, step))
    if family == "ernie4_5_moe":
        start = config.get("moe_layer_start_index", 0) or 0
        end = config.get("moe_layer_end_index", layers - 1)
        end = layers - 1 if end is None or end < 0 else end
        interval = fields.optional_count("moe_layer_interval", 1)
        return {index for index in range(layers) if start <= index <= end and (index - start) % interval == 0}
    return set(range(layers))


def _moe(fields: _Fields, hidden: int, mlp_bias: bool) -> Experts:
    """The experts of a MoE family's sparse layers."""
    family = fields.family
    if family in ("mixtral", "granitemoe", "phimoe"):
        return _experts(fields, "num_local_experts", "num_experts_per_tok", fields.count("intermediate_size"),
                        names=("router", "experts", "shared_experts"))
    if family in ("qwen3_moe", "olmoe"):
        ffn = fields.count("moe_intermediate_size" if family == "qwen3_moe" else "intermediate_size")
        return _experts(fields, _first_key(fields, "num_local_experts", "num_experts"), "num_experts_per_tok", ffn,
                        names=("gate", "experts", "shared_experts"))
    if family in ("qwen2_moe", "qwen3_5_moe_text"):
        shared = MLP(fields.count("shared_expert_intermediate_size"))
        return _experts(fields, _first_key(fields, "num_local_experts", "num_experts"), "num_experts_per_tok",
                        fields.count("moe_intermediate_size"), shared=shared, shared_gate=True,
                        names=("gate", "experts", "shared_expert"))
    if family in ("deepseek_v2", "deepseek_v3", "glm4_moe"):
        ffn = fields.count("moe_intermediate_size")
        shared_count = fields.config.get("n_shared_experts") or 0
        shared_mlp = MLP(ffn * shared_count) if shared_count else None
        return _experts(fields, "n_routed_experts", "num_experts_per_tok", ffn, shared=shared_mlp,
                        names=("gate", "experts", "shared_experts"), route_groups=_route_groups(fields))
    if family == "ernie4_5_moe":
        ffn = fields.count("moe_intermediate_size")
        shared_count = fields.config.get("moe_num_shared_experts") or 0
        return _experts(fields, "moe_num_experts", "moe_k", ffn, correction_bias=True,
                        shared=MLP(ffn * shared_count, bias=mlp_bias) if shared_count else None,
                        names=("gate", "experts", "shared_experts"))
    if family == "hunyuan_v1_moe":
        for key in ("num_experts", "moe_topk"):
            if isinstance(fields.config.get(key), list):
                raise InputError(fields.source, f"'{key}' differs per layer; zeroplan reads one value",
                                 f"count it with the trace extra (meta device), {_PARAMS_FIX}")
        ffn = fields.count("intermediate_size")
        return _experts(fields, "num_experts", "moe_topk", ffn, shared=MLP(ffn), names=("gate.wg", "experts",
                                                                                          "shared_mlp"))
    if family == "gpt_oss":
        return _experts(fields, "num_local_experts", "num_experts_per_tok", fields.count("intermediate_size"),
                        bias=True, router_bias=True, stacked="in_out", names=("router", "experts", "shared_experts"))
    if family == "llama4_text":
        ffn = fields.count("intermediate_size")
        return _experts(fields, "num_local_experts", "num_experts_per_tok", ffn, shared=MLP(ffn),
                        stacked="in_out", names=("router", "experts", "shared_expert"))
    raise ValueError(family)  # pragma: no cover - every MoE family above


_MOE_FAMILIES = frozenset({"mixtral", "granitemoe", "phimoe", "qwen3_moe", "olmoe", "qwen2_moe", "qwen3_5_moe_text",
                           "deepseek_v2", "deepseek_v3", "glm4_moe", "ernie4_5_moe", "hunyuan_v1_moe", "gpt_oss",
                           "llama4_text"})


def _head_bias(fields: _Fields) -> bool:
    """A bias on the LM head: Phi-3.5-MoE's lm_head_bias; ERNIE 4.5 MoE's use_bias (kept when the weight is tied)."""
    if fields.family == "phimoe":
        return fields.flag("lm_head_bias", False)
    return fields.flag("use_bias", False) if fields.family == "ernie4_5_moe" else False


def _chunks(fields: _Fields, layers: int) -> list[int | None]:
    """Each layer's attention chunk (None: not chunked): Llama 4's chunked_attention layers, as Llama4TextConfig fills
    layer_types in (transformers models/llama4/configuration_llama4.py: attention_chunk_size 8192 by default, chunked
    on the rotary layers, every no_rope_layer_interval-th layer (4) global without rotary embeddings)."""
    if fields.family != "llama4_text":
        return [None] * layers
    chunk = fields.config.get("attention_chunk_size", 8192)
    chunk = chunk if isinstance(chunk, int) and not isinstance(chunk, bool) and chunk > 0 else None
    types = fields.config.get("layer_types")
    if chunk is None:
        return [None] * layers
    if isinstance(types, list) and len(types) == layers:
        return [chunk if kind == "chunked_attention" else None for kind in types]
    rope = fields.config.get("no_rope_layers")
    if not (isinstance(rope, list) and len(rope) == layers):
        interval = fields.optional_count("no_rope_layer_interval", 4)
        rope = [int((index + 1) % interval != 0) for index in range(layers)]
    return [chunk if used else None for used in rope]


def _llama_style(fields: _Fields) -> Architecture:
    """Every family built like Llama: embeddings, layers of (norms, attention, MLP or experts), final norm, head.
    _STYLES says how each differs; MLA, experts and linear-attention layers come from their config keys."""
    family, style = fields.family, _STYLES[fields.family]
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(fields)
    vocab = fields.count("vocab_size")
    tied = fields.flag("tie_word_embeddings", family in _TIED_BY_DEFAULT)
    qkv_bias = _flag_or(fields, style.qkv_bias, style.bias_default)
    out_bias = _flag_or(fields, style.out_bias, style.bias_default)
    mlp_bias = _flag_or(fields, style.mlp_bias)
    qk_norm = _qk_norm(style, fields, heads, head_dim)
    windows = _windows(fields, layers, 4096 if family in ("mistral", "gemma2", "gemma3_text", "cohere2") else None)
    latent = None
    if family in ("deepseek_v2", "deepseek_v3"):
        q_lora = fields.config.get("q_lora_rank")
        latent = Latent(fields.count("kv_lora_rank"), None if q_lora is None else fields.count("q_lora_rank"),
                        fields.count("qk_rope_head_dim"), fields.count("qk_nope_head_dim"), fields.count("v_head_dim"))
        head_dim = latent.nope_dim + latent.rope_dim  # a query's and key's width (qk_head_dim); values: v_head_dim
    moe = _moe(fields, hidden, mlp_bias) if family in _MOE_FAMILIES else None
    moe_layers = _moe_layer_indices(fields, layers) if moe is not None else set()
    dense_ffn_key = "intermediate_size_mlp" if family == "llama4_text" else "intermediate_size"
    dense: MLP | None = None
    if len(moe_layers) < layers:
        ffn = fields.count(dense_ffn_key)
        dense = (MLP(ffn, gated=False, bias=mlp_bias, names=style.plain_mlp) if style.plain_mlp
                 else MLP(ffn, bias=mlp_bias, fused=style.fused_gate_up))
    norms = tuple((name, Norm(hidden, style.norm_kind)) for name in style.norms)
    kinds = fields.config.get("layer_types")
    linear = None
    if family in ("qwen3_5_text", "qwen3_5_moe_text"):
        linear = LinearAttention(fields.count("linear_num_key_heads"), fields.count("linear_num_value_heads"),
                                 fields.count("linear_key_head_dim"), fields.count("linear_value_head_dim"),
                                 fields.count("linear_conv_kernel_dim"))
        if not (isinstance(kinds, list) and len(kinds) == layers):
            interval = fields.optional_count("full_attention_interval", 4)
            kinds = ["linear_attention" if (index + 1) % interval else "full_attention" for index in range(layers)]
    chunks = _chunks(fields, layers)
    built = []
    for index in range(layers):
        attention = Attention(heads, kv_heads, head_dim, qkv_bias, out_bias, qk_norm=qk_norm,
                              sinks=family == "gpt_oss", window=windows[index], chunk=chunks[index], latent=latent,
                              qk_norm_names=style.qk_norm_names, gated_query=linear is not None)
        if linear is not None and kinds is not None and kinds[index] == "linear_attention":
            attention = Attention(heads, kv_heads, head_dim, linear=linear)
        built.append(Layer(attention, moe if index in moe_layers else dense, norms))  # type: ignore[arg-type]
    mtp = fields.config.get("num_nextn_predict_layers") or 0
    final_norm = None if style.norm_kind == "none" else (style.final_norm, Norm(hidden, style.norm_kind))
    decoder = Decoder(family, hidden, vocab, tuple(built), fields.optional_count("max_position_embeddings", 2048),
                      tied, final_norm, head_bias=_head_bias(fields), mtp_layers=mtp if isinstance(mtp, int) else 0)
    notes = []
    if decoder.mtp_layers:
        notes.append(f"the config describes {decoder.mtp_layers} multi-token-prediction module(s), "
                     f"about {decoder.mtp_params / 1e9:.1f}B parameters laid out as DeepSeek-V3's checkpoint stores "
                     "them; transformers does not build them, and this count leaves them out")
    extra: dict = {"attention_bias": qkv_bias, "position_embeddings": "rotary"}
    if decoder.mtp_layers:
        extra.update(mtp_layers=decoder.mtp_layers, mtp_params=decoder.mtp_params, notes=notes)
    return _architecture(decoder, heads, kv_heads, head_dim, extra)


def _phi3(fields: _Fields) -> Architecture:
    """Phi-3: llama-like, but q/k/v fused into qkv_proj and gate/up fused into gate_up_proj."""
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(fields)
    ffn, vocab = fields.count("intermediate_size"), fields.count("vocab_size")
    norms = (("input_layernorm", Norm(hidden)), ("post_attention_layernorm", Norm(hidden)))
    window = _windows(fields, layers)[0]  # Phi-3-mini-4k's 2047: Phi3Model masks every layer with it when set
    layer = Layer(Attention(heads, kv_heads, head_dim, fused="qkv_proj", window=window),
                  MLP(ffn, fused="gate_up_proj"), norms)
    decoder = Decoder("phi3", hidden, vocab, (layer,) * layers, fields.optional_count("max_position_embeddings", 4096),
                      fields.flag("tie_word_embeddings", False), ("norm", Norm(hidden)))
    return _architecture(decoder, heads, kv_heads, head_dim, {"position_embeddings": "rotary"})


def _phi(fields: _Fields) -> Architecture:
    """Phi-1/1.5/2: biased q/k/v/dense, one LayerNorm per layer (attention and MLP in parallel), a biased head."""
    hidden, layers, heads, kv_heads, _ = _attention_shape(fields)
    head_dim = hidden // heads
    ffn, vocab = fields.count("intermediate_size"), fields.count("vocab_size")
    qk_norm = Norm(head_dim, "layer") if fields.flag("qk_layernorm", False) else None
    attention = Attention(heads, kv_heads, head_dim, True, True, qk_norm=qk_norm,
                          names=("q_proj", "k_proj", "v_proj", "dense"), qk_norm_names=("q_layernorm", "k_layernorm"))
    layer = Layer(attention, MLP(ffn, gated=False, bias=True, names=("fc1", "fc2")),
                  (("input_layernorm", Norm(hidden, "layer")),))
    decoder = Decoder("phi", hidden, vocab, (layer,) * layers, fields.optional_count("max_position_embeddings", 2048),
                      fields.flag("tie_word_embeddings", False), ("final_layernorm", Norm(hidden, "layer")),
                      head_bias=True)
    return _architecture(decoder, heads, kv_heads, head_dim, {"position_embeddings": "rotary",
                                                               "parallel_attention": True})


def _gpt2(fields: _Fields) -> Architecture:
    """GPT-2: learned positions, Conv1D projections with biases, LayerNorm, tied head by default."""
    hidden, layers = fields.count("n_embd"), fields.count("n_layer")
    heads, vocab, positions = fields.count("n_head"), fields.count("vocab_size"), fields.count("n_positions")
    ffn = fields.optional_count("n_inner", 4 * hidden)
    attention = Attention(heads, heads, hidden // heads, True, True, fused="attn.c_attn", conv1d=True,
                          names=("q", "k", "v", "attn.c_proj"))
    layer = Layer(attention, MLP(ffn, gated=False, bias=True, conv1d=True, names=("mlp.c_fc", "mlp.c_proj")),
                  (("ln_1", Norm(hidden, "layer")), ("ln_2", Norm(hidden, "layer"))))
    decoder = Decoder("gpt2", hidden, vocab, (layer,) * layers, positions, fields.flag("tie_word_embeddings", True),
                      ("ln_f", Norm(hidden, "layer")), embed_name="wte", positions=positions, positions_name="wpe")
    return _architecture(decoder, heads, heads, hidden // heads, {"position_embeddings": "learned"}, ffn=ffn)


def _gpt_bigcode(fields: _Fields) -> Architecture:
    """GPT-BigCode (StarCoder 1, SantaCoder): GPT-2 with nn.Linear layers and multi-query attention."""
    hidden, layers = fields.count("n_embd"), fields.count("n_layer")
    heads, vocab, positions = fields.count("n_head"), fields.count("vocab_size"), fields.count("n_positions")
    ffn = fields.optional_count("n_inner", 4 * hidden)
    kv_heads = 1 if fields.flag("multi_query", True) else heads
    attention = Attention(heads, kv_heads, hidden // heads, True, True, fused="attn.c_attn",
                          names=("q", "k", "v", "attn.c_proj"))
    layer = Layer(attention, MLP(ffn, gated=False, bias=True, names=("mlp.c_fc", "mlp.c_proj")),
                  (("ln_1", Norm(hidden, "layer")), ("ln_2", Norm(hidden, "layer"))))
    decoder = Decoder("gpt_bigcode", hidden, vocab, (layer,) * layers, positions,
                      fields.flag("tie_word_embeddings", True), ("ln_f", Norm(hidden, "layer")), embed_name="wte",
                      positions=positions, positions_name="wpe")
    return _architecture(decoder, heads, kv_heads, hidden // heads, {"position_embeddings": "learned"})


def _gpt_neox(fields: _Fields) -> Architecture:
    """GPT-NeoX / Pythia: fused biased qkv, LayerNorm, parallel residual, untied embed_out."""
    hidden, layers, heads, vocab = fields.shape()
    ffn = fields.count("intermediate_size")
    bias = fields.flag("attention_bias", True)
    attention = Attention(heads, heads, hidden // heads, bias, bias, fused="attention.query_key_value",
                          names=("q", "k", "v", "attention.dense"))
    layer = Layer(attention, MLP(ffn, gated=False, bias=True, names=("mlp.dense_h_to_4h", "mlp.dense_4h_to_h")),
                  (("input_layernorm", Norm(hidden, "layer")), ("post_attention_layernorm", Norm(hidden, "layer"))))
    decoder = Decoder("gpt_neox", hidden, vocab, (layer,) * layers,
                      fields.optional_count("max_position_embeddings", 2048), fields.flag("tie_word_embeddings", False),
                      ("final_layer_norm", Norm(hidden, "layer")), embed_name="embed_in", head_name="embed_out")
    return _architecture(decoder, heads, heads, hidden // heads,
                         {"position_embeddings": "rotary",
                          "parallel_attention": fields.flag("use_parallel_residual", True)})


def _opt(fields: _Fields) -> Architecture:
    """OPT: learned positions (2 extra rows), biases, LayerNorm, optional project_in/out, tied head."""
    hidden, layers, heads, vocab = fields.shape()
    ffn = fields.count("ffn_dim")
    positions = fields.optional_count("max_position_embeddings", 2048)
    embed_width = fields.optional_count("word_embed_proj_dim", hidden)
    bias = fields.flag("enable_bias", True)
    norm = Norm(hidden, "layer" if fields.flag("layer_norm_elementwise_affine", True) else "none")
    attention = Attention(heads, heads, hidden // heads, bias, bias, names=("q_proj", "k_proj", "v_proj", "out_proj"))
    layer = Layer(attention, MLP(ffn, gated=False, bias=bias, names=("fc1", "fc2")),
                  (("self_attn_layer_norm", norm), ("final_layer_norm", norm)))
    final = fields.flag("do_layer_norm_before", True) and not fields.flag("_remove_final_layer_norm", False)
    decoder = Decoder("opt", hidden, vocab, (layer,) * layers, positions, fields.flag("tie_word_embeddings", True),
                      ("decoder.final_layer_norm", norm) if final else None, embed_width=embed_width,
                      positions=positions + 2)  # OPT offsets position ids by 2
    return _architecture(decoder, heads, heads, hidden // heads,
                         {"position_embeddings": "learned", "word_embed_proj_dim": embed_width})


def _falcon(fields: _Fields) -> Architecture:
    """Falcon: fused qkv sized by new_decoder_architecture / multi_query; 1 or 2 LayerNorms per layer."""
    hidden, layers, heads, vocab = fields.shape()
    head_dim = hidden // heads
    new_architecture = fields.flag("new_decoder_architecture", False)
    multi_query, parallel = fields.flag("multi_query", True), fields.flag("parallel_attn", True)
    bias, tied = fields.flag("bias", False), fields.flag("tie_word_embeddings", True)
    ffn = fields.optional_count("ffn_hidden_size", 4 * hidden)
    if new_architecture:  # grouped-query attention
        kv_heads = fields.optional_count("num_kv_heads", heads)
    else:  # one shared key and value head, or full multi-head
        kv_heads = 1 if multi_query else heads
    norms_in_parallel = fields.optional_count("num_ln_in_parallel_attn", 2 if new_architecture else 1)
    two_norms = not parallel or norms_in_parallel == 2
    norm_names = (("ln_attn", "ln_mlp") if new_architecture else ("input_layernorm", "post_attention_layernorm")) \
        if two_norms else ("input_layernorm",)
    attention = Attention(heads, kv_heads, head_dim, bias, bias, fused="self_attention.query_key_value",
                          names=("q", "k", "v", "self_attention.dense"))
    layer = Layer(attention, MLP(ffn, gated=False, bias=bias, names=("mlp.dense_h_to_4h", "mlp.dense_4h_to_h")),
                  tuple((name, Norm(hidden, "layer")) for name in norm_names))
    decoder = Decoder("falcon", hidden, vocab, (layer,) * layers,
                      fields.optional_count("max_position_embeddings", 2048), tied, ("ln_f", Norm(hidden, "layer")),
                      embed_name="word_embeddings")
    return _architecture(decoder, heads, kv_heads, head_dim,
                         {"position_embeddings": "alibi" if fields.flag("alibi", False) else "rotary",
                          "parallel_attention": parallel, "new_decoder_architecture": new_architecture}, ffn=ffn)


def _bloom(fields: _Fields) -> Architecture:
    """BLOOM: ALiBi, a LayerNorm on the embeddings, fused biased qkv, 4·h MLP, tied head."""
    hidden = fields.count(_first_key(fields, "n_embed", "hidden_size"))
    layers = fields.count(_first_key(fields, "num_hidden_layers", "n_layer"))
    heads = fields.count(_first_key(fields, "num_attention_heads", "n_head"))
    vocab = fields.count("vocab_size")
    norm = Norm(hidden, "layer")
    attention = Attention(heads, heads, hidden // heads, True, True, fused="self_attention.query_key_value",
                          names=("q", "k", "v", "self_attention.dense"))
    layer = Layer(attention, MLP(4 * hidden, gated=False, bias=True, names=("mlp.dense_h_to_4h", "mlp.dense_4h_to_h")),
                  (("input_layernorm", norm), ("post_attention_layernorm", norm)))
    decoder = Decoder("bloom", hidden, vocab, (layer,) * layers, fields.optional_count("seq_length", 2048),
                      fields.flag("tie_word_embeddings", True), ("ln_f", norm), embed_name="word_embeddings",
                      embed_norm=("word_embeddings_layernorm", norm))
    return _architecture(decoder, heads, heads, hidden // heads, {"position_embeddings": "alibi"}, ffn=4 * hidden)


def _dbrx(fields: _Fields) -> Architecture:
    """DBRX: fused Wqkv (GQA), bias-free LayerNorms, 16 experts of which 4 per token, each w1/v1/w2 stacked flat."""
    hidden, layers = fields.count("d_model"), fields.count("n_layers")
    heads, vocab = fields.count("n_heads"), fields.count("vocab_size")
    attn = _Fields(fields.config.get("attn_config") or {}, "dbrx", fields.source + " attn_config")
    ffn_fields = _Fields(fields.config.get("ffn_config") or {}, "dbrx", fields.source + " ffn_config")
    kv_heads = attn.optional_count("kv_n_heads", 1)
    experts = _experts(ffn_fields, "moe_num_experts", "moe_top_k", ffn_fields.count("ffn_hidden_size"),
                       stacked="flat", names=("router.layer", "experts.mlp", "shared"))
    norm = Norm(hidden, "layer_no_bias")
    attention = Attention(heads, kv_heads, hidden // heads, fused="attn.Wqkv", names=("q", "k", "v", "attn.out_proj"))
    layer = Layer(attention, experts, (("norm_1", norm), ("norm_2", norm)))
    decoder = Decoder("dbrx", hidden, vocab, (layer,) * layers, fields.optional_count("max_seq_len", 2048),
                      fields.flag("tie_word_embeddings", False), ("norm_f", norm), embed_name="wte")
    return _architecture(decoder, heads, kv_heads, hidden // heads, {"position_embeddings": "rotary"})


def _gemma4_kv_modes(layer_types: list[str], shared: int) -> list[str | None]:
    """Gemma4TextConfig.kv_sharing_modes: the last `shared` layers reuse ("reuse") the keys and values the last
    earlier layer of their type stores ("store")."""
    layers = len(layer_types)
    if shared >= layers:
        return ["reuse"] * layers
    first = layers - shared
    modes: list[str | None] = [None if index < first else "reuse" for index in range(layers)]
    if shared:
        for kind in set(layer_types):
            producers = [index for index in range(first) if layer_types[index] == kind]
            if producers:
                modes[producers[-1]] = "store"
    return modes


def _gemma4_text(fields: _Fields) -> Architecture:
    """Gemma 4's text model: sliding and global layers with their own head width and key/value heads (global
    layers: global_head_dim, num_global_key_value_heads with attention_k_eq_v, keys serving as values), the last
    num_kv_shared_layers reusing earlier keys and values (no k/v projections; double-wide MLP with
    use_double_wide_mlp), per-layer input embeddings, and an optional MoE block beside the dense MLP."""
    config = fields.config
    hidden, layers, heads, kv_heads, head_dim = _attention_shape(fields)
    vocab, ffn = fields.count("vocab_size"), fields.count("intermediate_size")
    tied = fields.flag("tie_word_embeddings", True)
    bias = fields.flag("attention_bias", False)
    window = fields.optional_count("sliding_window", 512)
    types = config.get("layer_types")
    if not (isinstance(types, list) and len(types) == layers):
        types = ["sliding_attention" if (index + 1) % 6 else "full_attention" for index in range(layers)]
    types = list(types[:-1]) + ["full_attention"]  # transformers forces the last layer global
    k_eq_v = fields.flag("attention_k_eq_v", False)
    overrides: dict[int, dict] = {}
    listed = config.get("per_layer_config")
    if isinstance(listed, dict):
        overrides = {int(key): value for key, value in listed.items() if isinstance(value, dict)}
    else:
        override = {"head_dim": fields.optional_count("global_head_dim", 512)}
        if k_eq_v and config.get("num_global_key_value_heads") is not None:
            override["num_key_value_heads"] = fields.count("num_global_key_value_heads")
        overrides = {index: override for index, kind in enumerate(types) if kind == "full_attention"}
    shared = config.get("num_kv_shared_layers") or 0
    modes = _gemma4_kv_modes(types, shared if isinstance(shared, int) else 0)
    per_layer_width = config.get("hidden_size_per_layer_input", 256)
    per_layer_width = per_layer_width if isinstance(per_layer_width, int) and per_layer_width > 0 else 0
    moe_block = fields.flag("enable_moe_block", False)
    built = []
    for index, kind in enumerate(types):
        layer_head_dim = overrides.get(index, {}).get("head_dim", head_dim)
        layer_kv = overrides.get(index, {}).get("num_key_value_heads", kv_heads)
        reuse = modes[index] == "reuse"
        attention = Attention(heads, layer_kv, layer_head_dim, bias, bias, qk_norm=Norm(layer_head_dim),
                              window=window if kind == "sliding_attention" else None, kv_shared=reuse,
                              k_is_v=k_eq_v and kind == "full_attention")
        dense = MLP(ffn * (2 if fields.flag("use_double_wide_mlp", False) and reuse else 1),
                    names=("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"))
        norms = tuple((name, Norm(hidden)) for name in ("input_layernorm", "post_attention_layernorm",
                                                         "pre_feedforward_layernorm", "post_feedforward_layernorm"))
        mlp: MLP | Experts = dense
        if moe_block:
            count = fields.count("num_experts")
            mlp = _experts(fields, "num_experts", "top_k_experts", fields.count("moe_intermediate_size"),
                           shared=MLP(dense.ffn), router_params=((hidden,), (count,)),
                           names=("router.proj", "experts", "mlp"))
            norms += tuple((name, Norm(hidden)) for name in ("post_feedforward_layernorm_1",
                                                             "post_feedforward_layernorm_2",
                                                             "pre_feedforward_layernorm_2"))
        extras: tuple = ()
        if per_layer_width:
            extras = (("per_layer_input_gate", ((per_layer_width, hidden),)),
                      ("per_layer_projection", ((hidden, per_layer_width),)),
                      ("post_per_layer_input_norm", ((hidden,),)))
        built.append(Layer(attention, mlp, norms, extras))
    inputs: tuple = ()
    if per_layer_width:
        inputs = (("embed_tokens_per_layer", ((fields.optional_count("vocab_size_per_layer_input", 262_144),
                                               layers * per_layer_width),)),
                  ("per_layer_model_projection", ((layers * per_layer_width, hidden),)),
                  ("per_layer_projection_norm", ((per_layer_width,),)))
    decoder = Decoder("gemma4_text", hidden, vocab, tuple(built),
                      fields.optional_count("max_position_embeddings", 131_072), tied, ("norm", Norm(hidden)),
                      input_extras=inputs)
    return _architecture(decoder, heads, kv_heads, head_dim, {"position_embeddings": "rotary"})


# Composite (vision + text) configs: the text model inside is counted; the vision tower is not.
_COMPOSITE_TEXT = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral",
                   "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text", "gemma4": "gemma4_text"}


def text_model_config(config: dict, source: str = "config.json") -> dict:
    """The config.json of the text model a composite (vision + text) config holds, with its model_type and the tied
    head the outer config sets; any other config as it is."""
    family = config.get("model_type")
    if family not in _COMPOSITE_TEXT:
        return config
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise InputError(source, f"config.json with model_type '{family}' has no 'text_config'",
                         f"add the model's text_config from its published config.json, {_PARAMS_FIX}")
    text = dict(text)
    text.setdefault("model_type", _COMPOSITE_TEXT[family])
    if "tie_word_embeddings" not in text and "tie_word_embeddings" in config:
        text["tie_word_embeddings"] = config["tie_word_embeddings"]
    return text


def _composite(fields: _Fields) -> Architecture:
    text = text_model_config(fields.config, fields.source)
    architecture = architecture_from_hf_config(text, fields.source + " text_config")
    notes = list(architecture.extra.get("notes", ())) + [
        f"'{fields.family}' is a vision-language model: the text model is counted; its vision tower and projector "
        "are not (count them with the trace extra: pip install \"zeroplan[trace]\")"]
    return Architecture(**{**architecture.__dict__, "extra": {**architecture.extra, "notes": notes,
                                                               "composite": fields.family, "text_config": text}})


def _architecture(decoder: Decoder, heads: int, kv_heads: int, head_dim: int, extra: dict,
                  ffn: int | None = None) -> Architecture:
    """The Architecture view of a Decoder: the normalised shape fields consumers read, and its modules."""
    moe = [layer.mlp for layer in decoder.layers if isinstance(layer.mlp, Experts)]
    dense = [layer.mlp for layer in decoder.layers if isinstance(layer.mlp, MLP)]
    experts = moe[0] if moe else None
    if ffn is None:
        ffn = experts.ffn if experts is not None and len(moe) * 2 > len(decoder.layers) else dense[0].ffn
    gated = (experts.gated if experts is not None and not dense else dense[0].gated)
    return Architecture(decoder.family, len(decoder.layers), decoder.hidden, heads, kv_heads, head_dim, ffn,
                        decoder.vocab, decoder.max_seq_len, decoder.tied, gated, decoder.modules,
                        experts.count if experts else None, experts.top_k if experts else None, extra, decoder)


_BUILDERS = {**{family: _llama_style for family in _STYLES},
             "phi3": _phi3, "phi": _phi, "gpt2": _gpt2, "gpt_bigcode": _gpt_bigcode, "gpt_neox": _gpt_neox,
             "opt": _opt, "falcon": _falcon, "bloom": _bloom, "dbrx": _dbrx,
             **{family: _llama_style for family in ("deepseek_v2", "deepseek_v3")},
             "gemma4_text": _gemma4_text, **{family: _composite for family in _COMPOSITE_TEXT}}
# Every model_type read into the architecture description (the composite ones through their text model).
DESCRIBED_FAMILIES = tuple(sorted(_BUILDERS))


def is_described(config: object) -> bool:
    """Whether a config.json's model_type is one the architecture description reads."""
    return isinstance(config, dict) and config.get("model_type") in DESCRIBED_FAMILIES


def architecture_from_hf_config(config: dict, source: str = "config.json") -> Architecture:
    """The Architecture a Hugging Face config.json describes. Unknown fields are ignored."""
    if not isinstance(config, dict):
        raise InputError(source, f"must hold a JSON object, got {type(config).__name__}",
                         f"point at the model's config.json, {_PARAMS_FIX}")
    model_type = config.get("model_type")
    if model_type not in _BUILDERS:
        problem = ("has no 'model_type'" if model_type is None
                   else f"model_type '{model_type}' is not described")
        raise InputError(source, f"{problem}; described: {', '.join(DESCRIBED_FAMILIES)}",
                         "count any model transformers builds with the trace extra (pip install \"zeroplan[trace]\")"
                         f", or give the parameter count with {ref('params')} (and {ref('largest_layer_params')}) "
                         "instead")
    return _BUILDERS[model_type](_Fields(config, model_type, source))


def parameter_layout(architecture: Architecture) -> tuple[int, int, int]:
    """(per-layer, input-side, output-side) parameters; the per-layer figure is the largest layer's. Together they
    add up to architecture.params where every layer holds the same."""
    decoder = architecture.description
    per_layer = max(decoder.per_layer_params())
    input_side, output_side = decoder.input_params, decoder.output_params
    if architecture.layers == 1:  # nothing to tell apart: count the whole model as its one layer
        per_layer, input_side, output_side = per_layer + input_side + output_side, 0, 0
    return per_layer, input_side, output_side


def attention_linears(layer: Layer, decoder: Decoder) -> tuple[tuple[int, int], ...]:
    """(inner, outer) of each of a layer's attention projection weights, in module order, from the description's one
    list of GEMMs (Decoder.gemms)."""
    names = {name for name, _shapes in layer.attention.modules(decoder.hidden)}
    return tuple((k, n) for name, _m, n, k, _c in decoder.gemms(layer, 1) if name in names)


def attention_spans(decoder: Decoder) -> tuple[tuple[str, int] | None, ...] | None:
    """Each layer's attention span (Attention.span: a sliding window or a chunk; None: the whole causal prefix), first
    to last; None where every layer attends globally."""
    spans = tuple(layer.attention.span for layer in decoder.layers)
    return spans if any(span is not None for span in spans) else None


def model_spec_from_hf_config(config: dict, name: str, source: str | None = None) -> ModelSpec:
    """A ModelSpec with exact params, largest layer and shape; family details go into extra."""
    architecture = architecture_from_hf_config(config, source or name)
    decoder = architecture.description
    largest = architecture.largest_module
    per_layer, input_side, output_side = parameter_layout(architecture)
    layer_counts = decoder.per_layer_params()
    uneven = architecture.layers > 1 and len(set(layer_counts)) > 1
    extra = dict(architecture.extra)
    # the config the activations read: a composite's text model (the whole config stays under composite_config)
    text = extra.pop("text_config", None)
    if text is not None:
        extra["composite_config"] = dict(config)
    extra.update(head_dim=architecture.head_dim, gated_mlp=architecture.gated_mlp,
                 largest_layer_module=largest.name, hf_config=dict(text or config))  # for the framework convention
    moe = [layer.mlp for layer in decoder.layers if isinstance(layer.mlp, Experts)]
    experts = moe[0] if moe else None
    dense = next((layer.mlp for layer in decoder.layers if isinstance(layer.mlp, MLP)), None)
    priced = next((layer for layer in decoder.layers if layer.is_moe), decoder.layers[0])  # the step time's layer
    shape = ModelShape.of(
        layers=architecture.layers, hidden=architecture.hidden, heads=architecture.heads,
        kv_heads=architecture.kv_heads, ffn=architecture.ffn, vocab=architecture.vocab,
        experts=architecture.experts, experts_per_token=architecture.experts_per_token,
        max_seq_len=architecture.max_seq_len, family=architecture.family,
        tied_embeddings=architecture.tied_embeddings, head_dim=architecture.head_dim,
        gated_mlp=architecture.gated_mlp,
        layout=ParamLayout(per_layer, input_side, output_side, layer_counts if uneven else None),
        moe=None if experts is None else MoEShape(
            moe_layers=len(moe), expert_ffn=experts.ffn,
            dense_ffn=dense.ffn if dense is not None else None,
            shared_expert_ffn=experts.shared.ffn if experts.shared is not None else None,
            expert_params=decoder.expert_params, active_params=decoder.active_params,
            pattern=tuple(layer.is_moe for layer in decoder.layers), route_groups=experts.route_groups,
            attention_linears=attention_linears(priced, decoder)),
        gemms=decoder.tp_gemms(priced), attention_spans=attention_spans(decoder))
    return ModelSpec(params=architecture.params, name=name, largest_layer_params=largest.params, shape=shape,
                     extra=extra)
