"""`zeroplan bench`: measure collective bandwidth and calibrate the estimates.

Registered by the CLI as app.command("bench")(bench). Nothing here imports torch at module import;
the bench code paths do, so other commands stay fast.
"""

from __future__ import annotations

from zeroplan.cli.options import command, uses
from zeroplan.inputs.command_sections import BenchInputs, RunInputs
from zeroplan.inputs.sections import OutputInputs


@command(uses(BenchInputs, "collectives", "min_bytes", "max_bytes", "factor", "dtype", "warmup", "iters"),
         uses(RunInputs, panel=None), uses(OutputInputs, "output_format", panel=None),
         uses(BenchInputs, "save_calibration"), formats=("table", "json", "csv"))
def bench(bench: BenchInputs, run: RunInputs, output: OutputInputs) -> None:
    """Measure real AllGather / ReduceScatter / AllReduce bandwidth (nccl-tests style) and fit α-β links."""
    from zeroplan.bench.config import build_config

    config = build_config(**bench.values(), **run.values(), output_format=output.output_format)
    from zeroplan.bench.runner import run_bench  # imports torch

    run_bench(config)  # a failed rank raises BenchFailed: a RuntimeError with exit_code 1 (130: Ctrl-C)
