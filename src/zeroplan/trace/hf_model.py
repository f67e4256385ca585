"""The Hugging Face model a trace runs: built on the meta device from the config.json dict, with selective
recompute's attention and transformers' masking made to behave as it does for real tensors (imports torch).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from typing import TYPE_CHECKING, Any

import torch

from zeroplan.core.errors import InputError
from zeroplan.core.model.families import DESCRIBED_FAMILIES, text_model_config

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# Families whose transformers code runs under FakeTensorMode: every model_type the architecture description reads
# (a composite vision + text config traces its text model); benchmarks/trace_accuracy.py and tests/test_trace*.py
# trace them.
TRACEABLE_FAMILIES = DESCRIBED_FAMILIES
_DROPPED_KEYS = ("architectures", "transformers_version", "torch_dtype", "dtype", "quantization_config",
                 "auto_map", "_name_or_path")


def layer_count(config: dict) -> int:
    config = text_model_config(config, "--model")
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if key in config:
            return int(config[key])
    raise InputError("--model", "the config has no layer count (num_hidden_layers / n_layer)",
                     "give a complete config.json")


def hf_config(config: dict, num_layers: int | None, attn_implementation: str):
    """transformers' config of the causal LM a trace builds: a composite (vision + text) config's text model."""
    config = text_model_config(config, "--model")
    fields = {k: v for k, v in config.items() if k not in _DROPPED_KEYS}
    model_type = fields.pop("model_type", None)
    if model_type not in TRACEABLE_FAMILIES:
        raise InputError("--model", f"family '{model_type}' cannot be traced (traced families: "
                         f"{', '.join(TRACEABLE_FAMILIES)})", "use zeroplan estimate for this model")
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(model_type, **fields)
    if num_layers is not None:
        cfg.num_hidden_layers = num_layers  # attribute_map covers n_layer (GPT-2) and the like
    cfg.use_cache = False
    return cfg


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The ModuleList of transformer blocks (model.model.layers, transformer.h, ...): the longest one."""
    best = None
    for _name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > 0 and (best is None or len(module) > len(best)):
            best = module
    if best is None:
        raise InputError("--model", "no decoder layer list found in the model", "use zeroplan estimate for this model")
    return best


_REGISTERED: set[str] = set()


def _checkpointed_attention(base: str) -> str:
    """Register '<base>_sac' with transformers' AttentionInterface: the core attention (QKᵀ, softmax, ·V or
    the fused sdpa kernel) runs under torch's selective activation checkpointing with every op recomputed
    (Megatron's selective recompute); projections, norms, rotary embedding and MLP keep their activations."""
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.models.llama.modeling_llama import eager_attention_forward as llama_eager

    name = f"{base}_sac"
    if name in _REGISTERED:
        return name

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.PREFER_RECOMPUTE

    def core(module, query, key, value, attention_mask, **kwargs):
        function: Any
        if base == "sdpa":
            function = sdpa_attention_forward
        else:  # the family's own eager function (same signature in every modeling file)
            function = getattr(sys.modules[type(module).__module__], "eager_attention_forward", llama_eager)

        def run(q, k, v, m):
            return function(module, q, k, v, m, **kwargs)[0]

        out = checkpoint(run, query, key, value, attention_mask, use_reentrant=False,
                         context_fn=lambda: create_selective_checkpoint_contexts(policy))
        return out, None

    AttentionInterface.register(name, core)
    _REGISTERED.add(name)
    return name


# Families whose attention calls torch's scaled_dot_product_attention itself rather than through transformers'
# AttentionInterface (selective recompute checkpoints that call instead).
_DIRECT_SDPA_FAMILIES = ("falcon",)


def _checkpoint_sdpa_calls(model: torch.nn.Module) -> None:
    """Selective recompute for a family whose attention modules call F.scaled_dot_product_attention directly:
    while such a module runs, that call runs under torch's selective activation checkpointing with every op
    recomputed (the kernel's inputs and output are what the layer keeps, as for '<base>_sac')."""
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.PREFER_RECOMPUTE

    functional = torch.nn.functional
    for module in model.modules():
        if not type(module).__name__.endswith("Attention"):
            continue
        forward = module.forward

        def checkpointed_forward(*args, _forward=forward, **kwargs):
            original = functional.scaled_dot_product_attention

            def sdpa(query, key, value, *rest, **options):
                return checkpoint(lambda q, k, v: original(q, k, v, *rest, **options), query, key, value,
                                  use_reentrant=False, context_fn=lambda: create_selective_checkpoint_contexts(policy))

            functional.scaled_dot_product_attention = sdpa
            try:
                return _forward(*args, **kwargs)
            finally:
                functional.scaled_dot_product_attention = original

        module.forward = checkpointed_forward


