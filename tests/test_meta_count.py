"""Any model transformers builds, counted from the model itself on the meta device (zeroplan.inputs.meta_count):
checked against the architecture description where both apply (the same count, largest layer and pipeline layout
found by structure), on state-space and hybrid models, and refused with the extra named where torch is absent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from zeroplan.core.errors import InputError
from zeroplan.core.model.families import model_spec_from_hf_config

MODELS = Path(__file__).parent / "configs" / "models"


def _meta_spec(config: dict, name: str = "model"):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from zeroplan.inputs.meta_count import model_spec_from_meta

    return model_spec_from_meta(config, name, f"{name}.json")


@pytest.mark.parametrize("name", ["deepseek-v2-lite", "gpt-oss-20b", "qwen3-0.6b", "olmo-2-1124-7b", "bloom-7b1",
                                  "starcoder", "ernie-4.5-21b-a3b"])
@pytest.mark.slow  # builds the model in transformers on the meta device
def test_meta_count_agrees_with_the_description(name: str) -> None:
    config = json.loads((MODELS / f"{name}.json").read_text())
    described, counted = model_spec_from_hf_config(config, name), _meta_spec(config, name)
    assert (counted.params, counted.largest_layer_params) == (described.params, described.largest_layer_params)
    assert described.shape is not None and counted.shape is not None
    assert counted.shape.layers == described.shape.layers
    assert counted.shape.layout == described.shape.layout  # layers found by structure, input and output sides
    assert counted.shape.tied_embeddings == described.shape.tied_embeddings
    if described.shape.moe is not None:
        assert counted.shape.moe is not None
        assert counted.shape.moe.expert_params == described.shape.moe.expert_params
        assert counted.shape.moe.active_params == described.shape.moe.active_params
    assert "meta device" in counted.extra["notes"][0]


@pytest.mark.slow  # builds the model in transformers on the meta device
def test_state_space_model_is_counted_and_says_what_is_not_modelled() -> None:
    """mamba-130m's shape; its published count (state-spaces/mamba-130m-hf): 129.1M."""
    config = {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280,
              "state_size": 16, "expand": 2, "conv_kernel": 4, "tie_word_embeddings": True}
    spec = _meta_spec(config, "mamba-130m")
    assert round(spec.params / 1e6, 1) == 129.1
    assert spec.shape is not None and spec.shape.layers == 24 and spec.shape.tied_embeddings
    layout = spec.shape.layout
    assert layout is not None and layout.input_params == 50280 * 768
    assert layout.layer_params * 24 + layout.input_params + layout.output_params == spec.params
    assert any("not modelled" in note for note in spec.extra["notes"])


@pytest.mark.slow  # builds the model in transformers on the meta device
def test_hybrid_moe_model_finds_its_experts() -> None:
    """Jamba v0.1's shape (ai21labs/Jamba-v0.1: 52B total, 12B active): mamba and attention layers, every other
    layer with 16 experts, 2 per token."""
    config = {"model_type": "jamba", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 65536, "num_experts": 16,
              "num_experts_per_tok": 2, "expert_layer_period": 2, "expert_layer_offset": 1}
    spec = _meta_spec(config, "jamba")
    assert spec.shape is not None and spec.shape.moe is not None
    from zeroplan.core.model.experts import active_params

    assert round(spec.params / 1e9) == 52 and round(active_params(spec) / 1e9) == 12
    assert spec.shape.moe.moe_layers == 16 and spec.shape.layout is not None and spec.shape.layout.per_layer


def test_without_torch_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from zeroplan.inputs.hf_config import spec_from_config

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails, as where it is not installed
    with pytest.raises(InputError) as caught:
        spec_from_config({"model_type": "mamba", "hidden_size": 8}, "mamba", "mamba/config.json")
    assert "zeroplan[trace]" in caught.value.fix


@pytest.mark.slow  # asks transformers (imports torch)
def test_unknown_model_type_is_refused_by_name() -> None:
    with pytest.raises(InputError, match="does not know model_type 'no_such_model'"):
        _meta_spec({"model_type": "no_such_model", "hidden_size": 8})
