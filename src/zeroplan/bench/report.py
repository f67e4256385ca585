"""Print a bench run the way nccl-tests does (size, count, time, algbw, busbw), as a table, JSON or CSV.
Data goes to stdout; in CSV mode the notes go to stderr so stdout stays one clean table."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any, TextIO

from zeroplan.bench.config import DTYPE_BYTES
from zeroplan.bench.result import BenchRun
from zeroplan.core.timing.collectives import (
    ALLREDUCE_THEN_CHUNK, REDUCE_SCATTER, RING, TORCH_NAMES, algbw, busbw, wire_bytes_per_rank,
)
from zeroplan.core.units import GB
from zeroplan.render.encoding import ERRORS as ASCII_ERRORS
from zeroplan.render.terminal import Canvas, Table

RESULT_FIELDS = ("collective", "span", "ranks", "size_bytes", "count", "dtype", "time_us_mean", "time_us_median",
                 "time_us_min", "time_us_max", "algbw_gbps", "busbw_gbps", "wire_bytes_per_rank",
                 "wire_gbps", "implementation")
GLOO_REDUCE_SCATTER_NOTE = (
    "gloo runs reduce_scatter_tensor as an AllReduce followed by a chunk (PyTorch PR #118911): each rank "
    "sends 2(n-1)/n*S, twice what a ring ReduceScatter sends. busbw keeps the nccl-tests factor (n-1)/n, so "
    "it shows the cost a ZeRO step really pays on gloo; wire_bytes_per_rank and wire_gbps show the real traffic.")
MIN_FILE_WIDTH = 120
COLUMNS_CAPTION = ("size, wire: bytes (wire = sent per rank); mean, median, min, max: µs; "
                   "algbw, busbw, wirebw: GB/s (on the mean)")
TIMING_NOTE = ("time: per iteration the slowest rank's time (max over ranks), then mean, median, min and max over "
               "iterations. algbw = S/mean (what a loop of these calls sees, as nccl-tests reports); busbw = "
               "algbw*factor (all_reduce 2(n-1)/n, others (n-1)/n); GB/s = 1e9 B/s. The α-β fit uses the mean.")


def implementation(backend: str, collective: str) -> str:
    return ALLREDUCE_THEN_CHUNK if backend == "gloo" and collective == REDUCE_SCATTER else RING


def result_rows(bench_run: BenchRun) -> list[dict[str, Any]]:
    run = bench_run.calibration
    rows = []
    for m, mean in zip(run.measurements, bench_run.mean_s, strict=True):
        how = implementation(run.backend, m.collective)
        wire = wire_bytes_per_rank(m.collective, m.size_bytes, m.ranks, how)
        rows.append({
            "collective": TORCH_NAMES[m.collective], "span": m.span, "ranks": m.ranks,
            "size_bytes": m.size_bytes, "count": m.size_bytes // DTYPE_BYTES[run.dtype], "dtype": run.dtype,
            "time_us_mean": mean * 1e6, "time_us_median": m.time_s_median * 1e6, "time_us_min": m.time_s_min * 1e6,
            "time_us_max": m.time_s_max * 1e6,
            "algbw_gbps": algbw(m.size_bytes, mean) / GB,
            "busbw_gbps": busbw(m.collective, m.size_bytes, mean, m.ranks) / GB,
            "wire_bytes_per_rank": round(wire), "wire_gbps": wire / mean / GB,
            "implementation": how,
        })
    return rows


def fit_rows(bench_run: BenchRun) -> list[dict[str, Any]]:
    run = bench_run.calibration
    rows = []
    for collective, spans in run.fits.items():
        for span, fit in spans.items():
            bandwidth = fit.bandwidth_bytes_per_s
            rows.append({
                "collective": TORCH_NAMES[collective], "span": span, "ranks": fit.ranks,
                "latency_us_per_step": fit.latency_s * 1e6,
                "bandwidth_gbps": bandwidth / GB if bandwidth else None,
                "r_squared": fit.r_squared, "max_relative_residual": fit.max_relative_residual,
                "points": fit.points, "implementation": fit.implementation,
            })
    return rows


def notes(bench_run: BenchRun) -> list[str]:
    run = bench_run.calibration
    result = [TIMING_NOTE, *run.notes]
    if run.backend == "gloo" and any(m.collective == REDUCE_SCATTER for m in run.measurements):
        result.append(GLOO_REDUCE_SCATTER_NOTE)
    if any(row["bandwidth_gbps"] is None for row in fit_rows(bench_run)):
        result.append("a fit without bandwidth saw only latency-bound sizes; raise --max-bytes")
    return result


def meta(bench_run: BenchRun) -> dict[str, Any]:
    run = bench_run.calibration
    return {key: getattr(run, key) for key in ("created", "backend", "dtype", "world_size", "nodes",
                                               "gpus_per_node", "hostnames", "device", "torch_version")}


def screen_text(text: str, encoding: str | None) -> str:
    """text as an output in this encoding can show it: µs, α, β, R², · as zeroplan's ASCII stand-ins
    (zeroplan.render.encoding) where the encoding lacks them."""
    codec = encoding or "ascii"
    try:
        return text.encode(codec, errors=ASCII_ERRORS).decode(codec)
    except LookupError:  # an encoding Python does not know: plain ASCII is safe
        return text.encode("ascii", errors=ASCII_ERRORS).decode("ascii")


def _print_table(bench_run: BenchRun, out: TextIO) -> None:
    run = bench_run.calibration
    encoding = getattr(out, "encoding", None) or "utf-8"

    def shown(text: str) -> str:  # before layout, so a stand-in's width is the one measured
        return screen_text(text, encoding)

    console = Canvas.for_stream(out, min_width=MIN_FILE_WIDTH)  # a file or pipe: wide enough that no number is cut
    console.print(shown(f"zeroplan bench: {run.backend}, {run.world_size} ranks on {run.nodes} node(s), "
                        f"{run.device}, torch {run.torch_version}"))
    rows = result_rows(bench_run)
    for key in dict.fromkeys((row["collective"], row["span"]) for row in rows):
        picked = [row for row in rows if (row["collective"], row["span"]) == key]
        title = f"{key[0]} · {key[1]} · {picked[0]['ranks']} ranks · {run.dtype}"
        if picked[0]["implementation"] != RING:
            title += f" · {picked[0]['implementation']}"
        headers = ["size", "count", "mean", "median", "min", "max", "algbw", "busbw", "wire", "wirebw"]
        table = Table(headers, "r" * len(headers), title=shown(title), caption=shown(COLUMNS_CAPTION))
        for row in picked:
            table.add_row(f"{row['size_bytes']}", f"{row['count']}", f"{row['time_us_mean']:.1f}",
                          f"{row['time_us_median']:.1f}", f"{row['time_us_min']:.1f}", f"{row['time_us_max']:.1f}",
                          f"{row['algbw_gbps']:.3f}", f"{row['busbw_gbps']:.3f}", f"{row['wire_bytes_per_rank']}",
                          f"{row['wire_gbps']:.3f}")
        console.print(table)
    fit_title = "α-β fit on mean times: t = steps·α + factor·S/B  (α in µs per ring step, B in GB/s)"
    fits = Table([shown(header) for header in ("collective", "span", "ranks", "α", "B", "R²", "max rel. resid.",
                                               "points")], "llrrrrrr", title=shown(fit_title))
    for row in fit_rows(bench_run):
        bandwidth = "-" if row["bandwidth_gbps"] is None else f"{row['bandwidth_gbps']:.3f}"
        fits.add_row(row["collective"], row["span"], str(row["ranks"]), f"{row['latency_us_per_step']:.2f}",
                     bandwidth, f"{row['r_squared']:.4f}", f"{row['max_relative_residual']:.3f}", str(row["points"]))
    if fits.row_count:
        console.print(fits)
    for note in notes(bench_run):
        console.print(shown(f"note: {note}"))
    # the table rule too: ASCII stand-ins where the output's encoding lacks them
    out.write(screen_text(console.text(), encoding))


def emit(run: BenchRun, output_format: str, out: TextIO | None = None, err: TextIO | None = None) -> None:
    out = out or sys.stdout
    err = err or sys.stderr
    if output_format == "json":
        document = {"meta": meta(run), "results": result_rows(run), "fits": fit_rows(run), "notes": notes(run)}
        out.write(json.dumps(document, indent=2) + "\n")
    elif output_format == "csv":
        writer = csv.DictWriter(out, fieldnames=RESULT_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(result_rows(run))
        for note in notes(run):
            err.write(screen_text(f"note: {note}", getattr(err, "encoding", None) or "utf-8") + "\n")
    else:
        _print_table(run, out)

