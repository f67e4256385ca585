"""One rank of a bench run: join the process group, learn the topology, sweep the sizes, and give
rank 0 the results as a Calibration. `python -m zeroplan.bench.worker` is how the local launcher
starts a rank; under torchrun the CLI calls run() in-process instead."""

from __future__ import annotations

import os
import platform
import socket
import sys
import traceback
from datetime import datetime, timedelta, timezone

from zeroplan.distributed.child import (
    CONFIG_ENV, FAULT_ENV, HEARTBEAT_ENV, PARENT_PID_ENV, RESULT_ENV, Heartbeat, parse_fault, watch_parent,
)
from zeroplan.bench.config import BenchConfig, available_host_memory, human_size, memory_cap_bytes
from zeroplan.distributed.rendezvous import EXIT_ADDRESS_IN_USE, RankEnv, export_for_env_init, is_address_in_use, launcher_env
from zeroplan.bench.timing import dist, make_op, max_over_ranks, summarize, time_cpu, time_cuda, torch
from zeroplan.bench.topology import RankInfo, Topology, build_topology
from zeroplan.inputs.calibration import INTRA_NODE, Calibration, Measurement, build_fits
from zeroplan.core.collectives import TORCH_NAMES
from zeroplan.core.errors import InputError

# Ranks spawned by our launcher wait this much longer than --timeout inside torch, so the launcher's
# watchdog (which can name the stuck rank) acts first.
LAUNCHER_MARGIN_S = 30.0
DEBUG_ENV = "ZEROPLAN_BENCH_DEBUG"  # set to print full tracebacks from ranks


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return f"CPU ({line.split(':', 1)[1].strip()})"
    except OSError:
        pass
    return f"CPU ({platform.machine() or 'unknown'})"


def _my_info(env: RankEnv, device: torch.device) -> RankInfo:
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
        name = torch.cuda.get_device_name(device)
    else:
        free, name = available_host_memory(), _cpu_name()
    return RankInfo(env.node_id, socket.gethostname(), free, name)


def _size_cap(infos: list[RankInfo], topology: Topology, device: torch.device) -> int | None:
    """Largest S every rank can hold; host memory on CPU is shared by all ranks of a node."""
    caps = []
    for ranks in topology.node_ranks:
        for rank in ranks:
            free = infos[rank].free_bytes
            if free is not None:
                share = free // len(ranks) if device.type == "cpu" else free
                caps.append(memory_cap_bytes(share))
    return min(caps) if caps else None


def _plan_sizes(config: BenchConfig, topology: Topology, cap: int | None) -> tuple[list[int], list[str]]:
    sizes = config.sizes(topology.world_size)
    if cap is None or sizes[-1] <= cap:
        return sizes, []
    kept = [size for size in sizes if size <= cap]
    if not kept:
        raise InputError("--min-bytes", f"{human_size(sizes[0])} does not fit in free memory "
                         f"(about {human_size(cap)} per message per rank)", "lower --min-bytes")
    note = (f"sizes above {human_size(kept[-1])} skipped: free memory holds about {human_size(cap)} "
            f"per message per rank (3x the message, for the backend's temporary copies)")
    return kept, [note]


def _progress(enabled: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    # No refresh thread: it would compete with the ranks for the CPU while they are being timed.
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, auto_refresh=False, transient=True,
                    disable=not (enabled and console.is_terminal))


