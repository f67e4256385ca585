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

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, field_validator, model_validator
import json

from zeroplan.core.errors import InputError
from zeroplan.inputs.text_files import read_user_text
from zeroplan.inputs.yaml_text import YamlSyntaxError, YamlTooLarge, load_with_nodes
from zeroplan.core.model.families import MAX_CONFIG_FIELD
from zeroplan.core.parallel.grid import MAX_WORLD
from zeroplan.core.units import MAX_COUNT, parse_bytes, parse_rate

CATEGORIES = ("gpus", "clusters", "models")
DATA_FILE = Path(__file__).with_name("presets_data.py")
REGENERATE = "python -m zeroplan.inputs.preset_schema --write"


# The bounds every command applies when it uses a preset (and `presets validate` with it): far beyond any real
# GPU or network, and small enough that every figure derived from them stays a finite number.
MAX_TFLOPS = 1e6  # 10^18 FLOP/s per GPU
MAX_LATENCY_US = 1e6  # one second per hop
MIN_LATENCY_US = 1e-6  # one picosecond: a smaller non-zero latency is a typo (0 means "not counted")


def _checked_by(parse: Callable[[Any, str], Any], what: str, positive: bool = False) -> Callable[[Any], Any]:
    """A validator keeping a size or rate text as written once `parse` accepts it (the error is parse's)."""
    def validate(value: Any) -> Any:
        if isinstance(value, str):
            try:
                parsed = parse(value, what)
            except InputError as exc:
                raise ValueError(exc.problem) from None
            if positive and parsed <= 0:
                raise ValueError(f"must be more than zero, got {value!r}")
        return value

    return validate


_size = _checked_by(parse_bytes, "size")
_positive_size = _checked_by(parse_bytes, "size", positive=True)
_rate = _checked_by(parse_rate, "rate", positive=True)


def _latency(value: Any) -> Any:
    if isinstance(value, (int, float)) and 0 < value < MIN_LATENCY_US:
        raise ValueError(f"{value} µs is below a picosecond: write 0 (not counted) or a real latency")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkEntry(_Strict):
    bandwidth: str = Field(description="per direction, e.g. 300GB/s or 400Gb/s")
    latency_us: float = Field(ge=0, le=MAX_LATENCY_US, allow_inf_nan=False)

    _bandwidth = field_validator("bandwidth")(_rate)
    _latency = field_validator("latency_us")(_latency)


class GpuEntry(_Strict):
    description: str
    memory: str = Field(description="as the driver reports it, e.g. 81920MiB")
    hbm_bandwidth: str
    bf16_tflops: float = Field(gt=0, le=MAX_TFLOPS, allow_inf_nan=False, description="dense; fp16 where the GPU has no bf16")
    bf16: StrictBool = Field(True, description="false where the GPU has no bf16 (V100): plan and export fp16")
    intra_node_link: LinkEntry
    # The node `--gpu NAME` stands for without --cluster; none means a generic node of 8 GPUs.
    default_cluster: str | None = Field(None, description="the cluster preset a bare --gpu uses")
    sources: list[str] = Field(min_length=1)

    _memory = field_validator("memory")(_positive_size)
    _hbm = field_validator("hbm_bandwidth")(_rate)


class ClusterEntry(_Strict):
    description: str
    gpu: str
    gpus_per_node: StrictInt = Field(ge=1, le=MAX_WORLD)  # as --gpus-per-node
    inter_node_bandwidth_per_gpu: str
    inter_node_latency_us: float = Field(ge=0, le=MAX_LATENCY_US, allow_inf_nan=False)
    cpu_memory: str
    nvme: str
    nvme_bandwidth: str
    pcie_generation: Literal[3, 4, 5]
    sources: list[str] = Field(min_length=1)

    _sizes = field_validator("cpu_memory", "nvme")(_size)
    _rates = field_validator("inter_node_bandwidth_per_gpu", "nvme_bandwidth")(_rate)
    _latency = field_validator("inter_node_latency_us")(_latency)


