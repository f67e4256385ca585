"""Gemma 2, Gemma 3 (text) and gpt-oss in transformers' implementation (core/memory/activations_sliding_families.py),
and GPT-2's and OPT's dropout: which configs the derivation covers, and estimate against `zeroplan trace` of tiny
whole models (seconds each) at the moments that hold the peak."""

from __future__ import annotations

import json

import pytest

from zeroplan.core.memory.activations import (
    ActivationConfig,
    _shape,
    _transformers_layers,
    applied_implementation,
    dropout_masks,
)
from zeroplan.core.model.families import model_spec_from_hf_config

pytestmark = pytest.mark.slow  # real runs / traces: `pytest -m "not slow"` skips them

# alternating sliding (16) and global layers, Gemma 2's soft-capping defaults (attention 50, final logits 30)
GEMMA2 = {"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 24, "num_hidden_layers": 4, "vocab_size": 128,
          "max_position_embeddings": 4096, "sliding_window": 16}
# a sliding layer (window 16) then a global one: the sliding layers get sdpa's explicit mask from 16 tokens on
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 24, "num_hidden_layers": 4, "vocab_size": 128,
          "max_position_embeddings": 4096, "sliding_window": 16, "sliding_window_pattern": 2}
GPT_OSS = {"model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 40, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 24, "num_hidden_layers": 4, "vocab_size": 128,
           "max_position_embeddings": 4096, "sliding_window": 16, "num_local_experts": 4, "num_experts_per_tok": 2}
# GPT-2 and OPT training with residual (and GPT-2's embedding) dropout; attention dropout off: on CPU sdpa runs its
# math kernel with it (the probabilities kept), which a GPU's fused kernel does not
GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 4, "vocab_size": 128, "n_positions": 1024,
        "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.0}
OPT = {"model_type": "opt", "hidden_size": 64, "ffn_dim": 256, "num_attention_heads": 4, "num_hidden_layers": 4,
       "vocab_size": 128, "max_position_embeddings": 1024, "word_embed_proj_dim": 64, "dropout": 0.1}
CONFIGS = {"gemma2": GEMMA2, "gemma3_text": GEMMA3, "gpt_oss": GPT_OSS, "gpt2": GPT2, "opt": OPT}


def _applied(config: dict, flash_attention: bool, seq: int = 256) -> tuple[str, str]:
    model = model_spec_from_hf_config(config, "tiny")
    return applied_implementation(model, ActivationConfig(seq_len=seq, flash_attention=flash_attention,
                                                          implementation="transformers"))


@pytest.mark.parametrize("config,flash", [(GEMMA2, False), (GEMMA3, True), (GEMMA3, False), (GPT_OSS, False),
                                          (GPT2, True), (OPT, True), ({**GPT2, "attn_pdrop": 0.1}, True)])
def test_these_configs_are_derived(config, flash):
    assert _applied(config, flash) == ("transformers", "")


@pytest.mark.parametrize("config,said", [
    (GEMMA2, "soft-capping"), (GPT_OSS, "sinks"),  # eager only in transformers: sdpa is not what runs
])
def test_gemma2_and_gpt_oss_with_flash_attention_fall_back_and_say_why(config, said):
    implementation, why = _applied(config, True)
    assert implementation == "megatron" and said in why and "eager" in why


@pytest.mark.parametrize("config,said", [
    ({**GPT_OSS, "experts_implementation": "eager"}, "experts_implementation"),
    ({**GEMMA3, "attn_logit_softcapping": 50.0}, "softcapping"),
    ({**GEMMA2, "hidden_activation": "gelu_new"}, "gelu_new"),
])
def test_variants_not_derived_fall_back(config, said):
    implementation, why = _applied(config, False)
    assert implementation == "megatron" and said in why


def test_gemma3_sliding_layers_keep_the_mask_and_repeated_kv_only_once_the_window_is_shorter():
    shape = _shape(model_spec_from_hf_config(GEMMA3, "tiny"))
    short, long = (_transformers_layers(shape, ActivationConfig(seq_len=seq, flash_attention=True,
                                                                implementation="transformers")) for seq in (8, 64))
    assert short[0] == short[1] and long[0] > long[1] == long[3] and long[0] == long[2]
    # k and v repeated over the a - k extra heads (2·e·(a - k)·d per token) and the mask in bf16 (b·s²·e)
    assert long[0] - long[1] == 64 * 2 * 2 * (4 - 2) * 24 + 64 * 64 * 2


def test_dropout_masks_follow_transformers_defaults():
    assert dropout_masks({"model_type": "gpt2"}) == (2, 1)  # resid_pdrop and embd_pdrop default to 0.1
    assert dropout_masks({"model_type": "gpt2", "resid_pdrop": 0.0, "embd_pdrop": 0.0}) == (0, 0)
    assert dropout_masks({"model_type": "opt"}) == (2, 0)  # OPT's dropout defaults to 0.1
    assert dropout_masks({"model_type": "opt", "dropout": 0.0}) == (0, 0)


# --- against traces of transformers' code (needs the `trace` extra) ---

_results: dict = {}


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    pytest.importorskip("torch", reason="zeroplan trace needs the `trace` extra (torch)")
    pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")
    from zeroplan.trace import compare

    folder = tmp_path_factory.mktemp("sliding")

    def run(family: str, stage: int, precision: str, recompute: str, seq: int):
        key = (family, stage, precision, recompute, seq)
        if key not in _results:
            path = folder / f"{family}.json"
            path.write_text(json.dumps(CONFIGS[family]))
            attention = "sdpa" if family in ("gemma3_text", "gpt2", "opt") else "eager"
            _results[key] = compare.run(compare.TraceRequest(model=str(path), gpus=4, stage=stage, seq_len=seq,
                                                             precision=precision, recompute=recompute,
                                                             attention=attention, layers_to_trace=0))
        return _results[key]
    return run


