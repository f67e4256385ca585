"""`zeroplan plan`: search every dp × tp × pp layout, ZeRO stage, offload tier, micro-batch and recompute
mode for the fastest plans that fit, and say why the rest do not."""

from __future__ import annotations

import typer

from zeroplan.cli.options import command, uses
from zeroplan.inputs.sections import TIMING, HardwareInputs, OutputInputs
from zeroplan.render.sink import canvas_for, check_format, distinct_outputs, write_text
from zeroplan.search.inputs import FIELDS, PlanInputs


@command(*(uses(section, *names, required=("gpus",), panels={"calibration": TIMING})
           if section is HardwareInputs else uses(section, *names) for section, names in FIELDS.items()),
         uses(OutputInputs, "output_format", "output", "units", "progress", "write_deepspeed", "plot"),
         formats=("table", "json", "csv"))
def plan(output: OutputInputs, **sections) -> None:
    """The fastest training plans that fit: layout, ZeRO stage, offload, micro-batch and recompute, with step
    time, tokens/s, MFU and time to train; and why the rest of the search space does not fit."""
    from zeroplan.search.run import run_plan

    output_format = check_format(output.output_format, ("table", "json", "csv"))
    write_deepspeed, plot = output.write_deepspeed, output.plot
    distinct_outputs({"--output": output.output, "--plot": plot, "--write-deepspeed": write_deepspeed})
    inputs = PlanInputs(units=output.units, **sections)
    read = (inputs.model.model, inputs.hardware.calibration)  # the files this run reads: -o never replaces one
    outcome = run_plan(inputs, show_progress=output.progress)
    if plot is not None:
        from zeroplan.search.plot import plot_plans

        plot_plans(outcome, plot, read)
    wrote: list[str] = []
    if write_deepspeed is not None:
        from zeroplan.search.export_top import write_deepspeed_config

        wrote = write_deepspeed_config(outcome, write_deepspeed, read)
    if output_format == "table":
        from zeroplan.search.table import render

        console = canvas_for(output.output)
        render(outcome, console)
        write_text(console.text(), output.output, read)
    else:
        from zeroplan.search import report

        write_text(report.to_json(outcome) if output_format == "json" else report.to_csv(outcome), output.output,
                   read)
    for line in wrote:  # after the report: stderr, so a report on stdout stays clean
        typer.echo(line, err=True)
