"""transformers' LayerNorm families (GPT-NeoX, OPT, Falcon) in the transformers activation model: each layer's
bytes and the step's peak against `zeroplan trace` of tiny configs, and the cases that fall back to Megatron."""

from __future__ import annotations

import json

import pytest

from zeroplan.core.memory.activations import ActivationConfig, _shape, _transformers_layer_bytes, applied_implementation
from zeroplan.core.model.spec import ModelShape, ModelSpec
from zeroplan.core.memory.activations_layernorm_families import FAMILIES

pytestmark = pytest.mark.slow  # real runs / traces / pre-commit: `pytest -m "not slow"` skips them

FALCON_40B_LAYOUT = {"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4,
                     "vocab_size": 128, "max_position_embeddings": 512, "new_decoder_architecture": True,
                     "num_kv_heads": 2}
TINY = {
    "gpt_neox": {"model_type": "gpt_neox", "hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4,
                 "num_hidden_layers": 4, "vocab_size": 128, "max_position_embeddings": 512, "rotary_pct": 0.25},
    "opt": {"model_type": "opt", "hidden_size": 64, "ffn_dim": 256, "num_attention_heads": 4, "num_hidden_layers": 4,
            "vocab_size": 128, "max_position_embeddings": 512, "word_embed_proj_dim": 64, "dropout": 0.0},
    "falcon": {"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4,
               "vocab_size": 128, "max_position_embeddings": 512},
}


def _model(config: dict) -> ModelSpec:
    family = config["model_type"]
    kv_heads = (config.get("num_kv_heads", 4) if config.get("new_decoder_architecture") else 1) if family == "falcon" \
        else 4
    shape = ModelShape.of(layers=4, hidden=64, heads=4, kv_heads=kv_heads, ffn=256, vocab=128, family=family)
    return ModelSpec(params=10**6, name=family, shape=shape, extra={"hf_config": config})


def _config(**kwargs) -> ActivationConfig:
    return ActivationConfig(**{"seq_len": 32, "flash_attention": True, "implementation": "transformers", **kwargs})


@pytest.mark.parametrize("config", [*TINY.values(), FALCON_40B_LAYOUT])
def test_the_tiny_members_are_derived(config):
    assert applied_implementation(_model(config), _config()) == ("transformers", "")


@pytest.mark.parametrize("config,says", [
    ({**TINY["opt"], "do_layer_norm_before": False}, "post-norm"),
    ({**TINY["opt"], "word_embed_proj_dim": 32}, "project_in"),
    ({**TINY["gpt_neox"], "hidden_dropout": 0.1}, "dropout"),
    ({**TINY["gpt_neox"], "hidden_act": "gelu_new"}, "gelu_new"),
    ({**TINY["falcon"], "alibi": True}, "alibi"),
    ({**TINY["falcon"], "multi_query": False}, "multi_query=false"),
    ({**TINY["falcon"], "parallel_attn": False}, "parallel_attn"),
])
def test_what_is_not_derived_falls_back_to_megatron_and_says_why(config, says):
    implementation, why = applied_implementation(_model(config), _config())
    assert implementation == "megatron" and says in why and "Megatron" in why


@pytest.mark.parametrize("family", FAMILIES)
def test_eager_attention_falls_back(family):
    implementation, why = applied_implementation(_model(TINY[family]), _config(flash_attention=False))
    assert implementation == "megatron" and "sdpa" in why


@pytest.mark.parametrize("family", FAMILIES)
def test_recompute_orders_the_layer_bytes(family):
    shape = _shape(_model(TINY[family]))
    none, selective, full = (_transformers_layer_bytes(shape, _config(recompute=mode))
                             for mode in ("none", "selective", "full"))
    assert none > selective > full == 32 * 2 * 64  # full recompute keeps the layer input only


# --- against the trace (needs the `trace` extra) ---

@pytest.fixture(scope="module")
def compare_module():
    pytest.importorskip("torch", reason="zeroplan trace needs the `trace` extra (torch)")
    pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")
    from zeroplan.trace import compare

    return compare


@pytest.fixture(scope="module")
def config_paths(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layernorm-families")
    paths = {}
    for family, config in {**TINY, "falcon_40b_layout": FALCON_40B_LAYOUT}.items():
        paths[family] = folder / f"{family}.json"
        paths[family].write_text(json.dumps(config))
    return {family: str(path) for family, path in paths.items()}


@pytest.mark.parametrize("family,stage,precision,recompute,seq", [
    ("gpt_neox", 3, "mixed", "none", 32),  # fc1's backward in the second-last layer
    ("gpt_neox", 3, "mixed", "selective", 32),  # the attention kernel's backward, its output recomputed
    ("gpt_neox", 2, "fp32", "full", 256),  # gelu's backward in the last layer, recomputed whole
    ("falcon", 3, "mixed", "none", 32),  # the fp32 math attention's backward (one KV head)
    ("falcon", 3, "fp32", "none", 32),
    ("falcon", 2, "mixed", "full", 128),  # the softmax's backward, the checkpoints keeping the causal mask
    ("falcon_40b_layout", 3, "mixed", "none", 32),  # grouped KV heads broadcast: a fused kernel with the mask
    ("falcon_40b_layout", 3, "mixed", "selective", 128),
])
def test_estimate_equals_the_trace(compare_module, config_paths, family, stage, precision, recompute, seq):
    # tiny whole models (4 layers, no extrapolation): every layer's bytes and the peak moment to the byte
    result = compare_module.run(compare_module.TraceRequest(model=config_paths[family], gpus=4, stage=stage,
                                                            precision=precision, recompute=recompute, seq_len=seq,
                                                            layers_to_trace=0))
    assert result.activation_model == "transformers", result.activation_note
    assert result.estimate["total"] == result.trace["peak_bytes"], (result.estimate, result.trace["categories"])


@pytest.mark.parametrize("family,precision,recompute", [("opt", "fp32", "selective"), ("opt", "mixed", "none"),
                                                         ("falcon", "mixed", "selective")])
def test_estimate_is_within_3_percent_of_the_trace(compare_module, config_paths, family, precision, recompute):
    # OPT's in-layer moments and the selective recompute of Falcon's math attention are within tens of bytes
    result = compare_module.run(compare_module.TraceRequest(model=config_paths[family], gpus=4, stage=3,
                                                            precision=precision, recompute=recompute, seq_len=32,
                                                            layers_to_trace=0))
    assert result.activation_model == "transformers"
    assert abs(result.error) <= 0.03, (result.estimate, result.trace["categories"])
