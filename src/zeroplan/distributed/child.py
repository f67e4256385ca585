"""The rank's side of the local launcher's protocol: a progress counter the launcher watches to spot
a hung rank, a lifeline that ends the rank if the launcher dies, and a test-only fault hook.

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
from dataclasses import dataclass

from zeroplan.core.errors import InputError

HEARTBEAT_ENV = "ZEROPLAN_BENCH_HEARTBEAT"
PARENT_PID_ENV = "ZEROPLAN_BENCH_PARENT_PID"
RESULT_ENV = "ZEROPLAN_BENCH_RESULT"
CONFIG_ENV = "ZEROPLAN_BENCH_CONFIG"
# Test-only: "RANK:exit:TICK" or "RANK:hang:TICK" makes that rank exit (code 17) or sleep at that tick.
FAULT_ENV = "ZEROPLAN_BENCH_FAULT"
FAULT_EXIT_CODE = 17
COUNTER = struct.Struct("<q")


@dataclass(frozen=True)
class Fault:
    rank: int
    action: str
    tick: int


def parse_fault(text: str | None) -> Fault | None:
    if not text:
        return None
    parts = text.split(":")
    if len(parts) != 3 or parts[1] not in ("exit", "hang") or not parts[0].isdigit() or not parts[2].isdigit():
        raise InputError(FAULT_ENV, f"'{text}' is not RANK:exit|hang:TICK", "unset it; it is for tests only")
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
            sys.stderr.write(f"zeroplan bench: test fault: exiting before step (code {FAULT_EXIT_CODE})\n")
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
