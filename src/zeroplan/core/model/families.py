"""Exact parameter counts of decoder-only Hugging Face families, read from a config.json dict
(docs/formulas.md §2.1).

Counts follow how transformers builds each model: a tied head is the embedding's own weight, so it
counts once; biases, norms and learned positions count where the family has them. Each family is
described as the list of modules that own parameters directly, so the same list gives the total
and DeepSpeed's "largest layer" (the max over modules of parameters owned directly by one module).
Mixtral's experts follow transformers >= 5, where one module holds all experts of a layer fused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zeroplan.core.errors import InputError, ref
from zeroplan.core.model.spec import ModelShape, ModelSpec, ParamLayout
from zeroplan.core.units import shown

_LLAMA_LIKE = ("llama", "mistral", "mixtral", "qwen2", "gemma")
SUPPORTED_FAMILIES = _LLAMA_LIKE + ("phi3", "gpt2", "gpt_neox", "opt", "falcon")
# Each size field of a config.json (hidden_size, vocab_size, ...) is at most this: far past real models,
# and it keeps derived counts within MAX_COUNT.
MAX_CONFIG_FIELD = 2**31
_PARAMS_FIX = f"or give the count with {ref('params')} (and {ref('largest_layer_params')}) instead"


@dataclass(frozen=True)
class Module:
    """One module's directly owned parameters, present `copies` times (once per layer, or once)."""

    name: str
    params: int
    copies: int = 1


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

    @property
    def params(self) -> int:
        return sum(module.params * module.copies for module in self.modules)

    @property
    def largest_module(self) -> Module:
        return max(self.modules, key=lambda module: module.params)


def _linear(inputs: int, outputs: int, bias: bool) -> int:
    return inputs * outputs + (outputs if bias else 0)


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


def _lm_head(vocab: int, width: int, tied: bool) -> list[Module]:
    return [] if tied else [Module("lm_head", vocab * width)]


