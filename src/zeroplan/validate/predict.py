"""What zeroplan predicts for a validate run, before any rank starts (no torch).

Model states: core.memory.framework_partition with the bytes torch really keeps. Under both precisions torch
stores fp32 parameters, fp32 gradients and fp32 optimizer states (see wrappers.py), so the per-element
bytes are bytes_per_param("fp32", optimizer); torch's Adam/AdamW add a 4-byte `step` tensor per parameter.

Activations: core.memory.activations (Korthikanti et al. Table 2, no flash attention, no recompute), 4-byte
elements for fp32 and 2-byte for mixed, one micro-batch in flight.

CUDA memory (not yet checked against a GPU, see docs/accuracy.md):
- at rest, after optimizer.step(): the model states on the device.
- forward/backward peak: parameters + optimizer states (+ DDP's gradient buckets, which never go away)
  + activations + the parameter copies alive at the end of forward + the loss's backward (fp32 gradients
  of the log-probabilities and of the logits, 2 · 4·s·b·V). Parameter copies: autocast's bf16 weights
  (stages 0-1, mixed); every unsharded parameter (stage 2 keeps them from forward to backward); none at
  stage 3, but at the start of its backward the root group, the last block and the prefetched next block.
- optimizer-step peak: parameters + gradients + optimizer states + foreach Adam's temporary
  (sqrt of exp_avg_sq: 4 bytes per element the rank steps).
"""

from __future__ import annotations

from dataclasses import replace

from zeroplan.core.memory.activations import ActivationConfig, activation_memory
from zeroplan.core.memory.framework_partition import FrameworkPartition, ParamSpec, framework_partition
from zeroplan.core.memory.framework_states import TORCH_STEP_TENSOR_BYTES
from zeroplan.core.precision import BytesPerParam, bytes_per_param
from zeroplan.core.units import ceil_div
from zeroplan.validate import STAGE_FRAMEWORKS
from zeroplan.validate.config import ValidateConfig

STEP_TENSOR_BYTES = TORCH_STEP_TENSOR_BYTES  # a 0-dim fp32 `step` per parameter
ADAM_TEMPORARY_BYTES = 4
FP32_BYTES = 4


def torch_bytes_per_param(optimizer: str) -> BytesPerParam:
    """Bytes per element torch keeps in every wrapper validate runs, under fp32 and bf16 mixed alike."""
    return bytes_per_param("fp32", optimizer)


def predict_states(config: ValidateConfig, world_size: int, stage: int) -> FrameworkPartition:
    partition = framework_partition(
        config.shape.param_specs(), world_size, torch_bytes_per_param(config.optimizer), STAGE_FRAMEWORKS[stage],
        offload=config.cpu_offload, per_tensor_state_bytes=STEP_TENSOR_BYTES.get(config.optimizer, 0))
    if config.perturb_bytes:  # tests only: a prediction that must not match
        tier = "cpu" if config.cpu_offload else "gpu"
        partition.breakdown[f"rank{partition.most_loaded_rank}/{tier}/optimizer_states"] += config.perturb_bytes
    return partition


def activation_dtype_bytes(config: ValidateConfig) -> int:
    return 2 if config.precision == "mixed" else 4


def predict_activations(config: ValidateConfig) -> int:
    """Bytes one rank saves for backward in one forward pass (one micro-batch)."""
    settings = ActivationConfig(seq_len=config.shape.seq_len, micro_batch=config.micro_batch,
                                dtype_bytes=activation_dtype_bytes(config))
    return activation_memory(config.shape.model_spec(), settings).total


def _unsharded(params: list[ParamSpec], world_size: int, element_bytes: int) -> int:
    """All-gathered FSDP2 parameters: every rank's padded chunk, so ceil(rows/N)·N rows."""
    return sum(ceil_div(p.rows, world_size) * world_size * p.row_numel for p in params) * element_bytes


def param_copy_bytes(config: ValidateConfig, world_size: int, stage: int) -> int:
    """Parameter copies alive at the end of forward (see the module docstring)."""
    specs = config.shape.param_specs()
    if stage < 2:
        if config.precision != "mixed":
            return 0
        matmul_weights = [p for p in specs if len(p.shape) == 2 and p.name not in ("wte.weight", "wpe.weight")]
        return 2 * sum(p.numel for p in matmul_weights)
    if stage == 3:
        return 0  # every group, the root included, is resharded when its forward ends
    owned = [p for p in specs if p.tied_to is None]
    return _unsharded(owned, world_size, activation_dtype_bytes(config))


def prefetch_bytes(config: ValidateConfig, world_size: int, stage: int) -> int:
    """Stage 3 at the start of backward: the root group gathered again (it stays until the embedding's
    gradient is done, at the very end), the last block, and the block prefetched after it."""
    if stage != 3:
        return 0
    owned = [p for p in config.shape.param_specs() if p.tied_to is None]
    element = activation_dtype_bytes(config)
    root = _unsharded([p for p in owned if not p.name.startswith("blocks.")], world_size, element)
    block = _unsharded([p for p in owned if p.name.startswith("blocks.0.")], world_size, element)
    return root + min(2, config.shape.layers) * block


def predict_cuda(config: ValidateConfig, world_size: int, stage: int, partition: FrameworkPartition,
                 rank: int) -> dict[str, int]:
    held = partition.rank(rank)
    params, grads, states = held["gpu/params"], held["gpu/gradients"], held["gpu/optimizer_states"]
    tokens = config.shape.seq_len * config.micro_batch
    loss_backward = 2 * FP32_BYTES * tokens * config.shape.vocab
    forward = (params + states + (grads if stage < 2 else 0) + predict_activations(config)
               + param_copy_bytes(config, world_size, stage) + prefetch_bytes(config, world_size, stage)
               + loss_backward)
    temporary = 0
    if config.optimizer in STEP_TENSOR_BYTES and not config.cpu_offload:
        per_element = replace(torch_bytes_per_param(config.optimizer), optimizer_states=ADAM_TEMPORARY_BYTES)
        stepped = framework_partition(config.shape.param_specs(), world_size, per_element, STAGE_FRAMEWORKS[stage])
        temporary = stepped.rank(rank)["gpu/optimizer_states"]
    step = params + grads + states + temporary
    return {"at_rest": params + grads + states, "peak_forward_backward": forward, "peak_optimizer_step": step,
            "peak": max(forward, step)}
