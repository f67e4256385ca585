"""The largest micro-batch an option fits, and the accumulation that reaches a global batch (docs/formulas.md §16)."""

from __future__ import annotations

import dataclasses

from zeroplan.core.evaluate.option_estimate import OptionEstimate
from zeroplan.core.memory.activations import ActivationConfig, largest_micro_batch_that_fits
from zeroplan.core.model.spec import ModelSpec


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


def with_max_micro_batch(estimate: OptionEstimate, model: ModelSpec, activations: ActivationConfig,
                         usable: int, global_batch: int | None, dp: int) -> OptionEstimate:
    """`estimate` with the largest micro-batch that fits `usable` GPU bytes, and the accumulation that reaches
    `global_batch` over `dp` ranks (when one is given)."""
    # total(b) = fixed + max(activations(b), step temporary): both sides must fit.
    beyond = estimate.breakdown.get("gpu/buffers/optimizer_step_beyond_activations", 0)
    fixed = estimate.gpu_bytes["total"] - estimate.gpu_bytes["activations"] - beyond
    temporary = estimate.breakdown.get("temporaries/fp32_gradient_partition", 0)
    largest = 0
    if fixed + temporary <= usable:
        largest = largest_micro_batch_that_fits(usable, fixed, model, activations)
    found = None
    if global_batch is not None and largest:
        found = accumulation_for(global_batch, dp, largest)
    return dataclasses.replace(estimate, max_micro_batch=largest, accumulation_micro_batch=found and found[0],
                               grad_accum_steps=found and found[1])
