"""zeroplan from Python: `estimate`, `plan` and `check`, for notebooks and capacity-planning scripts.

Each function takes the command's options as keyword arguments named as the flags are, without the dashes
and with underscores (`--gpus-per-node 4` is `gpus_per_node=4`; a size may be given as text, "512GB", or
as a number of bytes), runs exactly what the command runs, and returns a typed result whose `to_dict()`
is the command's JSON document (`-f json`), key for key. Bad input raises `zeroplan.InputError` with the
message the command would print; a failed check is a result (`.failed`), not an exception.

    >>> import zeroplan
    >>> result = zeroplan.estimate(model="llama-2-13b", gpus=8)
    >>> result.recommendation.label, result.recommendation.reason
    >>> zeroplan.plan(model="llama-2-70b", gpus=64, global_batch=512).top[0].step_seconds
    >>> zeroplan.check("ds_config.json", gpus=16, model="llama-2-7b").failed

Full reference with a notebook-style example: docs/api.md.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zeroplan.core.errors import InputError

__all__ = ["estimate", "plan", "check", "EstimateResult", "EstimateOption", "Recommendation", "PlanResult",
           "PlanSummary", "CheckResult", "CheckFinding"]


def _refuse_unknown(given: dict[str, Any], known: set[str], command: str) -> None:
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            raise InputError(name, f"is not an option of {command}",
                             f"did you mean {close[0]}?" if close else f"see `zeroplan {command} --help`")


# ---- estimate ------------------------------------------------------------------------------------------------

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
    from zeroplan.estimate import report
    from zeroplan.estimate.run import build_plan
    from zeroplan.inputs.estimate_inputs import FIELDS, EstimateInputs

    _refuse_unknown(options, {name for names in FIELDS.values() for name in names}, "estimate")
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


# ---- plan ----------------------------------------------------------------------------------------------------

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
    from zeroplan.search import report
    from zeroplan.search.inputs import FIELDS, PlanInputs
    from zeroplan.search.run import run_plan

    _refuse_unknown(options, {name for names in FIELDS.values() for name in names}, "plan")
    outcome = run_plan(PlanInputs.of(units=units, **options), show_progress=False)
    document = json.loads(report.to_json(outcome))
    top = tuple(PlanSummary(
        rank=row["rank"], label=row["label"], dp=row["dp"], tp=row["tp"], pp=row["pp"], stage=row["stage"],
        micro_batch=row["micro_batch"], grad_accum=row["grad_accum"], recompute=row["recompute"],
        step_seconds=row["step_seconds"], gpu_total_bytes=row["gpu_bytes_total"], row=row)
        for row in document["top"])
    return PlanResult(model=document["model"]["name"], gpus=outcome.inputs.hardware.gpus, top=top,
                      assumptions=tuple(document["assumptions"]), _document=document)


# ---- check ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckFinding:
    rule: str
    severity: str
    message: str
    fix: str
    file: str
    line: int | None
    column: int | None


@dataclass(frozen=True)
class CheckResult:
    failed: bool
    findings: tuple[CheckFinding, ...]
    _document: dict[str, Any] = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `zeroplan check -f json` prints for the same files and context."""
        return json.loads(json.dumps(self._document))


def check(*files: str | Path, plan: str | Path | None = None, strict: bool = False, units: str = "iec",
          **context: Any) -> CheckResult:
    """`zeroplan check`: DeepSpeed configs, plan files and accelerate configs against what DeepSpeed accepts
    and what fits. `context` holds what the memory and batch rules need (gpus=, model=, tp=, ...)."""
    import dataclasses

    from zeroplan.check.render import to_json
    from zeroplan.check.runner import check_files
    from zeroplan.deepspeed.context import CheckContext, from_flags

    if not files:
        raise InputError("files", "no file to check", "give the paths of DeepSpeed configs or plan files")
    _refuse_unknown(context, {f.name for f in dataclasses.fields(CheckContext)} - {"units", "origin"}, "check")
    reports, failed = check_files(list(files), from_flags(units=units, **context), plan, strict)
    document = json.loads(to_json(reports, failed, strict))
    findings = tuple(CheckFinding(f["rule"], f["severity"], f["message"], f["fix"], f["file"], f["line"], f["column"])
                     for entry in document["files"] for f in entry["findings"])
    return CheckResult(failed=failed, findings=findings, _document=document)
