"""`zeroplan estimate`: a thin layer from flags to zeroplan.planning.estimate_plan and back out through a formatter."""

from __future__ import annotations

from zeroplan.cli.options import command, uses
from zeroplan.core.errors import InputError
from zeroplan.inputs.estimate_inputs import FIELDS, EstimateInputs
from zeroplan.inputs.sections import OutputInputs
from zeroplan.render.sink import check_format, distinct_outputs, write_text


@command(*(uses(section, *names) for section, names in FIELDS.items()),
         uses(OutputInputs, "output_format", "output", "units", "explain", "plot"),
         formats=("table", "json", "csv", "markdown"))
def estimate(output: OutputInputs, **sections) -> None:
    """What every GPU holds at each ZeRO stage and offload tier, what each step sends, and what to use."""
    from zeroplan.planning.estimate_plan import build_plan

    output_format = check_format(output.output_format)
    if output.explain and output_format == "csv":
        raise InputError("--explain", "a CSV row has no room for formulas",
                         "use --explain with --format table, markdown or json")
    inputs = EstimateInputs(units=output.units, **sections)
    plot = output.plot
    distinct_outputs({"--output": output.output, "--plot": plot})
    plan = build_plan(inputs)
    read = (inputs.model.model, inputs.hardware.calibration)  # the files this run reads: -o never replaces one
    if plot is not None:
        from zeroplan.estimate.plot import plot_estimate

        plot_estimate(plan, plot, read)
    if output_format == "table":
        from zeroplan.core.evaluate.explain import explain_lines
        from zeroplan.estimate.table import render, render_explain
        from zeroplan.render.terminal import Canvas

        canvas = Canvas.for_output(to_file=output.output is not None)
        render(plan, canvas)
        if output.explain:
            render_explain(explain_lines(plan.request, plan.estimates, inputs.units), canvas)
        write_text(canvas.text(), output.output, read)
        return
    from zeroplan.core.evaluate.explain import explain_lines
    from zeroplan.estimate import report

    lines = explain_lines(plan.request, plan.estimates, inputs.units) if output.explain else None
    if output_format == "json":
        text = report.to_json(plan, explain=lines)
    else:
        text = {"csv": report.to_csv, "markdown": report.to_markdown}[output_format](plan)
        if lines:
            text += "\nHow each figure is computed:\n\n" + "".join(f"- {line.strip()}\n" for line in lines)
    write_text(text, output.output, read)
