"""zeroplan.check(...): the check command from Python (see zeroplan.api and docs/api.md)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zeroplan.check.render import to_json
from zeroplan.check.runner import check_files
from zeroplan.core.errors import InputError
from zeroplan.deepspeed.context import from_flags
from zeroplan.inputs.keywords import api_values, presets_layer
from zeroplan.inputs.sections import HardwareInputs, ModelInputs, OutputInputs, ParallelInputs, StepInputs


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


def _fields() -> dict[Any, tuple[str, ...]]:
    """The flags check takes as context (zeroplan.cli.check_cmd), by section: their keywords and types."""
    return {ModelInputs: ("params", "model", "hidden", "largest_layer_params"),
            HardwareInputs: ("gpus", "gpus_per_node", "gpu", "cluster", "presets_file", "cpu_memory", "nvme",
                             "gpu_memory"),
            ParallelInputs: ("tp", "pp"),
            StepInputs: ("micro_batch", "grad_accum", "global_batch", "seq_len", "recompute", "flash_attention",
                         "precision", "optimizer"),
            OutputInputs: ("units",)}


def _path(value: Any, keyword: str) -> str | Path:
    if isinstance(value, (str, Path)):
        return value
    if isinstance(value, os.PathLike) and isinstance(os.fspath(value), str):
        return str(os.fspath(value))
    raise InputError(keyword, f"must be a path (text or os.PathLike), got {type(value).__name__} {value!r}",
                     "give the path of a DeepSpeed config, plan file or accelerate config")


def check(*files: str | Path, plan: str | Path | None = None, strict: bool = False, units: str = "iec",
          **context: Any) -> CheckResult:
    """`zeroplan check`: DeepSpeed configs, plan files and accelerate configs against what DeepSpeed accepts
    and what fits. `context` holds what the memory and batch rules need (gpus=, model=, tp=, ...); keywords
    and their types: zeroplan.inputs.keywords (None = not given)."""
    if not files:
        raise InputError("files", "no file to check", "give the paths of DeepSpeed configs or plan files")
    paths = [_path(file, "files") for file in files]
    plan_path = None if plan is None else _path(plan, "plan")
    if not isinstance(strict, bool):
        raise InputError("strict", f"must be True or False, got {strict!r}", "write strict=True or False")
    values = api_values({"units": units, **context}, _fields(), "check")
    values.setdefault("units", "iec")
    presets_file = values.pop("presets_file", None)
    with presets_layer(presets_file, "presets_file" if "presets_file" in context else "presets"):
        reports, failed = check_files(paths, from_flags(**values), plan_path, strict)
    document = json.loads(to_json(reports, failed, strict))
    findings = tuple(CheckFinding(f["rule"], f["severity"], f["message"], f["fix"], f["file"], f["line"], f["column"])
                     for entry in document["files"] for f in entry["findings"])
    return CheckResult(failed=failed, findings=findings, _document=document)
