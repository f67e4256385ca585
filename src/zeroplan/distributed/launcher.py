"""Spawn N local ranks, watch them, and always clean up.

Each rank is `python -m zeroplan.bench.worker` in its own session (start_new_session), so a Ctrl-C in
the terminal reaches only the launcher, which then kills every rank's process group and reaps it.
A rank that exits non-zero fails the run at once; a run where no rank advances its progress counter
for --timeout seconds is a hang, and the rank furthest behind is named. If rank 0 finds the port
taken (errno 98, EADDRINUSE: another process won the race after we probed it), the launch is retried
on a fresh port.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from zeroplan.distributed.child import (
    CONFIG_ENV, COUNTER, HEARTBEAT_ENV, PARENT_PID_ENV, RESULT_ENV, read_counter,
)
from zeroplan.bench.config import BenchConfig
from zeroplan.distributed.rendezvous import EXIT_ADDRESS_IN_USE, LOCAL_HOST, free_port
from zeroplan.inputs.calibration import Calibration

POLL_S = 0.02
TERM_GRACE_S = 2.0
PORT_TRIES = 3
# A rank must report ready (torch imported) within this long; the no-progress --timeout counts from then.
STARTUP_TIMEOUT_S = 300.0
STDERR_TAIL_LINES = 8
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


@dataclass
class LaunchOutcome:
    exit_code: int  # 0, EXIT_FAILED or EXIT_INTERRUPTED
    result: Calibration | None = None
    message: str = ""
    failed_rank: int | None = None
    pids: list[int] = field(default_factory=list)  # every rank process started, all tries


class Interrupted(Exception):
    pass


def raise_interrupt(signum, frame):  # SIGTERM to the launcher: clean up as for Ctrl-C
    raise Interrupted()


def kill_process_groups(procs: list[subprocess.Popen], grace_s: float) -> None:
    """SIGTERM each rank's process group, SIGKILL what is left after a grace period, reap all."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [proc for proc in procs if proc.poll() is None]
        for proc in alive:
            try:
                os.killpg(proc.pid, sig)  # each rank leads its own session: pgid == pid
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        for proc in alive:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    for proc in procs:
        proc.wait()


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-STDERR_TAIL_LINES:])


class _RankSet:
    """One try: the processes of ranks 0..n-1 on one port, with their counters and stderr files."""

    def __init__(self, config: BenchConfig, nproc: int, port: int, workdir: Path) -> None:
        self.workdir = workdir
        self.result_path = workdir / "result.json"
        self.procs: list[subprocess.Popen] = []
        self.counters = [workdir / f"rank{rank}.progress" for rank in range(nproc)]
        self.stderr_paths = [workdir / f"rank{rank}.stderr" for rank in range(nproc)]
        for path in self.counters:
            path.write_bytes(bytes(COUNTER.size))
        try:
            for rank in range(nproc):
                self._spawn(config, nproc, port, rank)
        except BaseException:  # a Ctrl-C or a failed spawn halfway: take back the ranks already started
            self.kill()
            raise

    def _spawn(self, config: BenchConfig, nproc: int, port: int, rank: int) -> None:
        env = dict(os.environ)
        env.update({  # what torchrun would set, plus our protocol's files
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "MASTER_ADDR": LOCAL_HOST,
            "MASTER_PORT": str(port), CONFIG_ENV: config.to_json(),
            HEARTBEAT_ENV: str(self.counters[rank]), PARENT_PID_ENV: str(os.getpid()),
            RESULT_ENV: str(self.result_path),
        })
        env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does: N ranks must not each take every core
        # Rank 0 keeps the terminal's stderr for its progress bar; the others write files shown on failure.
        stderr = None if rank == 0 else open(self.stderr_paths[rank], "wb")
        try:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "zeroplan.bench.worker"], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True))
        finally:
            if stderr is not None:
                stderr.close()

    def progress(self) -> list[int]:
        return [read_counter(str(path)) for path in self.counters]

    def kill(self) -> None:
        kill_process_groups(self.procs, TERM_GRACE_S)


