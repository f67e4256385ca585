"""`zeroplan sweep`: per-GPU memory, fit, recommendation and fewest GPUs over a grid of models, GPU counts,
GPU types and ZeRO stages, for capacity planning. CSV by default; --plot draws memory against GPUs."""

from __future__ import annotations

from zeroplan.cli.options import command, uses
from zeroplan.estimate.sweep import FIELDS, SweepInputs
from zeroplan.inputs.sections import OutputInputs
from zeroplan.render.terminal import LateProgress
from zeroplan.render.sink import canvas_for, check_format, distinct_outputs, write_text


@command(*(uses(section, *names) for section, names in FIELDS.items()),
         uses(OutputInputs, "output_format", "output", "units", "progress", "plot"), formats=("csv", "json", "table"))
def sweep(output: OutputInputs, **sections) -> None:
    """Capacity planning over a grid: one row per model, GPU type, GPU count and ZeRO stage."""
    from zeroplan.estimate.sweep import sweep_rows
    from zeroplan.estimate import sweep_output

    output_format = check_format(output.output_format, ("csv", "json", "table"))
    plot = output.plot
    distinct_outputs({"--output": output.output, "--plot": plot})
    inputs = SweepInputs(units=output.units, **sections)
    models = list(inputs.grid.models or ())  # presets, or config.json paths: inputs, never overwritten
    progress = LateProgress("sweeping the grid", enabled=output.progress)
    try:
        rows, assumptions = sweep_rows(inputs, progress)
    finally:
        progress.close()
    if plot is not None:
        from zeroplan.estimate.sweep_plot import plot_sweep

        plot_sweep(rows, plot, inputs.units, models)
    if output_format == "table":
        console = canvas_for(output.output)
        sweep_output.render(rows, assumptions, console, inputs.units)
        write_text(console.text(), output.output, models)
        return
    text = sweep_output.to_csv(rows) if output_format == "csv" else sweep_output.to_json(rows, assumptions,
                                                                                         inputs.echo())
    write_text(text, output.output, models)
