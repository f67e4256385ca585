"""`zeroplan plan --plot FILE`: where the step time of each top plan goes: compute, the pipeline bubble,
exposed tensor-, pipeline- and data-parallel traffic, offload and the optimizer step (the step-time
model's own parts, stacked, so the bar's length is the predicted step time)."""

from __future__ import annotations

from zeroplan.render.figures import TIME_COLORS, check_plot_path, pyplot, save_figure
from zeroplan.render.sink import InputPaths
from zeroplan.search.run import PlanOutcome
from zeroplan.search.table import zero_label
from zeroplan.core.errors import InputError, ref

PART_LABELS = {"compute": "compute", "bubble": "pipeline bubble", "tp_comm": "TP traffic",
               "pp_comm": "PP traffic", "dp_exposed": "exposed DP traffic", "offload": "offload",
               "optimizer": "optimizer step"}


def plan_label(rank: int, plan) -> str:
    return (f"#{rank} dp{plan.dp}×tp{plan.tp}×pp{plan.pp}" + (f" v{plan.virtual_stages}" if plan.virtual_stages > 1
                                                               else "")
            + f" ZeRO-{zero_label(plan.option)} mb{plan.micro_batch}×{plan.grad_accum}"
            + ("" if plan.recompute == "none" else f" {plan.recompute} recompute"))


def plot_plans(outcome: PlanOutcome, path: str, inputs: InputPaths = ()) -> None:
    target = check_plot_path(path)
    if not outcome.top:
        raise InputError("plot", "no plan fits, so there is no step time to draw", f"drop {ref('plot')}, or add GPUs")
    plt = pyplot()
    plans = list(enumerate(outcome.top, start=1))[::-1]  # best on top
    names = [plan_label(rank, plan) for rank, plan in plans]
    figure, axis = plt.subplots(figsize=(10, 0.45 * len(plans) + 1.8))
    left = [0.0] * len(plans)
    for part, color in TIME_COLORS.items():
        widths = [plan.time.parts()[part] for _, plan in plans]
        if any(widths):
            axis.barh(names, widths, left=left, color=color, label=PART_LABELS[part], height=0.66)
            left = [a + b for a, b in zip(left, widths)]
    for index, (_, plan) in enumerate(plans):
        axis.text(plan.time.total * 1.01, index, f"{plan.time.total:.2f} s", va="center", fontsize=8)
    axis.set_xlim(0, max(plan.time.total for _, plan in plans) * 1.15)
    axis.set_xlabel("seconds per optimizer step (predicted)")
    request = outcome.resolved.request
    axis.set_title(f"{request.model.name} on {outcome.inputs.hardware.gpus} × {request.cluster.gpu.name}: "
                   "where each top plan's step time goes", fontsize=9)
    axis.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=8)
    axis.grid(True, axis="x", alpha=0.3)
    figure.tight_layout()
    save_figure(figure, target, inputs)
