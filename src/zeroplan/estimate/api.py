"""zeroplan.estimate(...): the estimate command from Python (see zeroplan.api and docs/api.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from zeroplan.inputs.keywords import refuse_unknown
from zeroplan.estimate import report
from zeroplan.planning.estimate_plan import build_plan
from zeroplan.inputs.estimate_inputs import FIELDS, EstimateInputs


@dataclass(frozen=True)
class EstimateOption:
    """One ZeRO stage and offload tier, as a row of the estimate table (bytes per GPU, CPU/NVMe per node)."""

    key: str
    label: str
    stage: int
    offload_optimizer: str
    offload_params: str
    gpu_bytes: dict[str, int]
    cpu_bytes_per_node: int
    nvme_bytes_per_node: int
    comm_bytes_per_gpu_per_step: int
    comm_seconds_per_step: float
    fits: bool
    limits: tuple[str, ...]

    @property
    def gpu_total_bytes(self) -> int:
        return self.gpu_bytes["total"]


@dataclass(frozen=True)
class Recommendation:
    """The option to use and why; `label` is None when nothing fits (then `fewest_gpus` may say how many would)."""

    label: str | None
    key: str | None
    reason: str
    fewest_gpus: int | None


@dataclass(frozen=True)
class EstimateResult:
    model: str
    params: int
    world: int
    gpu: str
    convention: str
    options: tuple[EstimateOption, ...]
    recommendation: Recommendation
    assumptions: tuple[str, ...]
    _document: dict[str, Any] = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `zeroplan estimate -f json` prints for the same inputs."""
        return json.loads(json.dumps(self._document))

    def option(self, label: str) -> EstimateOption:
        """The row labelled e.g. "ZeRO-3" or "ZeRO-3 + optimizer→cpu"."""
        for option in self.options:
            if option.label == label:
                return option
        raise KeyError(f"no option '{label}'; the options are: {', '.join(o.label for o in self.options)}")


def estimate(*, units: str = "iec", **options: Any) -> EstimateResult:
    """`zeroplan estimate`: what every GPU holds at each ZeRO stage and offload tier, and what to use."""
    refuse_unknown(options, {name for names in FIELDS.values() for name in names}, "estimate")
    result = build_plan(EstimateInputs.of(units=units, **options))
    document = json.loads(report.to_json(result))
    chosen = document["recommendation"]
    labels = {row["key"]: row["label"] for row in document["options"]}
    rows = tuple(EstimateOption(
        key=row["key"], label=row["label"], stage=row["stage"], offload_optimizer=row["offload_optimizer"],
        offload_params=row["offload_params"], gpu_bytes=dict(row["gpu_bytes"]),
        cpu_bytes_per_node=row["cpu_bytes_per_node"], nvme_bytes_per_node=row["nvme_bytes_per_node"],
        comm_bytes_per_gpu_per_step=row["comm_bytes_per_gpu_per_step"],
        comm_seconds_per_step=row["comm_seconds_per_step"], fits=row["fits"], limits=tuple(row["limits"]))
        for row in document["options"])
    return EstimateResult(
        model=document["model"]["name"], params=document["model"]["params"], world=document["parallel"]["world"],
        gpu=document["cluster"]["gpu"], convention=document["convention"], options=rows,
        recommendation=Recommendation(labels.get(chosen["key"]), chosen["key"], chosen["reason"],
                                      chosen["fewest_gpus"]),
        assumptions=tuple(document["assumptions"]), _document=document)


