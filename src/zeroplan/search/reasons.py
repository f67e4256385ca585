"""Why each plan ranks where it does, and why the rest of the space does not fit, in words with numbers."""

from __future__ import annotations

from zeroplan.core.layout.search import PlanRecord, SearchResult, plan_alltoall_seconds
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


def part_names(*plans: PlanRecord) -> dict[str, str]:
    """PART_NAMES, with the tp_comm part named for what it holds when a plan has EP: its all-to-all too."""
    if any(plan.ep > 1 for plan in plans):
        return {**PART_NAMES, "tp_comm": "tensor-parallel and expert all-to-all communication"}
    return PART_NAMES


def rank_reason(plan: PlanRecord, best: PlanRecord, fastest: PlanRecord, tolerance: float, usable: int,
                units: str) -> str:
    """#1: what its step is made of (and why it beat a slightly faster plan). Others: how they compare to #1."""
    names = part_names(plan, best)
    parts = plan.time.parts()
    if plan is best:
        shares = sorted(((v, k) for k, v in parts.items() if v >= 0.005 * plan.time.total), reverse=True)
        made_of = ", ".join(f"{names[k]} {v / plan.time.total:.0%}" for v, k in shares[:3])
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
        worse = [f"+{_seconds(d)} {names[k]}{_why_compute_differs(plan, best) if k == 'compute' else ''}"
                 for d, k in deltas if d > 0.005 * best.time.total][:2]
        better = [f"{_seconds(-d)} less {names[k]}" for d, k in reversed(deltas)
                  if -d > 0.005 * best.time.total][:1]
        text = f"{relative:.1%} slower than #1" + (": " + ", ".join(worse) if worse else "")
        if better:
            text += f" (despite {better[0]})"
    if plan.gpu_total < best.gpu_total:
        text += f"; needs {format_bytes(best.gpu_total - plan.gpu_total, units)} less memory per GPU than #1"
    return f"{text}; {_memory(plan, usable, units)}"


def _cause(part: str, plan: PlanRecord, other: PlanRecord) -> str:
    """What in the layout makes this part of plan's step differ from other's, in words ('' when nothing names it)."""
    def changed(name: str, mine: object, theirs: object) -> str | None:
        return f"{name} {mine} instead of {theirs}" if mine != theirs else None

    stage = changed("ZeRO", plan.option.stage, other.option.stage)
    if stage:
        stage = f"ZeRO-{plan.option.stage} instead of ZeRO-{other.option.stage}"
    recompute = None
    if plan.recompute != other.recompute:
        recompute = ("no recompute needed" if plan.recompute == "none" else f"{plan.recompute} recompute") + \
            f" instead of {other.recompute}"
    accumulation = changed("micro-batch", plan.micro_batch, other.micro_batch)
    if part == "compute":
        found = [recompute, changed("tp", plan.tp, other.tp), changed("cp", plan.cp, other.cp),
                 changed("pp", plan.pp, other.pp), accumulation]
    elif part == "bubble":
        found = [changed("pp", plan.pp, other.pp), changed("virtual stages", plan.virtual_stages,
                                                           other.virtual_stages),
                 changed("micro-batches per step", plan.grad_accum, other.grad_accum),
                 recompute and f"a shorter stage: {recompute}"]  # the bubble is (p-1)/v stage times
    elif part == "tp_comm":
        found = [changed("tp", plan.tp, other.tp), changed("cp", plan.cp, other.cp), recompute,
                 changed("pp", plan.pp, other.pp)]
    elif part == "pp_comm":
        found = [changed("pp", plan.pp, other.pp), changed("virtual stages", plan.virtual_stages,
                                                           other.virtual_stages)]
    elif part == "dp_exposed":
        found = [stage, changed("dp", plan.dp, other.dp), changed("pp", plan.pp, other.pp), accumulation]
        if plan.option.stage == 3 and plan.time.dp_exposed < other.time.dp_exposed:
            found.insert(0, "ZeRO-3 hides its gathers behind each micro-batch's passes")
    elif part == "optimizer":
        found = [stage, changed("dp × cp ranks sharing the optimizer states", plan.dp * plan.cp,
                                other.dp * other.cp)]
    else:  # offload
        found = [None if plan.option.label == other.option.label else
                 f"{plan.option.label} instead of {other.option.label}"]
    return "; ".join(dict.fromkeys(c for c in found if c))  # in order, once each


