"""How much of a GPU and a host the plan may use, and what counts as fitting (docs/formulas.md §15).

usable GPU memory = capacity − runtime reserve − fragmentation headroom.
- runtime reserve (default 1 GiB): the CUDA context with PyTorch's kernels loaded (≈0.3–0.6 GiB)
  plus NCCL communicator buffers (≈0.2–0.4 GiB); measure yours with torch.cuda.mem_get_info.
- fragmentation headroom (default 10% of capacity): PyTorch's caching allocator rarely packs tensors
  perfectly; 5–15% is what long runs lose.
When activations are not counted (only --params known), a reserve (default 15% of usable) is kept
for them. Host memory keeps a reserve (default 10%) for the OS, dataloaders and pinned buffers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from zeroplan.core.errors import InputError, ref
from zeroplan.core.units import GIB

DEFAULT_RUNTIME_RESERVE = 1 * GIB
DEFAULT_FRAGMENTATION = Fraction(10, 100)
DEFAULT_ACTIVATION_RESERVE = Fraction(15, 100)
DEFAULT_HOST_RESERVE = Fraction(10, 100)


def _check_fraction(name: str, value: Fraction) -> Fraction:
    if not 0 <= value < 1:
        shown = f"{float(value):g}" if abs(value) < 10**6 else "a huge number"  # float() of 1e400 overflows
        raise InputError(name, f"must be a fraction in [0, 1), got {shown}", "write e.g. 10% or 0.1")
    return value


@dataclass(frozen=True)
class MemoryBudget:
    gpu_capacity: int
    runtime_reserve: int = DEFAULT_RUNTIME_RESERVE
    fragmentation: Fraction = DEFAULT_FRAGMENTATION
    activation_reserve: Fraction = DEFAULT_ACTIVATION_RESERVE
    host_reserve: Fraction = DEFAULT_HOST_RESERVE

    def __post_init__(self) -> None:
        if self.gpu_capacity <= 0:
            raise InputError("gpu_memory", f"must be positive, got {self.gpu_capacity}")
        if self.runtime_reserve < 0:
            raise InputError("runtime_reserve", f"must not be negative, got {self.runtime_reserve}")
        _check_fraction("fragmentation", self.fragmentation)
        _check_fraction("activation_reserve", self.activation_reserve)
        _check_fraction("host_reserve", self.host_reserve)
        if self.usable_gpu_bytes <= 0:
            raise InputError("gpu_memory/runtime_reserve",
                             f"capacity {self.gpu_capacity} − runtime reserve {self.runtime_reserve} − fragmentation "
                             f"{self.fragmentation_bytes} bytes leaves no usable GPU memory",
                             f"check {ref('gpu_memory')}, or lower {ref('runtime_reserve')} or {ref('fragmentation')}")

    @property
    def fragmentation_bytes(self) -> int:
        return ceil(self.gpu_capacity * self.fragmentation)  # reserves round up: usable rounds down

    @property
    def usable_gpu_bytes(self) -> int:
        return self.gpu_capacity - self.runtime_reserve - self.fragmentation_bytes

    @property
    def activation_reserve_bytes(self) -> int:
        return int(self.usable_gpu_bytes * self.activation_reserve)

    def usable_host_bytes(self, capacity: int | None) -> int | None:
        return None if capacity is None else capacity - ceil(capacity * self.host_reserve)


def parse_fraction(text: str, input_name: str) -> Fraction:
    """'10%' or '0.1' -> Fraction(1, 10), exactly."""
    raw = str(text).strip()
    try:
        value = Fraction(raw[:-1]) / 100 if raw.endswith("%") else Fraction(raw)
    except (ValueError, ZeroDivisionError):
        raise InputError(input_name, f"'{text}' is not a fraction", "write e.g. 10% or 0.1") from None
    return _check_fraction(input_name, value)
