"""zeroplan.plan(...): the plan command from Python (see zeroplan.api and docs/api.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from zeroplan.inputs.keywords import refuse_unknown
from zeroplan.search import report
from zeroplan.search.inputs import FIELDS, PlanInputs
from zeroplan.search.run import run_plan


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
    _document: dict[str, Any] = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `zeroplan plan -f json` prints for the same inputs."""
        return json.loads(json.dumps(self._document))


def plan(*, units: str = "iec", **options: Any) -> PlanResult:
    """`zeroplan plan`: the fastest DP×TP×PP×ZeRO plans that fit, with predicted step time."""
    refuse_unknown(options, {name for names in FIELDS.values() for name in names}, "plan")
    outcome = run_plan(PlanInputs.of(units=units, **options), show_progress=False)
    document = json.loads(report.to_json(outcome))
    top = tuple(PlanSummary(
        rank=row["rank"], label=row["label"], dp=row["dp"], tp=row["tp"], pp=row["pp"], stage=row["stage"],
        micro_batch=row["micro_batch"], grad_accum=row["grad_accum"], recompute=row["recompute"],
        step_seconds=row["step_seconds"], gpu_total_bytes=row["gpu_bytes_total"], row=row, ep=row["ep"],
        etp=row["etp"])
        for row in document["top"])
    return PlanResult(model=document["model"]["name"], gpus=outcome.inputs.hardware.gpus, top=top,
                      assumptions=tuple(document["assumptions"]), _document=document)


