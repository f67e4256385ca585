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
    model = presets.model(name)
    implementation, why = applied_implementation(model, _config())
    assert implementation == "megatron" and "Megatron" in why
    assert activation_memory(model, _config()).total == activation_memory(model, _config(implementation="megatron")).total


def test_precision_sets_the_activation_dtype_and_the_implementation_is_checked():
    model = presets.model("llama-2-7b")
    parallel = ParallelDims(world=8, tp=1, pp=1, gpus_per_node=8)
    config = resolve_activations(StepInputs(precision="fp32"), model, parallel, [])
    assert (config.dtype_bytes, config.implementation) == (4, "transformers")
    with pytest.raises(InputError, match="^activations: "):
        resolve_activations(StepInputs(activations="deepspeed"), model, parallel, [])