def _watch(ranks: _RankSet, timeout_s: float, startup_timeout_s: float) -> tuple[str, int | None, str]:
    """Until the try ends: ("ok", None, ""), ("port", 0, msg) or ("failed", rank, msg).

    The no-progress clock starts when every rank has reported ready (its first tick, after importing
    torch): start-up time on a loaded machine is not a hang. A rank that is not ready within
    startup_timeout_s of its spawn is named as one that never started."""
    spawned = time.monotonic()
    last = ranks.progress()
    last_change: float | None = None  # None until every running rank is ready
    next_check = spawned
    while True:
        codes = [proc.poll() for proc in ranks.procs]
        failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            counts = ranks.progress()
            # Several found dead in one poll: the one killed by a signal, or furthest behind, went first.
            first = min(failed, key=lambda r: (codes[r] >= 0, counts[r], r))
            if codes[first] == EXIT_ADDRESS_IN_USE:
                return "port", first, f"rank {first}: port taken"
            message = f"rank {first} {describe_exit(codes[first])}"
            tail = _tail(ranks.stderr_paths[first]) if first else ""
            return "failed", first, message + (f"; its last lines:\n{tail}" if tail else "")
        if all(code == 0 for code in codes):
            return "ok", None, ""
        now = time.monotonic()
        if now >= next_check:
            counts = ranks.progress()
            running = [rank for rank, code in enumerate(codes) if code is None]
            if last_change is None:
                if all(counts[rank] > 0 for rank in running):
                    last, last_change = counts, now
                elif now - spawned > startup_timeout_s:
                    waiting = [rank for rank in running if counts[rank] == 0]
                    who = ("rank " if len(waiting) == 1 else "ranks ") + ", ".join(map(str, waiting))
                    return "failed", waiting[0], (f"{who} did not start within {startup_timeout_s:g} s "
                                                  "(importing torch and starting up); stopped the run")
            elif counts != last:
                last, last_change = counts, now
            elif now - last_change > timeout_s:
                return "failed", *_hang_message(counts, codes, timeout_s)
            next_check = now + 0.1
        time.sleep(POLL_S)


def _hang_message(counts: list[int], codes: list[int | None], timeout_s: float) -> tuple[int, str]:
    running = [rank for rank, code in enumerate(codes) if code is None]
    lowest = min(counts[rank] for rank in running)
    behind = [rank for rank in running if counts[rank] == lowest]
    others = sorted({counts[rank] for rank in running} - {lowest})
    if others:
        who = "rank " + ", ".join(map(str, behind))
        detail = f"stuck at step {lowest} while the others reached step {others[0]}"
    else:
        who = "ranks " + ", ".join(map(str, behind))
        detail = f"all stuck at step {lowest}"
    return behind[0], f"{who} made no progress for {timeout_s:g} s ({detail}); stopped the run"


def launch_local(config: BenchConfig, nproc: int, *, port_picker: Callable[[], int] = free_port,
                 port_tries: int = PORT_TRIES, log: TextIO | None = None) -> LaunchOutcome:
    """Run the sweep on nproc local ranks; config.backend must be resolved (gloo or nccl)."""
    log = log or sys.stderr
    outcome = LaunchOutcome(exit_code=EXIT_FAILED)
    workdir = Path(tempfile.mkdtemp(prefix="zeroplan-bench-"))
    previous_term = signal.signal(signal.SIGTERM, raise_interrupt) if _main_thread() else None
    ranks: _RankSet | None = None
    try:
        for attempt in range(1, port_tries + 1):
            port = port_picker()
            ranks = _RankSet(config, nproc, port, workdir)
            outcome.pids.extend(proc.pid for proc in ranks.procs)
            state, rank, message = _watch(ranks, config.timeout_s, max(STARTUP_TIMEOUT_S, config.timeout_s))
            ranks.kill()
            if state == "port" and attempt < port_tries:
                log.write(f"zeroplan bench: port {port} was taken (errno 98); retrying on another port\n")
                continue
            if state == "ok":
                outcome.exit_code = 0
                outcome.result = Calibration.model_validate_json(ranks.result_path.read_text(encoding="utf-8"))
            else:
                outcome.failed_rank, outcome.message = rank, message
                if state == "port":
                    outcome.message = f"rank 0 found every port taken (errno 98, EADDRINUSE) in {port_tries} tries"
            break
    except (KeyboardInterrupt, Interrupted):
        outcome.exit_code, outcome.message = EXIT_INTERRUPTED, "interrupted; stopped every rank"
    finally:
        if ranks is not None:
            ranks.kill()
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
        shutil.rmtree(workdir, ignore_errors=True)
    return outcome


def _main_thread() -> bool:  # signal handlers can only be set from the main thread
    return threading.current_thread() is threading.main_thread()
