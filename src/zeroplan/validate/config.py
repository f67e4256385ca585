"""What one `zeroplan validate` run does, validated up front (no torch): bad input fails with exit 2
before any process starts."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass

from zeroplan.core.errors import InputError
from zeroplan.core.memory.framework_partition import FRAMEWORKS, unshardable_ranks
from zeroplan.core.precision import normalize_precision
from zeroplan.distributed.devices import BACKENDS, check_nproc
from zeroplan.validate import STAGE_FRAMEWORKS
from zeroplan.validate.shape import TinyShape

FORMATS = ("table", "json")
OPTIMIZERS = ("adam", "adamw", "sgd-momentum", "sgd")


@dataclass(frozen=True)
class ValidateConfig:
    stages: tuple[int, ...]
    shape: TinyShape
    precision: str  # "fp32" or "mixed" (bf16)
    optimizer: str
    micro_batch: int
    steps: int
    backend: str  # "auto", "gloo" or "nccl" as asked; resolved once torch is imported
    nproc: int | None
    cpu_offload: bool
    timeout_s: float
    output_format: str
    perturb_bytes: int = 0  # tests only: added to the prediction so that it cannot match
    seed: int = 1234

    @property
    def frameworks(self) -> tuple[str, ...]:
        return tuple(STAGE_FRAMEWORKS[stage] for stage in self.stages)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ValidateConfig":
        fields = json.loads(text)
        fields["stages"] = tuple(fields["stages"])
        fields["shape"] = TinyShape(**fields["shape"])
        return cls(**fields)


def parse_stages(text: str) -> tuple[int, ...]:
    """"all", or a comma list of stages 0-3 and/or the frameworks that run them (fsdp2-zero3)."""
    key = text.strip().lower()
    if key == "all":
        return tuple(STAGE_FRAMEWORKS)
    by_name = {name: stage for stage, name in STAGE_FRAMEWORKS.items()}
    stages: list[int] = []
    for item in (part.strip() for part in key.split(",")):
        if item in ("0", "1", "2", "3"):
            stage = int(item)
        elif item in by_name:
            stage = by_name[item]
        elif item in FRAMEWORKS:
            raise InputError("--stage", f"{item} is predicted by zeroplan but cannot be run by validate",
                             "validate runs torch's frameworks: stages 0-3 (ddp, torch-zero1, fsdp2-zero2/3)")
        else:
            raise InputError("--stage", f"unknown stage or framework '{item or text}'",
                             f"use all, 0-3 or {', '.join(STAGE_FRAMEWORKS.values())}, comma separated")
        if stage not in stages:
            stages.append(stage)
    return tuple(sorted(stages))


def _choice(value: str, choices: tuple[str, ...], input_name: str) -> str:
    key = value.strip().lower()
    if key not in choices:
        raise InputError(input_name, f"unknown value '{value}'", f"use one of {', '.join(choices)}")
    return key


def _precision(text: str) -> str:
    if text.strip().lower() == "fp16":
        raise InputError("--precision", "fp16 training needs a loss scaler, which validate does not run",
                         "use mixed (bf16) or fp32")
    return normalize_precision(text)


def build_config(*, stage: str, shape: TinyShape, precision: str, optimizer: str, micro_batch: int, steps: int,
                 backend: str, nproc: int | None, cpu_offload: bool, timeout: float, output_format: str,
                 perturb_bytes: int = 0) -> ValidateConfig:
    if not 1 <= micro_batch <= 4096:
        raise InputError("--micro-batch", f"must be between 1 and 4096 for a validation run, got {micro_batch}")
    if steps < 1:
        raise InputError("--steps", f"must be at least 1, got {steps}", "states are measured after the last step")
    if not (math.isfinite(timeout) and timeout > 0):
        raise InputError("--timeout", f"must be a positive number of seconds, got {timeout}")
    check_nproc(nproc, "sharding")
    stages = parse_stages(stage)
    if cpu_offload and any(s < 2 for s in stages):
        raise InputError("--cpu-offload", "FSDP2's CPU offload policy applies to stages 2 and 3 only",
                         "use --stage 2,3 with --cpu-offload")
    return ValidateConfig(
        stages=stages, shape=shape, precision=_precision(precision),
        optimizer=_choice(optimizer, OPTIMIZERS, "--optimizer"), micro_batch=micro_batch, steps=steps,
        backend=_choice(backend, BACKENDS, "--backend"), nproc=nproc, cpu_offload=cpu_offload,
        timeout_s=float(timeout), output_format=_choice(output_format, FORMATS, "--format"),
        perturb_bytes=perturb_bytes)


def host_memory_bytes() -> int | None:
    """This machine's physical memory (None where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_world(config: ValidateConfig, world_size: int, backend: str, local_ranks: int | None = None) -> None:
    """Checks that need the world size and the resolved backend; still before any rank starts.
    local_ranks: the ranks this machine runs (each builds the whole model in fp32 on the host first)."""
    memory = host_memory_bytes()
    params = config.shape.params
    # At least: the fp32 model each rank builds, and the fp32 weights, gradients and Adam's two states that
    # stage 0 (DDP) keeps whole on every rank; sharded stages keep a 1/world share of the last three.
    held = 16 * params if 0 in config.stages else 4 * params + -(-12 * params // world_size)
    if memory is not None and local_ranks and held * local_ranks > memory:
        raise InputError("--hidden", f"{local_ranks} ranks of this {params:,}-parameter model hold at least "
                         f"{held * local_ranks / 2**30:,.1f} GiB (fp32 model, gradients and optimizer states), more "
                         f"than this machine's {memory / 2**30:,.1f} GiB",
                         "use a smaller shape, fewer ranks (--nproc) or only sharded stages")
    if config.cpu_offload and backend != "nccl":
        raise InputError("--cpu-offload", "offload moves states from the GPU to host memory; this run has no GPU",
                         "run it on CUDA (nccl), or drop --cpu-offload")
    specs = config.shape.param_specs()
    for framework in config.frameworks:
        idle = unshardable_ranks(specs, world_size, framework)
        if idle:
            raise InputError("--nproc", f"the model is too small to shard over {world_size} ranks with {framework}: "
                             f"rank {idle[0]} would hold none of it", "use fewer ranks or a larger model")
