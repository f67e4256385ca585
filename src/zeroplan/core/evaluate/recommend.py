"""Pick the cheapest option that fits and say why, with the deciding numbers (docs/formulas.md §17.4).

Order of preference: no offload before offload (CPU before CPU+params before NVMe), then less
data-parallel traffic, then the lower stage (less machinery for the same traffic). When nothing
fits, find the fewest GPUs of this kind that would, by bisection over dp. Per-GPU shards only shrink
as dp grows, so fitting is monotone in dp and the answer is the smallest world, with one exception:
hpZ's secondary partition appears once dp exceeds the hpZ group, so with --zeropp hpz the answer is a
world that fits where the one below it does not.
"""

from __future__ import annotations

import dataclasses
from math import lcm
from dataclasses import dataclass

from zeroplan.core.evaluate.estimate import EstimateRequest, OptionEstimate, evaluate_options


from zeroplan.core.parallel.grid import MAX_WORLD, ParallelDims
from zeroplan.core.units import format_bytes


@dataclass(frozen=True)
class Recommendation:
    option: OptionEstimate | None
    reason: str
    fewest_gpus: int | None = None  # when nothing fits: the smallest world where something does
    fewest_gpus_option: str | None = None


def preference_key(estimate: OptionEstimate) -> tuple[int, int, int]:
    return (estimate.option.tier_rank, estimate.comm_bytes_per_gpu_per_step, estimate.option.stage)


def _shortfall(estimate: OptionEstimate, request: EstimateRequest, units: str) -> str:
    """'ZeRO-1 needs 66.6 GiB > 60.0 GiB usable' for the first limit it breaks."""
    budget, cluster = request.budget, request.cluster
    label = estimate.option.label
    if "gpu" in estimate.limits:
        return (f"{label} needs {format_bytes(estimate.gpu_bytes['total'], units)} per GPU > "
                f"{format_bytes(budget.usable_gpu_bytes, units)} usable")
    # A cpu or nvme limit is only ever set against a known capacity (estimate._with_fit).
    cpu_usable = budget.usable_host_bytes(cluster.cpu_memory_bytes)
    if "cpu" in estimate.limits and cpu_usable is not None:
        return (f"{label} needs {format_bytes(estimate.cpu_bytes_per_node, units)} of CPU RAM per node > "
                f"{format_bytes(cpu_usable, units)} usable")
    return (f"{label} needs {format_bytes(estimate.nvme_bytes_per_node, units)} of NVMe per node > "
            f"{format_bytes(cluster.nvme_bytes or 0, units)}")


def _fits_summary(estimate: OptionEstimate, request: EstimateRequest, units: str) -> str:
    text = (f"{estimate.option.label} needs {format_bytes(estimate.gpu_bytes['total'], units)} per GPU ≤ "
            f"{format_bytes(request.budget.usable_gpu_bytes, units)} usable")
    if estimate.cpu_bytes_per_node:
        text += f", {format_bytes(estimate.cpu_bytes_per_node, units)} CPU RAM per node"
    if estimate.nvme_bytes_per_node:
        text += f", {format_bytes(estimate.nvme_bytes_per_node, units)} NVMe per node"
    if not estimate.host_checked:
        text += " (host capacity unknown: not checked)"
    return text


def fewest_gpus(request: EstimateRequest) -> tuple[int, OptionEstimate] | None:
    """Smallest world where some option fits, or None up to MAX_WORLD GPUs. Worlds are multiples of
    tp·pp that either fit in one node or fill whole nodes (ParallelDims' rule), so the search walks
    one node's worlds first, then multiples of lcm(tp·pp, GPUs per node), never past MAX_WORLD."""
    # Partitioning real tensors costs O(ranks × tensors): search with the paper's even split instead.
    base = dataclasses.replace(request, convention="paper") if request.convention == "framework" else request
    parallel = base.parallel
    # a world holds whole tp × pp grids and, with experts cut apart, whole ep × etp blocks in every stage
    model_parallel = lcm(parallel.tp * parallel.pp, parallel.pp * parallel.ep * parallel.etp)
    per_node = parallel.gpus_per_node

    def best_at(world: int) -> OptionEstimate | None:
        trial = dataclasses.replace(base, parallel=ParallelDims(world, parallel.tp, parallel.pp, per_node,
                                                                ep=parallel.ep, etp=parallel.etp))
        fitting = [e for e in evaluate_options(trial) if e.fits]
        return min(fitting, key=preference_key) if fitting else None

    step = lcm(model_parallel, per_node)
    largest = MAX_WORLD // step
    if largest == 0 or best_at(largest * step) is None:  # what does not shrink with dp already fails
        return None
    for world in range(model_parallel, per_node + 1, model_parallel):  # inside one node
        if world > parallel.world and (found := best_at(world)) is not None:
            return world, found
    low, high = max(parallel.world // step, per_node // step), largest  # low fails (or is 0), high fits
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if best_at(middle * step) is not None else (middle, high)
    best = best_at(high * step)
    return None if best is None else (high * step, best)  # high fits: best is never None


def recommend(request: EstimateRequest, estimates: list[OptionEstimate], units: str = "iec") -> Recommendation:
    ordered = sorted(estimates, key=preference_key)
    chosen = next((e for e in ordered if e.fits), None)
    if chosen is None:
        closest = min(ordered, key=lambda e: (e.gpu_bytes["total"], preference_key(e)))
        found = fewest_gpus(request)
        gpu_name = request.cluster.gpu.name
        reason = f"nothing fits on {request.parallel.world} × {gpu_name}: {_shortfall(closest, request, units)}"
        if found is None:
            reason += f"; no world size up to {MAX_WORLD} GPUs fits either"
            return Recommendation(None, reason)
        world, option = found
        reason += f"; the fewest {gpu_name} GPUs that fit: {world} ({option.option.label})"
        return Recommendation(None, reason, world, option.option.key)

    rejected = ordered[: ordered.index(chosen)]
    # For each cheaper tier, the option that came closest (the last tried): why that tier was passed over.
    last_per_tier: dict[int, OptionEstimate] = {}
    for estimate in rejected:
        last_per_tier[estimate.option.tier_rank] = estimate
    parts = [_shortfall(estimate, request, units) for _, estimate in sorted(last_per_tier.items())]
    parts.append(_fits_summary(chosen, request, units))
    reason = "; ".join(parts)
    if not rejected:
        reason += ", the cheapest option asked for" if chosen.option.offloads else ", with the least traffic and no offload"
    same_cost = [e for e in ordered if e.fits and e is not chosen and preference_key(e)[:2] == preference_key(chosen)[:2]]
    if same_cost:
        lighter = min(same_cost, key=lambda e: e.gpu_bytes["total"])
        saved = chosen.gpu_bytes["total"] - lighter.gpu_bytes["total"]
        if saved > 0:
            reason += (f"; {lighter.option.label} would free {format_bytes(saved, units)} per GPU at the same traffic"
                       " (room for a larger micro-batch)")
    return Recommendation(chosen, reason)
