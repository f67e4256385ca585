"""What `zeroplan validate` does once its options are valid: resolve the backend and world size, check
the model can be sharded, run the ranks (local spawn, or in-process under torchrun/SLURM), then report.
Imports torch (validate paths only)."""

from __future__ import annotations

import json
import os
from dataclasses import replace

from zeroplan.core.errors import InputError
from zeroplan.distributed.devices import local_world, resolve_backend
from zeroplan.distributed.launcher import Launch, launch_local
from zeroplan.distributed.rendezvous import launcher_env
from zeroplan.distributed.torch_import import import_torch
from zeroplan.validate import ValidateFailed
from zeroplan.validate.config import ValidateConfig, check_world
from zeroplan.validate.report import build_reports, render, to_json
from zeroplan.render.sink import canvas_for, write_text

WORKER = "zeroplan.validate.worker"
LABEL = "zeroplan validate"


def _every_rank(texts: list[str | None]) -> list[dict]:
    """Each rank's stage results (a JSON list per rank), rank by rank."""
    return [item for text in texts for item in json.loads(text or "[]")]


def _launch(config: ValidateConfig, world: int, pids: list[int] | None) -> list[dict]:
    """Every rank's results; a failed, hung or interrupted run raises ValidateFailed. pids, when given,
    collects every rank process started (tests check none is left)."""
    launch = Launch(WORKER, config.to_json(), world, LABEL, progress_timeout_s=None, deadline_s=config.timeout_s)
    outcome = launch_local(launch, _every_rank)
    if pids is not None:
        pids.extend(outcome.pids)
    if outcome.exit_code != 0:
        raise ValidateFailed(outcome.message, outcome.exit_code)
    return outcome.value()


def _meta(config: ValidateConfig, world: int, backend: str, torch) -> dict:
    shape = config.shape
    device = torch.cuda.get_device_name(0) if backend == "nccl" else "CPU"
    params = sum(p.numel for p in shape.param_specs() if p.tied_to is None)
    model = (f"{shape.style}-style, {shape.layers} layers, h={shape.hidden}, heads={shape.heads}, ffn={shape.ffn}, "
             f"V={shape.vocab}, s={shape.seq_len}, b={config.micro_batch}, "
             f"{'tied' if shape.tied else 'untied'} head, {params:,} params")
    return {"world_size": world, "backend": backend, "device": device, "torch_version": torch.__version__,
            "precision": config.precision, "optimizer": config.optimizer, "steps": config.steps,
            "cpu_offload": config.cpu_offload, "model": model, "shape": shape.to_dict(),
            "micro_batch": config.micro_batch}


def _emit(reports, config: ValidateConfig, meta: dict) -> None:
    if config.output_format == "json":
        write_text(to_json(meta, reports), None)
        return

    console = canvas_for(None)
    render(meta, reports, console)
    write_text(console.text(), None)


def joined_local_ranks() -> int:
    """Ranks a launcher starts on this machine (torchrun's LOCAL_WORLD_SIZE, SLURM's tasks per node)."""
    for name in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def run_validate(config: ValidateConfig, *, pids: list[int] | None = None) -> None:
    """Bad input raises InputError (exit 2); a failed rank or a missed model-state prediction raises
    ValidateFailed (exit 1) after the report is printed."""
    joined = launcher_env()
    torch = import_torch()
    backend = resolve_backend(config.backend, torch.cuda.is_available())
    if joined is not None:
        if config.nproc is not None and config.nproc != joined.world_size:
            raise InputError("--nproc", f"is {config.nproc} but the launcher started {joined.world_size} ranks",
                             "drop --nproc under torchrun/SLURM")
        world = joined.world_size
    else:
        world = local_world(config.nproc, backend, torch.cuda.device_count() if backend == "nccl" else 0, "sharding")
    check_world(config, world, backend, local_ranks=world if joined is None else joined_local_ranks())
    if joined is not None:
        from zeroplan.validate.worker import run_rank

        results = run_rank(config, joined, backend, config.timeout_s, gather=True)
        if joined.rank != 0:
            return
    else:
        results = _launch(replace(config, backend=backend), world, pids)
    meta = _meta(config, world, backend, torch)
    reports = build_reports(config, world, results)
    _emit(reports, config, meta)
    missed = [r for r in reports if not r.exact]
    if missed:
        first = missed[0].mismatches[0]
        raise ValidateFailed(f"model states differ from the prediction at stage {missed[0].stage} "
                             f"({missed[0].framework}): {first['key']} predicted {first['predicted']:,} B, "
                             f"measured {first['measured']:,} B")
