"""Why each plan ranks where it does, and why the rest of the space does not fit, in words with numbers."""

from __future__ import annotations

from zeroplan.core.layout_search import PlanRecord, SearchResult
from zeroplan.core.units import format_bytes

PART_NAMES = {
    "compute": "compute", "tp_comm": "tensor-parallel communication", "pp_comm": "pipeline transfers",
    "bubble": "pipeline bubble", "dp_exposed": "exposed data-parallel communication",
    "offload": "offload transfers and CPU optimizer", "optimizer": "optimizer step",
}
LIMIT_NAMES = {"gpu": "GPU memory", "cpu": "CPU RAM per node", "nvme": "NVMe capacity per node"}


def _seconds(value: float) -> str:
    return f"{value:.3g} s" if value >= 0.01 else f"{value * 1e3:.2g} ms"


def _memory(plan: PlanRecord, usable: int, units: str) -> str:
    return f"{format_bytes(plan.gpu_total, units)} per GPU ({plan.gpu_total / usable:.0%} of usable)"


def _why_compute_differs(plan: PlanRecord, best: PlanRecord) -> str:
    if plan.recompute != best.recompute:
        return f" ({plan.recompute} recompute)" if plan.recompute != "none" else " (no recompute)"
    if plan.pp != best.pp or plan.tp != best.tp:
        return " (a busier pipeline stage)"
    return ""


def simpler_because(plan: PlanRecord, other: PlanRecord) -> str:
    """What makes `plan` simpler than `other`: the first difference in PlanRecord.simplicity_key."""
    if plan.option.tier_rank != other.option.tier_rank:
        return "no offload" if not plan.option.offloads else "less offload"
    if plan.tp * plan.pp != other.tp * other.pp:
        return f"less model parallelism (tp×pp {plan.tp * plan.pp} instead of {other.tp * other.pp})"
    if plan.pp != other.pp:
        return f"a shorter pipeline (pp {plan.pp} instead of {other.pp})"
    if plan.option.stage != other.option.stage:
        return f"ZeRO-{plan.option.stage} instead of ZeRO-{other.option.stage}"
    if plan.recompute != other.recompute:
        return f"{plan.recompute} recompute instead of {other.recompute}"
    return "fewer features (sequence parallelism, interleaving)"


def rank_reason(plan: PlanRecord, best: PlanRecord, fastest: PlanRecord, tolerance: float, usable: int,
                units: str) -> str:
    """#1: what its step is made of (and why it beat a slightly faster plan). Others: how they compare to #1."""
    parts = plan.time.parts()
    if plan is best:
        shares = sorted(((v, k) for k, v in parts.items() if v >= 0.005 * plan.time.total), reverse=True)
        made_of = ", ".join(f"{PART_NAMES[k]} {v / plan.time.total:.0%}" for v, k in shares[:3])
        text = f"fastest: {_seconds(plan.time.total)} per step ({made_of})"
        if fastest.time.total < plan.time.total:
            text = (f"{_seconds(plan.time.total)} per step ({made_of}), within {tolerance:.0%} of the fastest plan "
                    f"and simpler: {simpler_because(plan, fastest)}")
        return f"{text}; {_memory(plan, usable, units)}"
    best_parts = best.time.parts()
    deltas = sorted(((parts[k] - best_parts[k], k) for k in parts), reverse=True)
    relative = plan.time.total / best.time.total - 1
    if relative < -0.0005:
        text = (f"{-relative:.1%} faster than #1, but within the {tolerance:.0%} tie tolerance, where #1 is simpler: "
                f"{simpler_because(best, plan)}")
    elif relative < 0.0005:
        text = f"as fast as #1, which is simpler: {simpler_because(best, plan)}"
    else:
        worse = [f"+{_seconds(d)} {PART_NAMES[k]}{_why_compute_differs(plan, best) if k == 'compute' else ''}"
                 for d, k in deltas if d > 0.005 * best.time.total][:2]
        better = [f"{_seconds(-d)} less {PART_NAMES[k]}" for d, k in reversed(deltas)
                  if -d > 0.005 * best.time.total][:1]
        text = f"{relative:.1%} slower than #1" + (": " + ", ".join(worse) if worse else "")
        if better:
            text += f" (despite {better[0]})"
    if plan.gpu_total < best.gpu_total:
        text += f"; needs {format_bytes(best.gpu_total - plan.gpu_total, units)} less memory per GPU than #1"
    return f"{text}; {_memory(plan, usable, units)}"


def infeasible_summary(result: SearchResult) -> list[str]:
    """'2,630 plans: GPU memory', '15 layouts: tp does not divide the attention heads', ..."""
    def most_first(counts: dict[str, int]) -> list[tuple[str, int]]:
        return sorted(counts.items(), key=lambda item: -item[1])

    def plural(count: int, word: str) -> str:
        return f"{count:,} {word if count == 1 else word + 's'}"

    lines = [f"{plural(count, 'plan')}: {LIMIT_NAMES[limit]}" for limit, count in most_first(result.infeasible_by_limit())]
    lines += [f"{plural(count, 'layout')}: {reason}" for reason, count in most_first(result.rejected_layouts)]
    lines += [f"{plural(count, 'plan')} not evaluated: {reason}" for reason, count in most_first(result.skipped)]
    unchecked = sum(1 for p in result.plans if p.fits and not p.host_checked)
    if unchecked:
        lines.append(f"{unchecked:,} fitting plans offload to a host whose capacity is unknown (not checked)")
    return lines


def search_line(result: SearchResult) -> str:
    evaluated = len(result.plans)
    rate = evaluated / result.seconds if result.seconds > 0 else float("inf")
    rejected = sum(result.rejected_layouts.values())
    return (f"searched {result.layouts_total} dp × tp × pp layouts ({rejected} ruled out), evaluated {evaluated:,} "
            f"plans in {result.seconds:.2f} s ({rate:,.0f} plans/s); {len(result.feasible):,} fit")


def nothing_fits(result: SearchResult, units: str) -> str:
    """When no plan fits: the closest one and what it lacks."""
    if not result.plans:
        return "no layout can run this model and batch (see the reasons below)"
    usable = result.request.budget.usable_gpu_bytes
    closest = min(result.plans, key=lambda p: (p.gpu_total, p.time.total))
    return (f"no plan fits: the smallest needs {format_bytes(closest.gpu_total, units)} per GPU > "
            f"{format_bytes(usable, units)} usable (dp {closest.dp} × tp {closest.tp} × pp {closest.pp}, "
            f"{closest.option.label}, micro-batch {closest.micro_batch}, {closest.recompute} recompute); "
            "add GPUs, shorten --seq-len, or lower --global-batch")