def _llama_like(fields: _Fields) -> Architecture:
    """llama, mistral, mixtral, qwen2, gemma: RMSNorm, rotary positions, gated (SwiGLU/GeGLU) MLP."""
    family = fields.family
    hidden, layers, heads, vocab = fields.shape()
    ffn = fields.count("intermediate_size")
    kv_heads = fields.optional_count("num_key_value_heads", heads)
    # GemmaConfig's own default head_dim is 256; the others derive it from hidden / heads.
    head_dim = fields.optional_count("head_dim", 256 if family == "gemma" else hidden // heads)
    tied = fields.flag("tie_word_embeddings", family == "gemma")
    # Biases: llama and gemma follow attention_bias (and llama mlp_bias); qwen2 always biases q/k/v.
    attention_bias = fields.flag("attention_bias", False) if family in ("llama", "gemma") else False
    qkv_bias = attention_bias or family == "qwen2"
    mlp_bias = fields.flag("mlp_bias", False) if family == "llama" else False
    query, key_value = heads * head_dim, kv_heads * head_dim
    modules = [
        Module("embed_tokens", vocab * hidden),
        Module("q_proj", _linear(hidden, query, qkv_bias), layers),
        Module("k_proj", _linear(hidden, key_value, qkv_bias), layers),
        Module("v_proj", _linear(hidden, key_value, qkv_bias), layers),
        Module("o_proj", _linear(query, hidden, attention_bias), layers),
        Module("input_layernorm", hidden, layers),
        Module("post_attention_layernorm", hidden, layers),
        Module("norm", hidden),
    ]
    experts = experts_per_token = None
    if family == "mixtral":
        experts, experts_per_token = fields.count("num_local_experts"), fields.count("num_experts_per_tok")
        if experts_per_token > experts:
            raise InputError(fields.source, f"'num_experts_per_tok' is {experts_per_token}, more than the {experts} "
                             "experts ('num_local_experts')", f"fix the config.json, {_PARAMS_FIX}")
        modules += [Module("router", hidden * experts, layers),
                    Module("experts", experts * 3 * hidden * ffn, layers)]  # gate_up + down, fused
    else:
        modules += [Module("gate_proj", _linear(hidden, ffn, mlp_bias), layers),
                    Module("up_proj", _linear(hidden, ffn, mlp_bias), layers),
                    Module("down_proj", _linear(ffn, hidden, mlp_bias), layers)]
    return Architecture(
        family, layers, hidden, heads, kv_heads, head_dim, ffn, vocab,
        fields.optional_count("max_position_embeddings", 2048), tied, True,
        tuple(modules + _lm_head(vocab, hidden, tied)), experts, experts_per_token,
        {"attention_bias": qkv_bias, "position_embeddings": "rotary"})


def _phi3(fields: _Fields) -> Architecture:
    """Phi-3: llama-like, but q/k/v fused into qkv_proj and gate/up fused into gate_up_proj."""
    hidden, layers, heads, vocab = fields.shape()
    ffn = fields.count("intermediate_size")
    kv_heads = fields.optional_count("num_key_value_heads", heads)
    head_dim = fields.optional_count("head_dim", hidden // heads)
    tied = fields.flag("tie_word_embeddings", False)
    modules = [
        Module("embed_tokens", vocab * hidden),
        Module("qkv_proj", hidden * (heads + 2 * kv_heads) * head_dim, layers),
        Module("o_proj", heads * head_dim * hidden, layers),
        Module("gate_up_proj", hidden * 2 * ffn, layers),
        Module("down_proj", ffn * hidden, layers),
        Module("input_layernorm", hidden, layers),
        Module("post_attention_layernorm", hidden, layers),
        Module("norm", hidden),
    ]
    return Architecture(
        "phi3", layers, hidden, heads, kv_heads, head_dim, ffn, vocab,
        fields.optional_count("max_position_embeddings", 4096), tied, True,
        tuple(modules + _lm_head(vocab, hidden, tied)), extra={"position_embeddings": "rotary"})


def _gpt2(fields: _Fields) -> Architecture:
    """GPT-2: learned positions, Conv1D projections with biases, LayerNorm, tied head by default."""
    hidden, layers = fields.count("n_embd"), fields.count("n_layer")
    heads, vocab, positions = fields.count("n_head"), fields.count("vocab_size"), fields.count("n_positions")
    ffn = fields.optional_count("n_inner", 4 * hidden)
    tied = fields.flag("tie_word_embeddings", True)
    modules = [
        Module("wte", vocab * hidden),
        Module("wpe", positions * hidden),
        Module("ln_1", 2 * hidden, layers),
        Module("attn.c_attn", _linear(hidden, 3 * hidden, True), layers),
        Module("attn.c_proj", _linear(hidden, hidden, True), layers),
        Module("ln_2", 2 * hidden, layers),
        Module("mlp.c_fc", _linear(hidden, ffn, True), layers),
        Module("mlp.c_proj", _linear(ffn, hidden, True), layers),
        Module("ln_f", 2 * hidden),
    ]
    return Architecture(
        "gpt2", layers, hidden, heads, heads, hidden // heads, ffn, vocab, positions, tied, False,
        tuple(modules + _lm_head(vocab, hidden, tied)), extra={"position_embeddings": "learned"})


def _gpt_neox(fields: _Fields) -> Architecture:
    """GPT-NeoX / Pythia: fused biased qkv, LayerNorm, parallel residual, untied embed_out."""
    hidden, layers, heads, vocab = fields.shape()
    ffn = fields.count("intermediate_size")
    bias = fields.flag("attention_bias", True)
    tied = fields.flag("tie_word_embeddings", False)
    modules = [
        Module("embed_in", vocab * hidden),
        Module("input_layernorm", 2 * hidden, layers),
        Module("post_attention_layernorm", 2 * hidden, layers),
        Module("attention.query_key_value", _linear(hidden, 3 * hidden, bias), layers),
        Module("attention.dense", _linear(hidden, hidden, bias), layers),
        Module("mlp.dense_h_to_4h", _linear(hidden, ffn, True), layers),
        Module("mlp.dense_4h_to_h", _linear(ffn, hidden, True), layers),
        Module("final_layer_norm", 2 * hidden),
    ]
    return Architecture(
        "gpt_neox", layers, hidden, heads, heads, hidden // heads, ffn, vocab,
        fields.optional_count("max_position_embeddings", 2048), tied, False,
        tuple(modules + _lm_head(vocab, hidden, tied)),
        extra={"position_embeddings": "rotary",
               "parallel_attention": fields.flag("use_parallel_residual", True)})


def _opt(fields: _Fields) -> Architecture:
    """OPT: learned positions (2 extra rows), biases, LayerNorm, optional project_in/out, tied head."""
    hidden, layers, heads, vocab = fields.shape()
    ffn = fields.count("ffn_dim")
    positions = fields.optional_count("max_position_embeddings", 2048)
    embed_width = fields.optional_count("word_embed_proj_dim", hidden)
    bias = fields.flag("enable_bias", True)
    norm = 2 * hidden if fields.flag("layer_norm_elementwise_affine", True) else 0
    tied = fields.flag("tie_word_embeddings", True)
    modules = [
        Module("embed_tokens", vocab * embed_width),
        Module("embed_positions", (positions + 2) * hidden),  # OPT offsets position ids by 2
        *(Module(name, _linear(hidden, hidden, bias), layers)
          for name in ("q_proj", "k_proj", "v_proj", "out_proj")),
        Module("self_attn_layer_norm", norm, layers),
        Module("fc1", _linear(hidden, ffn, bias), layers),
        Module("fc2", _linear(ffn, hidden, bias), layers),
        Module("layer.final_layer_norm", norm, layers),
    ]
    if embed_width != hidden:  # e.g. opt-350m: embeddings are narrower than the decoder
        modules += [Module("project_in", embed_width * hidden),
                    Module("project_out", hidden * embed_width)]
    if fields.flag("do_layer_norm_before", True) and not fields.flag("_remove_final_layer_norm", False):
        modules.append(Module("decoder.final_layer_norm", norm))
    modules = [module for module in modules if module.params]
    return Architecture(
        "opt", layers, hidden, heads, heads, hidden // heads, ffn, vocab, positions, tied, False,
        tuple(modules + _lm_head(vocab, embed_width, tied)),
        extra={"position_embeddings": "learned", "word_embed_proj_dim": embed_width})


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
        qkv_width = (heads + 2 * kv_heads) * head_dim
    elif multi_query:  # one shared key and value head
        kv_heads, qkv_width = 1, hidden + 2 * head_dim
    else:
        kv_heads, qkv_width = heads, 3 * hidden
    norms_in_parallel = fields.optional_count("num_ln_in_parallel_attn", 2 if new_architecture else 1)
    norms_per_layer = 2 if (not parallel or norms_in_parallel == 2) else 1
    modules = [
        Module("word_embeddings", vocab * hidden),
        Module("self_attention.query_key_value", _linear(hidden, qkv_width, bias), layers),
        Module("self_attention.dense", _linear(hidden, hidden, bias), layers),
        Module("mlp.dense_h_to_4h", _linear(hidden, ffn, bias), layers),
        Module("mlp.dense_4h_to_h", _linear(ffn, hidden, bias), layers),
        Module("layer_norms", 2 * hidden, layers * norms_per_layer),
        Module("ln_f", 2 * hidden),
    ]
    return Architecture(
        "falcon", layers, hidden, heads, kv_heads, head_dim, ffn, vocab,
        fields.optional_count("max_position_embeddings", 2048), tied, False,
        tuple(modules + _lm_head(vocab, hidden, tied)),
        extra={"position_embeddings": "alibi" if fields.flag("alibi", False) else "rotary",
               "parallel_attention": parallel, "new_decoder_architecture": new_architecture})


_BUILDERS = {**{family: _llama_like for family in _LLAMA_LIKE},
             "phi3": _phi3, "gpt2": _gpt2, "gpt_neox": _gpt_neox, "opt": _opt, "falcon": _falcon}


def architecture_from_hf_config(config: dict, source: str = "config.json") -> Architecture:
    """The Architecture a Hugging Face config.json describes. Unknown fields are ignored."""
    if not isinstance(config, dict):
        raise InputError(source, f"must hold a JSON object, got {type(config).__name__}",
                         f"point at the model's config.json, {_PARAMS_FIX}")
    model_type = config.get("model_type")
    if model_type not in _BUILDERS:
        problem = ("has no 'model_type'" if model_type is None
                   else f"model_type '{model_type}' is not supported")
        raise InputError(source, f"{problem}; supported: {', '.join(SUPPORTED_FAMILIES)}",
                         f"give the parameter count with {ref('params')} (and {ref('largest_layer_params')}) instead")
    return _BUILDERS[model_type](_Fields(config, model_type, source))


_OUTPUT_SIDE = frozenset({"lm_head", "embed_out", "norm", "ln_f", "final_layer_norm", "decoder.final_layer_norm",
                          "project_out"})


def parameter_layout(architecture: Architecture) -> tuple[int, int, int]:
    """(per-layer, input-side, output-side) parameters; together they add up to architecture.params."""
    layers = architecture.layers
    per_layer = input_side = output_side = 0
    for module in architecture.modules:
        if layers > 1 and module.copies >= layers and module.copies % layers == 0:
            per_layer += module.params * (module.copies // layers)
        elif module.name in _OUTPUT_SIDE:
            output_side += module.params * module.copies
        else:
            input_side += module.params * module.copies
    if layers == 1:  # nothing to tell apart: count the whole model as its one layer
        per_layer, input_side, output_side = per_layer + input_side + output_side, 0, 0
    return per_layer, input_side, output_side


def model_spec_from_hf_config(config: dict, name: str, source: str | None = None) -> ModelSpec:
    """A ModelSpec with exact params, largest layer and shape; family details go into extra."""
    architecture = architecture_from_hf_config(config, source or name)
    largest = architecture.largest_module
    per_layer, input_side, output_side = parameter_layout(architecture)
    extra = dict(architecture.extra)
    extra.update(head_dim=architecture.head_dim, gated_mlp=architecture.gated_mlp,
                 largest_layer_module=largest.name, hf_config=dict(config))  # for the framework convention
    shape = ModelShape.of(
        layers=architecture.layers, hidden=architecture.hidden, heads=architecture.heads,
        kv_heads=architecture.kv_heads, ffn=architecture.ffn, vocab=architecture.vocab,
        experts=architecture.experts, experts_per_token=architecture.experts_per_token,
        max_seq_len=architecture.max_seq_len, family=architecture.family,
        tied_embeddings=architecture.tied_embeddings, head_dim=architecture.head_dim,
        gated_mlp=architecture.gated_mlp, layout=ParamLayout(per_layer, input_side, output_side))
    return ModelSpec(params=architecture.params, name=name, largest_layer_params=largest.params, shape=shape,
                     extra=extra)
