"""The zeroplan plan file: model, cluster, parallel sizes, training settings and the ZeRO choice, in YAML.

Schema (every section but model and cluster is optional; unknown keys are rejected so typos surface):

    zeroplan_plan: 1                 # schema version
    model:        {preset: llama-2-7b}, {config: path/to/config.json} or
                  {params: 7e9, hidden: 4096, largest_layer_params: 131e6}
    cluster:      {gpus: 16, preset: dgx-a100 | gpu: a100-80g, gpus_per_node: 8, cpu_memory: 1TB, nvme: 15TB}
    parallel:     {tp: 1, pp: 1}
    training:     {precision: bf16|fp16|fp32, optimizer: adam, micro_batch: 4, grad_accum: 8,
                   global_batch: 512, seq_len: 4096, recompute: none|selective|full|selective-op, flash_attention: true}
    finetune:     {mode: full|lora|qlora, lora_rank: 16, lora_targets: all-linear, quant: nf4|int8,
                   double_quant: true, freeze: "embeddings,layers:8", recipe: peft|torchtune}
                                     # optional: full training without it
    zero:         {stage: 0-3, offload_optimizer: none|cpu|nvme, offload_params: none|cpu|nvme,
                   nvme_path: /local_nvme}
    deepspeed_config: ds_config.json # optional: the DeepSpeed config this plan describes (relative path)

Validated with pydantic; an invalid file is an input error naming the file, line and column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from zeroplan.inputs.config_files import Source
from zeroplan.core.errors import InputError

SCHEMA_VERSION = 1
Count = Union[int, str]  # 7e9, "7B", 7000000000
Tier = Literal["none", "cpu", "nvme"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PlanModel(_Strict):
    preset: Optional[str] = None
    config: Optional[str] = None  # a Hugging Face config.json
    params: Optional[Count] = None
    hidden: Optional[int] = Field(default=None, ge=1)
    largest_layer_params: Optional[Count] = None

    @model_validator(mode="after")
    def _one_source(self) -> "PlanModel":
        if sum(value is not None for value in (self.preset, self.config, self.params)) != 1:
            raise ValueError("give exactly one of preset, config or params")
        return self


class PlanCluster(_Strict):
    gpus: int = Field(ge=1)
    preset: Optional[str] = None
    gpu: Optional[str] = None
    gpus_per_node: Optional[int] = Field(default=None, ge=1)
    cpu_memory: Optional[str] = None
    nvme: Optional[str] = None
    gpu_memory: Optional[str] = None


class PlanParallel(_Strict):
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)  # expert parallelism (mixture-of-experts models)
    etp: Optional[int] = Field(default=None, ge=1)  # expert tensor parallelism; None: as tp


class PlanTraining(_Strict):
    precision: Literal["bf16", "fp16", "fp32"] = "bf16"
    optimizer: str = "adam"
    micro_batch: Optional[int] = Field(default=None, ge=1)
    grad_accum: Optional[int] = Field(default=None, ge=1)
    global_batch: Optional[int] = Field(default=None, ge=1)
    seq_len: Optional[int] = Field(default=None, ge=1)
    recompute: Optional[Literal["none", "selective", "full", "selective-op"]] = None
    flash_attention: Optional[bool] = None
    capacity_factor: Optional[float] = Field(default=None, ge=1)  # MoE expert capacity; None: dropless


class PlanFinetune(_Strict):
    """What trains (docs/formulas.md §21, §23.3): the flags --finetune, --lora-rank, --lora-targets, --quant,
    --double-quant, --freeze and --finetune-recipe (here `recipe`)."""

    mode: Literal["full", "lora", "qlora"] = "full"
    lora_rank: Optional[int] = Field(default=None, ge=1)
    lora_targets: Optional[str] = None
    quant: Optional[Literal["nf4", "int8"]] = None
    double_quant: Optional[bool] = None
    freeze: Optional[str] = None
    recipe: Optional[Literal["peft", "torchtune"]] = None


class PlanZero(_Strict):
    stage: int = Field(ge=0, le=3)
    offload_optimizer: Tier = "none"
    offload_params: Tier = "none"
    nvme_path: Optional[str] = None


class PlanFile(_Strict):
    zeroplan_plan: int = SCHEMA_VERSION
    model: PlanModel
    cluster: PlanCluster
    parallel: PlanParallel = PlanParallel()
    training: PlanTraining = PlanTraining()
    finetune: Optional[PlanFinetune] = None
    zero: Optional[PlanZero] = None
    deepspeed_config: Optional[str] = None

    @model_validator(mode="after")
    def _version(self) -> "PlanFile":
        if self.zeroplan_plan != SCHEMA_VERSION:
            raise ValueError(f"unsupported plan schema version {self.zeroplan_plan} (this zeroplan reads "
                             f"version {SCHEMA_VERSION})")
        return self


def validate_plan(source: Source) -> PlanFile:
    """The validated plan, or an InputError naming the file, the field, its line and what is wrong."""
    try:
        return PlanFile.model_validate(source.data)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = tuple(str(part) for part in error.get("loc", ()))
        field = ".".join(location) or "plan"
        where = _where(source, location)
        raise InputError(f"{source.name}{where}", f"{field}: {error.get('msg', 'invalid')}",
                         "see the plan schema in `zeroplan export plan --help`") from None


def _where(source: Source, location: tuple[str, ...]) -> str:
    for end in range(len(location), 0, -1):  # the deepest key that exists in the file
        mark = source.locate(location[:end])
        if mark:
            return f":{mark[0]}:{mark[1]}"
    return ""


def referenced_config(plan: PlanFile, plan_path: Path) -> Path | None:
    if plan.deepspeed_config is None:
        return None
    candidate = Path(plan.deepspeed_config)
    return candidate if candidate.is_absolute() else plan_path.parent / candidate


# Where a DeepSpeed key lives in a plan file, so findings about a plan point at the right line.
PLAN_KEY_FOR = {
    "train_batch_size": ("training", "global_batch"),
    "train_micro_batch_size_per_gpu": ("training", "micro_batch"),
    "gradient_accumulation_steps": ("training", "grad_accum"),
    "fp16": ("training", "precision"),
    "bf16": ("training", "precision"),
    "zero_optimization.stage": ("zero", "stage"),
    "zero_optimization.offload_optimizer": ("zero", "offload_optimizer"),
    "zero_optimization.offload_param": ("zero", "offload_params"),
    "world": ("cluster", "gpus"),
    "tp": ("parallel", "tp"),
    "expert_parallel": ("parallel", "ep"),
    "capacity_factor": ("training", "capacity_factor"),
}
