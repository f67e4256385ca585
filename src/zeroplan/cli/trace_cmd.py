"""`zeroplan trace`: measure the per-GPU peak of the real model on fake tensors, beside estimate's prediction."""

from __future__ import annotations

import math

import typer

from zeroplan.cli.options import command, uses
from zeroplan.core.errors import InputError
from zeroplan.inputs.command_sections import TraceInputs
from zeroplan.inputs.sections import HardwareInputs, ModelInputs, OutputInputs, StepInputs
from zeroplan.render.sink import check_format, write_text


@command(uses(ModelInputs, "model", required=("model",)), uses(TraceInputs, "gpus", "stage"),
         uses(HardwareInputs, "gpu"), uses(StepInputs, "precision", "recompute", "seq_len", "micro_batch"),
         uses(TraceInputs, "attention"), uses(StepInputs, "activations", "finetune", "lora_rank", "lora_targets",
                                                  "double_quant"),
         uses(TraceInputs, "layers_to_trace", "steps", "tolerance", "real"),
         uses(OutputInputs, "output_format", "output", "units"), formats=("table", "json", "csv"))
def trace(model: ModelInputs, trace: TraceInputs, hardware: HardwareInputs, step: StepInputs,
          output: OutputInputs) -> None:
    """Trace training steps of the real model on a fake process group of the real world size (no GPU needed)
    and print the measured peak by category beside `estimate`'s prediction for the same inputs."""
    output_format = check_format(output.output_format, ("table", "json", "csv"))
    tolerance = trace.tolerance
    if tolerance is not None and (not math.isfinite(tolerance) or tolerance < 0):
        raise InputError("--tolerance", f"must be a percentage of 0 or more, got {tolerance}")
    from zeroplan.trace import compare, report

    if model.model is None:  # required=("model",): the command line never leaves it out
        raise InputError("--model", "no model given", "pass --model with a preset or a config.json")
    result = compare.run(compare.TraceRequest(
        model=model.model, gpus=trace.gpus, stage=trace.stage, precision=step.precision,
        recompute=step.recompute or "none", seq_len=step.seq_len, micro_batch=step.micro_batch or 1,
        attention=trace.attention, activations=step.activations or "transformers", steps=trace.steps,
        layers_to_trace=trace.layers_to_trace, gpu=hardware.gpu, real=trace.real, finetune=step.finetune,
        lora_rank=step.lora_rank, lora_targets=step.lora_targets, double_quant=step.double_quant))
    units = output.units
    text = {"table": lambda r: report.to_table(r, units), "json": report.to_json, "csv": report.to_csv}[output_format]
    write_text(text(result), output.output)
    if tolerance is not None and abs(result.error) * 100 > tolerance:
        typer.echo(f"zeroplan: estimate differs from the trace by {result.error:+.1%}, more than --tolerance "
                   f"{tolerance:g}%", err=True)
        raise typer.Exit(1)
