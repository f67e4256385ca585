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
from zeroplan.core.memory.framework_partition import ParamSpec, expert_parallel_params, most_loaded_rank_bytes
from zeroplan.core.options import Option
from zeroplan.core.precision import BytesPerParam, bytes_per_param

FRAMEWORK_BY_STAGE = {
    "deepspeed": {0: "ddp", 1: "deepspeed-zero12", 2: "deepspeed-zero12", 3: "deepspeed-zero3"},
    "torch": {0: "ddp", 1: "torch-zero1", 2: "fsdp2-zero2", 3: "fsdp2-zero3"},
}
TORCH_STEP_TENSOR_BYTES = {"adam": 4, "adamw": 4}


def framework_model_states(option: Option, parameters: tuple[ParamSpec, ...], dp: int, per_param: BytesPerParam,
                           framework: str, *, ep: int = 1, edp: int = 0, experts: int = 0) -> dict[str, int]:
    """gpu/params, gpu/gradients, gpu/optimizer_states of the most loaded rank, and which rank it is.

    ep > 1 (torch only): expert parallelism as torchtitan runs it with FSDP2 (stages 2-3): the routed experts'
    stacked tensors split over ep, E/ep experts a rank (core.memory.framework_partition.expert_parallel_params),
    sharded by fully_shard over the edp (efsdp) ranks; every other tensor over dp. Rank 0 is the most loaded of both
    FSDP2 groups, so the two add. Stage 0 keeps the local experts whole (DDP over edp); stage 1 gives each group its
    own ZeroRedundancyOptimizer (dense over dp, experts over edp, a stated assumption: torchtitan has no ZeRO-1) and
    adds the two groups' most loaded ranks (an upper bound when they differ)."""
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
    groups: list[tuple[tuple[ParamSpec, ...] | list[ParamSpec], int]] = [(parameters, dp)]
    if ep > 1:
        if framework != "torch":
            raise InputError("ep", "the framework convention models expert parallelism as torchtitan's FSDP2 does",
                             f"use {ref('framework', 'torch')}, or {ref('convention', 'paper')} for DeepSpeed-MoE")
        dense, local = expert_parallel_params(parameters, experts, ep, edp, name.startswith("fsdp2"))
        if not local:
            raise InputError("ep", "no stacked routed-experts tensor in the model's parameters to split",
                             f"use {ref('convention', 'paper')}")
        groups = [(dense, dp), (local, edp)]
    totals = {f"gpu/{component}": 0 for component in ("params", "gradients", "optimizer_states")}
    most_loaded = 0
    for index, (tensors, ranks) in enumerate(groups):
        rank, held = most_loaded_rank_bytes(tensors, ranks, per_param, name,
                                            stage=option.stage if name == "deepspeed-zero12" else None,
                                            per_tensor_state_bytes=step_bytes)
        most_loaded = rank if index == 0 else most_loaded
        for key in totals:
            totals[key] += held[key]
    return totals | {"framework/most_loaded_rank": most_loaded}
