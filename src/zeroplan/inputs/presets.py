"""GPU, cluster and model presets: the built-in ones, plus the user's presets files.

Built-in presets are edited as presets/*.yaml and shipped as presets_data.py next to this module (Python
literals), generated and validated by `python -m zeroplan.inputs.preset_schema --write` (a test fails when
it is stale), so a run that uses only built-in presets imports one module: no YAML parser, no pydantic.
A user presets file (the config directory's presets.yaml, then --presets FILE) adds or overrides entries
with the same schema; only then are YAML and pydantic imported.
Sizes are written with units ("81920MiB", "2039GB/s", "400Gb/s") and parsed exactly.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Iterator

from zeroplan.core.errors import InputError
from zeroplan.core.hardware import ClusterSpec, GpuSpec, Link
from zeroplan.core.model.spec import ModelShape, ModelSpec, ParamLayout
from zeroplan.core.units import parse_bytes, parse_rate
from zeroplan.inputs.presets_data import CLUSTERS, GPUS, MODELS
from zeroplan.render.sink import note_input

CATEGORIES = ("gpus", "clusters", "models")
USER_FILE_NAME = "presets.yaml"
# PCIe x16 per direction, after encoding overhead (Gen3 15.75, Gen4 31.5, Gen5 63 GB/s).
PCIE_X16_BYTES_PER_S = {3: 15_750_000_000, 4: 31_500_000_000, 5: 63_000_000_000}


Entries = dict[str, dict[str, dict]]  # category -> name -> fields (the merged presets, or a file's being validated)


class PresetError(InputError):
    pass


class PresetEntry(dict):
    """A validated preset entry: a plain dict that also reads as attributes (entry.gpu)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def builtin() -> dict[str, dict[str, dict]]:
    """The built-in entries by category, as validated when presets_data.py was generated."""
    return {"gpus": GPUS, "clusters": CLUSTERS, "models": MODELS}


def user_config_dir() -> Path:
    """zeroplan's configuration directory as the platform defines it (no platformdirs needed)."""
    if sys.platform == "win32":
        base = os.environ.get("APPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Roaming")
        return Path(base) / "zeroplan"
    if sys.platform == "darwin":
        return Path(os.path.expanduser("~")) / "Library" / "Application Support" / "zeroplan"
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    if not os.path.isabs(base):  # the XDG spec: a relative value is invalid and ignored
        base = os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "zeroplan"


_presets_file: str | None = None  # --presets FILE of the running command


def use_presets_file(path: str | None) -> None:
    """Layer this file (--presets) over the built-in and config-directory presets; None for none."""
    global _presets_file
    if path is not None and not path.strip():
        raise PresetError("presets_file", "is empty", "give the path of a presets YAML file")
    if path is not None and not Path(path).expanduser().is_file():
        raise PresetError("presets_file", f"no such file '{path}'", "give the path of a presets YAML file")
    _presets_file = path


@contextlib.contextmanager
def _layered(before: str | None) -> Iterator[None]:
    global _presets_file
    try:
        yield
    finally:
        _presets_file = before


def layered(path: str | None) -> contextlib.AbstractContextManager[None]:
    """This presets file layered (checked now, as use_presets_file), then the one in place before."""
    before = _presets_file
    use_presets_file(path)
    return _layered(before)


def user_files() -> tuple[Path, ...]:
    """The user's presets files in the order they apply: the config directory's, then --presets."""
    files = []
    configured = user_config_dir() / USER_FILE_NAME
    if configured.is_file():
        files.append(configured)
    if _presets_file is not None:
        files.append(Path(_presets_file).expanduser())
    for path in files:  # read now or earlier in this process (cached): either way no output replaces it
        note_input(path)
    return tuple(files)


@functools.lru_cache(maxsize=None)
def _merged(files: tuple[Path, ...]) -> dict[str, dict[str, PresetEntry]]:
    base = builtin()
    merged = {category: dict(base[category]) for category in CATEGORIES}
    for path in files:
        for category, entries in validate(path, merged).items():
            merged[category].update(entries)
    return {category: {name: PresetEntry(fields) for name, fields in entries.items()}
            for category, entries in merged.items()}


