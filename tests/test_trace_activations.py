"""The transformers activation model (pure stdlib) against figures measured by tracing the real code."""

from __future__ import annotations

import pytest

from zeroplan.core.memory.activations import ActivationConfig, activation_memory, applied_implementation, layer_bytes
from zeroplan.core.errors import InputError
from zeroplan.inputs import presets
from zeroplan.inputs.sections import StepInputs
from zeroplan.inputs.training import resolve_activations
from zeroplan.core.parallel.grid import ParallelDims


def _config(**kwargs) -> ActivationConfig:
    return ActivationConfig(**{"seq_len": 4096, "flash_attention": True, "implementation": "transformers", **kwargs})


def test_llama_70b_layer_matches_the_trace():
    # Traced with FSDPMemTracker on Llama-2-70B, 1024 ranks, seq 4096, bf16 sdpa: 1,628,471,296 bytes per
    # layer (docs/trace.md); the layers term is 80 of them.
    estimate = activation_memory(presets.model("llama-2-70b"), _config())
    assert estimate.breakdown["activations/layers"] == 80 * 1_628_471_296


def test_megatron_is_kept_and_lower_than_transformers():
    model = presets.model("llama-2-7b")
    megatron = activation_memory(model, _config(implementation="megatron"))
    transformers = activation_memory(model, _config())
    assert megatron.breakdown["activations/layers"] == 32 * layer_bytes(model, _config(implementation="megatron"))
    assert transformers.total > megatron.total


def test_fp32_doubles_every_layer_tensor_but_the_fp32_ones():
    model = presets.model("llama-2-7b")
    bf16 = activation_memory(model, _config()).breakdown["activations/layers"]
    fp32 = activation_memory(model, _config(dtype_bytes=4)).breakdown["activations/layers"]
    assert bf16 < fp32 < 2 * bf16  # the fp32 norm inputs, rsqrt and logsumexp do not double


@pytest.mark.parametrize("name", ["opt-1.3b", "gpt2"])
def test_underived_cases_fall_back_to_megatron_and_say_so(name):
    model = presets.model(name)  # their eager attention is not derived
    implementation, why = applied_implementation(model, _config(flash_attention=False))
    assert implementation == "megatron" and "Megatron" in why
    assert (activation_memory(model, _config(flash_attention=False)).total
            == activation_memory(model, _config(implementation="megatron", flash_attention=False)).total)


@pytest.mark.parametrize("name,zeroed,masks", [("opt-1.3b", {"dropout": 0.0}, (2, 0)),
                                               ("gpt2", {"resid_pdrop": 0.0, "embd_pdrop": 0.0}, (2, 1))])
def test_published_dropout_is_derived_with_a_one_byte_mask_per_element(name, zeroed, masks):
    # GPT-2's and OPT's published configs train with dropout 0.1: a GPU keeps one byte per dropped element (two residual
    # dropouts per layer, GPT-2's embeddings), which is all the dropout adds to transformers' layers (sdpa's attention
    # dropout keeps only its random-number state); the CPU trace's difference is tests/test_trace_sliding_families.py's
    from dataclasses import replace

    from zeroplan.core.memory.activations import dropout_note

    model = presets.model(name)
    without = replace(model, extra={**model.extra, "hf_config": {**model.extra["hf_config"], **zeroed}})
    assert applied_implementation(model, _config()) == ("transformers", "")
    with_dropout, plain = activation_memory(model, _config()).breakdown, activation_memory(without, _config()).breakdown
    tokens, hidden, layers = 4096, model.shape.hidden, model.shape.layers
    assert with_dropout["activations/layers"] - plain["activations/layers"] == layers * masks[0] * tokens * hidden
    assert with_dropout["activations/embedding"] - plain["activations/embedding"] == masks[1] * tokens * hidden
    assert "one byte per dropped element" in dropout_note(model) and dropout_note(without) == ""


def test_precision_sets_the_activation_dtype_and_the_implementation_is_checked():
    model = presets.model("llama-2-7b")
    parallel = ParallelDims(world=8, tp=1, pp=1, gpus_per_node=8)
    config = resolve_activations(StepInputs(precision="fp32"), model, parallel, [])
    assert (config.dtype_bytes, config.implementation) == (4, "transformers")
    with pytest.raises(InputError, match="^activations: "):
        resolve_activations(StepInputs(activations="deepspeed"), model, parallel, [])
