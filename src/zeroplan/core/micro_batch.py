"""The largest micro-batch an option fits, and the accumulation that reaches a global batch."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from zeroplan.core.activations import ActivationConfig, largest_micro_batch_that_fits
from zeroplan.core.option_estimate import OptionEstimate

if TYPE_CHECKING:
    from zeroplan.core.estimate import EstimateRequest


def accumulation_for(global_batch: int, dp: int, micro_batch_limit: int) -> tuple[int, int] | None:
    """(micro_batch, accumulation steps) reaching global_batch on dp ranks with the largest micro-batch
    ≤ micro_batch_limit that divides each rank's share exactly; None when none does."""
    if global_batch % dp or micro_batch_limit < 1:
        return None
    per_rank = global_batch // dp
    for micro_batch in range(min(micro_batch_limit, per_rank), 0, -1):
        if per_rank % micro_batch == 0:
            return micro_batch, per_rank // micro_batch
    return None


def with_max_micro_batch(request: EstimateRequest, estimate: OptionEstimate,
                         activations: ActivationConfig) -> OptionEstimate:
    # total(b) = fixed + max(activations(b), step temporary): both sides must fit.
    beyond = estimate.breakdown.get("gpu/buffers/optimizer_step_beyond_activations", 0)
    fixed = estimate.gpu_bytes["total"] - estimate.gpu_bytes["activations"] - beyond
    temporary = estimate.breakdown.get("temporaries/fp32_gradient_partition", 0)
    usable = request.budget.usable_gpu_bytes
    largest = 0
    if fixed + temporary <= usable:
        largest = largest_micro_batch_that_fits(usable, fixed, request.model, activations)
    found = None
    if request.global_batch is not None and largest:
        found = accumulation_for(request.global_batch, request.parallel.dp, largest)
    return dataclasses.replace(estimate, max_micro_batch=largest, accumulation_micro_batch=found and found[0],
                               grad_accum_steps=found and found[1])
