"""The terminal view of `zeroplan plan`: the top plans, why each ranks there, and why the rest do not fit."""

from __future__ import annotations

from zeroplan.core.units import format_bytes, format_count
from zeroplan.render.terminal import Canvas, Table
from zeroplan.search.reasons import expert_parallel_verdict, infeasible_summary, nothing_fits, search_line
from zeroplan.search.run import PlanOutcome


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f}d"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 60:.0f}min"


def _short(value: float) -> str:
    """139,000 -> '139k': the table has to fit 80 columns."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def zero_label(option) -> str:
    """'3', '1 +cpu', '3 +cpu/cpu', '3 +nvme/nvme': stage, then where optimizer/params go."""
    if option.offload_optimizer == "none":
        return str(option.stage)
    text = f"{option.stage} +{option.offload_optimizer}"
    return text + (f"/{option.offload_params}" if option.offload_params != "none" else "")


RECOMPUTE_SHORT = {"none": "-", "selective": "sel", "full": "full", "selective-op": "op"}


def render(outcome: PlanOutcome, console: Canvas) -> None:
    resolved, result = outcome.resolved, outcome.result
    request, units = resolved.request, outcome.inputs.units
    space, model, cluster = request.space, request.model, request.cluster
    console.print(f"{model.name} ({format_count(model.params)} parameters) on {space.gpus} × {cluster.gpu.name} "
                  f"({cluster.gpus_per_node} per node): global batch {space.global_batch} × seq {space.seq_len}")
    console.print(search_line(result))
    usable = request.budget.usable_gpu_bytes
    if outcome.top:
        with_training = resolved.training_tokens is not None
        memory_header = "GiB" if units == "iec" else "GB"
        right = ("#", memory_header, "s/step", "tok/s", "MFU", "train", "GPU-h")
        names = ["#", "dp×tp×pp", "ZeRO", "mb×acc", "rec", "SP", memory_header, "s/step", "tok/s", "MFU"]
        names += ["train", "GPU-h"] if with_training else []
        table = Table(names, "".join("r" if name in right else "l" for name in names))
        for rank, plan in enumerate(outcome.top, start=1):
            metrics = outcome.throughput(plan)
            grid = (f"{plan.dp}×{plan.tp}×{plan.pp}" + (f" cp{plan.cp}" if plan.cp > 1 else "")
                    + (f" ep{plan.ep}" if plan.ep > 1 else "") + (f" etp{plan.etp}" if plan.etp and plan.etp != plan.tp else "")
                    + (f" v{plan.virtual_stages}" if plan.virtual_stages > 1 else ""))
            memory = format_bytes(plan.gpu_total, units).split()[0]
            cells = [str(rank), grid, zero_label(plan.option), f"{plan.micro_batch}×{plan.grad_accum}",
                     RECOMPUTE_SHORT[plan.recompute], "✓" if plan.sequence_parallel else "", memory,
                     f"{plan.time.total:.3g}", _short(metrics.tokens_per_second), f"{metrics.mfu:.1%}"]
            if with_training and metrics.train_seconds is not None and metrics.gpu_hours is not None:
                cells += [_duration(metrics.train_seconds), _short(metrics.gpu_hours)]
            table.add_row(*cells)
        console.print(table)
        console.print(f"ZeRO: stage [+optimizer offload[/parameter offload]]; mb×acc: micro-batch × accumulation; "
                      f"rec: recompute; SP: sequence parallel; {memory_header} per GPU")
        console.print("Why each ranks where it does:")
        for rank, plan in enumerate(outcome.top, start=1):
            console.print(f"  #{rank}: {outcome.reason(plan)}")
        verdict = expert_parallel_verdict(result, units)
        if verdict:
            console.print(verdict)
    else:
        console.print(nothing_fits(result, units))
    lines = infeasible_summary(result)
    if lines:
        console.print(f"Not feasible (usable {format_bytes(usable, units)} per GPU):")
        for line in lines:
            console.print(f"  {line}")
    console.print("Assumptions:")
    for note in resolved.assumptions:
        console.print(f"  - {note}")
