"""`zeroplan sweep`: per-GPU memory, fit, recommendation and fewest GPUs over a grid of models, GPU counts,
GPU types and ZeRO stages, for capacity planning. CSV by default; --plot draws memory against GPUs."""

from __future__ import annotations

from pathlib import Path

from typing import Annotated, Optional

import typer

from zeroplan.cli import options as opt
from zeroplan.core.errors import InputError
from zeroplan.render.sink import check_format, console_for, write_text

GRID = "Grid"

Models = Annotated[Optional[str], typer.Option(
    "--model", help="Comma list of model presets or config.json paths.", rich_help_panel=GRID)]
ParamsList = Annotated[Optional[str], typer.Option(
    "--params", help="Comma list of parameter counts, e.g. 7e9,13e9,70e9.", rich_help_panel=GRID)]
GpuCounts = Annotated[str, typer.Option("--gpus", help="Comma list of GPU counts.", rich_help_panel=GRID)]
GpuTypes = Annotated[Optional[str], typer.Option(
    "--gpu", help="Comma list of GPU presets (default a100-80g).", rich_help_panel=GRID)]
StageList = Annotated[Optional[str], typer.Option(
    "--stages", help="ZeRO stages, one row each (default 0,1,2,3).", rich_help_panel=GRID)]
SweepFormat = Annotated[str, typer.Option("--format", "-f", help="csv (default), json or table.",
                                          rich_help_panel=opt.OUTPUT)]


def sweep(
    model: Models = None,
    params: ParamsList = None,
    gpus: GpuCounts = "8,16,32,64,128,256",
    gpu: GpuTypes = None,
    presets_file: opt.PresetsFile = None,
    stages: StageList = None,
    tp: opt.Tp = 1,
    pp: opt.Pp = 1,
    gpus_per_node: opt.GpusPerNode = None,
    seq_len: opt.SeqLen = None,
    micro_batch: opt.MicroBatch = None,
    recompute: opt.Recompute = None,
    flash_attention: opt.FlashAttention = True,
    precision: opt.Precision = "mixed",
    optimizer: opt.Optimizer = "adam",
    runtime_reserve: opt.RuntimeReserve = None,
    fragmentation: opt.Fragmentation = None,
    output_format: SweepFormat = "csv",
    output: opt.Output = None,
    units: opt.Units = "iec",
    plot: opt.Plot = None,
) -> None:
    """Capacity planning over a grid: one row per model, GPU type, GPU count and ZeRO stage."""
    from zeroplan.estimate.sweep import SweepInputs, sweep_rows
    from zeroplan.estimate import sweep_output

    output_format = check_format(output_format, ("csv", "json", "table"))
    if plot is not None and output is not None and Path(plot).resolve() == Path(output).resolve():
        raise InputError("--plot", f"{plot} is also the --output file", "give the plot and the table different files")
    models = [name.strip() for name in (model or "").split(",")]  # presets, or config.json paths: inputs
    inputs = SweepInputs(models=model, params=params, gpus=gpus, gpu_types=gpu, stages=stages, tp=tp, pp=pp,
                         gpus_per_node=gpus_per_node, seq_len=seq_len, micro_batch=micro_batch,
                         recompute=recompute.strip().lower() if recompute else None, flash_attention=flash_attention,
                         precision=precision, optimizer=optimizer, runtime_reserve=runtime_reserve,
                         fragmentation=fragmentation, units=units.strip().lower())
    rows, assumptions = sweep_rows(inputs)
    if plot is not None:
        from zeroplan.estimate.sweep_plot import plot_sweep

        plot_sweep(rows, plot, inputs.units, models)
    if output_format == "table":
        console = console_for(output)
        sweep_output.render(rows, assumptions, console, inputs.units)
        if output is not None:
            write_text(console.export_text(), output, models)
        return
    text = sweep_output.to_csv(rows) if output_format == "csv" else sweep_output.to_json(rows, assumptions,
                                                                                         dict(vars(inputs)))
    write_text(text, output, models)
