"""zeroplan.estimate(...): the estimate command from Python (see zeroplan.api and docs/api.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from zeroplan.estimate import report
from zeroplan.inputs.estimate_inputs import FIELDS, EstimateInputs
from zeroplan.inputs.keywords import api_values, presets_layer
from zeroplan.planning.estimate_plan import build_plan
from zeroplan.inputs.sections import OutputInputs


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
    _plan: Any = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `zeroplan estimate -f json` prints for the same inputs (built on demand)."""
        return json.loads(report.to_json(self._plan))

    def option(self, label: str) -> EstimateOption:
        """The row labelled e.g. "ZeRO-3" or "ZeRO-3 + optimizer→cpu"."""
        for option in self.options:
            if option.label == label:
                return option
        raise KeyError(f"no option '{label}'; the options are: {', '.join(o.label for o in self.options)}")


def estimate(*, units: str = "iec", **options: Any) -> EstimateResult:
    """`zeroplan estimate`: what every GPU holds at each ZeRO stage and offload tier, and what to use.
    Keywords and their types: zeroplan.inputs.keywords (None = not given)."""
    values = api_values({"units": units, **options}, {**FIELDS, OutputInputs: ("units",)}, "estimate")
    units = values.pop("units", "iec")
    with presets_layer(values.get("presets_file"), "presets_file" if "presets_file" in options else "presets"):
        plan = build_plan(EstimateInputs.of(units=units, **values))
    return result_of(plan)


def result_of(plan: Any) -> EstimateResult:
    """The typed result of an evaluated estimate, read from the plan itself (no JSON round trip: a loop of
    estimates costs what the evaluations cost)."""
    request, recommendation = plan.request, plan.recommendation
    rows = tuple(EstimateOption(
        key=e.option.key, label=e.option.label, stage=e.option.stage, offload_optimizer=e.option.offload_optimizer,
        offload_params=e.option.offload_params, gpu_bytes=dict(e.gpu_bytes), cpu_bytes_per_node=e.cpu_bytes_per_node,
        nvme_bytes_per_node=e.nvme_bytes_per_node, comm_bytes_per_gpu_per_step=e.comm_bytes_per_gpu_per_step,
        comm_seconds_per_step=e.comm_seconds_per_step, fits=e.fits, limits=tuple(e.limits))
        for e in plan.estimates)
    chosen = recommendation.option
    return EstimateResult(
        model=request.model.name, params=request.model.params, world=request.parallel.world,
        gpu=request.cluster.gpu.name, convention=request.convention, options=rows,
        recommendation=Recommendation(chosen.option.label if chosen else None, chosen.option.key if chosen else None,
                                      recommendation.reason, recommendation.fewest_gpus),
        assumptions=tuple(plan.assumptions), _plan=plan)
