"""The rank's side of the local launcher's protocol: a progress counter the launcher watches to spot
a hung rank, a lifeline that ends the rank if the launcher dies, a result file, a test-only fault
hook, and rank_main(), the one entry point every worker module (bench, validate) goes through.

The counter is 8 bytes in a shared file mapping, so a tick is one memory store and never a syscall
inside the measurement loop.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable

from zeroplan.core.errors import InputError
from zeroplan.inputs.flag_names import cli_message
from zeroplan.distributed.rendezvous import (
    EXIT_ADDRESS_IN_USE, PortTaken, RankEnv, RankFailed, is_address_in_use, launcher_env,
)

# What the launcher sets for each rank, besides torchrun's RANK, WORLD_SIZE, MASTER_ADDR...
HEARTBEAT_ENV = "ZEROPLAN_RANK_HEARTBEAT"
PARENT_PID_ENV = "ZEROPLAN_RANK_PARENT_PID"
RESULT_DIR_ENV = "ZEROPLAN_RANK_RESULT_DIR"
CONFIG_ENV = "ZEROPLAN_RANK_CONFIG"
# Test-only (a command names its own variable): "RANK:exit:TICK" or "RANK:hang:TICK" makes that rank
# exit (code 17) or sleep at that tick.
FAULT_EXIT_CODE = 17
COUNTER = struct.Struct("<q")


@dataclass(frozen=True)
class Fault:
    rank: int
    action: str
    tick: int


def parse_fault(text: str | None, env_name: str) -> Fault | None:
    if not text:
        return None
    parts = text.split(":")
    if len(parts) != 3 or parts[1] not in ("exit", "hang") or not parts[0].isdigit() or not parts[2].isdigit():
        raise InputError(env_name, f"'{text}' is not RANK:exit|hang:TICK", "unset it; it is for tests only")
    return Fault(int(parts[0]), parts[1], int(parts[2]))


class Heartbeat:
    """Counts steps entered (a step: rank started, joined the group, or is about to start one op)."""

    def __init__(self, path: str | None, rank: int, fault: Fault | None = None) -> None:
        self.count = 0
        self._map: mmap.mmap | None = None
        if path:
            with open(path, "r+b") as file:
                self._map = mmap.mmap(file.fileno(), COUNTER.size)
        self._fault = fault if fault is not None and fault.rank == rank else None

    def tick(self) -> None:
        self.count += 1
        if self._fault is not None and self._fault.tick == self.count:
            self._trip(self._fault.action)  # before publishing: the rank never reaches this step
        if self._map is not None:
            COUNTER.pack_into(self._map, 0, self.count)

    @staticmethod
    def _trip(action: str) -> None:
        if action == "exit":
            sys.stderr.write(f"zeroplan: test fault: exiting before step (code {FAULT_EXIT_CODE})\n")
            sys.stderr.flush()
            os._exit(FAULT_EXIT_CODE)
        while True:  # "hang": a rank that stops answering
            time.sleep(3600)


def read_counter(path: str) -> int:
    with open(path, "rb") as file:
        data = file.read(COUNTER.size)
    return COUNTER.unpack(data)[0] if len(data) == COUNTER.size else 0


def watch_parent(parent_pid: int, interval_s: float = 0.5) -> None:
    """End this rank if the launcher that spawned it is gone (killed with SIGKILL, say): then nobody
    would reap us, and the other ranks would wait on us until their timeout."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, name="zeroplan-parent-watch", daemon=True).start()


def result_path(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.result")


def write_result(rank: int, text: str) -> None:
    """This rank's result, for the launcher; written whole or not at all."""
    path = result_path(os.environ[RESULT_DIR_ENV], rank)
    with open(path + ".tmp", "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(path + ".tmp", path)


RankBody = Callable[[RankEnv, Heartbeat, str], "str | None"]


def rank_main(label: str, body: RankBody, *, fault_env: str | None = None, debug_env: str | None = None) -> int:
    """Entry point of a rank the launcher spawned: body(env, heartbeat, config_json) runs the work and
    returns the text of this rank's result file (None: no file). A failure is one stderr line (the
    launcher shows the failed rank's last lines); debug_env set prints the traceback too.
    Exit: 0 done, 2 bad input, 98 the port was taken (the launcher retries), 1 anything else."""
    env = launcher_env()
    if env is None or CONFIG_ENV not in os.environ:
        sys.stderr.write(f"{label} worker: start it through `{label}`, not by hand\n")
        return 2
    try:
        fault = parse_fault(os.environ.get(fault_env), fault_env) if fault_env else None
    except InputError as exc:
        sys.stderr.write(f"{label}: rank {env.rank}: {cli_message(exc)}\n")
        return 2
    heartbeat = Heartbeat(os.environ.get(HEARTBEAT_ENV), env.rank, fault)
    heartbeat.tick()  # started: the worker module (and torch) imported
    if PARENT_PID_ENV in os.environ:
        watch_parent(int(os.environ[PARENT_PID_ENV]))
    try:
        result = body(env, heartbeat, os.environ[CONFIG_ENV])
    except InputError as exc:
        sys.stderr.write(f"{label}: rank {env.rank}: {cli_message(exc)}\n")
        return 2
    except PortTaken as exc:
        sys.stderr.write(f"{label}: {exc}\n")
        return EXIT_ADDRESS_IN_USE
    except Exception as exc:  # noqa: BLE001 - a rank reports one line; the launcher names it
        if is_address_in_use(exc):
            sys.stderr.write(f"{label}: rank {env.rank}: port {env.master_port} is taken\n")
            return EXIT_ADDRESS_IN_USE
        # One line by default: when a peer dies, every other rank fails with a long, useless traceback.
        if debug_env and os.environ.get(debug_env):
            traceback.print_exc()
        if isinstance(exc, RankFailed):
            sys.stderr.write(f"{label}: {exc}\n")
        else:
            first_line = (str(exc).strip().splitlines() or [""])[0]
            sys.stderr.write(f"{label}: rank {env.rank}: {type(exc).__name__}: {first_line}\n")
        return 1
    if result is not None:
        write_result(env.rank, result)
    return 0