def build_model(config: dict, num_layers: int | None, attn_implementation: str, dtype: torch.dtype,
                recompute: str) -> PreTrainedModel:
    """The causal LM on the meta device with num_layers decoder layers (None: all), in train mode. recompute
    "selective" is an attention implementation, chosen here; "full" wraps the layers when the model is sharded
    (zeroplan.distributed.sharding)."""
    from transformers import AutoModelForCausalLM

    direct = config.get("model_type") in _DIRECT_SDPA_FAMILIES
    if direct and recompute == "selective" and attn_implementation != "sdpa":
        raise InputError("--recompute", f"selective recompute of {config.get('model_type')}'s eager attention is not "
                         "traced (its attention code is inline)", "use --attention sdpa")
    selective_interface = recompute == "selective" and not direct
    implementation = _checkpointed_attention(attn_implementation) if selective_interface else attn_implementation
    cfg = hf_config(config, num_layers, implementation)
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation=implementation, dtype=dtype)
    except ValueError as error:
        if "scaled_dot_product_attention" not in str(error):
            raise
        raise InputError("--attention", f"transformers' {config.get('model_type')} code has no sdpa attention "
                         "(gpt-oss's attention sinks, Gemma 2's logit soft-capping, BLOOM's alibi run eager only)",
                         "use --attention eager") from None
    model.config.use_cache = False
    model.train()
    if direct and recompute == "selective":
        _checkpoint_sdpa_calls(model)
    return model


@contextlib.contextmanager
def real_masking():
    """Make transformers build attention masks as it does for real tensors.

    transformers.utils.is_tracing() counts any FakeTensor as tracing, so under FakeTensorMode
    masking_utils refuses to skip the causal mask and assumes packed sequences: sdpa would get a
    (b,1,s,s) mask, is_causal=False and, for GQA, repeat_kv'd K/V, none of which happens on a GPU
    (+9.4% activations on Llama-2-70B). Training without a KV cache has offsets 0 and positions 0..s-1."""
    from torch._subclasses.fake_tensor import FakeTensor
    from transformers import masking_utils

    original_ignore = masking_utils._ignore_causal_mask_sdpa
    original_packed = masking_utils.find_packed_sequence_indices

    @functools.wraps(original_ignore)
    def ignore(padding_mask, q_length, kv_length, q_offset, kv_offset, *args, **kwargs):
        q_offset = 0 if isinstance(q_offset, FakeTensor) else q_offset
        kv_offset = 0 if isinstance(kv_offset, FakeTensor) else kv_offset
        return original_ignore(padding_mask, q_length, kv_length, q_offset, kv_offset, *args, **kwargs)

    @functools.wraps(original_packed)
    def packed(position_ids, *args, **kwargs):
        if isinstance(position_ids, FakeTensor):
            return None
        return original_packed(position_ids, *args, **kwargs)

    masking_utils._ignore_causal_mask_sdpa = ignore
    masking_utils.find_packed_sequence_indices = packed
    try:
        yield
    finally:
        masking_utils._ignore_causal_mask_sdpa = original_ignore
        masking_utils.find_packed_sequence_indices = original_packed


@contextlib.contextmanager
def grouped_mm_any_dtype():
    """Let MoE experts run in fp32 under fake tensors as they do on a GPU.

    transformers' default experts implementation ("grouped_mm") calls torch's grouped_mm, whose fake (meta) kernel
    takes bf16 only; on CUDA other dtypes run through torch's fallback (a loop of mm into the same output). Under
    fake tensors non-bf16 experts take transformers' own fallback op instead: the same output, and the same
    tensors saved for backward (the input and the weights)."""
    from transformers.integrations import moe

    original = moe._can_use_grouped_mm

    @functools.wraps(original)
    def bf16_only(input, weight, offs):
        return weight.dtype == torch.bfloat16 and original(input, weight, offs)

    moe._can_use_grouped_mm = bf16_only
    try:
        yield
    finally:
        moe._can_use_grouped_mm = original