def savings(plan: PlanRecord, other: PlanRecord, share: float = 0.9) -> list[tuple[str, float, str]]:
    """The parts of the step `plan` saves against `other` (e.g. a pinned published layout), largest first, until
    they cover `share` of the difference: (part, seconds saved, what in the layout causes it or '')."""
    saving = other.time.total - plan.time.total
    mine, theirs = plan.time.parts(), other.time.parts()
    found, covered = [], 0.0
    for delta, part in sorted(((theirs[k] - mine[k], k) for k in mine), reverse=True):
        if delta <= 0 or covered >= share * saving:
            break
        found.append((part, delta, _cause(part, plan, other)))
        covered += delta
    return found


def faster_because(plan: PlanRecord, other: PlanRecord) -> str:
    """Why `plan` is faster than `other`, in words with numbers: '23% faster: -1.2 s pipeline bubble (pp 1
    instead of 8), ... (at the cost of +0.3 s exposed data-parallel communication)'."""
    saving = other.time.total - plan.time.total
    if saving <= 0:
        return f"{-saving / other.time.total:.0%} slower" if saving < 0 else "as fast"
    lines = [f"-{_seconds(delta)} {PART_NAMES[part]}" + (f" ({cause})" if cause else "")
             for part, delta, cause in savings(plan, other)]
    mine, theirs = plan.time.parts(), other.time.parts()
    costs = [f"+{_seconds(mine[k] - theirs[k])} {PART_NAMES[k]}" for k in mine
             if mine[k] - theirs[k] > 0.01 * other.time.total][:2]
    text = f"{saving / other.time.total:.0%} faster: " + ", ".join(lines)
    return text + (" (at the cost of " + ", ".join(costs) + ")" if costs else "")


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


def expert_parallel_verdict(result: SearchResult, units: str) -> str | None:
    """Why the best plan with expert parallelism wins or loses against the best without it (all-to-all exposed
    against memory saved), when the search tried both; None otherwise."""
    request = result.request
    if request.space.ep == (1,):
        return None
    with_ep = [p for p in result.feasible if p.ep > 1]
    without = [p for p in result.feasible if p.ep == 1]
    evaluated_ep = [p for p in result.plans if p.ep > 1]
    if not evaluated_ep:
        return "expert parallelism: no layout with ep > 1 passed the layout rules (see the rejected reasons)"
    if not with_ep:
        smallest = min(evaluated_ep, key=lambda p: p.gpu_total)
        return (f"expert parallelism: no plan with ep > 1 fits; the smallest needs "
                f"{format_bytes(smallest.gpu_total, units)} per GPU (ep {smallest.ep})")
    best_ep = with_ep[0]
    alltoall = plan_alltoall_seconds(request, best_ep)
    share = alltoall / best_ep.time.total
    head = (f"expert parallelism: the best plan with EP (ep {best_ep.ep}, {best_ep.dp}×{best_ep.tp}×{best_ep.pp}) "
            f"takes {_seconds(best_ep.time.total)} per step, of which {_seconds(alltoall)} ({share:.0%}) is exposed "
            f"all-to-all, with {format_bytes(best_ep.gpu_total, units)} per GPU")
    if not without:
        if 1 not in request.space.ep:
            return head
        dense_smallest = min((p for p in result.plans if p.ep == 1), key=lambda p: p.gpu_total, default=None)
        needs = (f" (the smallest needs {format_bytes(dense_smallest.gpu_total, units)} per GPU)"
                 if dense_smallest else "")
        return f"{head}; it wins because no plan without EP fits{needs}"
    best = without[0]
    # the same layout and step without EP: what EP changes on its own (experts' memory against the all-to-all)
    same = [p for p in result.plans if p.ep == 1 and (p.dp, p.tp, p.pp, p.cp, p.option, p.micro_batch, p.recompute,
                                                      p.sequence_parallel, p.virtual_stages) ==
            (best_ep.dp, best_ep.tp, best_ep.pp, best_ep.cp, best_ep.option, best_ep.micro_batch, best_ep.recompute,
             best_ep.sequence_parallel, best_ep.virtual_stages)]
    twin = ""
    if same:
        other = same[0]
        saved = other.gpu_total - best_ep.gpu_total
        fits = "fits" if other.fits else "does not fit"
        twin = (f"; the same layout without EP needs {format_bytes(other.gpu_total, units)} per GPU ({fits}): EP "
                f"saves {format_bytes(saved, units)} of expert states for {_seconds(alltoall)} of all-to-all")
    if result.feasible[0].ep > 1:
        verdict = (f"it ranks first, {1 - best_ep.time.total / best.time.total:.1%} faster than the best plan "
                   f"without EP ({best.dp}×{best.tp}×{best.pp}, {_seconds(best.time.total)})")
    else:
        verdict = (f"the best plan without EP ({best.dp}×{best.tp}×{best.pp}, {_seconds(best.time.total)}) is "
                   f"{best_ep.time.total / best.time.total - 1:.1%} faster")
    return f"{head}{twin}; {verdict}"
