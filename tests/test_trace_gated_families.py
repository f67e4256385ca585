"""Gemma, Phi-3 and Mixtral in transformers' implementation (core/memory/activations_gated_families.py): which configs the
derivation covers, and estimate against `zeroplan trace` of tiny configs (whole model traced, seconds each)."""

from __future__ import annotations

import json

import pytest

from zeroplan.core.memory.activations import ActivationConfig, applied_implementation
from zeroplan.core.model.families import model_spec_from_hf_config

pytestmark = pytest.mark.slow  # real runs / traces / pre-commit: `pytest -m "not slow"` skips them

GEMMA = {"model_type": "gemma", "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 24, "num_hidden_layers": 5, "vocab_size": 128,
         "max_position_embeddings": 512}  # head_dim 24, not hidden / heads (16); tied head, GeGLU
PHI3 = {"model_type": "phi3", "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 5, "vocab_size": 128, "max_position_embeddings": 512,
        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
MIXTRAL = {"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_hidden_layers": 5, "vocab_size": 128, "max_position_embeddings": 512,
           "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None}
CONFIGS = {"gemma": GEMMA, "phi3": PHI3, "mixtral": MIXTRAL}
SEQ = 32


def _applied(config: dict, seq: int = SEQ) -> tuple[str, str]:
    model = model_spec_from_hf_config(config, "tiny")
    return applied_implementation(model, ActivationConfig(seq_len=seq, flash_attention=True,
                                                          implementation="transformers"))


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_the_three_families_are_derived(family):
    assert _applied(CONFIGS[family]) == ("transformers", "")


@pytest.mark.parametrize("change,said", [
    ({"experts_implementation": "eager"}, "experts_implementation 'eager'"),
    ({"output_router_logits": True}, "output_router_logits"),
    ({"router_jitter_noise": 0.1}, "router_jitter_noise"),
])
def test_mixtral_variants_not_derived_fall_back_to_megatron_and_say_so(change, said):
    implementation, note = _applied({**MIXTRAL, **change})
    assert implementation == "megatron" and said in note and "balanced routing" in note


def test_an_activation_of_more_than_one_op_is_not_derived():
    implementation, note = _applied({**PHI3, "hidden_act": "gelu_new"})
    assert implementation == "megatron" and "gelu_new" in note


@pytest.mark.parametrize("family", ["phi3", "mixtral"])
def test_a_sliding_window_no_longer_than_the_sequence_is_derived_with_sdpa(family):
    assert _applied({**CONFIGS[family], "sliding_window": SEQ + 1})[0] == "transformers"
    assert _applied({**CONFIGS[family], "sliding_window": SEQ})[0] == "transformers"


# --- against traces of transformers' code (needs the `trace` extra) ---

_results: dict = {}


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    pytest.importorskip("torch", reason="zeroplan trace needs the `trace` extra (torch)")
    pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")
    from zeroplan.trace import compare

    folder = tmp_path_factory.mktemp("gated")

    def run(family: str, stage: int, precision: str, recompute: str = "none", gpus: int = 4, seq: int = SEQ):
        key = (family, stage, precision, recompute, gpus, seq)
        if key not in _results:
            path = folder / f"{family}.json"
            path.write_text(json.dumps(CONFIGS[family]))
            _results[key] = compare.run(compare.TraceRequest(model=str(path), gpus=gpus, stage=stage, seq_len=seq,
                                                             precision=precision, recompute=recompute,
                                                             layers_to_trace=0))
        return _results[key]
    return run


@pytest.mark.parametrize("family,stage,precision,recompute,gpus,seq", [
    ("gemma", 3, "mixed", "none", 4, SEQ),  # the post-attention norm's backward: Gemma's fp32 (1 + weight) freed
    ("gemma", 1, "fp32", "none", 4, SEQ),
    ("phi3", 0, "fp32", "none", 4, SEQ),  # gate_up_proj's backward: the cat of the gate and up gradients
    ("phi3", 2, "fp32", "selective", 128, SEQ),  # the last layer's forward, 32x padding
    ("mixtral", 3, "mixed", "none", 4, SEQ),  # the experts' first grouped matmul backward: both weight gradients
    ("mixtral", 3, "mixed", "none", 4, 256),  # the routing-weight product's fp32 gradients
])
def test_estimate_equals_the_trace_at_its_peak_moment(traced, family, stage, precision, recompute, gpus, seq):
    result = traced(family, stage, precision, recompute, gpus, seq)
    assert result.activation_model == "transformers"
    assert result.estimate["total"] == result.trace["peak_bytes"], (result.trace["where"], result.trace["categories"])


@pytest.mark.parametrize("family,stage,seq", [
    ("gemma", 3, SEQ),
    ("mixtral", 3, SEQ),  # the experts' first grouped matmul backward
    ("mixtral", 0, 1024),  # SwiGLU's two products in the experts' backward
])
def test_full_recompute_in_fp32_is_within_a_thousandth(traced, family, stage, seq):
    # Mixtral in fp32 runs transformers' own grouped-matmul op (torch's fake kernel is bf16-only): its ctx keeps
    # the int32 offsets outside the saved tensors, a few hundred bytes the estimate leaves out.
    result = traced(family, stage, "fp32", "full", 4, seq)
    assert result.activation_model == "transformers"
    assert abs(result.error) <= 0.001, (result.trace["where"], result.estimate, result.trace["categories"])


def test_the_per_layer_slope_is_one_mixtral_decoder_layer(traced):
    # 3, 4 and 5 layers traced: the peak sits in a layer's backward with every earlier layer's activations alive,
    # so one more layer adds exactly what core counts for it (router, experts and all).
    from zeroplan.core.memory.activations import _shape, _transformers_layer_bytes
    from zeroplan.trace.engine import TraceSettings, trace_peak

    config = {**MIXTRAL, "num_hidden_layers": 6}
    trace = trace_peak(config, TraceSettings(world_size=4, stage=3, seq_len=SEQ), layers_to_trace=3)
    activations = ActivationConfig(seq_len=SEQ, flash_attention=True, implementation="transformers")
    layer = _transformers_layer_bytes(_shape(model_spec_from_hf_config(config, "tiny")), activations)
    assert trace["where"]["phase"] == "backward"
    assert trace["per_layer"]["activations"] == layer


def test_transformers_fallback_op_holds_what_torch_grouped_mm_holds(traced):
    # The fp32 trace swaps torch's grouped_mm (bf16-only fake kernel) for transformers' fallback op; in bf16,
    # where both run, the peaks agree within 0.01%.
    import torch  # noqa: F401
    from transformers.integrations import moe

    from zeroplan.trace.engine import TraceSettings, trace_once

    settings = TraceSettings(world_size=4, stage=3, seq_len=2 * SEQ)
    torch_op = trace_once(MIXTRAL, settings)
    original = moe._can_use_grouped_mm
    moe._can_use_grouped_mm = lambda *args: False
    try:
        fallback = trace_once(MIXTRAL, settings)
    finally:
        moe._can_use_grouped_mm = original
    assert torch_op["where"]["op"] == "aten._grouped_mm.default"
    assert fallback["where"]["op"].startswith("transformers.grouped_mm_fallback")
    assert abs(fallback["peak_bytes"] - torch_op["peak_bytes"]) <= 1e-4 * torch_op["peak_bytes"]


def test_mixtral_eager_experts_cannot_be_traced(traced, cli, tmp_path):
    # transformers' "eager" experts loop over the experts the router hit (nonzero): data-dependent under fake
    # tensors, so the trace refuses (exit 1, one line) and estimate says it uses Megatron's formula.
    path = tmp_path / "eager-experts.json"
    path.write_text(json.dumps({**MIXTRAL, "experts_implementation": "eager"}))
    status, _out, err = cli("trace", "--model", str(path), "--gpus", "2", "--seq-len", "16", "--layers-to-trace", "0")
    assert status == 1 and "cannot be traced" in err and "Traceback" not in err
