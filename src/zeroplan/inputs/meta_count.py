"""Count any model transformers can build, exactly, from the model itself built on the meta device (no memory, no
weights): for a config.json whose model_type core.model.families does not describe. Needs the `trace` extra
(torch and transformers, imported here only when called).

What is counted, as transformers builds it: every parameter once (tied weights once), DeepSpeed's largest layer
(the most parameters one module owns directly), and the layout for pipeline stages: the decoder layers are found by
structure (the longest nn.ModuleList of same-class blocks: model.layers, transformer.h, backbone.layers, ...), the
parameters before them are the input side and those after them the output side. State-space and hybrid models
(mamba, jamba, falcon_h1, ...) count exactly the same way. What is not modelled is said in the spec's notes:
activations fall back to Megatron's formula (as if every layer were attention + MLP), or to `zeroplan trace`.
"""

from __future__ import annotations

import contextlib
import warnings

from zeroplan.core.errors import InputError, ref
from zeroplan.core.model.spec import ModelShape, ModelSpec, MoEShape, ParamLayout

EXTRA_FIX = f'install the trace extra (pip install "zeroplan[trace]"), or give the count with {ref("params")}'
_DROPPED_KEYS = ("architectures", "transformers_version", "torch_dtype", "dtype", "quantization_config",
                 "auto_map", "_name_or_path")
_FIRST = {"hidden": ("hidden_size", "n_embd", "d_model", "dim", "model_dim"),
          "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
          "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"),
          "ffn": ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size"),
          "vocab": ("vocab_size", "padded_vocab_size"),
          "positions": ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"),
          "experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
          "top_k": ("num_experts_per_tok", "moe_topk", "moe_k", "top_k", "moe_top_k")}


def _import():  # noqa: ANN202 - optional dependency
    try:
        import torch
        import transformers
    except ImportError as error:
        raise InputError("model", f"this model_type is counted from transformers' own model, and importing it "
                         f"failed ({_line(error)})", EXTRA_FIX) from None
    return torch, transformers


def _line(error: BaseException) -> str:
    """An exception's message on one line, cut short: errors are one line on stderr."""
    text = " ".join(str(error).split())
    return text if len(text) <= 200 else text[:197] + "..."


def build_on_meta(config: dict, source: str):  # noqa: ANN201 - a torch module
    """transformers' model for `config` on the meta device: its causal LM, else (vision-language) its
    image-text-to-text model, else the bare model."""
    torch, transformers = _import()
    fields = {key: value for key, value in config.items() if key not in _DROPPED_KEYS and not key.startswith("_")}
    model_type = fields.pop("model_type", None)
    if not isinstance(model_type, str):
        raise InputError(source, "has no 'model_type'", "point at the model's config.json")
    try:
        with _quiet(transformers):
            hf_config = transformers.AutoConfig.for_model(model_type, **fields)
    except (ValueError, KeyError) as error:
        raise InputError(source, f"transformers {transformers.__version__} does not know model_type '{model_type}' "
                         f"({_line(error)})", f"upgrade transformers, or give the count with {ref('params')}") from None
    with _quiet(transformers):
        return _build(torch, transformers, hf_config, model_type, source)


@contextlib.contextmanager
def _quiet(transformers):  # noqa: ANN001, ANN202 - transformers' notices are not the user's output
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def _build(torch, transformers, hf_config, model_type: str, source: str):  # noqa: ANN001, ANN202
    errors = []
    for auto in ("AutoModelForCausalLM", "AutoModelForImageTextToText", "AutoModel"):
        factory = getattr(transformers, auto, None)
        if factory is None:
            continue
        try:
            with torch.device("meta"):
                return factory.from_config(hf_config)
        except (ValueError, KeyError) as error:  # this auto class does not map the config
            errors.append(f"{auto}: {_line(error)}")
        except Exception as error:  # noqa: BLE001 - the model's own __init__ failed on this config
            raise InputError(source, f"transformers could not build '{model_type}' from this config "
                             f"({type(error).__name__}: {_line(error)})",
                             f"fix the config.json, or give {ref('params')}") from None
    raise InputError(source, f"transformers builds no model for '{model_type}' ({'; '.join(errors)[:300]})",
                     f"give the count with {ref('params')}")


def _decoder_layers(model) -> tuple[str, list]:  # noqa: ANN001
    """(prefix, blocks) of the decoder layers: the longest nn.ModuleList beside the token embedding (under the
    module that holds it: model.layers, transformer.h, backbone.layers, model.language_model.layers), else the
    longest anywhere. A vision tower's blocks sit elsewhere, so they are not taken for the decoder's."""
    torch, _ = _import()
    embeddings = model.get_input_embeddings()
    home = next((name.rpartition(".")[0] for name, module in model.named_modules() if module is embeddings), "")
    lists = [(name, list(module)) for name, module in model.named_modules()
             if isinstance(module, torch.nn.ModuleList) and len(module) > 0]
    beside = [(name, blocks) for name, blocks in lists if name.rpartition(".")[0] == home]
    return max(beside or lists, key=lambda item: len(item[1]), default=("", []))


