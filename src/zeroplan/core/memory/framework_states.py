"""Model states as a real framework partitions them (the "framework" convention, docs/formulas.md §6).

The paper splits Ψ evenly; frameworks split tensors. This maps each ZeRO stage to what implements it
and reads the most loaded rank off core.memory.framework_partition (computed directly, not by visiting every rank):
- deepspeed: DDP-like stage 0, the flat 2·N-aligned buffer of ZeRO-1/2, per-parameter padding of ZeRO-3,
  with the precision's bytes per parameter (mixed: 16-bit weights and gradients, fp32 master + states).
- torch: DDP, ZeroRedundancyOptimizer, FSDP2 without and with resharding. torch keeps fp32 weights and
  gradients even in mixed precision (autocast or FSDP2's MixedPrecisionPolicy cast per op), so it is
  fp32 bytes per parameter plus the 4-byte `step` tensor Adam keeps per parameter tensor.
Offload tiers stay in the paper convention: this one evaluates stages 0-3 on the GPU.
"""

from __future__ import annotations

from zeroplan.core.errors import InputError, ref
from zeroplan.core.memory.framework_partition import ParamSpec, most_loaded_rank_bytes
from zeroplan.core.options import Option
from zeroplan.core.precision import BytesPerParam, bytes_per_param

FRAMEWORK_BY_STAGE = {
    "deepspeed": {0: "ddp", 1: "deepspeed-zero12", 2: "deepspeed-zero12", 3: "deepspeed-zero3"},
    "torch": {0: "ddp", 1: "torch-zero1", 2: "fsdp2-zero2", 3: "fsdp2-zero3"},
}
TORCH_STEP_TENSOR_BYTES = {"adam": 4, "adamw": 4}


def framework_model_states(option: Option, parameters: tuple[ParamSpec, ...], dp: int, per_param: BytesPerParam,
                           framework: str) -> dict[str, int]:
    """gpu/params, gpu/gradients, gpu/optimizer_states of the most loaded rank, and which rank it is."""
    if framework not in FRAMEWORK_BY_STAGE:
        raise InputError("framework", f"unknown framework '{framework}'", "use deepspeed or torch")
    if option.offloads:
        raise InputError("convention", "the framework convention covers stages 0-3 without offload",
                         f"use {ref('convention', 'paper')} for offload tiers")
    name = FRAMEWORK_BY_STAGE[framework][option.stage]
    step_bytes = 0
    if framework == "torch":
        step_bytes = TORCH_STEP_TENSOR_BYTES.get(per_param.optimizer, 0)
        per_param = bytes_per_param("fp32", per_param.optimizer)
    rank, held = most_loaded_rank_bytes(parameters, dp, per_param, name,
                                        stage=option.stage if name == "deepspeed-zero12" else None,
                                        per_tensor_state_bytes=step_bytes)
    return {f"gpu/{component}": held[f"gpu/{component}"]
            for component in ("params", "gradients", "optimizer_states")} | {"framework/most_loaded_rank": rank}
