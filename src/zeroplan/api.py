"""zeroplan from Python: `estimate`, `plan` and `check`, for notebooks and capacity-planning scripts.

Each function takes the command's options as keyword arguments named as the flags are, without the dashes
and with underscores (`--gpus-per-node 4` is `gpus_per_node=4`; a size may be given as text, "512GB", or
as a number of bytes), runs exactly what the command runs, and returns a typed result whose `to_dict()`
is the command's JSON document (`-f json`), key for key. Bad input raises `zeroplan.InputError` with the
message the command would print, naming each input by its keyword (`gpus: ...` where the command says
`--gpus: ...`); a failed check is a result (`.failed`), not an exception.

    >>> import zeroplan
    >>> result = zeroplan.estimate(model="llama-2-13b", gpus=8)
    >>> result.recommendation.label, result.recommendation.reason
    >>> zeroplan.plan(model="llama-2-70b", gpus=64, global_batch=512).top[0].step_seconds
    >>> zeroplan.check("ds_config.json", gpus=16, model="llama-2-7b").failed

Full reference with a notebook-style example: docs/api.md.
"""

from __future__ import annotations

from zeroplan.check.api import CheckFinding, CheckResult, check
from zeroplan.estimate.api import EstimateOption, EstimateResult, Recommendation, estimate
from zeroplan.search.api import PlanResult, PlanSummary, plan

__all__ = ["estimate", "plan", "check", "EstimateResult", "EstimateOption", "Recommendation", "PlanResult",
           "PlanSummary", "CheckResult", "CheckFinding"]
