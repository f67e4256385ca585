"""`zeroplan validate`: train a tiny GPT for a few steps on N local ranks under DDP, torch's
ZeroRedundancyOptimizer and FSDP2, measure what every rank holds, and compare it with the prediction.

Layout: shape (the tiny model's shape and parameter list, no torch), config (validated options, no torch),
predict (model states from core.memory.framework_partition, activations and CUDA peak, no torch), model (the torch
module), wrappers (DDP / ZeRO-1 / FSDP2 and the optimizer, from zeroplan.distributed.sharding), measure
(storage bytes, saved tensors, CUDA peaks), worker (one rank, started by zeroplan.distributed's launcher or
in-process under torchrun), report (compare and render), runner (all of it). Importing this package does
not import torch; the run paths do.
"""

from __future__ import annotations

from zeroplan.core.errors import RunFailed
from zeroplan.core.memory.framework_states import FRAMEWORK_BY_STAGE

# Each stage runs as the torch framework that behaves like it (see docs/accuracy.md), as estimate predicts it.
STAGE_FRAMEWORKS = FRAMEWORK_BY_STAGE["torch"]
FRAMEWORK_LABELS = {
    "ddp": "DistributedDataParallel",
    "torch-zero1": "DDP + ZeroRedundancyOptimizer",
    "fsdp2-zero2": "FSDP2 fully_shard(reshard_after_forward=False)",
    "fsdp2-zero3": "FSDP2 fully_shard(reshard_after_forward=True)",
}


class ValidateFailed(RunFailed):
    """A rank failed or hung, or a prediction missed: one line, exit_code (1; 130 for an interrupt)."""
