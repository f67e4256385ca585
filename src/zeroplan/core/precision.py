"""Bytes each parameter costs in parameters, gradients and optimizer states (docs/formulas.md §3).

mixed: 16-bit (bf16/fp16) parameters and gradients, fp32 master weights kept by the optimizer.
fp32:  everything in fp32, so no separate master copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError, ref

PRECISIONS = ("mixed", "fp32")
PRECISION_ALIASES = {"mixed": "mixed", "bf16": "mixed", "fp16": "mixed", "fp32": "fp32"}
OPTIMIZERS = ("adam", "adamw", "sgd-momentum", "sgd", "adam-8bit")

# Optimizer state bytes per parameter *excluding* any fp32 master copy.
_OPTIMIZER_STATE_BYTES = {
    "adam": 8,          # m and v in fp32
    "adamw": 8,
    "sgd-momentum": 4,  # momentum in fp32
    "sgd": 0,
    "adam-8bit": 2,     # bitsandbytes: m and v in 8 bits each
}
_MASTER_WEIGHT_BYTES = 4  # fp32 master copy, only under mixed precision


@dataclass(frozen=True)
class BytesPerParam:
    """Per-parameter bytes of each model-state component (the P, G, K of the ZeRO paper)."""

    precision: str
    optimizer: str
    params: int
    gradients: int
    optimizer_states: int

    @property
    def total(self) -> int:
        return self.params + self.gradients + self.optimizer_states


def normalize_precision(name: str) -> str:
    key = name.strip().lower()
    if key not in PRECISION_ALIASES:
        raise InputError("precision", f"unknown precision '{name}'", "use mixed (or bf16/fp16) or fp32")
    return PRECISION_ALIASES[key]


def bytes_per_param(precision: str = "mixed", optimizer: str = "adam") -> BytesPerParam:
    """Bytes per parameter, e.g. mixed + adam -> 2 + 2 + 12 = 16 (ZeRO paper §3.1, K = 12)."""
    precision = normalize_precision(precision)
    key = optimizer.strip().lower()
    if key not in _OPTIMIZER_STATE_BYTES:
        raise InputError("optimizer", f"unknown optimizer '{optimizer}'", f"use one of {', '.join(OPTIMIZERS)}")
    weight_bytes = 2 if precision == "mixed" else 4
    master = _MASTER_WEIGHT_BYTES if precision == "mixed" else 0
    return BytesPerParam(
        precision=precision,
        optimizer=key,
        params=weight_bytes,
        gradients=weight_bytes,
        optimizer_states=master + _OPTIMIZER_STATE_BYTES[key],
    )


def check_precision_on_gpu(precision: str | None, gpu_name: str, supports_bf16: bool) -> None:
    """bf16 asked for on a GPU without bf16 units (V100, T4): refused, for every command, rather than
    planned (DeepSpeed would fail at start-up, torch would emulate it at a fraction of the speed)."""
    if precision is not None and precision.strip().lower() == "bf16" and not supports_bf16:
        raise InputError("precision", f"{gpu_name} has no bf16 support",
                         f"use {ref('precision', 'fp16')} (or mixed, which means fp16 on this GPU) or fp32")
