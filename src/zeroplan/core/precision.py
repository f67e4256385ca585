"""Bytes each parameter costs in parameters, gradients and optimizer states (docs/formulas.md §3).

mixed: 16-bit (bf16/fp16) parameters and gradients, fp32 master weights kept by the optimizer.
fp32:  everything in fp32, so no separate master copy.
fp8:   mixed precision whose linear-layer GEMMs run in FP8 (torchao Float8Linear, Transformer Engine): the model
       states are mixed's (bf16 weights and gradients, fp32 master weights and Adam moments: FP8 copies of a
       weight are cast per use, their scales one fp32 per tensor (tensorwise), per row (rowwise) or one byte per
       32 elements (mxfp8), negligible beside the states); with the tensorwise recipe FSDP gathers the linear
       weights in FP8 (torchao's enable_fsdp_float8_all_gather: 1 byte per parameter on the wire,
       BytesPerParam.gathered).
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError, ref

PRECISIONS = ("mixed", "fp32")
PRECISION_ALIASES = {"mixed": "mixed", "bf16": "mixed", "fp16": "mixed", "fp32": "fp32", "fp8": "mixed"}
# FP8 training recipes (torchao.float8 recipe names; MXFP8: OCP Microscaling, 1x32 blocks with E8M0 scales):
# tensorwise (one scale per tensor, the Hopper default), rowwise (a scale per row, torchao's "rowwise"), mxfp8
# (block scales, native on Blackwell only).
FP8_RECIPES = ("tensorwise", "rowwise", "mxfp8")
OPTIMIZERS = ("adam", "adamw", "sgd-momentum", "sgd", "adam-8bit", "paged-adamw-8bit")

# Optimizer state bytes per parameter *excluding* any fp32 master copy.
_OPTIMIZER_STATE_BYTES = {
    "adam": 8,          # m and v in fp32
    "adamw": 8,
    "sgd-momentum": 4,  # momentum in fp32
    "sgd": 0,
    "adam-8bit": 2,     # bitsandbytes: m and v in 8 bits each
    # bitsandbytes PagedAdamW8bit (QLoRA, arXiv 2305.14314 §3): the same 8-bit states in unified memory that the
    # driver pages to the host only under memory pressure: counted on the GPU, as they sit until then.
    "paged-adamw-8bit": 2,
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
    gathered: int = 0  # bytes per parameter a ZeRO-3/FSDP AllGather moves (0: params); FP8 gathers: 1

    @property
    def total(self) -> int:
        return self.params + self.gradients + self.optimizer_states

    @property
    def gather_bytes(self) -> int:
        return self.gathered or self.params


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


def is_fp8(precision: str | None) -> bool:
    return precision is not None and precision.strip().lower() == "fp8"


def check_fp8(precision: str | None, recipe: str | None, gpu_name: str, fp8_flops: int | None,
              supports_mxfp8: bool) -> str | None:
    """The FP8 recipe a run trains with (None without precision fp8): refused on a GPU without FP8 tensor cores
    (Volta, Ampere: torchao and Transformer Engine need sm89+), and mxfp8 where the tensor cores do not take it."""
    if not is_fp8(precision):
        if recipe is not None:
            raise InputError("fp8_recipe", f"is given without {ref('precision', 'fp8')}",
                             f"add {ref('precision', 'fp8')} or drop it")
        return None
    if fp8_flops is None:
        raise InputError("precision", f"{gpu_name} has no FP8 tensor cores",
                         "use bf16, or an FP8 GPU (h100-80g, h200-141g, b200, l40s, mi300x)")
    chosen = (recipe or "tensorwise").strip().lower()
    if chosen not in FP8_RECIPES:
        raise InputError("fp8_recipe", f"unknown recipe '{recipe}'", f"use one of {', '.join(FP8_RECIPES)}")
    if chosen == "mxfp8" and not supports_mxfp8:
        raise InputError("fp8_recipe", f"{gpu_name}'s tensor cores do not take MXFP8 operands (Blackwell do)",
                         "use tensorwise or rowwise on this GPU")
    return chosen
