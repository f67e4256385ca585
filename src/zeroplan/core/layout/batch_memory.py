"""Per-GPU memory for many plans at once, byte-identical to core.evaluate.estimate.evaluate_options.

evaluate_options builds each option's total from two independent halves: model states and buffers
(they depend on the layout and the option, not on the step's shape) and activations (they depend on
the step's shape, not on the option), joined by one rule: the optimizer step's fp32 gradient partition
lives after backward has freed the activations, so the GPU holds fixed + max(activations, temporary).

Here the first half comes from evaluate_options itself, once per layout with zero activations. The
second comes from core.memory.activations' exact terms: every term is linear in the micro-batch b (each is
a multiple of s·b tokens), so the terms for b are exactly b × the terms for one sequence, and rounding
each entry up, as activation_memory does, gives the same integers. tests/test_plan_search.py checks
both against evaluate_options on a sample of plans.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from zeroplan.core.memory.activations import ActivationConfig, activation_terms
from zeroplan.core.evaluate.estimate import EstimateRequest, evaluate_options
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.options import Option
from zeroplan.core.units import ceil_div


@dataclass(frozen=True)
class FixedMemory:
    """One option's memory on one layout, activations aside."""

    option: Option
    params: int
    gradients: int
    optimizer_states: int
    buffers: int  # without the optimizer-step temporary
    temporary: int  # the fp32 gradient partition that overlaps the activations
    cpu_bytes_per_node: int
    nvme_bytes_per_node: int
    host_limits: tuple[str, ...]  # "cpu", "nvme": these do not depend on activations
    host_checked: bool

    def gpu_parts(self, activations: int) -> tuple[int, int, int, int, int]:
        """(params, gradients, optimizer states, activations, buffers) as evaluate_options reports them."""
        beyond = max(0, self.temporary - activations)
        return self.params, self.gradients, self.optimizer_states, activations, self.buffers + beyond


def fixed_memory(request: EstimateRequest) -> list[FixedMemory]:
    """Every option of the request with no activations counted."""
    bare = dataclasses.replace(request, activation_bytes=0, activations=None, max_micro_batch=False)
    found = []
    for estimate in evaluate_options(bare):
        breakdown = estimate.breakdown
        beyond = breakdown.get("gpu/buffers/optimizer_step_beyond_activations", 0)
        parts = estimate.gpu_bytes
        found.append(FixedMemory(
            estimate.option, parts["params"], parts["gradients"], parts["optimizer_states"], parts["buffers"] - beyond,
            breakdown.get("temporaries/fp32_gradient_partition", 0), estimate.cpu_bytes_per_node,
            estimate.nvme_bytes_per_node, tuple(limit for limit in estimate.limits if limit != "gpu"),
            estimate.host_checked))
    return found


class ActivationTable:
    """Activation bytes per GPU for any step shape, from cached one-sequence terms as exact fractions."""

    def __init__(self, model: ModelSpec, seq_len: int, flash_attention: bool, dtype_bytes: int = 2,
                 capacity_factor: float | None = None) -> None:
        self.model, self.seq_len, self.flash_attention, self.dtype_bytes = model, seq_len, flash_attention, dtype_bytes
        self.capacity_factor = capacity_factor
        self._terms: dict[tuple, tuple[tuple[int, int], ...]] = {}

    def config(self, tp: int, pp: int, virtual_stages: int, sequence_parallel: bool, recompute: str,
               grad_accum: int, micro_batch: int, ep: int = 1) -> ActivationConfig:
        """The ActivationConfig evaluate_options would be given for this step."""
        return ActivationConfig(seq_len=self.seq_len, micro_batch=micro_batch, recompute=recompute,
                                flash_attention=self.flash_attention, sequence_parallel=sequence_parallel, tp=tp,
                                pp=pp, virtual_stages=virtual_stages, num_micro_batches=grad_accum,
                                dtype_bytes=self.dtype_bytes, ep=ep, capacity_factor=self.capacity_factor)

    def bytes(self, tp: int, pp: int, virtual_stages: int, sequence_parallel: bool, recompute: str,
              grad_accum: int, micro_batch: int, ep: int = 1) -> int:
        # Only min(pp, m) of the accumulation steps matters (1F1B keeps at most pp micro-batches in flight).
        in_flight = min(pp, grad_accum) if virtual_stages == 1 else 0
        key = (tp, pp, virtual_stages, sequence_parallel, recompute, in_flight, ep)
        terms = self._terms.get(key)
        if terms is None:
            config = self.config(tp, pp, virtual_stages, sequence_parallel, recompute, grad_accum, 1, ep)
            terms = tuple((t.numerator, t.denominator) for t in activation_terms(self.model, config).values())
            self._terms[key] = terms
        return sum(ceil_div(micro_batch * numerator, denominator) for numerator, denominator in terms)
