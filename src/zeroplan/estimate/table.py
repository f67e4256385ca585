"""The terminal view of an estimate: one row per option, a bar against GPU capacity, the
recommendation with its reason, and the assumptions."""

from __future__ import annotations

from zeroplan.core.units import format_bytes, format_count, format_seconds, memory_unit
from zeroplan.render.terminal import Canvas, grid, grid_width
from zeroplan.planning.estimate_plan import Plan

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


def _short(cell: Cell) -> Cell:
    """'→ ZeRO-3 opt:nvme par:nvme' as '→ Z3 opt:nvme par:nvme' for narrow terminals."""
    return cell[0].replace("ZeRO-", "Z", 1), cell[1]


MEMORY_HEADERS = ["option", "params", "grads", "optim", "activ", "buffers", "total/GPU", "of GPU"]
TRAFFIC_HEADERS = ["CPU", "NVMe", "comm", "time"]
SHORT_HEADERS = {"total/GPU": "total", "buffers": "buffer"}


def render(plan: Plan, canvas: Canvas) -> None:
    request, units = plan.request, plan.inputs.units
    _, label = memory_unit(units)
    budget, parallel, model = request.budget, request.parallel, request.model
    chosen = plan.recommendation.option
    canvas.wrapped(f"{model.name} · {format_count(model.params)} params · {parallel.world} × "
                   f"{request.cluster.gpu.name} ({format_bytes(budget.gpu_capacity, units)}, "
                   f"{format_bytes(budget.usable_gpu_bytes, units)} usable) · {parallel.describe(plan.request.cp)} · "
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
        tail: list[tuple[str, str | None]] = []
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
    else:  # narrower terminal: memory first, then host memory and traffic (and max mb)
        _narrow(canvas, memory_rows, traffic_rows, tails, show_max)
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


def _narrow(canvas: Canvas, memory_rows: list, traffic_rows: list, tails: list, show_max: bool) -> None:
    """Two tables; at 80 columns and below the bar goes, option names shorten ('Z3 opt:nvme'), long
    headers shorten and the max micro-batch moves to the second table, until each row fits one line."""
    layouts = []
    for short in (False, True):
        memory = [(row if not short else [_short(row[0])] + row[1:7]) + tail[-1:] for row, tail in zip(memory_rows, tails)]
        memory_headers = MEMORY_HEADERS if not short else [SHORT_HEADERS.get(h, h) for h in MEMORY_HEADERS[:7]]
        traffic = [(row if not short else [_short(row[0])] + row[1:]) + (tail[:-1] if show_max else [])
                   for row, tail in zip(traffic_rows, tails)]
        traffic_headers = ["option"] + TRAFFIC_HEADERS + (["max mb"] if show_max else [])
        layouts.append(((memory_headers + ["fits"], memory, "lrrrrrr" + ("l" if short else "ll")),
                        (traffic_headers, traffic, "lrrrr" + ("r" if show_max else ""))))
    for first, second in layouts:
        if max(grid_width(first[0], first[1]), grid_width(second[0], second[1])) <= canvas.width or \
                (first, second) == layouts[-1]:
            grid(canvas, *first)
            canvas.line()
            grid(canvas, *second)
            return


def render_explain(lines: list[str], canvas: Canvas) -> None:
    canvas.line(canvas.style("How each figure is computed:", "bold"))
    for line in lines:
        canvas.wrapped(line, first="  ", indent="      ")
