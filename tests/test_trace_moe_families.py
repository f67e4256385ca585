"""OLMoE, Qwen2-MoE and DeepSeek-V2/V3 (latent attention, dense then sparse layers, shared experts) in transformers'
activation model (core.memory.activations_moe_families) against `zeroplan trace`: one more decoder layer adds exactly
what core counts for it, dense and sparse, 16 bits and fp32, sdpa and eager, recompute none and selective; the whole
model equals the trace at its peak where that moment is derived, and is within 3% elsewhere."""

from __future__ import annotations

import json

import pytest

from zeroplan.core.memory.activations import ActivationConfig, applied_implementation
from zeroplan.core.model.families import model_spec_from_hf_config

BASE = {"hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 6, "vocab_size": 128, "max_position_embeddings": 512}
_LATENT = {"num_key_value_heads": 4, "moe_intermediate_size": 48, "n_routed_experts": 4, "num_experts_per_tok": 2,
           "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 32, "q_lora_rank": 48,
           "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, "n_group": 2, "topk_group": 1}
CONFIGS = {
    # OLMoE-1B-7B's layout: qk-norm over all heads, every layer sparse
    "olmoe": {**BASE, "model_type": "olmoe", "intermediate_size": 48, "num_experts": 4, "num_experts_per_tok": 2,
              "eos_token_id": 1, "pad_token_id": 0},
    # Qwen1.5-MoE's layout: a shared expert behind a sigmoid gate
    "qwen2_moe": {**BASE, "model_type": "qwen2_moe", "moe_intermediate_size": 48, "shared_expert_intermediate_size": 96,
                  "num_experts": 4, "num_experts_per_tok": 2},
    # DeepSeek-V2's group-limited greedy router, complex rotary; V3's noaux_tc router, normalised top-k
    "deepseek_v2": {**BASE, "model_type": "deepseek_v2", **_LATENT, "topk_method": "group_limited_greedy"},
    "deepseek_v3": {**BASE, "model_type": "deepseek_v3", **_LATENT},
    # Llama 4 Maverick's interleaving: MoE every second layer (a shared expert, top-1), every fourth layer without
    # rotary (nor its qk L2 norm, but the query's temperature scales)
    "llama4_text": {**BASE, "model_type": "llama4_text", "head_dim": 16, "intermediate_size_mlp": 160,
                    "num_local_experts": 4, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2},
}
_ROPE = [1] * 6  # Llama 4's layers all with rotary (and L2 qk-norm); [0] * 6: none
pytestmark = pytest.mark.slow  # traces: `pytest -m "not slow"` skips them


def _model(config: dict):
    return model_spec_from_hf_config(config, "tiny")


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_derived_with_eager_and_sdpa(family):
    for flash in (True, False):
        assert applied_implementation(_model(CONFIGS[family]), ActivationConfig(
            seq_len=64, flash_attention=flash, implementation="transformers")) == ("transformers", "")


@pytest.mark.parametrize("family,change,said", [
    ("olmoe", {"clip_qkv": 8.0}, "clip_qkv"),
    ("qwen2_moe", {"output_router_logits": True}, "output_router_logits"),
    ("deepseek_v3", {"experts_implementation": "eager"}, "experts_implementation 'eager'"),
    ("deepseek_v2", {"qk_nope_head_dim": 8, "v_head_dim": 16}, "queries as wide as values"),
    ("llama4_text", {"attention_chunk_size": 32}, "chunked attention (32 tokens) shorter than the sequence (64)"),
])
def test_variants_not_derived_fall_back_and_say_so(family, change, said):
    implementation, note = applied_implementation(_model({**CONFIGS[family], **change}), ActivationConfig(
        seq_len=64, flash_attention=True, implementation="transformers"))
    assert implementation == "megatron" and said in note and "Megatron" in note


def _slope(config: dict, seq: int, precision: str, attention: str, recompute: str, sparse: bool) -> tuple[int, int]:
    """(the trace's activations added by a fourth layer at the end of forward, core's bytes for that layer)."""
    from zeroplan.core.memory.activations import _moe_family_layer_bytes, _shape
    from zeroplan.core.memory.activations_moe_families import last_layer
    from zeroplan.trace.engine import TraceSettings, trace_once

    settings = TraceSettings(world_size=4, stage=0, seq_len=seq, precision=precision, attention=attention,
                             recompute=recompute)
    three, four = trace_once(config, settings, 3), trace_once(config, settings, 4)
    traced = four["forward_end"]["activations"] - three["forward_end"]["activations"]
    activations = ActivationConfig(seq_len=seq, flash_attention=attention == "sdpa", implementation="transformers",
                                   dtype_bytes=2 if precision == "mixed" else 4, recompute=recompute)
    shape = _shape(_model(config))
    assert shape.moe_layout is not None
    return traced, _moe_family_layer_bytes(shape, activations, last_layer(shape.moe_layout, sparse))


@pytest.mark.parametrize("family,precision,attention,recompute", [
    ("olmoe", "mixed", "sdpa", "none"), ("olmoe", "fp32", "sdpa", "none"), ("olmoe", "mixed", "eager", "selective"),
    ("qwen2_moe", "mixed", "sdpa", "none"), ("qwen2_moe", "fp32", "eager", "none"),
    ("qwen2_moe", "mixed", "sdpa", "selective"),
    ("deepseek_v2", "mixed", "sdpa", "none"), ("deepseek_v2", "fp32", "sdpa", "none"),
    ("deepseek_v3", "mixed", "eager", "none"), ("deepseek_v3", "fp32", "eager", "selective"),
    ("deepseek_v3", "mixed", "sdpa", "selective"), ("deepseek_v3", "fp32", "sdpa", "none"),
    ("llama4_text", "mixed", "sdpa", "none"), ("llama4_text", "fp32", "eager", "none"),
    ("llama4_text", "mixed", "eager", "none"),  # its eager softmax in the compute dtype
    ("llama4_text", "mixed", "eager", "selective"), ("llama4_text-no-rope", "mixed", "sdpa", "none"),
])
def test_one_more_sparse_layer_adds_what_core_counts(family, precision, attention, recompute):
    pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")
    config = {**CONFIGS[family], "first_k_dense_replace": 0} if family.startswith("deepseek") else None
    if family.startswith("llama4_text"):
        config = {**CONFIGS["llama4_text"], "interleave_moe_layer_step": 1,
                  "no_rope_layers": [0] * 6 if family.endswith("no-rope") else _ROPE}
    config = config or CONFIGS[family]
    traced, counted = _slope(config, 64, precision, attention, recompute, sparse=True)
    assert counted == traced


@pytest.mark.parametrize("family,change", [("deepseek_v3", {"first_k_dense_replace": 5}),
                                           ("llama4_text", {"moe_layers": [5], "no_rope_layers": _ROPE}),
                                           ("qwen2_moe", {"mlp_only_layers": [0, 1, 2, 3, 4]})])
def test_one_more_dense_layer_adds_what_core_counts(family, change):
    # five dense layers then a sparse one: layers 3 and 4 are dense (core's dense layer, read with the sparse one's
    # layout)
    pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")
    config = {**CONFIGS[family], **change}
    for precision in ("mixed", "fp32"):
        traced, counted = _slope(config, 64, precision, "sdpa", "none", sparse=False)
        assert counted == traced


_results: dict = {}


def _traced(tmp_path_factory, family, stage, precision, recompute, gpus, seq):
    from zeroplan.trace import compare

    key = (family, stage, precision, recompute, gpus, seq)
    if key not in _results:
        path = tmp_path_factory.mktemp("moe") / f"{family}.json"
        path.write_text(json.dumps(CONFIGS[family]))
        _results[key] = compare.run(compare.TraceRequest(model=str(path), gpus=gpus, stage=stage, seq_len=seq,
                                                         precision=precision, recompute=recompute, layers_to_trace=0))
    return _results[key]


@pytest.mark.parametrize("family,stage,precision,recompute,gpus,seq", [
    ("olmoe", 0, "mixed", "none", 4, 256), ("olmoe", 3, "mixed", "full", 8, 256),
    ("olmoe", 2, "fp32", "selective", 8, 128), ("olmoe", 3, "mixed", "none", 64, 128),
    ("qwen2_moe", 0, "mixed", "none", 4, 256), ("qwen2_moe", 2, "fp32", "selective", 8, 128),
    ("deepseek_v2", 0, "mixed", "none", 4, 256),  # inside the last layer's softmax backward (CPU's math kernel)
    ("deepseek_v3", 0, "mixed", "none", 4, 256),
])
def test_estimate_equals_the_trace_at_its_peak_moment(tmp_path_factory, family, stage, precision, recompute, gpus,
                                                      seq):
    pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")
    result = _traced(tmp_path_factory, family, stage, precision, recompute, gpus, seq)
    assert result.activation_model == "transformers"
    assert result.estimate["total"] == result.trace["peak_bytes"], (result.trace["where"], result.trace["categories"])


@pytest.mark.parametrize("family,stage,precision,recompute,gpus,seq", [
    ("qwen2_moe", 3, "mixed", "full", 8, 256),  # the shared expert's gate backward, not derived: -1.0%
    ("qwen2_moe", 3, "mixed", "none", 64, 128),  # -0.2%
    ("deepseek_v3", 3, "mixed", "full", 8, 256),  # -1.5%, +0.3% at stage 0
    ("deepseek_v2", 2, "fp32", "selective", 8, 128),  # the loss at the end of forward: -0.5%
    ("llama4_text", 0, "mixed", "none", 4, 256),  # inside the shared expert's backward, not derived: -0.1%
])
def test_estimate_is_within_three_percent_of_the_trace(tmp_path_factory, family, stage, precision, recompute, gpus,
                                                       seq):
    pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")
    result = _traced(tmp_path_factory, family, stage, precision, recompute, gpus, seq)
    assert result.activation_model == "transformers"
    assert abs(result.error) <= 0.03, (result.trace["where"], result.trace["categories"])
