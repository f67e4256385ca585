"""The pydantic schema of preset files, the generator of the built-in preset data, and the loader of
user preset files. Never imported on a run that uses only the built-in presets.

presets/*.yaml (human-edited, with comments and sources) --validate--> src/zeroplan/inputs/presets_data.py
(generated, committed, shipped in the wheel; imported by inputs/presets.py: Python literals load from the
.pyc in about 0.5 ms, where JSON would first import the json module, about 5 ms on the start-up path).
Regenerate after editing presets/*.yaml:

    python -m zeroplan.inputs.preset_schema --write

tests/test_presets_data.py fails when the committed file differs from what this produces.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
import json

from zeroplan.core.errors import InputError
from zeroplan.inputs.text_files import read_user_text
from zeroplan.inputs.yaml_text import YamlSyntaxError, load_with_nodes
from zeroplan.core.units import parse_bytes, parse_rate

CATEGORIES = ("gpus", "clusters", "models")
DATA_FILE = Path(__file__).with_name("presets_data.py")
REGENERATE = "python -m zeroplan.inputs.preset_schema --write"


def _checked_by(parse: Callable[[Any, str], Any], what: str) -> Callable[[Any], Any]:
    """A validator keeping a size or rate text as written once `parse` accepts it (the error is parse's)."""
    def validate(value: Any) -> Any:
        if isinstance(value, str):
            try:
                parse(value, what)
            except InputError as exc:
                raise ValueError(exc.problem) from None
        return value

    return validate


_size = _checked_by(parse_bytes, "size")
_rate = _checked_by(parse_rate, "rate")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkEntry(_Strict):
    bandwidth: str = Field(description="per direction, e.g. 300GB/s or 400Gb/s")
    latency_us: float = Field(ge=0)

    _bandwidth = field_validator("bandwidth")(_rate)


class GpuEntry(_Strict):
    description: str
    memory: str = Field(description="as the driver reports it, e.g. 81920MiB")
    hbm_bandwidth: str
    bf16_tflops: float = Field(gt=0, description="dense; fp16 where the GPU has no bf16")
    bf16: bool = Field(True, description="false where the GPU has no bf16 (V100): plan and export fp16")
    intra_node_link: LinkEntry
    # The node `--gpu NAME` stands for without --cluster; none means a generic node of 8 GPUs.
    default_cluster: str | None = Field(None, description="the cluster preset a bare --gpu uses")
    sources: list[str] = Field(min_length=1)

    _memory = field_validator("memory")(_size)
    _hbm = field_validator("hbm_bandwidth")(_rate)


class ClusterEntry(_Strict):
    description: str
    gpu: str
    gpus_per_node: int = Field(ge=1)
    inter_node_bandwidth_per_gpu: str
    inter_node_latency_us: float = Field(ge=0)
    cpu_memory: str
    nvme: str
    nvme_bandwidth: str
    pcie_generation: Literal[3, 4, 5]
    sources: list[str] = Field(min_length=1)

    _sizes = field_validator("cpu_memory", "nvme")(_size)
    _rates = field_validator("inter_node_bandwidth_per_gpu", "nvme_bandwidth")(_rate)


class ModelEntry(_Strict):
    description: str
    family: str
    params: int = Field(gt=0)
    largest_layer_params: int = Field(gt=0)
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    ffn: int = Field(gt=0)
    vocab: int = Field(gt=0)
    max_seq_len: int = Field(gt=0)
    tied_embeddings: bool
    experts: int | None = Field(default=None, gt=0)
    experts_per_token: int | None = Field(default=None, gt=0)
    # Extra architecture fields (Hugging Face config.json names) later planners may use.
    config: dict[str, Any] = Field(default_factory=dict)
    sources: list[str] = Field(min_length=1)

    @field_validator("params", "largest_layer_params", mode="before")
    @classmethod
    def _no_floats(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError("write an exact integer, not a float")
        return value


ENTRY_TYPES: dict[str, type[_Strict]] = {"gpus": GpuEntry, "clusters": ClusterEntry, "models": ModelEntry}


class PresetFileError(InputError):
    """A bad preset file; input_name is `FILE:LINE:COLUMN` where the parser knows the place."""


# ---------------------------------------------------------------- YAML with positions


def _parse(text: str, path: Path) -> tuple[Any, Any]:
    """(data, node): the plain data and the YAML node tree that knows each value's line and column."""
    try:
        return load_with_nodes(text)
    except YamlSyntaxError as exc:
        where = f"{path}:{exc.line}:{exc.column}" if exc.line else str(path)
        raise PresetFileError(where, f"malformed YAML: {exc.problem}", "fix the YAML syntax") from None


def _where(path: Path, node: Any, loc: tuple, *, key: bool = False) -> str:
    """`FILE:LINE:COLUMN` of the value at loc (or of its key, for key=True), as deep as the tree goes."""
    target = node
    for part in loc:
        child = None
        if target is not None and target.tag.endswith(":map"):
            for key_node, value_node in target.value:
                if str(key_node.value) == str(part):
                    child = key_node if key and part == loc[-1] else value_node
                    break
        elif target is not None and target.tag.endswith(":seq") and isinstance(part, int) \
                and part < len(target.value):
            child = target.value[part]
        if child is None:
            break  # a missing field: the place of the entry that lacks it
        target = child
    if target is None:
        return str(path)
    return f"{path}:{target.start_mark.line + 1}:{target.start_mark.column + 1}"


def _validate_entries(category: str, raw: Any, path: Path, node: Any, prefix: tuple) -> dict[str, dict]:
    entry_type = ENTRY_TYPES[category]
    label = ".".join(str(p) for p in prefix) or category
    if not isinstance(raw, dict):
        raise PresetFileError(_where(path, node, prefix), f"{label} must be a mapping of preset name to fields")
    entries = {}
    for name, fields in raw.items():
        key = str(name).strip().lower()
        try:
            entries[key] = entry_type.model_validate(fields).model_dump()
        except ValidationError as exc:
            errors = exc.errors()
            # A misspelt key also reports the key it was meant to be as missing: name the typo first.
            first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
            loc = tuple(first["loc"])
            field = ".".join(str(part) for part in loc)
            if first["type"] == "extra_forbidden":
                valid = ", ".join(entry_type.model_fields)
                raise PresetFileError(_where(path, node, (*prefix, name, *loc), key=True),
                                      f"{name}: unknown key '{field}'", f"valid keys: {valid}") from None
            if first["type"] == "missing":
                raise PresetFileError(_where(path, node, (*prefix, name), key=True), f"{name}: {field}: field required",
                                      f"add {field} to {name}") from None
            message = first["msg"].removeprefix("Value error, ")
            raise PresetFileError(_where(path, node, (*prefix, name, *loc)), f"{name}: {field}: {message}") from None
    return entries


def check_references(merged: dict[str, dict[str, dict]], where: dict[tuple[str, str], str] | None = None) -> None:
    """Every cluster names a known GPU; every default_cluster names a cluster of that GPU."""
    where = where or {}
    gpus, clusters = merged["gpus"], merged["clusters"]
    for name, fields in clusters.items():
        if fields["gpu"] not in gpus:
            raise PresetFileError(where.get(("clusters", name), "presets"),
                                  f"cluster '{name}' names unknown GPU '{fields['gpu']}'",
                                  "name a GPU preset (zeroplan presets list) or define it under gpus")
    for name, fields in gpus.items():
        default = fields.get("default_cluster")
        if default is None:
            continue
        if default not in clusters:
            raise PresetFileError(where.get(("gpus", name), "presets"),
                                  f"GPU '{name}': default_cluster '{default}' is not a cluster preset",
                                  "name a cluster preset or drop default_cluster")
        if clusters[default]["gpu"] != name:
            raise PresetFileError(where.get(("gpus", name), "presets"),
                                  f"GPU '{name}': default_cluster '{default}' has {clusters[default]['gpu']} GPUs",
                                  f"name a cluster of {name} GPUs")


# ---------------------------------------------------------------- built-in presets -> presets_data.json


def source_dir() -> Path:
    """The repository's presets/ directory (a source checkout; the wheel ships only the generated data)."""
    return Path(__file__).resolve().parents[3] / "presets"


def build_data(directory: Path | None = None) -> dict[str, Any]:
    """Validated, normalised entries of presets/{gpus,clusters,models}.yaml, in file order."""
    directory = directory or source_dir()
    data: dict[str, Any] = {}
    for category in CATEGORIES:
        path = directory / f"{category}.yaml"
        raw, node = _parse(path.read_text(encoding="utf-8"), path)
        data[category] = _validate_entries(category, raw, path, node, ())
    check_references(data)
    return data


def render(data: dict[str, Any]) -> str:
    """The source of presets_data.py: one dict literal per category, in file order. Written as JSON (stable
    across Python versions, unlike pprint) with JSON's three names bound to Python's values."""
    lines = [f'"""Built-in presets, validated: generated from presets/*.yaml by `{REGENERATE}`. Do not edit."""',
             "# ruff: noqa", "", "true, false, null = True, False, None", ""]
    for category in CATEGORIES:
        lines += [f"{category.upper()} = {json.dumps(data[category], indent=1, ensure_ascii=False)}", ""]
    lines += ["del true, false, null", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- user preset files


def load_user_file(path: Path) -> tuple[dict[str, dict[str, dict]], dict[tuple[str, str], str]]:
    """A user presets file: top-level gpus/clusters/models mappings, each entry in the built-in schema.
    Returns the entries and each entry's `FILE:LINE:COLUMN` (for errors found after merging)."""
    try:
        text = read_user_text(path, "check the path given to --presets")
    except InputError as exc:  # the same one-line error, as the presets file's own error type
        raise PresetFileError(exc.input_name, exc.problem, exc.fix) from None
    raw, node = _parse(text, path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise PresetFileError(_where(path, node, ()), "a presets file must be a mapping",
                              "write top-level keys gpus:, clusters: and/or models:")
    entries: dict[str, dict[str, dict]] = {}
    places: dict[tuple[str, str], str] = {}
    for category, section in raw.items():
        if category not in ENTRY_TYPES:
            raise PresetFileError(_where(path, node, (category,), key=True), f"unknown section '{category}'",
                                  "valid sections: gpus, clusters, models")
        entries[category] = _validate_entries(category, section or {}, path, node, (category,))
        for name in section or {}:
            places[(category, str(name).strip().lower())] = _where(path, node, (category, name), key=True)
    return entries, places


def validate_file(path: Path, builtin: dict[str, dict[str, dict]]) -> dict[str, dict[str, dict]]:
    """The file's entries, checked alone and merged over the built-in ones; PresetFileError names the place."""
    entries, places = load_user_file(path)
    merged = {category: {**builtin[category], **entries.get(category, {})} for category in CATEGORIES}
    check_references(merged, places)
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate or check zeroplan/inputs/presets_data.py.")
    parser.add_argument("--write", action="store_true", help="write the file (default: check it is current)")
    args = parser.parse_args(argv)
    try:
        text = render(build_data())
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.write:
        DATA_FILE.write_text(text, encoding="utf-8")
        print(f"wrote {DATA_FILE}")
        return 0
    if DATA_FILE.is_file() and DATA_FILE.read_text(encoding="utf-8") == text:
        print(f"{DATA_FILE} is current")
        return 0
    print(f"{DATA_FILE} is out of date: run `{REGENERATE}`", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
