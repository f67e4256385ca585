"""A ready DeepSpeed config (ds_config.json) for a chosen option: stage, offload blocks, bucket sizes, precision
and batch sizes that satisfy the identity. Keys and defaults: docs/formulas.md §18 and DeepSpeed's zero/config.py."""

from __future__ import annotations

import json

from zeroplan.deepspeed.buckets import scientific
from zeroplan.deepspeed.choose import Choice

NVME_PATH_PLACEHOLDER = "/local_nvme"
# Dynamic loss scaling as DeepSpeed's own defaults (runtime/precision_config.py): fp16 needs it, bf16 does not.
FP16_BLOCK = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
              "hysteresis": 2, "min_loss_scale": 1}


def _offload_block(tier: str, nvme_path: str) -> dict:
    block: dict = {"device": tier, "pin_memory": True}
    if tier == "nvme":
        block["nvme_path"] = nvme_path
    return block


def build(choice: Choice, nvme_path: str | None = None) -> dict:
    option, buckets, batch = choice.estimate.option, choice.buckets, choice.batch
    config: dict = {
        "train_batch_size": batch.train_batch_size,
        "train_micro_batch_size_per_gpu": batch.micro_batch,
        "gradient_accumulation_steps": batch.accumulation,
        "gradient_clipping": 1.0,
    }
    if choice.precision == "bf16":
        config["bf16"] = {"enabled": True}
    elif choice.precision == "fp16":
        config["fp16"] = dict(FP16_BLOCK)
    zero: dict = {"stage": option.stage}
    if option.stage > 0:
        zero.update({"overlap_comm": buckets.overlap_comm, "contiguous_gradients": True,
                     "reduce_bucket_size": buckets.reduce})
    if option.stage in (1, 2):
        zero.update({"allgather_partitions": True, "allgather_bucket_size": buckets.allgather, "reduce_scatter": True})
    if option.stage == 3:
        zero.update({"stage3_prefetch_bucket_size": buckets.prefetch,
                     "stage3_param_persistence_threshold": choice.persistence_threshold,
                     "stage3_max_live_parameters": buckets.max_live, "stage3_max_reuse_distance": buckets.max_live,
                     "stage3_gather_16bit_weights_on_model_save": True})
    path = nvme_path or NVME_PATH_PLACEHOLDER
    if option.offload_optimizer != "none":
        zero["offload_optimizer"] = _offload_block(option.offload_optimizer, path)
    if option.offload_params != "none":
        zero["offload_param"] = _offload_block(option.offload_params, path)
    config["zero_optimization"] = zero
    if choice.ep > 1:  # DeepSpeed AutoEP (module_inject/auto_ep_config.py): experts folded over the ranks
        config["expert_parallel"] = {"enabled": True, "autoep_size": choice.ep, "expert_tensor_parallel_size": 1}
    config["steps_per_print"] = 100
    config["wall_clock_breakdown"] = False
    return config


_SCIENTIFIC_KEYS = {"reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size",
                    "stage3_max_live_parameters", "stage3_max_reuse_distance"}


def render(config: dict) -> str:
    """Indented JSON, element counts in DeepSpeed's usual 5e8 style (exact: JSON numbers, read back whole)."""
    text = json.dumps(config, indent=2)
    for key in _SCIENTIFIC_KEYS:
        value = config.get("zero_optimization", {}).get(key)
        if isinstance(value, int):
            text = text.replace(f'"{key}": {value},', f'"{key}": {scientific(value)},')
            text = text.replace(f'"{key}": {value}\n', f'"{key}": {scientific(value)}\n')
    return text + "\n"
