"""Run the search with a progress bar on stderr once it takes more than a moment."""

from __future__ import annotations

from dataclasses import dataclass, field

from zeroplan.core.layout.search import PlanRecord, SearchResult, search
from zeroplan.core.timing.step_time import FlopModel
from zeroplan.search.inputs import PlanInputs, ResolvedPlan, resolve
from zeroplan.search.metrics import Throughput, throughput
from zeroplan.search.reasons import rank_reason
from zeroplan.render.terminal import LateProgress

PROGRESS_AFTER_S = 0.3  # searches shorter than this never draw a bar


@dataclass
class PlanOutcome:
    resolved: ResolvedPlan
    result: SearchResult
    top: list[PlanRecord]
    metrics: dict[int, Throughput] = field(default_factory=dict)  # id(plan) -> throughput, filled on demand
    flops: FlopModel | None = None

    @property
    def inputs(self) -> PlanInputs:
        return self.resolved.inputs

    def throughput(self, plan: PlanRecord) -> Throughput:
        found = self.metrics.get(id(plan))
        if found is None:
            request = self.resolved.request
            if self.flops is None:
                self.flops = FlopModel.from_model(request.model)
            found = throughput(plan, request, self.flops, self.resolved.training_tokens)
            self.metrics[id(plan)] = found
        return found


    def reason(self, plan: PlanRecord) -> str:
        """Why this top plan ranks where it does (core.layout.search.rank's order, in words)."""
        request = self.resolved.request
        fastest = min(self.result.feasible, key=lambda p: p.time.total)
        return rank_reason(plan, self.top[0], fastest, request.tie_tolerance, request.budget.usable_gpu_bytes,
                           self.inputs.units)


def run_plan(inputs: PlanInputs, show_progress: bool = True) -> PlanOutcome:
    resolved = resolve(inputs)
    progress = LateProgress("searching layouts", enabled=show_progress, after_s=PROGRESS_AFTER_S)
    try:
        result = search(resolved.request, progress)
    finally:
        progress.close()
    top = result.best_per_layout()[: inputs.search.top]
    return PlanOutcome(resolved, result, top)
