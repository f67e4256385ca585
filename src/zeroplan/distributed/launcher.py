"""Spawn N local ranks of a worker module, watch them, and always clean up. Generic: the caller gives
the worker module, its config (JSON) and how to read the ranks' result files; nothing here imports
torch or the commands that use it (bench, validate).

Each rank is `python -m WORKER` in its own session (start_new_session), with the environment torchrun
would set (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT...) plus the protocol's files
(zeroplan.distributed.child). A Ctrl-C in the terminal (or SIGTERM) reaches only the launcher, which
then kills every rank's process group and reaps it. A rank that exits non-zero fails the run at once,
named with its last stderr lines. A run where no rank advances its progress counter for the
no-progress timeout is a hang, and the rank furthest behind is named; that clock starts when every
rank has reported ready. An optional deadline bounds the whole run. If a rank finds the port taken
(exit 98, EADDRINUSE: another process won the race after we probed it), the launch is retried on a
fresh port.
"""

from __future__ import annotations

import contextlib
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
from typing import Any, Callable, Generic, TextIO, TypeVar

from zeroplan.distributed.child import (
    CONFIG_ENV, COUNTER, HEARTBEAT_ENV, PARENT_PID_ENV, RESULT_DIR_ENV, read_counter, result_path,
)
from zeroplan.distributed.rendezvous import EXIT_ADDRESS_IN_USE, LOCAL_HOST, free_port

POLL_S = 0.02
TERM_GRACE_S = 2.0
PORT_TRIES = 3
# A rank must report ready (torch imported) within this long; the no-progress timeout counts from then.
STARTUP_TIMEOUT_S = 300.0
STDERR_TAIL_LINES = 8
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

T = TypeVar("T")


@dataclass(frozen=True)
class Launch:
    """What to run: `python -m worker_module` on nproc ranks, config_json in the environment."""

    worker_module: str
    config_json: str
    nproc: int
    label: str  # "zeroplan bench": how log lines start
    progress_timeout_s: float | None  # no rank advancing for this long (once all are ready): a hang
    deadline_s: float | None = None  # the whole run, from the first spawn of a try
    startup_timeout_s: float = STARTUP_TIMEOUT_S
    rank0_stderr_to_terminal: bool = False  # rank 0's progress bar; otherwise every rank writes a file
    env: dict[str, str] = field(default_factory=dict)  # extra variables for every rank


@dataclass
class LaunchOutcome(Generic[T]):
    exit_code: int  # 0, EXIT_FAILED or EXIT_INTERRUPTED
    result: T | None = None
    message: str = ""
    failed_rank: int | None = None
    pids: list[int] = field(default_factory=list)  # every rank process started, all tries

    def value(self) -> T:
        """The result of a run that exited 0 (read_results ran on every rank's output)."""
        if self.result is None:
            raise RuntimeError(f"the ranks left no result (exit code {self.exit_code}): {self.message}")
        return self.result


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
    lines = [line for line in lines if line.strip()]
    return "\n".join("    " + line for line in lines[-STDERR_TAIL_LINES:])


@contextlib.contextmanager
def _interrupts_deferred():
    """While ranks are being spawned, a Ctrl-C or SIGTERM is noted, not raised: raised inside Popen, it
    would leave a started rank that is in no list, so nobody would kill it. Yields a list that is
    non-empty once a signal came."""
    if not _main_thread():
        yield []
        return
    noted: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: noted.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield noted
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _RankSet:
    """One try: the processes of ranks 0..n-1 on one port, with their counters and stderr files."""

    def __init__(self, launch: Launch, port: int, workdir: Path, pids: list[int]) -> None:
        self.workdir = workdir
        self.pids = pids  # every rank started, reported even when the spawn loop is interrupted
        self.procs: list[subprocess.Popen] = []
        self.counters = [workdir / f"rank{rank}.progress" for rank in range(launch.nproc)]
        self.stderr_paths = [workdir / f"rank{rank}.stderr" for rank in range(launch.nproc)]
        self.stderr_to_terminal = launch.rank0_stderr_to_terminal
        for path in self.counters:
            path.write_bytes(bytes(COUNTER.size))
        for rank in range(launch.nproc):  # a result file from an earlier try must not count
            Path(result_path(str(workdir), rank)).unlink(missing_ok=True)
        try:
            with _interrupts_deferred() as interrupted:
                for rank in range(launch.nproc):
                    self._spawn(launch, port, rank)
                    if interrupted:
                        break
            if interrupted:
                raise Interrupted()
        except BaseException:  # a Ctrl-C or a failed spawn halfway: take back the ranks already started
            self.kill()
            raise

    def _spawn(self, launch: Launch, port: int, rank: int) -> None:
        env = dict(os.environ)
        env.update(launch.env)
        nproc = launch.nproc
        env.update({  # what torchrun would set, plus our protocol's files
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "MASTER_ADDR": LOCAL_HOST,
            "MASTER_PORT": str(port), CONFIG_ENV: launch.config_json,
            HEARTBEAT_ENV: str(self.counters[rank]), PARENT_PID_ENV: str(os.getpid()),
            RESULT_DIR_ENV: str(self.workdir),
        })
        env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does: N ranks must not each take every core
        to_terminal = rank == 0 and self.stderr_to_terminal
        stderr = None if to_terminal else open(self.stderr_paths[rank], "wb")
        try:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", launch.worker_module], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True))
            self.pids.append(self.procs[-1].pid)
        finally:
            if stderr is not None:
                stderr.close()

    def progress(self) -> list[int]:
        return [read_counter(str(path)) for path in self.counters]

    def results(self) -> list[str | None]:
        texts: list[str | None] = []
        for rank in range(len(self.counters)):
            path = Path(result_path(str(self.workdir), rank))
            texts.append(path.read_text(encoding="utf-8") if path.exists() else None)
        return texts

    def kill(self) -> None:
        kill_process_groups(self.procs, TERM_GRACE_S)


