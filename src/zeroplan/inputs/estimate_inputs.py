"""What `zeroplan estimate` accepts, as the user gave it (None = not given: the resolvers apply defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.deepspeed_estimator import DEFAULT_BUFFER_FACTOR


@dataclass
class EstimateInputs:
    """Everything `zeroplan estimate` accepts, as given (None = not given, use the default)."""

    gpus: int = 1
    params: str | None = None
    model: str | None = None  # a preset name or the path of a Hugging Face config.json
    gpu: str | None = None
    cluster: str | None = None
    gpus_per_node: int | None = None
    tp: int = 1
    pp: int = 1
    precision: str = "mixed"
    optimizer: str = "adam"
    convention: str = "paper"
    framework: str | None = None  # for the framework convention: deepspeed (the default) or torch
    stage: int | None = None
    offload_optimizer: str | None = None
    offload_params: str | None = None
    largest_layer_params: str | None = None
    zero_init: bool = True
    buffer_factor: float = DEFAULT_BUFFER_FACTOR
    cpu_memory: str | None = None
    nvme: str | None = None
    nvme_bandwidth: str | None = None
    intra_node_bandwidth: str | None = None
    inter_node_bandwidth: str | None = None
    gpu_memory: str | None = None
    runtime_reserve: str | None = None
    fragmentation: str | None = None
    activation_reserve: str | None = None
    host_reserve: str | None = None
    zeropp: str | None = None
    hpz_partition_size: int | None = None
    # The training step (activations need the model's shape: --model).
    seq_len: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None
    activations: str | None = None  # transformers (the default) or megatron: whose code keeps the activations
    flash_attention: bool = True
    sequence_parallel: bool = False
    grad_accum: int | None = None
    global_batch: int | None = None
    max_micro_batch: bool = False
    # DeepSpeed buffer settings (element counts), None = DeepSpeed's defaults.
    reduce_bucket_size: str | None = None
    allgather_bucket_size: str | None = None
    prefetch_bucket_size: str | None = None
    max_live_parameters: str | None = None
    sub_group_size: str | None = None
    overlap_comm: bool | None = None
    calibration: str | None = None  # a profile saved by `zeroplan bench --save-calibration`
    units: str = "iec"
