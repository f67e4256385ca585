"""GPUs, links and clusters as plain frozen records (inputs/presets.py fills them from YAML)."""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError


@dataclass(frozen=True)
class Link:
    """A link for the α-β model: time = steps·latency + bytes/bandwidth (bandwidth per direction)."""

    bandwidth_bytes_per_s: int
    latency_s: float
    source: str = "preset"

    def __post_init__(self) -> None:
        if self.bandwidth_bytes_per_s <= 0:
            raise InputError("link bandwidth", f"must be positive, got {self.bandwidth_bytes_per_s}")
        if self.latency_s < 0:
            raise InputError("link latency", f"must not be negative, got {self.latency_s}")


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_bytes: int
    hbm_bandwidth_bytes_per_s: int
    bf16_flops: int  # dense, per second
    intra_node_link: Link
    description: str = ""
    supports_bf16: bool = True


@dataclass(frozen=True)
class ClusterSpec:
    """One node type, repeated. Capacities are per node; bandwidths per direction."""

    name: str
    gpu: GpuSpec
    gpus_per_node: int
    inter_node_link: Link  # per GPU (node bandwidth / GPUs per node)
    cpu_memory_bytes: int | None  # None: unknown, host capacity is then not checked
    nvme_bytes: int | None
    nvme_bandwidth_bytes_per_s: int | None
    pcie_bandwidth_bytes_per_s: int  # host <-> one GPU, per direction
    pcie_generation: int
    description: str = ""

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise InputError("gpus_per_node", f"must be at least 1, got {self.gpus_per_node}")
