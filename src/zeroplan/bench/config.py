"""What one `zeroplan bench` run measures, validated up front (no torch) so bad input fails in
milliseconds with exit 2, before any process is spawned."""

from __future__ import annotations


import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from zeroplan.core.timing.collectives import CollectiveName, parse_collectives, sweep_sizes
from zeroplan.core.errors import InputError
from zeroplan.core.units import parse_bytes
from zeroplan.distributed.devices import BACKENDS, check_nproc

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
FORMATS = ("table", "json", "csv")
# Peak bytes a rank holds per S (gloo's ReduceScatter clones its S-byte input before the AllReduce;
# its AllGather gathers into a temporary S-byte buffer), with headroom.
BYTES_HELD_PER_SIZE = 3
MEMORY_SHARE = 0.8  # of the free memory a sweep may plan to use
DEBUG_ENV = "ZEROPLAN_BENCH_DEBUG"  # set to print full tracebacks from ranks
FAULT_ENV = "ZEROPLAN_BENCH_FAULT"  # tests only: RANK:exit|hang:STEP (see zeroplan.distributed.child)


@dataclass(frozen=True)
class BenchConfig:
    collectives: tuple[CollectiveName, ...]
    min_bytes: int
    max_bytes: int
    factor: int
    dtype: str
    warmup: int
    iters: int
    backend: str  # "auto", "gloo" or "nccl" as asked; "auto" is settled by the ranks (they import torch)
    nproc: int | None
    timeout_s: float
    output_format: str
    save_calibration: str | None

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def sizes(self, world_size: int) -> list[int]:
        """The sweep, each size a whole number of elements on every rank of the world."""
        return sweep_sizes(self.min_bytes, self.max_bytes, self.factor, world_size * self.element_bytes)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "BenchConfig":
        fields = json.loads(text)
        fields["collectives"] = tuple(fields["collectives"])
        return cls(**fields)


def _choice(value: str, choices: tuple[str, ...], input_name: str) -> str:
    key = value.strip().lower()
    if key not in choices:
        raise InputError(input_name, f"unknown value '{value}'", f"use one of {', '.join(choices)}")
    return key


def _check_calibration_path(path: str | None) -> str | None:
    """Fail before a long sweep, not after it, when the profile could not be written."""
    if path is None:
        return None
    target = Path(path)
    if target.is_dir():
        raise InputError("--save-calibration", f"{path} is a directory", "give a file name such as calib.yaml")
    if not path.strip():
        raise InputError("--save-calibration", "is empty", "give a file name such as calib.yaml")
    if not target.parent.is_dir():
        raise InputError("--save-calibration", f"folder {target.parent} does not exist", "create it first")
    existed = target.exists()
    try:  # a real probe: permission bits say nothing to root, and some filesystems refuse new files
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise InputError("--save-calibration", f"cannot write {path}: {exc.strerror}",
                         "choose a writable location") from None
    if not existed:
        target.unlink()
    return str(target)


def build_config(
    *, collectives: str, min_bytes: str, max_bytes: str, factor: int, dtype: str, warmup: int, iters: int,
    backend: str, nproc: int | None, timeout: float, output_format: str, save_calibration: str | None,
) -> BenchConfig:
    if warmup < 0:
        raise InputError("--warmup", f"must not be negative, got {warmup}")
    if iters < 1:
        raise InputError("--iters", f"must be at least 1, got {iters}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise InputError("--timeout", f"must be a positive number of seconds, got {timeout}")
    check_nproc(nproc, "a collective")
    config = BenchConfig(
        collectives=parse_collectives(collectives),
        min_bytes=parse_bytes(min_bytes, "--min-bytes"),
        max_bytes=parse_bytes(max_bytes, "--max-bytes"),
        factor=factor,
        dtype=_choice(dtype, tuple(DTYPE_BYTES), "--dtype"),
        warmup=warmup,
        iters=iters,
        backend=_choice(backend, BACKENDS, "--backend"),
        nproc=nproc,
        timeout_s=float(timeout),
        output_format=_choice(output_format, FORMATS, "--format"),
        save_calibration=_check_calibration_path(save_calibration),
    )
    config.sizes(nproc or 2)  # min/max/factor checks now, with the world size known later
    return config


def memory_cap_bytes(free_bytes_per_rank: int) -> int:
    """Largest S one rank can hold while measuring, given its free memory."""
    return int(free_bytes_per_rank * MEMORY_SHARE) // BYTES_HELD_PER_SIZE


def human_size(size_bytes: int) -> str:
    """64KiB, 1MiB, 1.5GiB: message sizes as people write them."""
    for unit, label in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size_bytes >= unit:
            return f"{size_bytes / unit:.4g}{label}"
    return f"{size_bytes}B"


def available_host_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes; None where there is no /proc."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
