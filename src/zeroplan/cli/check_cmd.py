"""`zeroplan check`: lint DeepSpeed configs, plan files and accelerate configs; exit 1 on errors (and, with
--strict, warnings); exit 2 when a file cannot be read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from zeroplan.cli import options as opt
from zeroplan.core.errors import RunFailed
from zeroplan.render.sink import check_format, console_for, write_text

CHECK_FORMATS = ("table", "json", "github")
CONTEXT = "Context (for memory, batch and parallel rules)"

Files = Annotated[list[Path], typer.Argument(
    help="DeepSpeed JSON configs, zeroplan plan files (YAML) or accelerate configs (YAML).", show_default=False,
    metavar="FILE...")]
PlanOption = Annotated[Optional[str], typer.Option(
    "--plan", help="A zeroplan plan file giving the model, cluster and training settings.", rich_help_panel=CONTEXT)]
Hidden = Annotated[Optional[int], typer.Option(
    "--hidden", help='Hidden size, to resolve "auto" bucket sizes (default: from --model).', rich_help_panel=opt.MODEL)]
MaybeGpus = Annotated[Optional[int], typer.Option(
    "--gpus", help="Total GPUs (the world size); default: from the plan or accelerate config.",
    rich_help_panel=opt.HARDWARE)]
MaybeTp = Annotated[Optional[int], typer.Option(
    "--tp", help="Tensor-parallel degree (default: tensor_parallel.autotp_size, else 1).", rich_help_panel=opt.PARALLEL)]
MaybePp = Annotated[Optional[int], typer.Option("--pp", help="Pipeline-parallel degree.", rich_help_panel=opt.PARALLEL)]
AutoPrecision = Annotated[Optional[str], typer.Option(
    "--precision", help='bf16, fp16 or fp32: resolves fp16/bf16 "enabled": "auto".', rich_help_panel=opt.TRAINING)]
MaybeFlash = Annotated[Optional[bool], typer.Option(
    "--flash-attention/--no-flash-attention", help="Flash attention stores no s×s scores (default on).",
    rich_help_panel=opt.STEP)]
CheckFormat = Annotated[str, typer.Option(
    "--format", "-f", help="table, json, or github (workflow annotations).", rich_help_panel=opt.OUTPUT)]
Strict = Annotated[bool, typer.Option("--strict", help="Warnings fail the check too.", rich_help_panel=opt.OUTPUT)]
ShowAssumptions = Annotated[bool, typer.Option(
    "--assumptions", help="List what the memory rules assumed.", rich_help_panel=opt.OUTPUT)]


class CheckFailed(RunFailed):
    """Findings at a failing level: the CLI prints this line on stderr and exits 1."""


def check(
    files: Files,
    plan: PlanOption = None,
    params: opt.Params = None,
    model: opt.ModelOrConfig = None,
    hidden: Hidden = None,
    largest_layer_params: opt.LargestLayer = None,
    gpus: MaybeGpus = None,
    gpus_per_node: opt.GpusPerNode = None,
    gpu: opt.Gpu = None,
    cluster: opt.Cluster = None,
    presets_file: opt.PresetsFile = None,
    cpu_memory: opt.CpuMemory = None,
    nvme: opt.Nvme = None,
    gpu_memory: opt.GpuMemory = None,
    tp: MaybeTp = None,
    pp: MaybePp = None,
    micro_batch: opt.MicroBatch = None,
    grad_accum: opt.GradAccum = None,
    global_batch: opt.GlobalBatch = None,
    precision: AutoPrecision = None,
    seq_len: opt.SeqLen = None,
    recompute: opt.Recompute = None,
    flash_attention: MaybeFlash = None,
    output_format: CheckFormat = "table",
    output: opt.Output = None,
    strict: Strict = False,
    units: opt.Units = "iec",
    assumptions: ShowAssumptions = False,
) -> None:
    """Check DeepSpeed configs for mistakes DeepSpeed rejects, silently ignores, or that will not fit."""
    from zeroplan.deepspeed.context import from_flags, from_plan
    from zeroplan.deepspeed.findings import summary_text
    from zeroplan.check.runner import check_file
    from zeroplan.core.errors import InputError

    output_format = check_format(output_format, CHECK_FORMATS)
    if precision is not None and precision.strip().lower() not in ("bf16", "fp16", "fp32"):
        raise InputError("--precision", f"unknown precision '{precision}'", "use bf16, fp16 or fp32")
    context = from_flags(
        model=model, params=params, hidden=hidden, largest_layer_params=largest_layer_params, gpus=gpus, gpu=gpu,
        cluster=cluster, gpus_per_node=gpus_per_node, cpu_memory=cpu_memory, nvme=nvme, gpu_memory=gpu_memory,
        tp=tp, pp=pp, micro_batch=micro_batch, grad_accum=grad_accum, global_batch=global_batch,
        precision=precision.strip().lower() if precision else None, seq_len=seq_len,
        recompute=recompute.strip().lower() if recompute else None, flash_attention=flash_attention,
        units=units.strip().lower())
    if plan is not None:
        from zeroplan.inputs import config_files as loaders
        from zeroplan.deepspeed.plan_file import validate_plan

        context = context.under(from_plan(validate_plan(loaders.load(plan))))
    reports = [check_file(path, context) for path in files]
    inputs = [*files, plan, model, *(report.checked_file for report in reports)]  # -o never replaces one
    failed = any(report.failed(strict) for report in reports)
    if output_format == "json":
        from zeroplan.check.render import to_json

        write_text(to_json(reports, failed, strict), output, inputs)
    elif output_format == "github":
        from zeroplan.check.annotations import render

        write_text(render(reports), output, inputs)
    else:
        from zeroplan.check.render import render_table

        console = console_for(output)
        render_table(reports, console, show_assumptions=assumptions)
        if output is not None:
            write_text(console.export_text(), output, inputs)
    if failed:
        names = ", ".join(report.file for report in reports if report.failed(strict))
        raise CheckFailed(f"check failed ({summary_text(reports)}{', strict' if strict else ''}): {names}")
