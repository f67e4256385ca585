"""Spawn N local validate ranks, watch them, and always clean up.

Each rank is `python -m zeroplan.validate.worker` in its own session, so a Ctrl-C reaches only this
launcher, which then kills every rank's process group and reaps it. The first rank to exit non-zero
fails the run (named, with the last lines it wrote); a run still going after the timeout is stopped,
naming the ranks still running. A rank that finds the port taken (errno 98) makes the launch retry on a
fresh port. Uses zeroplan.bench's port probe and parent lifeline; the protocol (a JSON file per rank)
is validate's own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zeroplan.distributed.launcher import Interrupted, describe_exit, kill_process_groups, raise_interrupt  # one process-exit vocabulary
from zeroplan.distributed.rendezvous import EXIT_ADDRESS_IN_USE, LOCAL_HOST, free_port
from zeroplan.validate import ValidateFailed
from zeroplan.validate.config import ValidateConfig

POLL_S = 0.05
TERM_GRACE_S = 2.0
PORT_TRIES = 3

TAIL_LINES = 6
EXIT_INTERRUPTED = 130
# The environment a rank reads (zeroplan.validate.worker).
CONFIG_ENV, BACKEND_ENV = "ZEROPLAN_VALIDATE_CONFIG", "ZEROPLAN_VALIDATE_BACKEND"
RESULT_DIR_ENV, PARENT_PID_ENV = "ZEROPLAN_VALIDATE_RESULTS", "ZEROPLAN_VALIDATE_PARENT_PID"


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    lines = [line for line in lines if "Warning" not in line and line.strip()]
    return " | ".join(line.strip() for line in lines[-TAIL_LINES:])


class _Ranks:
    def __init__(self, config: ValidateConfig, backend: str, nproc: int, port: int, workdir: Path) -> None:
        self.procs: list[subprocess.Popen] = []
        self.stderr_paths = [workdir / f"rank{rank}.stderr" for rank in range(nproc)]
        try:
            for rank in range(nproc):
                env = dict(os.environ)
                env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
                            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "MASTER_ADDR": LOCAL_HOST,
                            "MASTER_PORT": str(port), CONFIG_ENV: config.to_json(), BACKEND_ENV: backend,
                            RESULT_DIR_ENV: str(workdir), PARENT_PID_ENV: str(os.getpid())})
                env.setdefault("OMP_NUM_THREADS", "1")  # N ranks must not each take every core
                with open(self.stderr_paths[rank], "wb") as stderr:
                    self.procs.append(subprocess.Popen(
                        [sys.executable, "-m", "zeroplan.validate.worker"], env=env, stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True))
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        kill_process_groups(self.procs, TERM_GRACE_S)

    def watch(self, timeout_s: float) -> tuple[str, str]:
        """("ok", ""), ("port", message) or ("failed", message), once the try is over."""
        deadline = time.monotonic() + timeout_s
        while True:
            codes = [proc.poll() for proc in self.procs]
            failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                # Several found dead at once: one killed by a signal, or the lowest rank, went first.
                first = min(failed, key=lambda r: (codes[r] >= 0, r))
                if codes[first] == EXIT_ADDRESS_IN_USE:
                    return "port", f"rank {first}: port taken"
                tail = _tail(self.stderr_paths[first])
                return "failed", f"rank {first} {describe_exit(codes[first])}" + (f": {tail}" if tail else "")
            if all(code == 0 for code in codes):
                return "ok", ""
            if time.monotonic() > deadline:
                running = [str(rank) for rank, code in enumerate(codes) if code is None]
                return "failed", (f"rank{'s' if len(running) > 1 else ''} {', '.join(running)} still running after "
                                  f"{timeout_s:g} s (--timeout); stopped the run")
            time.sleep(POLL_S)


def launch_local(config: ValidateConfig, backend: str, nproc: int, *, port_tries: int = PORT_TRIES,
                 pids: list[int] | None = None) -> list[dict]:
    """Every rank's stage results (rank by rank); a failed, hung or interrupted run raises ValidateFailed.
    pids, when given, collects every rank process started (tests check none is left)."""
    workdir = Path(tempfile.mkdtemp(prefix="zeroplan-validate-"))
    main_thread = _main_thread()
    previous_term = signal.signal(signal.SIGTERM, raise_interrupt) if main_thread else None
    ranks: _Ranks | None = None
    try:
        for attempt in range(1, port_tries + 1):
            ranks = _Ranks(config, backend, nproc, free_port(), workdir)
            if pids is not None:
                pids.extend(proc.pid for proc in ranks.procs)
            state, message = ranks.watch(config.timeout_s)
            ranks.kill()
            if state == "port" and attempt < port_tries:
                continue
            if state != "ok":
                raise ValidateFailed(message if state == "failed" else
                                     f"every port tried was taken (errno 98, EADDRINUSE) in {port_tries} tries")
            results: list[dict] = []
            for rank in range(nproc):
                results += json.loads((workdir / f"rank{rank}.json").read_text(encoding="utf-8"))
            return results
        raise AssertionError("unreachable")  # the loop returns or raises
    except (KeyboardInterrupt, Interrupted):
        raise ValidateFailed("interrupted; stopped every rank", EXIT_INTERRUPTED) from None
    finally:
        if ranks is not None:
            ranks.kill()
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
        shutil.rmtree(workdir, ignore_errors=True)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
