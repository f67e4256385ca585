"""The pydantic schema of preset files. Imported only when a preset file has to be validated."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


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
    bf16: bool = Field(True, description="false where the GPU has no bf16 (V100): plan and export fp16")
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


ENTRY_TYPES = {"gpus": GpuEntry, "clusters": ClusterEntry, "models": ModelEntry}


def validate_category(category: str, raw: dict, path: Path) -> dict[str, dict[str, Any]]:
    """Validated entries as plain dicts with defaults filled in; ValueError names file, entry and key."""
    entry_type = ENTRY_TYPES[category]
    entries = {}
    for name, fields in raw.items():
        try:
            entries[str(name)] = entry_type.model_validate(fields).model_dump()
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            if first["type"] == "extra_forbidden":
                valid = ", ".join(entry_type.model_fields)
                raise ValueError(f"{path.name}: {name}: unknown key '{where}' (valid keys: {valid})") from None
            raise ValueError(f"{path.name}: {name}: {where}: {first['msg']}") from None
    return entries
