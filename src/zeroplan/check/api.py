"""zeroplan.check(...): the check command from Python (see zeroplan.api and docs/api.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
import dataclasses

from zeroplan.core.errors import InputError
from zeroplan.inputs.keywords import refuse_unknown
from zeroplan.check.render import to_json


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
    from zeroplan.check.runner import check_files
    from zeroplan.deepspeed.context import CheckContext, from_flags

    if not files:
        raise InputError("files", "no file to check", "give the paths of DeepSpeed configs or plan files")
    refuse_unknown(context, {f.name for f in dataclasses.fields(CheckContext)} - {"units", "origin"}, "check")
    reports, failed = check_files(list(files), from_flags(units=units, **context), plan, strict)
    document = json.loads(to_json(reports, failed, strict))
    findings = tuple(CheckFinding(f["rule"], f["severity"], f["message"], f["fix"], f["file"], f["line"], f["column"])
                     for entry in document["files"] for f in entry["findings"])
    return CheckResult(failed=failed, findings=findings, _document=document)
