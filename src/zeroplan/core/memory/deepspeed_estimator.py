"""DeepSpeed's own estimators, reproduced to the byte (docs/formulas.md §5).

Source: deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs and
deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs. DeepSpeed evaluates
these in Python floats and truncates with int(); this module evaluates the same expressions in
the same order on purpose, so "deepspeed" figures match DeepSpeed's output exactly. Everything
else in zeroplan is integer arithmetic.

DeepSpeed reports one GPU figure per option; the split into params / gradients / optimizer
states / buffers below is zeroplan's, chosen so the parts add up to DeepSpeed's total.
"""

from __future__ import annotations

from zeroplan.core.errors import InputError, ref
from zeroplan.core.options import Option

DEFAULT_BUFFER_FACTOR = 1.5


def zero2(total_params: int, gpus_per_node: int, nodes: int, cpu_offload: bool,
          buffer_factor: float = DEFAULT_BUFFER_FACTOR) -> tuple[int, int]:
    """(cpu_bytes_per_node, gpu_bytes) as DeepSpeed's current estimator returns them."""
    total_gpus = nodes * gpus_per_node
    if cpu_offload:
        gpu = 2 * total_params
        cpu = total_params * max(4 * total_gpus, 16) * buffer_factor
    else:
        # 18 = fp16 grads 2 + fp32 grads 4 + fp32 params 4 + Adam 8 (after DeepSpeed PR #5099).
        gpu = 2 * total_params + int(18 * total_params / total_gpus)
        cpu = total_params * 4 * gpus_per_node * buffer_factor
    return int(cpu), int(gpu)


def zero3(total_params: int, largest_layer_params: int, gpus_per_node: int, nodes: int, cpu_offload: bool,
          cpu_offload_params: bool, zero_init: bool, buffer_factor: float = DEFAULT_BUFFER_FACTOR) -> tuple[int, int]:
    """(cpu_bytes_per_node, gpu_bytes) as DeepSpeed's estimator returns them."""
    total_gpus = nodes * gpus_per_node
    gpus_factor = 1 / nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload and cpu_offload_params:
        gpu = largest_layer_memory
        cpu = (total_params * 18 * gpus_factor * buffer_factor if zero_init
               else total_params * max(4 * gpus_per_node, 18 * gpus_factor) * buffer_factor)
    elif cpu_offload:
        gpu = largest_layer_memory + int(2 * total_params / total_gpus)
        cpu = (total_params * 16 * gpus_factor * buffer_factor if zero_init
               else total_params * max(4 * gpus_per_node, 16 * gpus_factor) * buffer_factor)
    else:
        gpu = largest_layer_memory + int(18 * total_params / total_gpus)
        cpu = (largest_layer_params * 4 * gpus_per_node * buffer_factor if zero_init
               else total_params * 4 * gpus_per_node * buffer_factor)
    return int(cpu), int(gpu)


def node_layout(world: int, gpus_per_node: int) -> tuple[int, int]:
    """(gpus_per_node, nodes) in DeepSpeed's terms, which assume full nodes."""
    if world <= gpus_per_node:
        return world, 1
    if world % gpus_per_node:
        raise InputError("gpus", f"the deepspeed convention needs whole nodes: {world} GPUs is not a multiple of "
                         f"{gpus_per_node} per node",
                         f"use a multiple of {ref('gpus_per_node')} or {ref('convention', 'paper')}")
    return gpus_per_node, world // gpus_per_node


def deepspeed_model_states(option: Option, total_params: int, largest_layer_params: int, world: int,
                           gpus_per_node: int, zero_init: bool, buffer_factor: float) -> dict[str, int]:
    """Breakdown with path keys for one of DeepSpeed's five estimator rows."""
    per_node, nodes = node_layout(world, gpus_per_node)
    total_gpus = per_node * nodes
    cpu_offload = option.offload_optimizer == "cpu"
    breakdown = {"gpu/params": 0, "gpu/gradients": 0, "gpu/optimizer_states": 0,
                 "cpu/model_states": 0, "deepspeed/gpu_bytes": 0}
    if option.stage == 2 and option.offload_params == "none":
        cpu, gpu = zero2(total_params, per_node, nodes, cpu_offload, buffer_factor)
        breakdown["gpu/params"] = 2 * total_params
        if not cpu_offload:
            sharded_total = gpu - 2 * total_params
            breakdown["gpu/gradients"] = int(6 * total_params / total_gpus)
            breakdown["gpu/optimizer_states"] = sharded_total - breakdown["gpu/gradients"]
    elif option.stage == 3 and option.offload_optimizer in ("none", "cpu") and option.offload_params in ("none", "cpu"):
        cpu, gpu = zero3(total_params, largest_layer_params, per_node, nodes, cpu_offload,
                         option.offload_params == "cpu", zero_init, buffer_factor)
        breakdown["gpu/buffers/largest_layer"] = 4 * largest_layer_params
        sharded_total = gpu - 4 * largest_layer_params
        if option.offload_params == "none":
            breakdown["gpu/params"] = int(2 * total_params / total_gpus)
        if not cpu_offload:
            breakdown["gpu/gradients"] = int(4 * total_params / total_gpus)
            breakdown["gpu/optimizer_states"] = sharded_total - breakdown["gpu/params"] - breakdown["gpu/gradients"]
        else:
            breakdown["gpu/params"] = sharded_total
    else:
        raise InputError("convention", f"DeepSpeed has no estimator for {option.label}",
                         f"use {ref('convention', 'paper')} for stages 0-1 and NVMe tiers")
    breakdown["cpu/model_states"] = cpu
    breakdown["deepspeed/gpu_bytes"] = gpu
    return breakdown
