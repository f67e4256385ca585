"""What `zeroplan validate` does once its options are valid: resolve the backend and world size, check
the model can be sharded, run the ranks (local spawn, or in-process under torchrun/SLURM), then report.
Imports torch (validate paths only)."""

from __future__ import annotations

import sys

from zeroplan.bench import import_torch
from zeroplan.bench.config import resolve_backend
from zeroplan.distributed.rendezvous import launcher_env
from zeroplan.core.errors import InputError
from zeroplan.validate import ValidateFailed
from zeroplan.validate.config import ValidateConfig, check_world
from zeroplan.validate.report import build_reports, render, to_json

DEFAULT_CPU_RANKS = 2


def _local_world(config: ValidateConfig, backend: str, torch) -> int:
    gpus = torch.cuda.device_count() if backend == "nccl" else 0
    world = config.nproc if config.nproc is not None else (gpus if backend == "nccl" else DEFAULT_CPU_RANKS)
    if world < 2:
        raise InputError("--nproc", f"sharding needs at least 2 ranks, got {world}",
                         "use --nproc 2 or more (with --backend gloo on a single-GPU machine), or torchrun")
    if backend == "nccl" and world > gpus:
        raise InputError("--nproc", f"{world} ranks but torch sees {gpus} GPU(s); nccl needs one GPU per rank",
                         f"use --nproc {gpus} or fewer, or --backend gloo")
    return world


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
        sys.stdout.write(to_json(meta, reports))
        return
    from zeroplan.render.sink import console_for

    render(meta, reports, console_for(None))


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
        world = _local_world(config, backend, torch)
    check_world(config, world, backend)
    if joined is not None:
        from zeroplan.validate.worker import run_rank

        results = run_rank(config, joined, backend, config.timeout_s, gather=True)
        if joined.rank != 0:
            return
    else:
        from zeroplan.distributed.validate_launcher import launch_local

        results = launch_local(config, backend, world, pids=pids)
    meta = _meta(config, world, backend, torch)
    reports = build_reports(config, world, results)
    _emit(reports, config, meta)
    missed = [r for r in reports if not r.exact]
    if missed:
        first = missed[0].mismatches[0]
        raise ValidateFailed(f"model states differ from the prediction at stage {missed[0].stage} "
                             f"({missed[0].framework}): {first['key']} predicted {first['predicted']:,} B, "
                             f"measured {first['measured']:,} B")
