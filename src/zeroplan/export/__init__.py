"""`zeroplan export`: a DeepSpeed config or a plan file for the recommended (or a chosen) option.

What export writes passes `zeroplan check` with the same inputs (tests/test_export.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zeroplan.inputs import config_files as loaders
from zeroplan.deepspeed.context import CheckContext, from_plan
from zeroplan.deepspeed.plan_file import validate_plan
from zeroplan.deepspeed.choose import Choice, ExportError, choose

__all__ = ["Choice", "ExportError", "choose", "choose_for_plan", "PlanChoice"]


@dataclass(frozen=True)
class PlanChoice:
    """A plan file's option as keyword arguments for choose(), and its NVMe path."""

    context: CheckContext
    stage: int | None
    offload_optimizer: str | None
    offload_params: str | None
    nvme_path: str | None


def choose_for_plan(plan_path: str | Path, flags: CheckContext, stage: int | None = None,
                    offload_optimizer: str | None = None, offload_params: str | None = None,
                    nvme_path: str | None = None) -> PlanChoice:
    """Flags over the plan file: its model, cluster and training settings, and its zero: choice unless
    --stage/--offload-* pick another."""
    plan = validate_plan(loaders.load(plan_path))
    context = flags.under(from_plan(plan))
    zero = plan.zero
    if zero is not None and stage is None and offload_optimizer is None and offload_params is None:
        stage, offload_optimizer, offload_params = zero.stage, zero.offload_optimizer, zero.offload_params
    return PlanChoice(context, stage, offload_optimizer, offload_params,
                      nvme_path or (zero.nvme_path if zero is not None else None))
