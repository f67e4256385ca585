"""What `zeroplan bench` does once its options are valid: join a torchrun/SLURM job or spawn local
ranks, then print the report and save the calibration profile. The local path never imports torch
here (only the ranks do); the torchrun path runs the rank in-process."""

from __future__ import annotations

import os
import sys
from dataclasses import replace

from zeroplan.bench.config import (
    DEBUG_ENV, FAULT_ENV, BenchConfig, available_host_memory, human_size, memory_cap_bytes,
)
from zeroplan.bench.report import emit
from zeroplan.bench.result import BenchRun
from zeroplan.core.errors import InputError
from zeroplan.distributed.child import parse_fault
from zeroplan.distributed.devices import launcher_backend, local_world, visible_gpu_count
from zeroplan.distributed.launcher import Launch, launch_local
from zeroplan.distributed.rendezvous import RankEnv, RankFailed, launcher_env
from zeroplan.inputs.calibration import save_calibration
from zeroplan.distributed.child import Heartbeat

WORKER = "zeroplan.bench.worker"
LABEL = "zeroplan bench"


class BenchFailed(RankFailed):
    """A rank died or hung, or the run was interrupted. The CLI prints the message and exits with
    exit_code (1, or 130 for an interrupt), as it does for any RuntimeError carrying one."""


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


def _finish(run: BenchRun, config: BenchConfig) -> None:
    emit(run, config.output_format)
    if config.save_calibration:
        save_calibration(run.calibration, config.save_calibration)
        sys.stderr.write(f"zeroplan bench: calibration saved to {config.save_calibration}\n")


def _run_joined(config: BenchConfig, env: RankEnv) -> None:
    """Inside torchrun/SLURM: this process is one rank; rank 0 reports. Every failure is one line."""
    from zeroplan.bench import worker  # imports torch.distributed
    if config.nproc is not None and config.nproc != env.world_size:
        raise InputError("--nproc", f"is {config.nproc} but the launcher started {env.world_size} ranks",
                         "drop --nproc under torchrun/SLURM")
    config.sizes(env.world_size)
    heartbeat = Heartbeat(None, env.rank, parse_fault(os.environ.get(FAULT_ENV), FAULT_ENV))
    try:
        result = worker.run(config, env, heartbeat, pg_timeout_s=config.timeout_s)
    except (InputError, RankFailed):
        raise
    except Exception as exc:  # a peer died, a collective timed out: one line, not a traceback
        if os.environ.get(DEBUG_ENV):
            raise
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise BenchFailed(f"rank {env.rank}: {type(exc).__name__}: {first_line} (set {DEBUG_ENV}=1 for the "
                          "traceback)", 1) from None
    if result is not None:
        _finish(result, config)


def run_bench(config: BenchConfig) -> None:
    """Bad input raises InputError (exit 2); a failed, hung or interrupted run raises BenchFailed."""
    joined = launcher_env()
    if joined is not None:
        _run_joined(config, joined)
        return
    gpus = visible_gpu_count()
    config = replace(config, backend=launcher_backend(config.backend, gpus))
    nproc = local_world(config.nproc, config.backend, gpus, "a collective")
    config.sizes(nproc)
    if config.backend == "gloo":
        _check_host_memory(config, nproc)
    launch = Launch(WORKER, config.to_json(), nproc, LABEL, progress_timeout_s=config.timeout_s,
                    rank0_stderr_to_terminal=True)
    # Rank 0 writes the run; a missing file reads as empty text, which fails to parse.
    outcome = launch_local(launch, lambda texts: BenchRun.from_json(texts[0] or ""))
    if outcome.exit_code != 0:
        raise BenchFailed(outcome.message, outcome.exit_code)
    _finish(outcome.value(), config)
