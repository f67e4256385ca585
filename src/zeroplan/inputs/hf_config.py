"""Read a local Hugging Face config.json into a ModelSpec. Local files only: never the network.

The counting itself is pure and lives in zeroplan.core.model.families (the architecture description); a
model_type it does not describe is counted by zeroplan.inputs.meta_count from transformers' own model on the meta
device. This module does the I/O and turns file problems into InputErrors that name the file.
"""

from __future__ import annotations

from pathlib import Path

from zeroplan.core.model.families import is_described, model_spec_from_hf_config
from zeroplan.core.errors import InputError
from zeroplan.core.model.spec import ModelSpec
from zeroplan.inputs.meta_count import model_spec_from_meta
from zeroplan.inputs.text_files import parse_json_text, read_user_text


def _display_name(config: dict, path: Path) -> str:
    """The hub id the file records (e.g. meta-llama/Llama-2-7b-hf); the repository of a Hugging Face cache
    snapshot (models--ORG--NAME/snapshots/REV/config.json); a file named after its model by its stem (gpt2.json);
    a config.json by the path as given (never one folder of it: path/to/config.json is no model called "to")."""
    recorded = config.get("_name_or_path")
    if isinstance(recorded, str) and recorded.strip() and not Path(recorded).is_absolute():
        return recorded.strip()
    parts = path.parts
    if len(parts) >= 4 and parts[-3] == "snapshots" and parts[-4].startswith("models--"):
        return parts[-4][len("models--"):].replace("--", "/")
    if path.name != "config.json":  # a file named after its model (gpt2.json)
        return path.stem
    return str(path)


def read_hf_config(path: str | Path) -> dict:
    """The parsed JSON object of a local config.json."""
    path = Path(path)
    where = str(path)
    if path.is_dir() and (path / "config.json").is_file():
        raise InputError(where, "is a directory", "point at the config.json inside it")
    text = read_user_text(path, "give the path of a local config.json")
    config = parse_json_text(text, where, "fix the file, or download the model's config.json again")
    if not isinstance(config, dict):
        raise InputError(where, f"must hold a JSON object, got {type(config).__name__}",
                         "give the model's config.json")
    return config


def load_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """ModelSpec with exact parameters and shape from a local config.json."""
    path = Path(path)
    config = read_hf_config(path)
    return spec_from_config(config, name or _display_name(config, path), str(path))


def spec_from_config(config: dict, name: str, source: str) -> ModelSpec:
    """The ModelSpec of a config.json: read into the architecture description where its model_type is described,
    else counted from transformers' own model on the meta device (the trace extra; the error names it when
    absent). A config without a model_type is refused by the description's reader."""
    if is_described(config) or not isinstance(config.get("model_type"), str):
        return model_spec_from_hf_config(config, name, source=source)
    return model_spec_from_meta(config, name, source)  # imports torch and transformers only now
