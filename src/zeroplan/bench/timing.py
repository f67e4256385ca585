"""Timing one collective at one size, per iteration, on CPU (gloo) or GPU (nccl).

CPU: every iteration starts from a barrier and is timed with the wall clock on each rank.
GPU: iterations run back to back as nccl-tests does (the collectives themselves keep ranks in step),
each bracketed by CUDA events on the current stream, read after one synchronize.
Either way the caller reduces the per-iteration times with MAX over ranks: an iteration is done when
its slowest rank is done. Imports torch: only the bench code paths import this module.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from zeroplan.distributed.torch_import import import_torch

if TYPE_CHECKING:
    import torch
else:
    torch = import_torch()
import torch.distributed as dist  # noqa: E402  (after the quiet import above)

from zeroplan.core.timing.collectives import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# torch 2.13 renamed all_gather_into_tensor / reduce_scatter_tensor to *_single and deprecated the old
# names as thin wrappers; call the new name where it exists to skip the wrapper and its warning.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def make_op(collective: str, size_bytes: int, ranks: int, dtype: str, device: torch.device,
            group: dist.ProcessGroup | None) -> Callable[[], None]:
    """Allocate the buffers once and return a call that runs the collective on them.
    Zeros, not torch.empty: garbage can hold denormals, which make CPU reductions crawl."""
    torch_dtype = TORCH_DTYPES[dtype]
    count = size_bytes // torch_dtype.itemsize
    if collective == ALL_GATHER:
        piece = torch.zeros(count // ranks, dtype=torch_dtype, device=device)
        whole = torch.zeros(count, dtype=torch_dtype, device=device)
        return lambda: _all_gather(whole, piece, group=group)
    if collective == REDUCE_SCATTER:
        whole = torch.zeros(count, dtype=torch_dtype, device=device)
        piece = torch.zeros(count // ranks, dtype=torch_dtype, device=device)
        return lambda: _reduce_scatter(piece, whole, group=group)
    if collective == ALL_REDUCE:
        buffer = torch.zeros(count, dtype=torch_dtype, device=device)
        return lambda: dist.all_reduce(buffer, group=group)
    raise ValueError(f"unknown collective {collective}")  # internal: names are validated upstream


def time_cpu(op: Callable[[], None], group: dist.ProcessGroup | None, warmup: int, iters: int,
             tick: Callable[[], None]) -> list[float]:
    times: list[float] = []
    for index in range(warmup + iters):
        tick()
        dist.barrier(group=group)
        start = time.perf_counter()
        op()
        elapsed = time.perf_counter() - start
        if index >= warmup:
            times.append(elapsed)
    return times


def time_cuda(op: Callable[[], None], group: dist.ProcessGroup | None, warmup: int, iters: int,
              tick: Callable[[], None]) -> list[float]:
    for _ in range(warmup):
        tick()
        op()
    tick()
    torch.cuda.synchronize()
    dist.barrier(group=group)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for start, end in zip(starts, ends):
        tick()
        start.record()
        op()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 for start, end in zip(starts, ends)]


def max_over_ranks(times: list[float], device: torch.device) -> list[float]:
    """Per-iteration MAX across every rank of the world (outside the timed region)."""
    tensor = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()


@dataclass(frozen=True)
class TimingStats:
    mean_s: float  # what a loop of these collectives takes per call: bandwidth and fits use it
    median_s: float
    min_s: float
    max_s: float


def summarize(times: list[float]) -> TimingStats:
    return TimingStats(statistics.fmean(times), statistics.median(times), min(times), max(times))
