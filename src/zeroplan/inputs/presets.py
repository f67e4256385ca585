"""Built-in GPU, cluster and model presets: YAML files validated with pydantic.

Files live in the repository's top-level presets/ directory, packaged into the wheel as
zeroplan/_presets. Nothing is read at import time; each category is read once on first use, and its validated
form is cached (see _load_category) so a warm start needs neither YAML parsing nor pydantic.
Sizes are written with units ("81920MiB", "2039GB/s", "400Gb/s") and parsed exactly.
"""

from __future__ import annotations

import difflib
import functools
import zlib
import json
import os
from pathlib import Path
from typing import Any

from zeroplan import __version__
from zeroplan.core.errors import InputError
from zeroplan.core.hardware import ClusterSpec, GpuSpec, Link
from zeroplan.core.model import ModelSpec
from zeroplan.core.units import parse_bytes, parse_rate

CATEGORIES = ("gpus", "clusters", "models")
SCHEMA_REVISION = 2  # bump when inputs/preset_schema.py changes what a validated entry holds
# PCIe x16 per direction, after encoding overhead (Gen3 15.75, Gen4 31.5, Gen5 63 GB/s).
PCIE_X16_BYTES_PER_S = {3: 15_750_000_000, 4: 31_500_000_000, 5: 63_000_000_000}


class PresetError(InputError):
    pass


def presets_dir() -> Path:
    """Packaged presets in a wheel; the repository's presets/ in a source checkout."""
    package = Path(__file__).resolve().parent.parent  # src/zeroplan, or site-packages/zeroplan
    for candidate in (package / "_presets", package.parent.parent / "presets"):
        if (candidate / "gpus.yaml").is_file():
            return candidate
    raise PresetError("presets", f"no presets directory found next to {package}", "reinstall zeroplan")


class PresetEntry(dict):
    """A validated preset entry: a plain dict that also reads as attributes (entry.gpu)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _cache_dir() -> Path | None:
    configured = os.environ.get("ZEROPLAN_CACHE_DIR")
    if configured == "":
        return None  # caching switched off
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "zeroplan"


def _read_cache(path: Path | None) -> dict | None:
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # a damaged cache is ignored and rewritten


def _write_cache(path: Path | None, entries: dict) -> None:
    if path is None:
        return
    import tempfile  # only on a cache miss

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(entries, stream)
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only home just means validating every time


@functools.lru_cache(maxsize=None)
def _load_category(category: str) -> dict[str, PresetEntry]:
    """Entries of one category. Validation (pydantic) runs once per file content; its result is cached
    as JSON keyed by the file's hash, so later runs skip YAML parsing and pydantic entirely."""
    path = presets_dir() / f"{category}.yaml"
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise PresetError(str(path), f"cannot read preset file: {exc.strerror}", "reinstall zeroplan") from None
    # crc32 + adler32 + length of the content and the versions: an edit that keeps all three is not a
    # practical risk, and zlib costs a fraction of hashlib's OpenSSL import at every start.
    keyed = content + f"|{__version__}|{SCHEMA_REVISION}".encode()
    key = f"{zlib.crc32(keyed):08x}{zlib.adler32(keyed):08x}{len(keyed):x}"
    cache_dir = _cache_dir()
    cache_path = cache_dir / f"presets-{category}-{key}.json" if cache_dir else None
    entries = _read_cache(cache_path)
    if entries is None:
        entries = _validate(category, content, path)
        _write_cache(cache_path, entries)
    return {name: PresetEntry(fields) for name, fields in entries.items()}


