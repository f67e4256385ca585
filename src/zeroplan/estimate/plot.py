"""`zeroplan estimate --plot FILE`: per-GPU memory of each option as a stacked bar (parameters,
gradients, optimizer states, activations, buffers), the usable-memory and capacity lines, and the
recommended option marked."""

from __future__ import annotations

from zeroplan.core.units import memory_unit
from zeroplan.planning.estimate_plan import Plan
from zeroplan.render.figures import (
    CATEGORY_COLORS,
    check_plot_path,
    pyplot,
    save_figure,
)
from zeroplan.render.sink import InputPaths

CATEGORY_LABELS = {"params": "parameters", "gradients": "gradients", "optimizer_states": "optimizer states",
                   "activations": "activations", "buffers": "buffers"}


def plot_estimate(plan: Plan, path: str, inputs: InputPaths = ()) -> None:
    target = check_plot_path(path)
    plt = pyplot()
    divisor, label = memory_unit(plan.inputs.units)
    request, chosen = plan.request, plan.recommendation.option
    estimates = list(reversed(plan.estimates))  # first option on top
    names = [("→ " if e is chosen else "") + e.option.label for e in estimates]
    figure, axis = plt.subplots(figsize=(9.5, 0.42 * len(estimates) + 1.8))
    left = [0.0] * len(estimates)
    for category, color in CATEGORY_COLORS.items():
        widths = [e.gpu_bytes[category] / divisor for e in estimates]
        axis.barh(names, widths, left=left, color=color, label=CATEGORY_LABELS[category], height=0.66)
        left = [a + b for a, b in zip(left, widths)]
    usable = request.budget.usable_gpu_bytes / divisor
    capacity = request.budget.gpu_capacity / divisor
    axis.axvline(usable, color="black", linestyle="--", linewidth=1.2, label=f"usable ({usable:.1f} {label})")
    axis.axvline(capacity, color="grey", linestyle=":", linewidth=1.2, label=f"GPU capacity ({capacity:.1f} {label})")
    right = capacity * 1.6  # options far past the GPU run off the right edge; their totals are printed
    for index, estimate in enumerate(estimates):
        total = estimate.gpu_bytes["total"] / divisor
        verdict = "fits" if estimate.fits else "no: " + ",".join(estimate.limits)
        beyond = total > right * 0.8
        axis.text(right * 0.99 if beyond else total + capacity * 0.01, index,
                  f"{total:.1f} {label}{' ▶' if total > right else ''} · {verdict}", va="center",
                  ha="right" if beyond else "left", fontsize=8,
                  fontweight="bold" if estimate is chosen else "normal",
                  color="black" if estimate.fits else "#b22222",
                  bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0} if beyond else None)
    for tick in axis.get_yticklabels():
        if tick.get_text().startswith("→ "):
            tick.set_fontweight("bold")
    axis.set_xlim(0, right)
    axis.set_xlabel(f"memory per GPU ({label})")
    verdict = f"recommended: {chosen.option.label}" if chosen else "nothing fits"
    axis.set_title(f"{request.model.name} on {request.parallel.world} × {request.cluster.gpu.name}, "
                   f"{request.parallel.describe(request.cp)}, {request.convention} convention — {verdict}", fontsize=9)
    axis.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=8)
    axis.grid(True, axis="x", alpha=0.3)
    figure.tight_layout()
    save_figure(figure, target, inputs)
