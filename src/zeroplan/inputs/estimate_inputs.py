"""What `zeroplan estimate` accepts: its input sections, as the user gave them (the resolvers apply defaults)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from zeroplan.inputs.sections import (
    BudgetInputs, BufferInputs, CommandInputs, ConventionInputs, HardwareInputs, ModelInputs, ParallelInputs, Section, StepInputs,
)

FINETUNE_FIELDS = ("finetune", "lora_rank", "lora_targets", "quant", "double_quant", "freeze", "finetune_recipe")

# The fields `zeroplan estimate` takes from each section (the CLI's options, and the report's "inputs").
FIELDS: dict[type[Section], tuple[str, ...]] = {
    ModelInputs: ("params", "model", "largest_layer_params"),
    HardwareInputs: ("gpus", "gpus_per_node", "gpu", "cluster", "presets_file", "cpu_memory", "nvme", "nvme_bandwidth",
                     "intra_node_bandwidth", "inter_node_bandwidth", "gpu_memory", "calibration"),
    ParallelInputs: ("tp", "pp", "cp", "ep", "etp", "stage", "offload_optimizer", "offload_params", "zeropp",
                     "hpz_partition_size", "dp_shard"),
    StepInputs: ("precision", "fp8_recipe", "optimizer", "seq_len", "micro_batch", "recompute", "activations",
                 "flash_attention", "sequence_parallel", "grad_accum", "global_batch", "max_micro_batch",
                 "capacity_factor", *FINETUNE_FIELDS),
    BudgetInputs: ("runtime_reserve", "fragmentation", "activation_reserve", "host_reserve"),
    ConventionInputs: ("convention", "framework", "zero_init", "buffer_factor"),
    BufferInputs: ("reduce_bucket_size", "allgather_bucket_size", "prefetch_bucket_size", "max_live_parameters",
                   "sub_group_size", "overlap_comm"),
}


# The report's "inputs", in the order it has always listed them.
ECHO_ORDER = ("gpus", "params", "model", "gpu", "cluster", "gpus_per_node", "tp", "pp", "precision", "optimizer",
              "convention", "framework", "stage", "offload_optimizer", "offload_params", "largest_layer_params",
              "zero_init", "buffer_factor", "cpu_memory", "nvme", "nvme_bandwidth", "intra_node_bandwidth",
              "inter_node_bandwidth", "gpu_memory", "runtime_reserve", "fragmentation", "activation_reserve",
              "host_reserve", "zeropp", "hpz_partition_size", "seq_len", "micro_batch", "recompute",
              "activations", "flash_attention", "sequence_parallel", "grad_accum", "global_batch", "max_micro_batch",
              "reduce_bucket_size", "allgather_bucket_size", "prefetch_bucket_size", "max_live_parameters",
              "sub_group_size", "overlap_comm", "calibration", "ep", "etp", "capacity_factor", "cp", "fp8_recipe",
              "dp_shard", *FINETUNE_FIELDS)


@dataclass
class EstimateInputs(CommandInputs):
    """Everything `zeroplan estimate` accepts, by section."""

    model: ModelInputs = field(default_factory=ModelInputs)
    hardware: HardwareInputs = field(default_factory=HardwareInputs)
    parallel: ParallelInputs = field(default_factory=ParallelInputs)
    step: StepInputs = field(default_factory=StepInputs)
    budget: BudgetInputs = field(default_factory=BudgetInputs)
    convention: ConventionInputs = field(default_factory=ConventionInputs)
    buffers: BufferInputs = field(default_factory=BufferInputs)
    units: str = "iec"
    FIELDS: ClassVar[dict[Any, tuple[str, ...]]] = FIELDS
    ECHO_ORDER: ClassVar[tuple[str, ...]] = ECHO_ORDER

