"""zeroplan.plan(...): the plan command from Python (see zeroplan.api and docs/api.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from zeroplan.inputs.keywords import api_values, presets_layer
from zeroplan.search import report
from zeroplan.search.inputs import FIELDS, PlanInputs
from zeroplan.search.report import top_entries
from zeroplan.search.run import run_plan
from zeroplan.inputs.sections import OutputInputs


@dataclass(frozen=True)
class PlanSummary:
    """One of the fastest plans that fit: layout, ZeRO option, step shape, predicted time and memory."""
    rank: int
    label: str
    dp: int
    tp: int
    pp: int
    stage: int
    micro_batch: int
    grad_accum: int
    recompute: str
    step_seconds: float
    gpu_total_bytes: int
    row: dict[str, Any] = field(repr=False, compare=False)
    ep: int = 1  # expert parallelism (mixture-of-experts models)
    etp: int = 1  # expert tensor parallelism


@dataclass(frozen=True)
class PlanResult:
    model: str
    gpus: int
    top: tuple[PlanSummary, ...]
    assumptions: tuple[str, ...]
    _outcome: Any = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `zeroplan plan -f json` prints for the same inputs (built on demand)."""
        return json.loads(report.to_json(self._outcome))


def plan(*, units: str = "iec", **options: Any) -> PlanResult:
    """`zeroplan plan`: the fastest DP×TP×PP×ZeRO plans that fit, with predicted step time.
    Keywords and their types: zeroplan.inputs.keywords (None = not given)."""
    values = api_values({"units": units, **options}, {**FIELDS, OutputInputs: ("units",)}, "plan")
    units = values.pop("units", "iec")
    with presets_layer(values.get("presets_file"), "presets_file" if "presets_file" in options else "presets"):
        outcome = run_plan(PlanInputs.of(units=units, **values), show_progress=False)
    top = tuple(PlanSummary(
        rank=row["rank"], label=row["label"], dp=row["dp"], tp=row["tp"], pp=row["pp"], stage=row["stage"],
        micro_batch=row["micro_batch"], grad_accum=row["grad_accum"], recompute=row["recompute"],
        step_seconds=row["step_seconds"], gpu_total_bytes=row["gpu_bytes_total"], row=row, ep=row["ep"],
        etp=row["etp"])
        for row in top_entries(outcome))
    return PlanResult(model=outcome.resolved.request.model.name, gpus=outcome.inputs.hardware.gpus, top=top,
                      assumptions=tuple(outcome.resolved.assumptions), _outcome=outcome)
