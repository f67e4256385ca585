"""The terminal view of an estimate: one row per option, a bar against GPU capacity, the
recommendation with its reason, and the assumptions."""

from __future__ import annotations

from zeroplan.core.units import format_bytes, format_count, format_seconds, memory_unit
from zeroplan.render.terminal import Canvas, grid, grid_width
from zeroplan.estimate.run import Plan

BAR_WIDTH = 8

Cell = tuple[str, "str | None"]


def _bar(total: int, usable: int, capacity: int) -> Cell:
    """Filled cells for the share of GPU capacity used; ▶ when the total is past the capacity."""
    filled = min(BAR_WIDTH, round(BAR_WIDTH * total / capacity))
    text = "█" * filled + "·" * (BAR_WIDTH - filled) + ("▶" if total > capacity else " ")
    return text, "green" if total <= usable else "red"


def _number(value: int, units: str) -> Cell:
    divisor, _ = memory_unit(units)
    if value == 0:
        return "–", None
    shown = value / divisor
    return (f"{shown:.1f}" if shown < 100 else f"{shown:.0f}"), None


MEMORY_HEADERS = ["option", "params", "grads", "optim", "activ", "buffers", "total/GPU", "of GPU"]
TRAFFIC_HEADERS = ["CPU", "NVMe", "comm", "time"]


def render(plan: Plan, canvas: Canvas) -> None:
    request, units = plan.request, plan.inputs.units
    _, label = memory_unit(units)
    budget, parallel, model = request.budget, request.parallel, request.model
    chosen = plan.recommendation.option
    canvas.wrapped(f"{model.name} · {format_count(model.params)} params · {parallel.world} × "
                   f"{request.cluster.gpu.name} ({format_bytes(budget.gpu_capacity, units)}, "
                   f"{format_bytes(budget.usable_gpu_bytes, units)} usable) · {parallel.describe()} · "
                   f"{request.convention} convention", first="")
    canvas.line()
    show_max = any(e.max_micro_batch is not None for e in plan.estimates)
    memory_rows, traffic_rows, tails = [], [], []
    for estimate in plan.estimates:
        gpu = estimate.gpu_bytes
        is_chosen = estimate is chosen
        name = (("→ " if is_chosen else "  ") + estimate.option.short_label, "bold cyan" if is_chosen else None)
        cells = [_number(gpu[k], units) for k in ("params", "gradients", "optimizer_states", "activations", "buffers")]
        total = _number(gpu["total"], units)
        memory_rows.append([name, *cells, (total[0], "bold"), _bar(gpu["total"], budget.usable_gpu_bytes,
                                                                   budget.gpu_capacity)])
        traffic_rows.append([name, _number(estimate.cpu_bytes_per_node, units),
                             _number(estimate.nvme_bytes_per_node, units),
                             _number(estimate.comm_bytes_per_gpu_per_step, "si"),
                             (format_seconds(estimate.comm_seconds_per_step), None)])
        tail = []
        if show_max:
            largest = estimate.max_micro_batch or 0
            accumulation = (f" ({estimate.accumulation_micro_batch}×{estimate.grad_accum_steps})"
                            if estimate.grad_accum_steps else "")
            tail.append((f"{largest}{accumulation}" if largest else "–", None))
        if estimate.fits:
            tail.append(("yes", "green") if estimate.host_checked else ("yes*", "yellow"))
        else:
            tail.append(("no:" + ",".join(estimate.limits), "red"))
        tails.append(tail)
    tail_headers = (["max mb"] if show_max else []) + ["fits"]
    tail_align = "r" * len(tail_headers[:-1]) + "l"
    wide_headers = MEMORY_HEADERS + TRAFFIC_HEADERS + tail_headers
    wide_rows = [m + t[1:] + tail for m, t, tail in zip(memory_rows, traffic_rows, tails)]
    if grid_width(wide_headers, wide_rows) <= canvas.width:
        grid(canvas, wide_headers, wide_rows, "lrrrrrrl" + "rrrr" + tail_align)
    else:  # narrow terminal: memory first, then host memory and traffic
        grid(canvas, MEMORY_HEADERS + tail_headers, [m + tail for m, tail in zip(memory_rows, tails)],
             "lrrrrrrl" + tail_align)
        canvas.line()
        grid(canvas, ["option"] + TRAFFIC_HEADERS, traffic_rows, "lrrrr")
    canvas.line()
    caption = f"memory in {label}: per GPU; CPU and NVMe per node · comm: GB per GPU per step"
    if show_max:
        caption += " · max mb: largest micro-batch that fits (micro-batch × accumulation reaching --global-batch)"
    canvas.wrapped(caption, first="", indent="")
    verdict = chosen.option.label if chosen else "nothing fits"
    canvas.line(canvas.style("Recommendation: ", "bold") + canvas.style(verdict, "bold cyan" if chosen else "bold red"))
    canvas.wrapped("because " + plan.recommendation.reason)
    canvas.line(canvas.style("Assumptions:", "bold"))
    for note in plan.assumptions:
        canvas.wrapped(note, first="  • ")
    if any(not e.host_checked for e in plan.estimates):
        canvas.line(canvas.style("  * host capacity unknown: not checked", "yellow"))


def render_explain(lines: list[str], canvas: Canvas) -> None:
    canvas.line(canvas.style("How each figure is computed:", "bold"))
    for line in lines:
        canvas.line(f"  {line}")
