"""Every family the architecture description reads, checked against transformers' own model built on the meta
device: the exact count (tied weights once) and DeepSpeed's largest layer (parameters one module owns directly),
on configs with the sizes of released checkpoints (tests/configs/models/*.json; each file's _zeroplan_source names
the checkpoint whose config.json it follows). Composite vision-language configs are checked on their text model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeroplan.core.model.families import DESCRIBED_FAMILIES, architecture_from_hf_config, model_spec_from_hf_config

MODELS = Path(__file__).parent / "configs" / "models"
NAMES = sorted(path.stem for path in MODELS.glob("*.json"))


def released(name: str) -> dict:
    return json.loads((MODELS / f"{name}.json").read_text())


def _hf_kwargs(config: dict) -> dict:
    return {key: value for key, value in config.items() if not key.startswith("_zeroplan")}


def meta_counts(config: dict) -> tuple[int, int]:
    """(unique parameters, the most one module owns directly) of transformers' causal LM for `config`, built on
    the meta device; a composite config's text model."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = _hf_kwargs(config)
    if isinstance(raw.get("text_config"), dict):  # the text model of a vision-language config
        text = dict(raw["text_config"])
        raw = dict(text, model_type=text["model_type"])
    hf_config = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    unique = {id(parameter): parameter.numel() for parameter in model.parameters()}
    largest = max(sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules())
    return sum(unique.values()), largest


def test_every_released_config_is_a_described_family() -> None:
    assert {released(name)["model_type"] for name in NAMES} <= set(DESCRIBED_FAMILIES)


@pytest.mark.parametrize("name", NAMES)
def test_released_config_matches_transformers_on_meta_device(name: str) -> None:
    spec = model_spec_from_hf_config(released(name), name)
    assert (spec.params, spec.largest_layer_params) == meta_counts(released(name))