def validate(path: Path, base: Entries | None = None) -> Entries:
    """A user presets file's entries, validated over `base` (the built-in ones by default) and each built as
    every command builds it (gpu(), cluster(), model()), so what validation accepts, every command can use."""
    from zeroplan.inputs.preset_schema import validate_file  # YAML and pydantic: only for user files

    return validate_file(path, builtin() if base is None else base, build)


def build(category: str, name: str, entries: Entries) -> object:
    """The preset `name` of `category` made from `entries` as the commands make it."""
    return {"gpus": gpu, "clusters": cluster, "models": model}[category](name, entries)


def _load_category(category: str) -> dict[str, PresetEntry]:
    return _merged(user_files())[category]


def clear_cache() -> None:
    _merged.cache_clear()


def names(category: str) -> list[str]:
    return sorted(_load_category(category))


def entry(category: str, name: str, entries_by_category: Entries | None = None) -> PresetEntry:
    entries = _load_category(category) if entries_by_category is None else entries_by_category[category]
    key = name.strip().lower()
    if key in entries:
        found = entries[key]
        return found if isinstance(found, PresetEntry) else PresetEntry(found)
    flag = {"gpus": "gpu", "clusters": "cluster", "models": "model"}[category]

    raise PresetError(flag, f"unknown {category[:-1]} preset '{name}'",
                      f"{_did_you_mean(key, entries)}see `zeroplan presets list`")


def _link(bandwidth: str, latency_us: float, what: str) -> Link:
    return Link(bandwidth_bytes_per_s=parse_rate(bandwidth, what), latency_s=latency_us * 1e-6, source="preset")


def gpu(name: str, entries: Entries | None = None) -> GpuSpec:
    """The GPU preset as every command uses it (presets validate builds each entry of a file through here too,
    so a file it accepts is one every command can use)."""
    e = entry("gpus", name, entries)
    return GpuSpec(
        name=name.strip().lower(),
        memory_bytes=parse_bytes(e.memory, f"gpu preset {name}: memory"),
        hbm_bandwidth_bytes_per_s=parse_rate(e.hbm_bandwidth, f"gpu preset {name}: hbm_bandwidth"),
        bf16_flops=int(round(e.bf16_tflops * 1e12)),
        intra_node_link=_link(e.intra_node_link["bandwidth"], e.intra_node_link["latency_us"],
                              f"gpu preset {name}: intra_node_link"),
        description=e.description,
        supports_bf16=e.bf16,
        fp8_flops=None if e.fp8_tflops is None else int(round(e.fp8_tflops * 1e12)),
        supports_mxfp8=e.mxfp8,
    )


def cluster(name: str, entries: Entries | None = None) -> ClusterSpec:
    e = entry("clusters", name, entries)
    return ClusterSpec(
        name=name.strip().lower(),
        gpu=gpu(e.gpu, entries),
        gpus_per_node=e.gpus_per_node,
        inter_node_link=_link(e.inter_node_bandwidth_per_gpu, e.inter_node_latency_us,
                              f"cluster preset {name}: inter_node_bandwidth_per_gpu"),
        cpu_memory_bytes=parse_bytes(e.cpu_memory, f"cluster preset {name}: cpu_memory"),
        nvme_bytes=parse_bytes(e.nvme, f"cluster preset {name}: nvme"),
        nvme_bandwidth_bytes_per_s=parse_rate(e.nvme_bandwidth, f"cluster preset {name}: nvme_bandwidth"),
        pcie_bandwidth_bytes_per_s=PCIE_X16_BYTES_PER_S[e.pcie_generation],
        pcie_generation=e.pcie_generation,
        description=e.description,
    )


def default_cluster(gpu_name: str) -> str | None:
    """The cluster preset a bare `--gpu NAME` stands for: the GPU entry's explicit default_cluster
    (None: a generic node, or an unknown GPU). Never guessed from which clusters use the GPU."""
    fields = _load_category("gpus").get(gpu_name.strip().lower())
    return fields.get("default_cluster") if fields is not None else None


