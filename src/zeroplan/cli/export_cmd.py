"""`zeroplan export deepspeed|plan`: write a ready ds_config.json or a plan file for the recommended option
(or the one --stage/--offload-* or --plan picks). What it writes passes `zeroplan check`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from zeroplan.core.errors import InputError

from zeroplan.cli import options as opt
from zeroplan.cli.check_cmd import Hidden, MaybeFlash, MaybePp, MaybeTp, PlanOption
from zeroplan.render.sink import write_text

export_app = typer.Typer(help="Write a DeepSpeed config or a zeroplan plan file for the option to use.",
                         no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

ExportGpus = Annotated[Optional[int], typer.Option(
    "--gpus", help="Total GPUs (the world size, default 1).", rich_help_panel=opt.HARDWARE)]
ExportPrecision = Annotated[Optional[str], typer.Option(
    "--precision", help="bf16 (default; fp16 on GPUs without bf16), fp16 or fp32.", rich_help_panel=opt.TRAINING)]
ExportOptimizer = Annotated[Optional[str], typer.Option(
    "--optimizer", help="adam (default), adamw, sgd-momentum, sgd, adam-8bit.", rich_help_panel=opt.TRAINING)]
NvmePath = Annotated[Optional[str], typer.Option(
    "--nvme-path", help="nvme_path for NVMe offload blocks (default the placeholder /local_nvme).",
    rich_help_panel=opt.PARALLEL)]
Force = Annotated[bool, typer.Option(
    "--force", help="When nothing fits, write the closest option anyway (the least GPU memory).", rich_help_panel=opt.OUTPUT)]


def _choice(plan, params, model, hidden, largest_layer_params, gpus, gpus_per_node, gpu, cluster, cpu_memory, nvme,
            gpu_memory, tp, pp, stage, offload_optimizer, offload_params, precision, optimizer, micro_batch,
            grad_accum, global_batch, seq_len, recompute, flash_attention, nvme_path, force, units):
    from zeroplan.deepspeed.context import from_flags
    from zeroplan.deepspeed.choose import choose
    from zeroplan.export import choose_for_plan

    flags = from_flags(
        model=model, params=params, hidden=hidden, largest_layer_params=largest_layer_params, gpus=gpus, gpu=gpu,
        cluster=cluster, gpus_per_node=gpus_per_node, cpu_memory=cpu_memory, nvme=nvme, gpu_memory=gpu_memory,
        tp=tp, pp=pp, micro_batch=micro_batch, grad_accum=grad_accum, global_batch=global_batch,
        precision=precision.strip().lower() if precision else None,
        optimizer=optimizer.strip().lower() if optimizer else None, seq_len=seq_len,
        recompute=recompute.strip().lower() if recompute else None, flash_attention=flash_attention,
        units=units.strip().lower())
    tiers = [t.strip().lower() if t else None for t in (offload_optimizer, offload_params)]
    if plan is not None:
        picked = choose_for_plan(plan, flags, stage, tiers[0], tiers[1], nvme_path)
        flags, stage, tiers, nvme_path = picked.context, picked.stage, [picked.offload_optimizer,
                                                                       picked.offload_params], picked.nvme_path
    return choose(flags, stage=stage, offload_optimizer=tiers[0], offload_params=tiers[1], force=force), nvme_path


def _confirm(output: str | None, what: str, choice) -> None:
    from zeroplan.core.units import format_bytes

    estimate = choice.estimate
    if not estimate.fits:  # --force wrote it anyway: never silently
        typer.echo(f"warning: {estimate.option.label} does not fit ({', '.join(estimate.limits)}): "
                   f"{format_bytes(estimate.gpu_bytes['total'], choice.context.units)} per GPU; written because "
                   "of --force", err=True)
    if output is not None:  # the file holds the data; say what went into it
        typer.echo(f"wrote {output}: {what} for {estimate.option.label}, "
                   f"{format_bytes(estimate.gpu_bytes['total'], choice.context.units)} per GPU predicted", err=True)
        if what == "plan":
            typer.echo(f"check it with `zeroplan check {output}`", err=True)
        else:
            typer.echo(f"check it with `zeroplan check {output}` and the same model, hardware and step flags "
                       "(--recompute, --seq-len, ...), or export a plan file, which records them", err=True)


@export_app.command("deepspeed")
def deepspeed(
    plan: PlanOption = None,
    params: opt.Params = None,
    model: opt.ModelOrConfig = None,
    hidden: Hidden = None,
    largest_layer_params: opt.LargestLayer = None,
    gpus: ExportGpus = None,
    gpus_per_node: opt.GpusPerNode = None,
    gpu: opt.Gpu = None,
    cluster: opt.Cluster = None,
    presets_file: opt.PresetsFile = None,
    cpu_memory: opt.CpuMemory = None,
    nvme: opt.Nvme = None,
    gpu_memory: opt.GpuMemory = None,
    tp: MaybeTp = None,
    pp: MaybePp = None,
    stage: opt.Stage = None,
    offload_optimizer: opt.OffloadOptimizer = None,
    offload_params: opt.OffloadParams = None,
    nvme_path: NvmePath = None,
    precision: ExportPrecision = None,
    optimizer: ExportOptimizer = None,
    micro_batch: opt.MicroBatch = None,
    grad_accum: opt.GradAccum = None,
    global_batch: opt.GlobalBatch = None,
    seq_len: opt.SeqLen = None,
    recompute: opt.Recompute = None,
    flash_attention: MaybeFlash = None,
    force: Force = False,
    output: opt.Output = None,
    units: opt.Units = "iec",
) -> None:
    """A ready ds_config.json: stage, offload blocks, bucket sizes scaled to the model, precision, batch sizes."""
    from zeroplan.deepspeed import config_writer as deepspeed_config

    if nvme_path is not None and not nvme_path.strip():
        raise InputError("--nvme-path", "is empty", "give the NVMe mount point, e.g. /local_nvme")
    choice, path = _choice(plan, params, model, hidden, largest_layer_params, gpus, gpus_per_node, gpu, cluster,
                           cpu_memory, nvme, gpu_memory, tp, pp, stage, offload_optimizer, offload_params, precision,
                           optimizer, micro_batch, grad_accum, global_batch, seq_len, recompute, flash_attention,
                           nvme_path, force, units)
    write_text(deepspeed_config.render(deepspeed_config.build(choice, path)), output, (plan, model))
    _confirm(output, "DeepSpeed config", choice)


@export_app.command("plan")
def plan_file(
    params: opt.Params = None,
    model: opt.ModelOrConfig = None,
    hidden: Hidden = None,
    largest_layer_params: opt.LargestLayer = None,
    gpus: ExportGpus = None,
    gpus_per_node: opt.GpusPerNode = None,
    gpu: opt.Gpu = None,
    cluster: opt.Cluster = None,
    presets_file: opt.PresetsFile = None,
    cpu_memory: opt.CpuMemory = None,
    nvme: opt.Nvme = None,
    gpu_memory: opt.GpuMemory = None,
    tp: MaybeTp = None,
    pp: MaybePp = None,
    stage: opt.Stage = None,
    offload_optimizer: opt.OffloadOptimizer = None,
    offload_params: opt.OffloadParams = None,
    nvme_path: NvmePath = None,
    precision: ExportPrecision = None,
    optimizer: ExportOptimizer = None,
    micro_batch: opt.MicroBatch = None,
    grad_accum: opt.GradAccum = None,
    global_batch: opt.GlobalBatch = None,
    seq_len: opt.SeqLen = None,
    recompute: opt.Recompute = None,
    flash_attention: MaybeFlash = None,
    force: Force = False,
    output: opt.Output = None,
    units: opt.Units = "iec",
) -> None:
    """A zeroplan plan file (YAML): model, cluster, parallel sizes, training settings and the ZeRO choice.

    Schema: zeroplan_plan (1), model {preset | config | params, hidden, largest_layer_params},
    cluster {gpus, preset | gpu, gpus_per_node, cpu_memory, nvme, gpu_memory}, parallel {tp, pp},
    training {precision, optimizer, micro_batch, grad_accum, global_batch, seq_len, recompute,
    flash_attention}, zero {stage, offload_optimizer, offload_params, nvme_path}, deepspeed_config (a path).
    """
    from zeroplan.deepspeed import plan_yaml

    choice, path = _choice(None, params, model, hidden, largest_layer_params, gpus, gpus_per_node, gpu, cluster,
                           cpu_memory, nvme, gpu_memory, tp, pp, stage, offload_optimizer, offload_params, precision,
                           optimizer, micro_batch, grad_accum, global_batch, seq_len, recompute, flash_attention,
                           nvme_path, force, units)
    name = Path(output).name if output else "plan.yaml"
    write_text(plan_yaml.render(plan_yaml.document(choice, path), name), output, (model,))
    _confirm(output, "plan", choice)
