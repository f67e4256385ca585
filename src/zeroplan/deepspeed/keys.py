"""The keys DeepSpeed's config schema knows, and the deprecated ones with their replacements.

Collected from DeepSpeed's source (deepspeedai/DeepSpeed): runtime/constants.py and runtime/config.py
(top level, as read by DeepSpeedConfig._initialize_params and the sub-config getters it calls),
runtime/zero/config.py (DeepSpeedZeroConfig: field names and their "stage3_*" aliases, both accepted
since the model sets populate_by_name), runtime/zero/offload_config.py, runtime/precision_config.py.
The union over recent releases is kept, so a key one release renamed is not called a typo.

How DeepSpeed treats an unknown key differs by place, and the severity follows it:
- top level: read with dict.get, so an unknown key is silently ignored (warning);
- zero_optimization, the offload blocks, fp16 and bf16: pydantic models with extra="forbid" (fp16/bf16
  since DeepSpeed's precision_config models), so DeepSpeed stops at start-up (error).
"""

from __future__ import annotations

TOP_LEVEL_KEYS = frozenset({
    # batch and steps
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "managed_gradient_accumulation", "steps_per_print", "dataloader_drop_last",
    # precision
    "fp16", "bf16", "bfloat16", "amp", "torch_autocast", "data_types", "communication_data_type",
    "seq_parallel_communication_data_type", "seq_parallel_comm_data_type",
    # optimizer, gradients
    "optimizer", "scheduler", "gradient_clipping", "prescale_gradients", "gradient_predivide_factor",
    "gradient_allreduce_op", "sparse_gradients", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer",
    "zero_optimization", "disable_allgather",
    # parallelism
    "pipeline", "tensor_parallel", "expert_parallel", "sequence_parallel_size", "hybrid_engine",
    "use_data_before_expert_parallelism", "elasticity",
    # memory, I/O, checkpoints
    "activation_checkpointing", "aio", "checkpoint", "nebula", "datastates_ckpt", "weight_quantization",
    # monitoring and profiling
    "tensorboard", "wandb", "csv_monitor", "comet", "trackio", "comms_logger", "flops_profiler", "autotuning",
    "wall_clock_breakdown", "memory_breakdown", "timers", "dump_state", "log_level",
    # training techniques
    "sparse_attention", "progressive_layer_drop", "curriculum_learning", "data_efficiency",
    "compression_training", "quantize_training", "compile", "graph_harvesting", "disable_python_gc",
    "vocabulary_size",
})

ZERO_KEYS = frozenset({
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "use_multi_rank_bucket_allreduce",
    "allgather_partitions", "allgather_bucket_size", "overlap_comm", "load_from_fp32_weights",
    "elastic_checkpoint", "offload_param", "offload_optimizer", "zenflow", "sub_group_size",
    "cpu_offload_param", "cpu_offload_use_pin_memory", "cpu_offload",
    "prefetch_bucket_size", "stage3_prefetch_bucket_size",
    "param_persistence_threshold", "stage3_param_persistence_threshold",
    "model_persistence_threshold", "stage3_model_persistence_threshold",
    "max_live_parameters", "stage3_max_live_parameters",
    "max_reuse_distance", "stage3_max_reuse_distance",
    "gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
    "module_granularity_threshold", "stage3_module_granularity_threshold",
    "use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params",
    "allgather_sequential", "stage3_allgather_sequential",
    "partition_stream_chunk_size", "stage3_partition_stream_chunk_size",
    "ignore_unused_parameters", "legacy_stage1", "round_robin_gradients",
    "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients", "zeropp_loco_param", "mics_shard_size", "mics_hierarchical_params_gather",
    "memory_efficient_linear", "pipeline_loading_checkpoint", "override_module_apply",
    "log_trace_cache_warnings", "enable_sanity_checks", "save_muon_momentum_buffer_in_memory", "leaf_module",
})

OFFLOAD_PARAM_KEYS = frozenset({"device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory"})
OFFLOAD_OPTIMIZER_KEYS = frozenset({
    "device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read", "pipeline_write", "fast_init",
    "ratio", "super_offload", "convert_grad_on_cpu", "cpuadam_cores_perc",
})
FP16_KEYS = frozenset({
    "enabled", "auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
    "consecutive_hysteresis", "min_loss_scale", "fp16_master_weights_and_grads", "fused_mode",
})
BF16_KEYS = frozenset({
    "enabled", "immediate_grad_update", "check_overflow", "check_grad_overflow",
    "bf16_master_weights_and_grads", "bf16_optimizer_states",
})

# Where each known-key set applies, and whether DeepSpeed rejects an unknown key there.
KEY_SETS: dict[tuple[str, ...], tuple[frozenset, bool]] = {
    (): (TOP_LEVEL_KEYS, False),
    ("fp16",): (FP16_KEYS, True),
    ("bf16",): (BF16_KEYS, True),
    ("zero_optimization",): (ZERO_KEYS, True),
    ("zero_optimization", "offload_optimizer"): (OFFLOAD_OPTIMIZER_KEYS, True),
    ("zero_optimization", "offload_param"): (OFFLOAD_PARAM_KEYS, True),
}


# Deprecated key path -> (replacement, what to write instead). DeepSpeed still reads these, with a warning
# (zero/config.py marks them deprecated=True with new_param; config.py keeps "bfloat16" "for backwards
# compatibility"); giving a deprecated key and its replacement together is an error there.
DEPRECATED: dict[tuple[str, ...], tuple[tuple[str, ...], str]] = {
    ("zero_optimization", "cpu_offload"): (
        ("zero_optimization", "offload_optimizer"), 'write "offload_optimizer": {"device": "cpu"}'),
    ("zero_optimization", "cpu_offload_param"): (
        ("zero_optimization", "offload_param"), 'write "offload_param": {"device": "cpu"} (stage 3)'),
    ("zero_optimization", "cpu_offload_use_pin_memory"): (
        (), 'write "pin_memory": true inside offload_optimizer / offload_param'),
    ("zero_optimization", "stage3_gather_fp16_weights_on_model_save"): (
        ("zero_optimization", "stage3_gather_16bit_weights_on_model_save"),
        "rename it to stage3_gather_16bit_weights_on_model_save"),
    ("bfloat16",): (("bf16",), 'rename "bfloat16" to "bf16"'),
    ("allgather_size",): (("zero_optimization", "allgather_bucket_size"),
                          "move it into zero_optimization as allgather_bucket_size"),
}

# Replacements that share a field with a deprecated key (an alias pair counts as the same field).
ALIASES = {"stage3_gather_16bit_weights_on_model_save": "gather_16bit_weights_on_model_save"}

DEEPSPEED_DEFAULTS = {
    "reduce_bucket_size": 500_000_000,
    "allgather_bucket_size": 500_000_000,
    "stage3_prefetch_bucket_size": 50_000_000,
    "stage3_max_live_parameters": 1_000_000_000,
    "stage3_max_reuse_distance": 1_000_000_000,
    "stage3_param_persistence_threshold": 100_000,
}
