"""The terminal view: one row per option, a bar against usable memory, then the recommendation."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from zeroplan.core.units import format_bytes, format_count, format_seconds, memory_unit
from zeroplan.planner import Plan

BAR_WIDTH = 8


def _bar(total: int, usable: int, capacity: int) -> Text:
    """Filled cells for the share of GPU capacity used; the cell holding 'usable' marks the limit."""
    filled = min(BAR_WIDTH, round(BAR_WIDTH * total / capacity))
    bar = Text("█" * filled + "·" * (BAR_WIDTH - filled), style="green" if total <= usable else "red")
    if total > capacity:
        bar.append("▶", style="bold red")
    return bar


def _number(value: int, units: str) -> str:
    divisor, _ = memory_unit(units)
    if value == 0:
        return "–"
    shown = value / divisor
    return f"{shown:.1f}" if shown < 100 else f"{shown:.0f}"


WIDE_LAYOUT_COLUMNS = 132  # narrower terminals get memory and host/traffic as two stacked tables


def _table(title: str | None, caption: str | None) -> Table:
    return Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False,
                 collapse_padding=True, caption=caption, caption_justify="left")


def render(plan: Plan, console: Console) -> None:
    request, units = plan.request, plan.inputs.units
    _, label = memory_unit(units)
    budget, parallel, model = request.budget, request.parallel, request.model
    chosen = plan.recommendation.option
    title = (f"{model.name} · {format_count(model.params)} params · {parallel.world} × {request.cluster.gpu.name} "
             f"({format_bytes(budget.gpu_capacity, units)}, {format_bytes(budget.usable_gpu_bytes, units)} usable) · "
             f"{parallel.describe()} · {request.convention} convention")
    caption = f"memory in {label}: per GPU; CPU and NVMe per node · comm: GB per GPU per step"
    if any(e.max_micro_batch is not None for e in plan.estimates):
        caption += " · max mb: largest micro-batch that fits (micro-batch × accumulation reaching --global-batch)"
    wide = console.width >= WIDE_LAYOUT_COLUMNS
    memory = _table(title, caption if wide else None)
    traffic = memory if wide else _table(None, caption)
    for table in {id(memory): memory, id(traffic): traffic}.values():
        table.add_column("option", no_wrap=True)
    for heading in ("params", "grads", "optim", "activ", "buffers"):
        memory.add_column(heading, justify="right", no_wrap=True)
    memory.add_column("total/GPU", justify="right", style="bold", no_wrap=True)
    memory.add_column("of GPU", no_wrap=True)
    for heading in ("CPU", "NVMe", "comm", "time"):
        traffic.add_column(heading, justify="right", no_wrap=True)
    show_max = any(e.max_micro_batch is not None for e in plan.estimates)
    if show_max:
        memory.add_column("max mb", justify="right", no_wrap=True)
    memory.add_column("fits", no_wrap=True)
    for estimate in plan.estimates:
        gpu = estimate.gpu_bytes
        fits = Text("yes", style="green") if estimate.fits else Text("no:" + ",".join(estimate.limits), style="red")
        if estimate.fits and not estimate.host_checked:
            fits = Text("yes*", style="yellow")
        name = Text(("→ " if estimate is chosen else "  ") + estimate.option.short_label,
                    style="bold cyan" if estimate is chosen else "")
        memory_cells = [_number(gpu[k], units) for k in ("params", "gradients", "optimizer_states", "activations",
                                                        "buffers", "total")]
        memory_cells.append(_bar(gpu["total"], budget.usable_gpu_bytes, budget.gpu_capacity))
        traffic_cells = [_number(estimate.cpu_bytes_per_node, units), _number(estimate.nvme_bytes_per_node, units),
                         _number(estimate.comm_bytes_per_gpu_per_step, "si"),
                         format_seconds(estimate.comm_seconds_per_step)]
        max_cells = []
        if show_max:
            largest = estimate.max_micro_batch or 0
            accumulation = (f" ({estimate.accumulation_micro_batch}×{estimate.grad_accum_steps})"
                            if estimate.grad_accum_steps else "")
            max_cells.append(f"{largest}{accumulation}" if largest else "–")
        if wide:
            memory.add_row(name, *memory_cells, *traffic_cells, *max_cells, fits)
        else:
            memory.add_row(name, *memory_cells, *max_cells, fits)
            traffic.add_row(name, *traffic_cells)
    console.print(memory)
    if not wide:
        console.print(traffic)
    verdict = chosen.option.label if chosen else "nothing fits"
    console.print(Text.assemble(("Recommendation: ", "bold"), (verdict, "bold cyan" if chosen else "bold red")))
    console.print(f"  because {plan.recommendation.reason}", highlight=False)
    console.print(Text("Assumptions:", style="bold"))
    for note in plan.assumptions:
        console.print(f"  • {note}", highlight=False)
    if any(not e.host_checked for e in plan.estimates):
        console.print("  * host capacity unknown: not checked", style="yellow", highlight=False)


def render_explain(lines: list[str], console: Console) -> None:
    console.print(Text("How each figure is computed:", style="bold"))
    for line in lines:
        console.print(f"  {line}", highlight=False, soft_wrap=True)