def _validate(category: str, content: bytes, path: Path) -> dict:
    import yaml

    from zeroplan.inputs.preset_schema import validate_category

    try:
        raw = yaml.load(content.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PresetError(str(path), f"malformed YAML{where}", "fix the preset file") from None
    if not isinstance(raw, dict):
        raise PresetError(str(path), "must be a mapping of preset name to fields")
    try:
        return validate_category(category, raw, path)
    except ValueError as exc:
        raise PresetError("preset", str(exc)) from None


def names(category: str) -> list[str]:
    return sorted(_load_category(category))


def entry(category: str, name: str) -> PresetEntry:
    entries = _load_category(category)
    key = name.strip().lower()
    if key in entries:
        return entries[key]
    flag = {"gpus": "--gpu", "clusters": "--cluster", "models": "--model"}[category]
    close = difflib.get_close_matches(key, entries, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise PresetError(flag, f"unknown {category[:-1]} preset '{name}'",
                      f"{hint}see `zeroplan presets list`")


def _link(bandwidth: str, latency_us: float, what: str) -> Link:
    return Link(bandwidth_bytes_per_s=parse_rate(bandwidth, what), latency_s=latency_us * 1e-6, source="preset")


def gpu(name: str) -> GpuSpec:
    e = entry("gpus", name)
    return GpuSpec(
        name=name.strip().lower(),
        memory_bytes=parse_bytes(e.memory, f"gpu preset {name}: memory"),
        hbm_bandwidth_bytes_per_s=parse_rate(e.hbm_bandwidth, f"gpu preset {name}: hbm_bandwidth"),
        bf16_flops=int(round(e.bf16_tflops * 1e12)),
        intra_node_link=_link(e.intra_node_link["bandwidth"], e.intra_node_link["latency_us"],
                              f"gpu preset {name}: intra_node_link"),
        description=e.description,
        supports_bf16=e.bf16,
    )


def cluster(name: str) -> ClusterSpec:
    e = entry("clusters", name)
    return ClusterSpec(
        name=name.strip().lower(),
        gpu=gpu(e.gpu),
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


def model(name: str) -> ModelSpec:
    """A model preset with its full shape; rebuilt through core.architecture where the family is supported."""
    from zeroplan.core.architecture import SUPPORTED_FAMILIES, model_spec_from_hf_config

    e = entry("models", name)
    key = name.strip().lower()
    if e.family in SUPPORTED_FAMILIES:
        spec = model_spec_from_hf_config(_hf_config(e), key, source=f"model preset {key}")
        if (spec.params, spec.largest_layer_params) != (e.params, e.largest_layer_params):
            raise PresetError("--model", f"preset '{key}' says {e.params} parameters (largest layer "
                              f"{e.largest_layer_params}) but its shape gives {spec.params} ({spec.largest_layer_params})",
                              "fix presets/models.yaml")
        return spec
    # Families core.architecture does not build (e.g. bloom): the shape fields as given, with the
    # layout derived from them (token embedding in, untied head out).
    embedding = e.vocab * e.hidden
    output = 0 if e.tied_embeddings else embedding
    layer_params = (e.params - embedding - output) // e.layers
    return ModelSpec(
        params=e.params, name=key, largest_layer_params=e.largest_layer_params,
        layers=e.layers, hidden=e.hidden, heads=e.heads, kv_heads=e.kv_heads, ffn=e.ffn, vocab=e.vocab,
        experts=e.experts, experts_per_token=e.experts_per_token, max_seq_len=e.max_seq_len,
        family=e.family, tied_embeddings=e.tied_embeddings, gated_mlp=e.family in GATED_MLP_FAMILIES,
        layer_params=layer_params, input_params=e.params - output - layer_params * e.layers,
        output_params=output, extra=dict(e.config),
    )


def show(category: str, name: str) -> dict[str, Any]:
    return dict(entry(category, name))


def category_of(name: str) -> str:
    """The category a bare preset name belongs to (for `zeroplan presets show NAME`)."""
    key = name.strip().lower()
    for category in CATEGORIES:
        if key in _load_category(category):
            return category
    every = [n for c in CATEGORIES for n in _load_category(c)]
    close = difflib.get_close_matches(key, every, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise PresetError("NAME", f"unknown preset '{name}'", f"{hint}see `zeroplan presets list`")