class ModelEntry(_Strict):
    description: str
    family: str
    # Counts as a config.json's are bounded (core.model.families): whole numbers, never booleans.
    params: StrictInt = Field(gt=0, le=MAX_COUNT)
    largest_layer_params: StrictInt = Field(gt=0, le=MAX_COUNT)
    layers: StrictInt = Field(gt=0, le=MAX_CONFIG_FIELD)
    hidden: StrictInt = Field(gt=0, le=MAX_CONFIG_FIELD)
    heads: StrictInt = Field(gt=0, le=MAX_CONFIG_FIELD)
    kv_heads: StrictInt = Field(gt=0, le=MAX_CONFIG_FIELD)
    ffn: StrictInt = Field(gt=0, le=MAX_CONFIG_FIELD)
    vocab: StrictInt = Field(gt=0, le=MAX_CONFIG_FIELD)
    max_seq_len: StrictInt = Field(gt=0, le=MAX_CONFIG_FIELD)
    tied_embeddings: StrictBool
    experts: StrictInt | None = Field(default=None, gt=0, le=MAX_CONFIG_FIELD)
    experts_per_token: StrictInt | None = Field(default=None, gt=0, le=MAX_CONFIG_FIELD)
    # Extra architecture fields (Hugging Face config.json names) later planners may use.
    config: dict[str, Any] = Field(default_factory=dict)
    sources: list[str] = Field(min_length=1)

    @field_validator("params", "largest_layer_params", mode="before")
    @classmethod
    def _no_floats(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError("write an exact integer, not a float")
        return value

    @model_validator(mode="after")
    def _heads_and_experts(self) -> "ModelEntry":
        if self.kv_heads > self.heads or self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        if (self.experts is None) != (self.experts_per_token is None):
            raise ValueError("give experts and experts_per_token together (or neither)")
        if self.experts is not None and self.experts_per_token is not None and self.experts_per_token > self.experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) exceeds experts ({self.experts})")
        if self.largest_layer_params > self.params:
            raise ValueError(f"largest_layer_params ({self.largest_layer_params}) exceeds params ({self.params})")
        return self


ENTRY_TYPES: dict[str, type[_Strict]] = {"gpus": GpuEntry, "clusters": ClusterEntry, "models": ModelEntry}


class PresetFileError(InputError):
    """A bad preset file; input_name is `FILE:LINE:COLUMN` where the parser knows the place."""


# ---------------------------------------------------------------- YAML with positions


def _parse(text: str, path: Path) -> tuple[Any, Any]:
    """(data, node): the plain data and the YAML node tree that knows each value's line and column."""
    try:
        return load_with_nodes(text)
    except YamlTooLarge as exc:
        raise PresetFileError(str(path), exc.problem, "check that this is the presets file") from None
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


_NOT_IN_NAMES = (",", "/", "@")  # comma lists (sweep), Hub ids and paths (--model ORG/NAME, path/config.json)


def preset_name(name: Any) -> str | None:
    """Why `name` cannot name a preset (None when it can): every command must be able to take it back as a
    flag value (--gpu NAME, --model NAME, a comma list) and show it."""
    if isinstance(name, bool) or not isinstance(name, (str, int)):
        return f"a preset name must be text, got {name!r}"
    text = str(name)
    if not text.strip():
        return "a preset name must not be empty"
    if not text.isprintable():
        return f"preset name {text!r} holds control characters"
    if any(mark in text for mark in _NOT_IN_NAMES):
        return f"preset name {text!r} holds one of {' '.join(_NOT_IN_NAMES)} (a list separator, a Hub id or a path)"
    return None


def _duplicate(node: Any, normalise: Callable[[Any], Any] = lambda key: key) -> Any:
    """The first key node of a mapping node that repeats an earlier key (after `normalise`), or None."""
    if node is None or not node.tag.endswith(":map"):
        return None
    seen = set()
    for key_node, _ in node.value:
        key = normalise(key_node.value)
        if key in seen:
            return key_node
        seen.add(key)
    return None


def _mark(path: Path, key_node: Any) -> str:
    return f"{path}:{key_node.start_mark.line + 1}:{key_node.start_mark.column + 1}"