def _first(config: dict, key: str) -> int | None:
    for name in _FIRST[key]:
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def model_spec_from_meta(config: dict, name: str, source: str) -> ModelSpec:
    """A ModelSpec counted from transformers' model built on the meta device, for any model_type it builds."""
    torch, transformers = _import()
    model = build_on_meta(config, source)
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    shape_config = {**config, **(text or {})}
    named = list(model.named_parameters())  # tied weights once (remove_duplicate)
    params = sum(parameter.numel() for _n, parameter in named)
    largest_name, largest = max(((module_name, sum(p.numel() for p in module.parameters(recurse=False)))
                                 for module_name, module in model.named_modules()), key=lambda item: item[1])
    prefix, blocks = _decoder_layers(model)
    per_layer = [sum(p.numel() for p in block.parameters()) for block in blocks]
    layers = len(blocks)
    if layers:
        layer_names = {f"{prefix}.{index}." for index in range(layers)}
        positions = [index for index, (n, _p) in enumerate(named)
                     if any(n.startswith(layer) for layer in layer_names)]
        first, last = min(positions), max(positions)
        input_params = sum(p.numel() for _n, p in named[:first])
        output_params = sum(p.numel() for _n, p in named[last + 1:])
        # whatever sits among the layers but outside them (rare) goes to the input side
        input_params += params - input_params - output_params - sum(per_layer)
    else:
        layers, per_layer, input_params, output_params = 1, [params], 0, 0
    hidden = _first(shape_config, "hidden") or (model.get_input_embeddings().embedding_dim
                                                if model.get_input_embeddings() is not None else 1)
    heads = _first(shape_config, "heads") or 1
    head_dim = shape_config.get("head_dim") if isinstance(shape_config.get("head_dim"), int) else None
    if head_dim is None and hidden % heads:
        head_dim = hidden // heads or 1
    kv_heads = _first(shape_config, "kv_heads")
    if kv_heads is not None and (kv_heads > heads or heads % kv_heads):
        kv_heads = None
    embeddings = model.get_input_embeddings()
    vocab = _first(shape_config, "vocab") or (embeddings.num_embeddings if embeddings is not None else 1)
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    tied = (output is not None and embeddings is not None and output.weight is embeddings.weight)
    experts, top_k = _first(shape_config, "experts"), _first(shape_config, "top_k")
    moe = None
    notes = [f"counted from transformers {transformers.__version__}'s {type(model).__name__} built on the meta "
             f"device ({layers} layers found by structure under '{prefix or '(none)'}'; tied weights once)",
             f"transformers' {shape_config.get('model_type')} is not described by zeroplan: activations use "
             "Megatron's formula as if every layer were attention + MLP (state-space, recurrent or vision parts "
             "not modelled); measure them with zeroplan trace"]
    if experts and top_k and top_k <= experts:
        routed = sum(p.numel() for n, p in named if ".experts." in n or n.endswith(".experts"))
        routed = sum(p.numel() for n, p in named if "experts" in n and "shared" not in n) if not routed else routed
        if routed:
            moe_layers = sum(1 for block in blocks if any("experts" in n for n, _p in block.named_parameters()))
            moe = MoEShape(moe_layers=moe_layers, expert_ffn=_first(shape_config, "ffn") or 1, expert_params=routed,
                           active_params=params - routed + routed * top_k // experts)
            notes.append(f"routed experts found by name ('experts'): {routed} parameters, {top_k} of {experts} "
                         "per token")
    shape = ModelShape.of(
        layers=layers, hidden=hidden, heads=heads, vocab=vocab, kv_heads=kv_heads, ffn=_first(shape_config, "ffn"),
        head_dim=head_dim, experts=experts if moe else None, experts_per_token=top_k if moe else None,
        max_seq_len=_first(shape_config, "positions"), family=str(shape_config.get("model_type")),
        tied_embeddings=tied, moe=moe,
        layout=ParamLayout(max(per_layer), input_params, output_params,
                           tuple(per_layer) if len(set(per_layer)) > 1 else None))
    extra = {"counted_by": "meta-device", "largest_layer_module": largest_name, "notes": notes,
             "hf_config": dict(config), "parameter_shapes": [(n, tuple(p.shape)) for n, p in named]}
    return ModelSpec(params=params, name=name, largest_layer_params=largest or None, shape=shape, extra=extra)
