"""`zeroplan trace`: measure the per-GPU peak of the real model on fake tensors, beside estimate's prediction."""

from __future__ import annotations

import math

import typer

from zeroplan.cli import options as opt
from zeroplan.core.errors import InputError
from zeroplan.render.sink import check_format, write_text


def trace(
    model: opt.TraceModel,
    gpus: opt.TraceGpus = 8,
    stage: opt.TraceStage = 3,
    gpu: opt.Gpu = None,
    precision: opt.Precision = "mixed",
    recompute: opt.Recompute = "none",
    seq_len: opt.SeqLen = None,
    micro_batch: opt.MicroBatch = 1,
    attention: opt.Attention = "sdpa",
    activations: opt.Activations = "transformers",
    layers_to_trace: opt.LayersToTrace = 3,
    steps: opt.TraceSteps = 2,
    tolerance: opt.Tolerance = None,
    real: opt.Real = False,
    output_format: opt.FormatTableJsonCsv = "table",
    output: opt.Output = None,
    units: opt.Units = "iec",
) -> None:
    """Trace training steps of the real model on a fake process group of the real world size (no GPU needed)
    and print the measured peak by category beside `estimate`'s prediction for the same inputs."""
    output_format = check_format(output_format, ("table", "json", "csv"))
    if tolerance is not None and (not math.isfinite(tolerance) or tolerance < 0):
        raise InputError("--tolerance", f"must be a percentage of 0 or more, got {tolerance}")
    from zeroplan.trace import compare, report

    result = compare.run(compare.TraceRequest(
        model=model, gpus=gpus, stage=stage, precision=precision, recompute=(recompute or "none").strip().lower(),
        seq_len=seq_len, micro_batch=micro_batch or 1, attention=attention.strip().lower(),
        activations=(activations or "transformers").strip().lower(), steps=steps, layers_to_trace=layers_to_trace,
        gpu=gpu, real=real))
    text = {"table": lambda r: report.to_table(r, units), "json": report.to_json, "csv": report.to_csv}[output_format]
    write_text(text(result), output)
    if tolerance is not None and abs(result.error) * 100 > tolerance:
        typer.echo(f"zeroplan: estimate differs from the trace by {result.error:+.1%}, more than --tolerance "
                   f"{tolerance:g}%", err=True)
        raise typer.Exit(1)