def _child(node: Any, key: Any) -> Any:
    if node is None or not node.tag.endswith(":map"):
        return None
    return next((value for key_node, value in node.value if str(key_node.value) == str(key)), None)


def _validate_entries(category: str, raw: Any, path: Path, node: Any, prefix: tuple) -> dict[str, dict]:
    entry_type = ENTRY_TYPES[category]
    label = ".".join(str(p) for p in prefix) or category
    if not isinstance(raw, dict):
        raise PresetFileError(_where(path, node, prefix), f"{label} must be a mapping of preset name to fields")
    section_node = node
    for part in prefix:
        section_node = _child(section_node, part)
    repeated = _duplicate(section_node, lambda key: str(key).strip().lower())
    if repeated is not None:  # YAML keeps the last silently; a preset named twice is a mistake either way
        raise PresetFileError(_mark(path, repeated), f"{label}: preset '{repeated.value}' is defined twice",
                              "keep one definition (names are compared without case)")
    entries = {}
    for name, fields in raw.items():
        problem = preset_name(name)
        if problem is not None:
            raise PresetFileError(_where(path, node, (*prefix, name), key=True), f"{label}: {problem}",
                                  "name it with letters, digits, '-', '.' or '_'")
        key = str(name).strip().lower()
        repeated_field = _duplicate(_child(section_node, name))
        if repeated_field is not None:
            raise PresetFileError(_mark(path, repeated_field), f"{name}: '{repeated_field.value}' is given twice",
                                  "keep one of them")
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
            raise PresetFileError(_where(path, node, (*prefix, name, *loc), key=not loc),
                                  f"{name}: {field + ': ' if field else ''}{message}") from None
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
    repeated = _duplicate(node)
    if repeated is not None:
        raise PresetFileError(_mark(path, repeated), f"section '{repeated.value}' is given twice",
                              "merge them into one")
    for category, section in raw.items():
        if category not in ENTRY_TYPES:
            raise PresetFileError(_where(path, node, (category,), key=True), f"unknown section '{category}'",
                                  "valid sections: gpus, clusters, models")
        if section is None:  # an empty section
            section = {}
        entries[category] = _validate_entries(category, section, path, node, (category,))
        for name in section:
            places[(category, str(name).strip().lower())] = _where(path, node, (category, name), key=True)
    return entries, places


def validate_file(path: Path, builtin: dict[str, dict[str, dict]],
                  build: Callable[[str, str, dict[str, dict[str, dict]]], Any] | None = None) -> dict[str, dict[str, dict]]:
    """The file's entries, checked alone and merged over the built-in ones; PresetFileError names the place.
    build(category, name, merged): each entry made as the commands make it (inputs.presets.build), its error
    placed at the entry."""
    entries, places = load_user_file(path)
    merged = {category: {**builtin[category], **entries.get(category, {})} for category in CATEGORIES}
    check_references(merged, places)
    if build is not None:
        for category, found in entries.items():
            for name in found:  # each entry as every command will use it: what validate accepts, they accept
                try:
                    build(category, name, merged)
                except InputError as exc:
                    raise PresetFileError(places.get((category, name), str(path)), f"{name}: {exc.problem}",
                                          exc.fix) from None
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate or check zeroplan/inputs/presets_data.py.")
    parser.add_argument("--write", action="store_true", help="write the file (default: check it is current)")
    parser.add_argument("--source", type=Path, default=None,
                        help="the presets/ directory of a source checkout (default: the one beside src/)")
    args = parser.parse_args(argv)
    directory = args.source or source_dir()
    missing = [name for name in CATEGORIES if not (directory / f"{name}.yaml").is_file()]
    if missing:  # an installed zeroplan ships the generated presets_data.py, not the YAML it is made from
        print(f"error: no presets sources in {directory} ({', '.join(m + '.yaml' for m in missing)} missing): this "
              "tool regenerates the built-in presets in a source checkout (git clone; or --source DIR); to check "
              "your own presets file run `zeroplan presets validate FILE`", file=sys.stderr)
        return 2
    try:
        text = render(build_data(directory))
    except (InputError, OSError) as exc:
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
