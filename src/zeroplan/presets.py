"""Built-in GPU, cluster and model presets: YAML files validated with pydantic.

Files live in the repository's top-level presets/ directory, packaged into the wheel as
zeroplan/_presets. Nothing is read at import time; each category is read once on first use.
Sizes are written with units ("81920MiB", "2039GB/s", "400Gb/s") and parsed exactly.
"""

from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zeroplan.core.errors import InputError
from zeroplan.core.hardware import ClusterSpec, GpuSpec, Link
from zeroplan.core.model import ModelSpec
from zeroplan.core.units import parse_bytes, parse_rate

CATEGORIES = ("gpus", "clusters", "models")
# PCIe x16 per direction, after encoding overhead (Gen3 15.75, Gen4 31.5, Gen5 63 GB/s).
PCIE_X16_BYTES_PER_S = {3: 15_750_000_000, 4: 31_500_000_000, 5: 63_000_000_000}


class PresetError(InputError):
    pass


def presets_dir() -> Path:
    """Packaged presets in a wheel; the repository's presets/ in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_presets", here.parent.parent / "presets"):
        if (candidate / "gpus.yaml").is_file():
            return candidate
    raise PresetError("presets", f"no presets directory found next to {here}", "reinstall zeroplan")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkEntry(_Strict):
    bandwidth: str = Field(description="per direction, e.g. 300GB/s or 400Gb/s")
    latency_us: float = Field(ge=0)


class GpuEntry(_Strict):
    description: str
    memory: str = Field(description="as the driver reports it, e.g. 81920MiB")
    hbm_bandwidth: str
    bf16_tflops: float = Field(gt=0, description="dense; fp16 where the GPU has no bf16")
    intra_node_link: LinkEntry
    sources: list[str] = Field(min_length=1)


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


_ENTRY_TYPES = {"gpus": GpuEntry, "clusters": ClusterEntry, "models": ModelEntry}


def _format_validation_error(path: Path, name: str, entry_type: type[BaseModel], error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "extra_forbidden":
        valid = ", ".join(entry_type.model_fields)
        return f"{path.name}: {name}: unknown key '{where}' (valid keys: {valid})"
    return f"{path.name}: {name}: {where}: {first['msg']}"


def _yaml_loader():
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def _load_category(category: str) -> dict[str, BaseModel]:
    path = presets_dir() / f"{category}.yaml"
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_yaml_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PresetError(str(path), f"malformed YAML{where}", "fix the preset file") from None
    if not isinstance(raw, dict):
        raise PresetError(str(path), "must be a mapping of preset name to fields")
    entry_type = _ENTRY_TYPES[category]
    entries = {}
    for name, fields in raw.items():
        try:
            entries[str(name)] = entry_type.model_validate(fields)
        except ValidationError as exc:
            raise PresetError("preset", _format_validation_error(path, name, entry_type, exc)) from None
    return entries


def names(category: str) -> list[str]:
    return sorted(_load_category(category))


def entry(category: str, name: str) -> BaseModel:
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
        intra_node_link=_link(e.intra_node_link.bandwidth, e.intra_node_link.latency_us,
                              f"gpu preset {name}: intra_node_link"),
        description=e.description,
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


def model(name: str) -> ModelSpec:
    e = entry("models", name)
    return ModelSpec(
        params=e.params, name=name.strip().lower(), largest_layer_params=e.largest_layer_params,
        layers=e.layers, hidden=e.hidden, heads=e.heads, kv_heads=e.kv_heads, ffn=e.ffn, vocab=e.vocab,
        experts=e.experts, experts_per_token=e.experts_per_token, max_seq_len=e.max_seq_len,
        family=e.family, tied_embeddings=e.tied_embeddings, extra=dict(e.config),
    )


def show(category: str, name: str) -> dict[str, Any]:
    return entry(category, name).model_dump()


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