def _sweep(config: BenchConfig, topology: Topology, sizes: list[int], device: torch.device,
           heartbeat: Heartbeat, rank: int) -> list[Measurement]:
    groups: dict[str, dist.ProcessGroup | None] = {span: None for span in topology.spans()}
    if INTRA_NODE in groups and topology.nodes > 1:
        groups[INTRA_NODE], _ = dist.new_subgroups_by_enumeration([list(r) for r in topology.node_ranks])
    timer = time_cuda if device.type == "cuda" else time_cpu
    measurements: list[Measurement] = []
    with _progress(rank == 0) as progress:
        task = progress.add_task("collectives", total=len(groups) * len(config.collectives) * len(sizes))
        for span, group in groups.items():
            ranks = topology.span_ranks(span)
            for collective in config.collectives:
                for size in sizes:
                    progress.update(task, description=f"{TORCH_NAMES[collective]} {span} {human_size(size)}")
                    progress.refresh()
                    op = make_op(collective, size, ranks, config.dtype, device, group)
                    times = timer(op, group, config.warmup, config.iters, heartbeat.tick)
                    del op  # free this size's buffers before the next, larger one
                    stats = summarize(max_over_ranks(times, device))
                    measurements.append(Measurement(
                        collective=collective, span=span, ranks=ranks, size_bytes=size,
                        time_s_median=stats.median_s, time_s_min=stats.min_s, time_s_max=stats.max_s))
                    progress.advance(task)
    return measurements


def run(config: BenchConfig, env: RankEnv, heartbeat: Heartbeat, pg_timeout_s: float) -> Calibration | None:
    """Measure on this rank; rank 0 returns the run's Calibration, the others None.
    config.backend must already be resolved to gloo or nccl."""
    if config.backend == "nccl":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    export_for_env_init(env)
    dist.init_process_group(config.backend, init_method="env://", rank=env.rank, world_size=env.world_size,
                            timeout=timedelta(seconds=pg_timeout_s),
                            device_id=device if device.type == "cuda" else None)
    heartbeat.tick()  # joined the group
    infos: list[RankInfo | None] = [None] * env.world_size
    dist.all_gather_object(infos, _my_info(env, device))
    topology = build_topology(infos)
    sizes, notes = _plan_sizes(config, topology, _size_cap(infos, topology, device))
    measurements = _sweep(config, topology, sizes, device, heartbeat, env.rank)
    dist.barrier()
    dist.destroy_process_group()
    if env.rank != 0:
        return None
    return Calibration(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        backend=config.backend, dtype=config.dtype, world_size=topology.world_size, nodes=topology.nodes,
        gpus_per_node=topology.ranks_per_node, hostnames=list(topology.hostnames), device=topology.device_name,
        torch_version=torch.__version__, fits=build_fits(measurements, config.backend),
        measurements=measurements, notes=notes,
    )


def main() -> int:
    """Entry point of a rank spawned by zeroplan.distributed.launcher (all inputs come in the environment)."""
    config = BenchConfig.from_json(os.environ[CONFIG_ENV])
    env = launcher_env()
    if env is None:
        sys.stderr.write("zeroplan bench worker: start it through `zeroplan bench`, not by hand\n")
        return 2
    heartbeat = Heartbeat(os.environ.get(HEARTBEAT_ENV), env.rank, parse_fault(os.environ.get(FAULT_ENV)))
    heartbeat.tick()  # started: torch imported
    if PARENT_PID_ENV in os.environ:
        watch_parent(int(os.environ[PARENT_PID_ENV]))
    try:
        result = run(config, env, heartbeat, config.timeout_s + LAUNCHER_MARGIN_S)
    except InputError as exc:
        sys.stderr.write(f"zeroplan bench: rank {env.rank}: {exc}\n")
        return 2
    except Exception as exc:
        if is_address_in_use(exc):
            sys.stderr.write(f"zeroplan bench: rank {env.rank}: port {env.master_port} is taken\n")
            return EXIT_ADDRESS_IN_USE
        # One line by default: when a peer dies, every other rank fails with a long, useless traceback.
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        first_line = (str(exc).strip().splitlines() or [""])[0]
        sys.stderr.write(f"zeroplan bench: rank {env.rank}: {type(exc).__name__}: {first_line}\n")
        return 1
    if result is not None:
        with open(os.environ[RESULT_ENV], "w", encoding="utf-8") as out:
            out.write(result.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
