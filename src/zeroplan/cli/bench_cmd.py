"""`zeroplan bench`: measure collective bandwidth and calibrate the estimates.

Registered by the CLI as app.command("bench")(bench). Nothing here imports torch at module import;
the bench code paths do, so other commands stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

DEFAULT_COLLECTIVES = "all_gather_into_tensor,reduce_scatter_tensor,all_reduce"


def bench(
    collectives: Annotated[str, typer.Option(
        help="Comma list of all_gather_into_tensor, reduce_scatter_tensor, all_reduce.")] = DEFAULT_COLLECTIVES,
    min_bytes: Annotated[str, typer.Option(
        "--min-bytes", help="Smallest message S (the full gathered/reduced buffer), e.g. 64KiB.")] = "64KiB",
    max_bytes: Annotated[str, typer.Option(
        "--max-bytes", help="Largest message S, e.g. 256MiB; capped by free memory.")] = "256MiB",
    factor: Annotated[int, typer.Option(help="Multiply the size by this between steps (nccl-tests -f).")] = 2,
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16.")] = "float32",
    warmup: Annotated[int, typer.Option(help="Untimed iterations per size.")] = 5,
    iters: Annotated[int, typer.Option(help="Timed iterations per size.")] = 20,
    backend: Annotated[str, typer.Option(help="auto (nccl with CUDA, else gloo), gloo or nccl.")] = "auto",
    nproc: Annotated[Optional[int], typer.Option(
        help="Local ranks to spawn (default: GPUs for nccl, 2 for gloo); inside torchrun/SLURM leave it out.")] = None,
    timeout: Annotated[float, typer.Option(
        help="Seconds without progress before a rank counts as hung and the run is stopped.")] = 300.0,
    output_format: Annotated[str, typer.Option("--format", help="table, json or csv (data on stdout).")] = "table",
    save_calibration: Annotated[Optional[Path], typer.Option(
        "--save-calibration", help="Write the α-β fits and raw medians to this YAML profile.")] = None,
) -> None:
    """Measure real AllGather / ReduceScatter / AllReduce bandwidth (nccl-tests style) and fit α-β links."""
    from zeroplan.bench.config import build_config

    config = build_config(
        collectives=collectives, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, dtype=dtype,
        warmup=warmup, iters=iters, backend=backend, nproc=nproc, timeout=timeout,
        output_format=output_format, save_calibration=str(save_calibration) if save_calibration else None,
    )
    from zeroplan.bench.runner import run_bench  # imports torch

    run_bench(config)  # a failed rank raises BenchFailed: a RuntimeError with exit_code 1 (130: Ctrl-C)
