"""`zeroplan trace --real`: the traced step with real tensors on a CUDA GPU, measured by
torch.cuda.max_memory_allocated.

It is the fake trace's step, not a copy of it: rank 0 of the same fake world (collectives do nothing, the
shard sizes are the real ones), the model sharded by engine.sharded_model (zeroplan.distributed.sharding),
the optimizer and micro-batch from engine.prepare_step, each step engine.training_step. Only where the
tensors live differs: real storage on the device instead of FakeTensorMode. The weights are left
uninitialised (to_empty): memory does not depend on their values (a mixture of experts' routing would).
The whole model is run (no extrapolation), so it must fit on the one GPU.
"""

from __future__ import annotations

from typing import Callable, TypeVar
import warnings

from zeroplan.core.errors import InputError

T = TypeVar("T")


def run_real_steps(config: dict, settings, device, after_steps: Callable[..., T],
                   before_last_step: Callable[[], None] = lambda: None) -> T:
    """settings.steps training steps of the whole model with real tensors on `device` (a CUDA device for
    --real; tests use the CPU). before_last_step() runs right before the last step starts;
    after_steps(model, optimizer) runs after it, while the fake world still exists, and its value is returned."""
    from zeroplan.trace.engine import fake_world, prepare_step, sharded_model, training_step
    from zeroplan.trace.hf_model import real_masking

    warnings.filterwarnings("ignore")  # as the fake trace: torch's and transformers' notices are not output
    with fake_world(settings.world_size), real_masking():
        model = sharded_model(config, settings, None, device.type)
        optimizer, ids, labels = prepare_step(model, settings, device)
        for step in range(settings.steps):
            if step == settings.steps - 1:
                before_last_step()
            training_step(model, optimizer, ids, labels)
        return after_steps(model, optimizer)


def real_peak_bytes(config: dict, settings) -> int:
    """torch.cuda.max_memory_allocated over the last of settings.steps real steps on the current GPU."""
    import torch

    if not torch.cuda.is_available():
        raise InputError("--real", "needs a CUDA GPU and torch sees none",
                         "run without --real to trace with fake tensors, or on a machine with a GPU")
    device = torch.device("cuda", torch.cuda.current_device())

    def reset_peak() -> None:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)

    def read_peak(_model, _optimizer) -> int:
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device))

    return run_real_steps(config, settings, device, read_peak, before_last_step=reset_peak)