def _ranks_named(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _watch(ranks: Any, timeout_s: float | None, startup_timeout_s: float,
           deadline_s: float | None = None) -> tuple[str, int | None, str]:
    """Until the try ends: ("ok", None, ""), ("port", rank, msg) or ("failed", rank, msg).

    The no-progress clock (timeout_s; None: off) starts when every rank has reported ready (its first
    tick, after importing torch): start-up time on a loaded machine is not a hang. A rank that is not
    ready within startup_timeout_s of its spawn is named as one that never started. deadline_s bounds
    the whole try."""
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
            on_terminal = first == 0 and getattr(ranks, "stderr_to_terminal", False)  # already shown there
            tail = "" if on_terminal else _tail(ranks.stderr_paths[first])
            return "failed", first, message + (f"; its last lines:\n{tail}" if tail else "")
        if all(code == 0 for code in codes):
            return "ok", None, ""
        now = time.monotonic()
        running = [rank for rank, code in enumerate(codes) if code is None]
        if deadline_s is not None and now - spawned > deadline_s:
            return "failed", running[0], (f"{_ranks_named(running)} still running after {deadline_s:g} s "
                                          "(--timeout); stopped the run")
        if now >= next_check:
            counts = ranks.progress()
            if last_change is None:
                if all(counts[rank] > 0 for rank in running):
                    last, last_change = counts, now
                elif now - spawned > startup_timeout_s:
                    waiting = [rank for rank in running if counts[rank] == 0]
                    return "failed", waiting[0], (f"{_ranks_named(waiting)} did not start within "
                                                  f"{startup_timeout_s:g} s (importing torch and starting up); "
                                                  "stopped the run")
            elif counts != last:
                last, last_change = counts, now
            elif timeout_s is not None and now - last_change > timeout_s:
                return "failed", *_hang_message(counts, codes, timeout_s)
            next_check = now + 0.1
        time.sleep(POLL_S)


def _hang_message(counts: list[int], codes: list[int | None], timeout_s: float) -> tuple[int, str]:
    running = [rank for rank, code in enumerate(codes) if code is None]
    lowest = min(counts[rank] for rank in running)
    behind = [rank for rank in running if counts[rank] == lowest]
    others = sorted({counts[rank] for rank in running} - {lowest})
    if others:
        detail = f"stuck at step {lowest} while the others reached step {others[0]}"
    elif len(running) < len(codes):
        detail = f"stuck at step {lowest} after the other ranks finished"
    else:
        detail = f"all stuck at step {lowest}"
    return behind[0], f"{_ranks_named(behind)} made no progress for {timeout_s:g} s ({detail}); stopped the run"


def launch_local(launch: Launch, read_results: Callable[[list[str | None]], T], *,
                 port_picker: Callable[[], int] = free_port, port_tries: int = PORT_TRIES,
                 log: TextIO | None = None) -> LaunchOutcome[T]:
    """Run the worker on launch.nproc local ranks. read_results gets every rank's result file text
    (None where a rank wrote none) once all ranks exited 0, and returns the outcome's result."""
    log = log or sys.stderr
    outcome: LaunchOutcome[T] = LaunchOutcome(exit_code=EXIT_FAILED)
    workdir = Path(tempfile.mkdtemp(prefix="zeroplan-ranks-"))
    previous_term = signal.signal(signal.SIGTERM, raise_interrupt) if _main_thread() else None
    ranks: _RankSet | None = None
    startup = max(launch.startup_timeout_s, launch.progress_timeout_s or 0.0)
    try:
        for attempt in range(1, port_tries + 1):
            port = port_picker()
            ranks = _RankSet(launch, port, workdir, outcome.pids)
            state, rank, message = _watch(ranks, launch.progress_timeout_s, startup, launch.deadline_s)
            ranks.kill()
            if state == "port" and attempt < port_tries:
                log.write(f"{launch.label}: port {port} was taken (errno 98); retrying on another port\n")
                continue
            if state == "ok":
                outcome.exit_code = 0
                outcome.result = read_results(ranks.results())
            else:
                outcome.failed_rank, outcome.message = rank, message
                if state == "port":
                    outcome.message = f"every port tried was taken (errno 98, EADDRINUSE) in {port_tries} tries"
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