@pytest.mark.parametrize("family,stage,precision,recompute,seq", [
    ("gemma2", 0, "mixed", "none", 512),  # eager softmax backward: the soft-capped scores' tanh kept
    ("gemma2", 0, "fp32", "none", 512),
    ("gemma2", 3, "mixed", "selective", 256),
    ("gemma2", 2, "mixed", "full", 256),  # the recomputed layer's softmax backward
    ("gemma3_text", 0, "mixed", "none", 256),  # backward start: sliding layers with the mask, global ones without
    ("gemma3_text", 3, "mixed", "none", 256),
    ("gemma3_text", 0, "fp32", "none", 256),
    ("gemma3_text", 3, "mixed", "selective", 256),  # the mask's bytes recomputed inside the checkpoint
    ("gpt_oss", 0, "mixed", "none", 256),  # the last layer's attention forward (the sink column's temporaries)
    ("gpt_oss", 3, "mixed", "none", 256),  # the same with the layer's all-gather buffer
    ("gpt_oss", 0, "mixed", "selective", 512),  # the core recomputed in backward
    ("gpt_oss", 3, "mixed", "full", 512),  # the layer recomputed in backward, at its attention's maximum
])
def test_estimate_equals_the_trace_at_its_peak_moment(traced, family, stage, precision, recompute, seq):
    result = traced(family, stage, precision, recompute, seq)
    assert result.activation_model == "transformers"
    assert result.estimate["total"] == result.trace["peak_bytes"], (result.trace["where"], result.trace["categories"])


@pytest.mark.parametrize("family,stage,precision,recompute,seq,within", [
    ("gpt_oss", 2, "fp32", "none", 256, 64),  # 64 bytes (fp32 only) left out of the attention forward
    ("gpt_oss", 0, "fp32", "full", 1024, 128),
])
def test_gpt_oss_in_fp32_is_within_a_few_hundred_bytes(traced, family, stage, precision, recompute, seq, within):
    result = traced(family, stage, precision, recompute, seq)
    assert 0 <= result.trace["peak_bytes"] - result.estimate["total"] <= within


@pytest.mark.parametrize("family,stage,precision,recompute,seq", [
    ("gemma3_text", 2, "mixed", "full", 256),  # the recomputed layer's post-feedforward norm backward
    ("gemma3_text", 1, "fp32", "full", 256),
    ("gemma3_text", 3, "mixed", "none", 32),  # the same moment without recompute
    ("gemma2", 3, "mixed", "none", 32),
    ("gemma2", 3, "fp32", "none", 32),  # the MLP's backward
])
def test_gemma_post_norm_moments_equal_the_trace(traced, family, stage, precision, recompute, seq):
    result = traced(family, stage, precision, recompute, seq)
    assert result.estimate["total"] == result.trace["peak_bytes"], (result.trace["where"], result.trace["categories"])


@pytest.mark.parametrize("family,stage,precision,recompute,alive", [
    ("gpt2", 0, "mixed", "none", 9),  # the backward start: every layer's two masks and the embeddings'
    ("gpt2", 3, "mixed", "none", 9),
    ("opt", 0, "mixed", "none", 8),  # two per layer
    ("gpt2", 0, "fp32", "none", 8),  # the last layer's MLP backward: its dropout mask freed
    ("opt", 0, "fp32", "none", 7),
    ("gpt2", 2, "mixed", "full", 2),  # a recomputed layer's MLP backward: its attention's mask and the embeddings'
])
def test_dropout_on_a_gpu_is_the_cpu_trace_less_its_wider_masks(traced, family, stage, precision, recompute, alive):
    # The trace's CPU kernels keep each dropout mask in the compute dtype (e bytes per element), a GPU's in one byte,
    # which the estimate counts: at the peak the difference is (e - 1)·T·h per mask alive.
    result = traced(family, stage, precision, recompute, 256)
    assert result.activation_model == "transformers"
    e = 2 if precision == "mixed" else 4
    assert result.trace["peak_bytes"] - result.estimate["total"] == (e - 1) * 256 * 64 * alive, result.trace["where"]


@pytest.mark.parametrize("family,precision", [("gemma2", "mixed"), ("gemma2", "fp32"), ("gpt_oss", "mixed"),
                                              ("gpt_oss", "fp32")])
def test_the_per_layer_slope_is_one_decoder_layer(family, precision):
    # 4, 6 and 8 layers traced (stage 0, eager; gpt-oss's peak in the last layer's attention forward, Gemma 2's in its
    # softmax backward): each layer adds exactly what core counts for one, sliding or global (eager attention keeps
    # the same bytes in both); in fp32 gpt-oss's experts run transformers' fallback grouped-matmul op, whose context
    # also keeps the int32 group offsets (4 bytes per expert and layer)
    pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")
    from zeroplan.core.memory.activations import _transformers_layer_bytes
    from zeroplan.trace.engine import TraceSettings, trace_peak

    config = {**CONFIGS[family], "num_hidden_layers": 10}
    trace = trace_peak(config, TraceSettings(world_size=4, stage=0, seq_len=256, precision=precision,
                                             attention="eager"), layers_to_trace=3)
    activations = ActivationConfig(seq_len=256, flash_attention=False, implementation="transformers",
                                   dtype_bytes=2 if precision == "mixed" else 4)
    layer = _transformers_layer_bytes(_shape(model_spec_from_hf_config(config, "tiny")), activations)
    offsets = 4 * config.get("num_local_experts", 0) if precision == "fp32" else 0
    assert trace["per_layer"]["activations"] == layer + offsets
