"""`zeroplan sweep --plot FILE`: memory per GPU against GPU count, one line per ZeRO stage, one panel per
(model, GPU type), with the usable-memory line. matplotlib is an optional extra (`zeroplan[plot]`)."""

from __future__ import annotations

from typing import Any

from zeroplan.core.units import ceil_div, memory_unit
from zeroplan.render.figures import check_plot_path, pyplot, save_figure
from zeroplan.render.sink import InputPaths

STAGE_STYLES = {0: ("tab:red", "o"), 1: ("tab:orange", "s"), 2: ("tab:green", "^"), 3: ("tab:blue", "D")}


def _plain(value: float, _position: int) -> str:
    """Log-axis labels as plain numbers (0.5, 2, 50, 1000), not powers of ten."""
    return f"{value:g}"


def plot_sweep(rows: list[dict[str, Any]], path: str, units: str = "iec", inputs: InputPaths = ()) -> None:
    target = check_plot_path(path)
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator
    divisor, label = memory_unit(units)
    panels: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        panels.setdefault((row["model"], row["gpu"]), []).append(row)
    columns = min(2, len(panels))
    lines = ceil_div(len(panels), columns)
    figure, axes = plt.subplots(lines, columns, figsize=(6.4 * columns, 4.2 * lines), squeeze=False)
    handles: dict[str, Any] = {}
    for axis, ((model, gpu), panel_rows) in zip(axes.flat, panels.items()):
        counts = sorted({row["gpus"] for row in panel_rows})
        for stage in sorted({row["stage"] for row in panel_rows}):
            points = sorted((row["gpus"], row["gpu_bytes_total"] / divisor) for row in panel_rows
                            if row["stage"] == stage and row["gpu_bytes_total"] != "")
            if points:
                color, marker = STAGE_STYLES[stage]
                (line,) = axis.plot(*zip(*points), color=color, marker=marker, label=f"ZeRO-{stage}")
                handles[f"ZeRO-{stage}"] = line
        usable = panel_rows[0]["usable_gpu_bytes"] / divisor
        capacity = panel_rows[0]["gpu_capacity_bytes"] / divisor
        handles["usable memory"] = axis.axhline(usable, color="black", linestyle="--", label="usable memory")
        handles["GPU capacity"] = axis.axhline(capacity, color="grey", linestyle=":", label="GPU capacity")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xticks(counts, [str(c) for c in counts])
        axis.minorticks_off()
        axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.yaxis.set_major_formatter(FuncFormatter(_plain))
        axis.set_title(f"{model} on {gpu} (usable {usable:.1f} {label})", fontsize=10)
        axis.set_xlabel("GPUs")
        axis.set_ylabel(f"memory per GPU ({label})")
        axis.grid(True, which="major", alpha=0.3)
    for axis in list(axes.flat)[len(panels):]:
        axis.set_visible(False)
    figure.legend(list(handles.values()), list(handles), loc="center left", bbox_to_anchor=(1.0, 0.5),
                  frameon=False)
    figure.tight_layout()
    save_figure(figure, target, inputs)
