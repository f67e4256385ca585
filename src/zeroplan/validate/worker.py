"""One rank of a validate run: join the group, train each stage's model a few steps, measure what the
rank holds. `python -m zeroplan.validate.worker` is how the local launcher (zeroplan.distributed)
starts a rank (inputs in the environment, results in a JSON file); under torchrun the runner calls
run_rank() in-process."""

from __future__ import annotations

import contextlib
import gc
import json
import sys

from zeroplan.distributed.child import Heartbeat, rank_main
from zeroplan.distributed.exchange import all_gather_json
from zeroplan.distributed.rendezvous import RankEnv, join_group
from zeroplan.distributed.torch_import import import_torch
from zeroplan.validate.config import ValidateConfig

torch = import_torch()
import torch.distributed as dist  # noqa: E402

DEBUG_ENV = "ZEROPLAN_VALIDATE_DEBUG"
LAUNCHER_MARGIN_S = 30.0  # ranks wait longer than the launcher, so the launcher names the culprit


def run_stage(config: ValidateConfig, stage: int, rank: int, device, tick=lambda: None) -> dict:
    from zeroplan.validate.measure import (
        CudaMemory, SavedTensorMeter, cuda_baseline, model_states, unsharded_param_bytes,
    )
    from zeroplan.validate.model import TinyGpt
    from zeroplan.validate.wrappers import wrap

    cuda = CudaMemory(device, cuda_baseline(device)) if device.type == "cuda" else None
    torch.manual_seed(config.seed)  # the same initial weights on every rank
    wrapped = wrap(TinyGpt(config.shape).to(device), stage, config, device)
    wrapped.module.train()
    data = torch.Generator().manual_seed(config.seed + 1 + rank)  # each rank its own batch
    size = (config.micro_batch, config.shape.seq_len)
    meter = SavedTensorMeter(wrapped.inner)
    loss_value, copies = 0.0, 0
    for step in range(config.steps):
        tick()
        last = step == config.steps - 1
        wrapped.optimizer.zero_grad(set_to_none=True)
        ids = torch.randint(0, config.shape.vocab, size, generator=data).to(device)
        targets = torch.randint(0, config.shape.vocab, size, generator=data).to(device)
        if last and cuda:
            cuda.start()
        with wrapped.forward_context(device), (meter.hooks() if last else contextlib.nullcontext()):
            loss = wrapped.module(ids, targets)
        if last and cuda:
            cuda.mark("after_forward")
        if last:  # stages 0-1: autocast's weight copies; FSDP2: parameters left unsharded after forward
            copies = meter.param_copy_bytes if stage < 2 else unsharded_param_bytes(wrapped.inner, device.type)
        loss.backward()
        if last and cuda:
            cuda.end_phase("forward_backward")
        wrapped.optimizer.step()
        loss_value = loss.item()
        del loss, ids, targets  # so that "at rest" is the model states alone
        if last and cuda:
            cuda.end_phase("optimizer_step")
            cuda.mark("at_rest")
    result = {"stage": stage, "rank": rank, "held": model_states(wrapped.inner, wrapped.optimizer, device.type),
              "activations": meter.activation_bytes, "param_copies": copies,
              "cuda": cuda.summary() if cuda else None, "loss": loss_value}
    del wrapped, meter
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def run_rank(config: ValidateConfig, env: RankEnv, backend: str, pg_timeout_s: float, gather: bool,
             heartbeat: Heartbeat | None = None) -> list:
    """This rank's results, one per stage; with gather, rank 0 gets every rank's (others get [])."""
    tick = heartbeat.tick if heartbeat is not None else (lambda: None)
    if backend == "nccl":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    join_group(backend, env, pg_timeout_s, device, "zeroplan validate")
    tick()  # joined the group
    try:
        results = []
        for stage in config.stages:
            results.append(run_stage(config, stage, env.rank, device, tick))
            dist.barrier()
        if gather:  # as JSON in tensors: torch's gather_object needs numpy
            everyone = all_gather_json(results, device)
            results = [item for part in everyone for item in part] if env.rank == 0 else []
    finally:
        dist.destroy_process_group()
    return results


def _rank(env: RankEnv, heartbeat: Heartbeat, config_json: str) -> str:
    config = ValidateConfig.from_json(config_json)  # backend resolved by the launcher's side
    results = run_rank(config, env, config.backend, config.timeout_s + LAUNCHER_MARGIN_S, gather=False,
                       heartbeat=heartbeat)
    return json.dumps(results)


def main() -> int:
    """Entry point of a rank spawned by zeroplan.distributed.launcher."""
    return rank_main("zeroplan validate", _rank, debug_env=DEBUG_ENV)


if __name__ == "__main__":
    sys.exit(main())
