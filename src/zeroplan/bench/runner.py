"""What `zeroplan bench` does once its options are valid: join a torchrun/SLURM job or spawn local
ranks, then print the report and save the calibration profile. Imports torch (bench paths only)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace

from zeroplan.bench import import_torch
from zeroplan.distributed.child import FAULT_ENV, Heartbeat, parse_fault
from zeroplan.bench.config import BenchConfig, available_host_memory, human_size, memory_cap_bytes, resolve_backend
from zeroplan.distributed.launcher import launch_local
from zeroplan.distributed.rendezvous import RankEnv, launcher_env
from zeroplan.bench.report import emit
from zeroplan.inputs.calibration import Calibration, save_calibration
from zeroplan.core.errors import InputError

DEFAULT_CPU_RANKS = 2


class BenchFailed(RuntimeError):
    """A rank died or hung, or the run was interrupted. The CLI prints the message and exits with
    exit_code (1, or 130 for an interrupt), as it does for any RuntimeError carrying one."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _local_ranks(config: BenchConfig, torch) -> int:
    gpus = torch.cuda.device_count() if config.backend == "nccl" else 0
    nproc = config.nproc if config.nproc is not None else (gpus if config.backend == "nccl" else DEFAULT_CPU_RANKS)
    if nproc < 2:
        raise InputError("--nproc", f"a collective needs at least 2 ranks, got {nproc}",
                         "use --nproc 2 or more (with --backend gloo on a single-GPU machine)")
    if config.backend == "nccl" and nproc > gpus:
        raise InputError("--nproc", f"{nproc} ranks but torch sees {gpus} GPU(s); nccl needs one GPU per rank",
                         f"use --nproc {gpus} or fewer, or --backend gloo")
    return nproc


def _check_host_memory(config: BenchConfig, nproc: int) -> None:
    """On CPU every rank shares this host's memory: refuse a sweep whose smallest size cannot fit."""
    available = available_host_memory()
    if available is None:
        return
    cap = memory_cap_bytes(available // nproc)
    smallest = config.sizes(nproc)[0]
    if smallest > cap:
        raise InputError("--min-bytes", f"{human_size(smallest)} per message does not fit {nproc} ranks in "
                         f"{human_size(available)} of free memory", f"use at most {human_size(cap)}")


def _finish(run: Calibration, config: BenchConfig) -> None:
    emit(run, config.output_format)
    if config.save_calibration:
        save_calibration(run, config.save_calibration)
        sys.stderr.write(f"zeroplan bench: calibration saved to {config.save_calibration}\n")


def _run_joined(config: BenchConfig, env: RankEnv) -> None:
    """Inside torchrun/SLURM: this process is one rank; rank 0 reports."""
    from zeroplan.bench import worker  # imports torch.distributed

    if config.nproc is not None and config.nproc != env.world_size:
        raise InputError("--nproc", f"is {config.nproc} but the launcher started {env.world_size} ranks",
                         "drop --nproc under torchrun/SLURM")
    config.sizes(env.world_size)
    heartbeat = Heartbeat(None, env.rank, parse_fault(os.environ.get(FAULT_ENV)))
    result = worker.run(config, env, heartbeat, pg_timeout_s=config.timeout_s)
    if result is not None:
        _finish(result, config)


def run_bench(config: BenchConfig) -> None:
    """Bad input raises InputError (exit 2); a failed, hung or interrupted run raises BenchFailed."""
    joined = launcher_env()
    torch = import_torch()
    config = replace(config, backend=resolve_backend(config.backend, torch.cuda.is_available()))
    if joined is not None:
        _run_joined(config, joined)
        return
    nproc = _local_ranks(config, torch)
    config.sizes(nproc)
    if config.backend == "gloo":
        _check_host_memory(config, nproc)
    outcome = launch_local(config, nproc)
    if outcome.exit_code != 0:
        raise BenchFailed(outcome.message, outcome.exit_code)
    _finish(outcome.result, config)
