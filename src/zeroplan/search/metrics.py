"""What a plan's step time means for a training run: throughput, MFU, time to train, GPU-hours."""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.layout.search import PlanRecord, SearchRequest
from zeroplan.core.timing.step_time import FlopModel, train_seconds


@dataclass(frozen=True)
class Throughput:
    tokens_per_step: int
    tokens_per_second: float
    mfu: float  # 6Ψ·tokens / (time · peak · GPUs)
    hardware_tflops_per_gpu: float  # what the GPUs execute, recompute included
    train_seconds: float | None  # with --tokens
    gpu_hours: float | None


def throughput(plan: PlanRecord, request: SearchRequest, flops: FlopModel, training_tokens: int | None) -> Throughput:
    space = request.space
    tokens = space.global_batch * space.seq_len
    seconds = plan.time.total
    gpus = plan.world
    peak = request.machine.peak_flops
    model_flops = flops.model_flops_per_token() * tokens
    hardware_flops = flops.hardware_flops_per_token(space.seq_len, plan.recompute) * tokens
    train = None if training_tokens is None else train_seconds(seconds, tokens, training_tokens)
    return Throughput(
        tokens_per_step=tokens, tokens_per_second=tokens / seconds, mfu=model_flops / (seconds * peak * gpus),
        hardware_tflops_per_gpu=hardware_flops / (seconds * gpus) / 1e12, train_seconds=train,
        gpu_hours=None if train is None else train * gpus / 3600)
