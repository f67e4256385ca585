"""One rank of a validate run: join the group, train each stage's model a few steps, measure what the
rank holds. `python -m zeroplan.validate.worker` is how the local launcher starts a rank (inputs in
the environment, results in a JSON file); under torchrun the runner calls run_rank() in-process."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import traceback
from datetime import timedelta

from zeroplan.bench import import_torch
from zeroplan.distributed.child import watch_parent
from zeroplan.distributed.rendezvous import EXIT_ADDRESS_IN_USE, RankEnv, export_for_env_init, is_address_in_use, launcher_env
from zeroplan.core.errors import InputError
from zeroplan.validate.config import ValidateConfig
from zeroplan.distributed.validate_launcher import BACKEND_ENV, CONFIG_ENV, PARENT_PID_ENV, RESULT_DIR_ENV

torch = import_torch()
import torch.distributed as dist  # noqa: E402

# Test-only: "RANK:STAGE" makes that rank exit with FAULT_EXIT_CODE as that stage starts.
FAULT_ENV = "ZEROPLAN_VALIDATE_FAULT"
FAULT_EXIT_CODE = 17
DEBUG_ENV = "ZEROPLAN_VALIDATE_DEBUG"
LAUNCHER_MARGIN_S = 30.0  # ranks wait longer than the launcher, so the launcher names the culprit


def _maybe_fault(rank: int, stage: int) -> None:
    text = os.environ.get(FAULT_ENV)
    if text and text == f"{rank}:{stage}":
        sys.stderr.write(f"zeroplan validate: test fault: rank {rank} exits at stage {stage}\n")
        sys.stderr.flush()
        os._exit(FAULT_EXIT_CODE)


def run_stage(config: ValidateConfig, stage: int, rank: int, device) -> dict:
    from zeroplan.validate.measure import (
        CudaMemory, SavedTensorMeter, cuda_baseline, model_states, unsharded_param_bytes,
    )
    from zeroplan.validate.model import TinyGpt
    from zeroplan.validate.wrappers import wrap

    _maybe_fault(rank, stage)
    cuda = CudaMemory(device, cuda_baseline(device)) if device.type == "cuda" else None
    torch.manual_seed(config.seed)  # the same initial weights on every rank
    wrapped = wrap(TinyGpt(config.shape).to(device), stage, config, device)
    wrapped.module.train()
    data = torch.Generator().manual_seed(config.seed + 1 + rank)  # each rank its own batch
    size = (config.micro_batch, config.shape.seq_len)
    meter = SavedTensorMeter(wrapped.inner)
    loss_value, copies = 0.0, 0
    for step in range(config.steps):
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


def run_rank(config: ValidateConfig, env: RankEnv, backend: str, pg_timeout_s: float, gather: bool) -> list:
    """This rank's results, one per stage; with gather, rank 0 gets every rank's (others get [])."""
    if backend == "nccl":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    export_for_env_init(env)
    dist.init_process_group(backend, init_method="env://", rank=env.rank, world_size=env.world_size,
                            timeout=timedelta(seconds=pg_timeout_s),
                            device_id=device if device.type == "cuda" else None)
    try:
        results = []
        for stage in config.stages:
            results.append(run_stage(config, stage, env.rank, device))
            dist.barrier()
        if gather:
            everyone = [None] * env.world_size if env.rank == 0 else None
            dist.gather_object(results, everyone, dst=0)
            results = [item for part in everyone for item in part] if env.rank == 0 else []
    finally:
        dist.destroy_process_group()
    return results


def main() -> int:
    """Entry point of a rank spawned by zeroplan.distributed.validate_launcher."""
    env = launcher_env()
    if env is None or CONFIG_ENV not in os.environ:
        sys.stderr.write("zeroplan validate worker: start it through `zeroplan validate`, not by hand\n")
        return 2
    if PARENT_PID_ENV in os.environ:
        watch_parent(int(os.environ[PARENT_PID_ENV]))
    config = ValidateConfig.from_json(os.environ[CONFIG_ENV])
    try:
        results = run_rank(config, env, os.environ[BACKEND_ENV], config.timeout_s + LAUNCHER_MARGIN_S, gather=False)
    except InputError as exc:
        sys.stderr.write(f"zeroplan validate: rank {env.rank}: {exc}\n")
        return 2
    except Exception as exc:  # noqa: BLE001 - a rank reports one line; the launcher names it
        if is_address_in_use(exc):
            sys.stderr.write(f"zeroplan validate: rank {env.rank}: port {env.master_port} is taken\n")
            return EXIT_ADDRESS_IN_USE
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        first_line = (str(exc).strip().splitlines() or [""])[0]
        sys.stderr.write(f"zeroplan validate: rank {env.rank}: {type(exc).__name__}: {first_line}\n")
        return 1
    path = os.path.join(os.environ[RESULT_DIR_ENV], f"rank{env.rank}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as out:
        json.dump(results, out)
    os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