# Preset field -> Hugging Face config.json key, per naming style, so presets rebuild through the same
# exact architecture code as a user's config.json does.
_HF_KEYS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
            "kv_heads": "num_key_value_heads", "ffn": "intermediate_size", "vocab": "vocab_size",
            "max_seq_len": "max_position_embeddings", "tied_embeddings": "tie_word_embeddings",
            "experts": "num_local_experts", "experts_per_token": "num_experts_per_tok"}
_HF_KEYS_BY_FAMILY = {
    "gpt2": {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head", "ffn": "n_inner",
             "max_seq_len": "n_positions"},
    "opt": {"ffn": "ffn_dim"},
}
GATED_MLP_FAMILIES = frozenset({"llama", "mistral", "mixtral", "qwen2", "gemma", "phi3"})


def _hf_config(e: PresetEntry) -> dict[str, Any]:
    keys = {**_HF_KEYS, **_HF_KEYS_BY_FAMILY.get(e.family, {})}
    config = {keys[field]: e[field] for field in keys if e.get(field) is not None}
    config.update(e.config)
    config["model_type"] = e.family
    return config


def model(name: str, entries: Entries | None = None) -> ModelSpec:
    """A model preset with its full shape; rebuilt through core.model.families where the family is supported."""
    from zeroplan.core.model.families import DESCRIBED_FAMILIES, model_spec_from_hf_config

    e = entry("models", name, entries)
    key = name.strip().lower()
    if e.family in DESCRIBED_FAMILIES:
        spec = model_spec_from_hf_config(_hf_config(e), key, source=f"model preset {key}")
        if (spec.params, spec.largest_layer_params) != (e.params, e.largest_layer_params):
            raise PresetError("model", f"preset '{key}' says {e.params} parameters (largest layer "
                              f"{e.largest_layer_params}) but its shape gives {spec.params} ({spec.largest_layer_params})",
                              "fix the preset's params, largest_layer_params or shape fields")
        return spec
    # Families core.model.families does not build (e.g. bloom): the shape fields as given, with the
    # layout derived from them (token embedding in, untied head out).
    embedding = e.vocab * e.hidden
    output = 0 if e.tied_embeddings else embedding
    layer_params = (e.params - embedding - output) // e.layers
    if layer_params < 1:
        raise PresetError("model", f"preset '{key}' says {e.params} parameters, fewer than its embeddings "
                          f"({embedding + output}) and {e.layers} layers hold", "fix params or the shape fields")
    shape = ModelShape.of(
        layers=e.layers, hidden=e.hidden, heads=e.heads, kv_heads=e.kv_heads, ffn=e.ffn, vocab=e.vocab,
        experts=e.experts, experts_per_token=e.experts_per_token, max_seq_len=e.max_seq_len,
        family=e.family, tied_embeddings=e.tied_embeddings, gated_mlp=e.family in GATED_MLP_FAMILIES,
        layout=ParamLayout(layer_params, e.params - output - layer_params * e.layers, output))
    return ModelSpec(params=e.params, name=key, largest_layer_params=e.largest_layer_params, shape=shape,
                     extra=dict(e.config))


def show(category: str, name: str) -> dict[str, Any]:
    return dict(entry(category, name))


def category_of(name: str) -> str:
    """The category a bare preset name belongs to (for `zeroplan presets show NAME`)."""
    key = name.strip().lower()
    for category in CATEGORIES:
        if key in _load_category(category):
            return category
    every = [n for c in CATEGORIES for n in _load_category(c)]

    raise PresetError("NAME", f"unknown preset '{name}'", f"{_did_you_mean(key, every)}see `zeroplan presets list`")


def _did_you_mean(key: str, names: Iterable[str]) -> str:
    """The closest preset names to a mistyped one, as the start of an error's fix (difflib: the error path only)."""
    import difflib

    close = difflib.get_close_matches(key, list(names), n=3, cutoff=0.5)
    return f"did you mean {' or '.join(close)}? " if close else ""
