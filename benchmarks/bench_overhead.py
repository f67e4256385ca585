"""How much does `zeroplan bench`'s measurement cost? Its bandwidth against a bare timing loop.

In the same processes, at the same large sizes, each rank measures every (collective, size) twice:
  tool: zeroplan.bench.timing as `zeroplan bench` uses it (barrier before each iteration on CPU,
        CUDA events per iteration on GPU, max over ranks, median over iterations);
  bare: the plainest torch.distributed loop, nccl-tests style: one barrier, `iters` back-to-back
        collectives, one clock (plus one synchronize on GPU), average time, max over ranks.
The order alternates between rounds so neither side always runs on a warmer machine. Prints busbw for
both and the ratio tool/bare (target >= 0.9: the tool must not make links look slower than they are).

    python benchmarks/bench_overhead.py [--nproc 2] [--sizes 32MiB,128MiB] [--iters 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta

COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce")


def _args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--sizes", default="32MiB,128MiB")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    parser.add_argument("--dtype", default="float32")
    return parser.parse_args(argv)


def _rank_main(args) -> None:
    from zeroplan.bench.config import human_size
    from zeroplan.distributed.devices import resolve_backend
    from zeroplan.distributed.torch_import import import_torch
    from zeroplan.bench.timing import dist, make_op, max_over_ranks, summarize, time_cpu, time_cuda
    from zeroplan.core.timing.collectives import TORCH_NAMES, busbw
    from zeroplan.core.units import GB, parse_bytes

    torch = import_torch()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend = resolve_backend(args.backend, torch.cuda.is_available())
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(minutes=10))
    element = {"float32": 4, "bfloat16": 2, "float16": 2}[args.dtype]
    sizes = [parse_bytes(s, "--sizes") // (world * element) * (world * element) for s in args.sizes.split(",")]
    tool_timer = time_cuda if device.type == "cuda" else time_cpu

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def bare(op) -> float:
        for _ in range(args.warmup):
            op()
        sync()
        dist.barrier()
        sync()
        start = time.perf_counter()
        for _ in range(args.iters):
            op()
        sync()
        return max_over_ranks([(time.perf_counter() - start) / args.iters], device)[0]

    def tool(op) -> float:
        times = tool_timer(op, None, args.warmup, args.iters, lambda: None)
        return summarize(max_over_ranks(times, device)).mean_s  # bench reports and fits on the mean

    results: dict[tuple[str, int], dict[str, list[float]]] = {}
    for round_index in range(args.rounds):
        for collective in COLLECTIVES:
            for size in sizes:
                op = make_op(collective, size, world, args.dtype, device, None)
                order = (("tool", tool), ("bare", bare)) if round_index % 2 == 0 else (("bare", bare), ("tool", tool))
                for name, measure in order:
                    seconds = measure(op)
                    results.setdefault((collective, size), {}).setdefault(name, []).append(
                        busbw(collective, size, seconds, world))
                del op
    dist.destroy_process_group()
    if rank != 0:
        return
    print(f"backend {backend}, {world} ranks, {device.type}, dtype {args.dtype}, iters {args.iters}, "
          f"rounds {args.rounds}; busbw in GB/s (median over rounds)")
    print(f"{'collective':<24}{'size':>10}{'tool':>10}{'bare':>10}{'ratio':>8}")
    ratios = []
    for (collective, size), by_side in results.items():
        tool_bw, bare_bw = statistics.median(by_side["tool"]), statistics.median(by_side["bare"])
        ratios.append(tool_bw / bare_bw)
        print(f"{TORCH_NAMES[collective]:<24}{human_size(size):>10}{tool_bw / GB:>10.3f}{bare_bw / GB:>10.3f}"
              f"{ratios[-1]:>8.3f}")
    overall = statistics.median(ratios)
    print(f"median ratio tool/bare: {overall:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"target >= 0.9: {'met' if overall >= 0.9 else 'NOT met'}")


def main(argv=None) -> int:
    args = _args(argv)
    if "RANK" in os.environ:
        _rank_main(args)
        return 0
    from zeroplan.distributed.rendezvous import LOCAL_HOST, free_port

    port = str(free_port())
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.nproc), LOCAL_RANK=str(rank),
                   MASTER_ADDR=LOCAL_HOST, MASTER_PORT=port)
        env.setdefault("OMP_NUM_THREADS", "1")
        procs.append(subprocess.Popen([sys.executable, __file__, *(argv or sys.argv[1:])], env=env,
                                      start_new_session=True))
    try:
        codes = [proc.wait() for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return max(codes, key=abs)


if __name__ == "__main__":
    sys.exit(main())
