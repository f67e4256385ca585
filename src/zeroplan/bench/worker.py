"""One rank of a bench run: join the process group, learn the topology, sweep the sizes, and give
rank 0 the results as a BenchRun. `python -m zeroplan.bench.worker` is how the local launcher starts a
rank; under torchrun the CLI calls run() in-process instead."""

from __future__ import annotations

import platform
import socket
import sys
from dataclasses import asdict, replace
from datetime import datetime, timezone

from zeroplan.bench.config import (
    DEBUG_ENV, FAULT_ENV, BenchConfig, available_host_memory, human_size, memory_cap_bytes,
)
from zeroplan.bench.result import BenchRun, fits_on_mean
from zeroplan.bench.timing import dist, make_op, max_over_ranks, summarize, time_cpu, time_cuda, torch
from zeroplan.bench.topology import RankInfo, Topology, build_topology
from zeroplan.core.timing.collectives import TORCH_NAMES
from zeroplan.core.errors import InputError
from zeroplan.distributed.child import Heartbeat, rank_main
from zeroplan.distributed.devices import resolve_backend
from zeroplan.distributed.exchange import all_gather_json
from zeroplan.distributed.rendezvous import RankEnv, join_group
from zeroplan.inputs.calibration import INTRA_NODE, Calibration, Measurement, SpanName
from zeroplan.render.terminal import ProgressLine

# Ranks spawned by our launcher wait this much longer than --timeout inside torch, so the launcher's
# watchdog (which can name the stuck rank) acts first.
LAUNCHER_MARGIN_S = 30.0


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
    free: int | None  # this rank's free memory (None: unknown)
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


def _progress(enabled: bool, total: int):
    # Drawn only when update() is called (no refresh thread to compete with the ranks being timed).
    return ProgressLine("collectives", total, enabled=enabled)


def _sweep(config: BenchConfig, topology: Topology, sizes: list[int], device: torch.device,
           heartbeat: Heartbeat, rank: int) -> tuple[list[Measurement], list[float]]:
    groups: dict[SpanName, dist.ProcessGroup | None] = {span: None for span in topology.spans()}
    if INTRA_NODE in groups and topology.nodes > 1:
        groups[INTRA_NODE], _ = dist.new_subgroups_by_enumeration([list(r) for r in topology.node_ranks])
    timer = time_cuda if device.type == "cuda" else time_cpu
    measurements: list[Measurement] = []
    means: list[float] = []
    progress = _progress(rank == 0, len(groups) * len(config.collectives) * len(sizes))
    try:
        for span, group in groups.items():
            ranks = topology.span_ranks(span)
            for collective in config.collectives:
                for size in sizes:
                    progress.update(label=f"{TORCH_NAMES[collective]} {span} {human_size(size)}", force=True)
                    op = make_op(collective, size, ranks, config.dtype, device, group)
                    times = timer(op, group, config.warmup, config.iters, heartbeat.tick)
                    del op  # free this size's buffers before the next, larger one
                    stats = summarize(max_over_ranks(times, device))
                    measurements.append(Measurement(
                        collective=collective, span=span, ranks=ranks, size_bytes=size,
                        time_s_median=stats.median_s, time_s_min=stats.min_s, time_s_max=stats.max_s))
                    means.append(stats.mean_s)
                    progress.update(advance=1)
    finally:
        progress.close()
    return measurements, means


def run(config: BenchConfig, env: RankEnv, heartbeat: Heartbeat, pg_timeout_s: float) -> BenchRun | None:
    """Measure on this rank; rank 0 returns the run, the others None. config.backend may still be
    "auto": every rank settles it the same way, with torch's view of CUDA."""
    config = replace(config, backend=resolve_backend(config.backend, torch.cuda.is_available()))
    if config.backend == "nccl":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    join_group(config.backend, env, pg_timeout_s, device, "zeroplan bench")
    heartbeat.tick()  # joined the group
    infos = [RankInfo(**info) for info in all_gather_json(asdict(_my_info(env, device)), device)]
    topology = build_topology(infos)
    sizes, notes = _plan_sizes(config, topology, _size_cap(infos, topology, device))
    measurements, means = _sweep(config, topology, sizes, device, heartbeat, env.rank)
    dist.barrier()
    dist.destroy_process_group()
    if env.rank != 0:
        return None
    calibration = Calibration(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        backend="nccl" if config.backend == "nccl" else "gloo",  # resolve_backend settled "auto" above
        dtype=config.dtype, world_size=topology.world_size, nodes=topology.nodes,
        gpus_per_node=topology.ranks_per_node, hostnames=list(topology.hostnames), device=topology.device_name,
        torch_version=torch.__version__, fits=fits_on_mean(measurements, means, config.backend),
        measurements=measurements, notes=notes,
    )
    return BenchRun(calibration, tuple(means))


def _rank(env: RankEnv, heartbeat: Heartbeat, config_json: str) -> str | None:
    config = BenchConfig.from_json(config_json)
    result = run(config, env, heartbeat, config.timeout_s + LAUNCHER_MARGIN_S)
    return None if result is None else result.to_json()


def main() -> int:
    """Entry point of a rank spawned by zeroplan.distributed.launcher (all inputs come in the environment)."""
    return rank_main("zeroplan bench", _rank, fault_env=FAULT_ENV, debug_env=DEBUG_ENV)


if __name__ == "__main__":
    sys.exit(main())
