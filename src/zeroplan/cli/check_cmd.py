"""`zeroplan check`: lint DeepSpeed configs, plan files and accelerate configs; exit 1 on errors (and, with
--strict, warnings); exit 2 when a file cannot be read."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated

import typer

from zeroplan.cli.options import command, uses
from zeroplan.core.errors import RunFailed
from zeroplan.inputs.sections import HardwareInputs, ModelInputs, OutputInputs, ParallelInputs, StepInputs
from zeroplan.render.sink import canvas_for, check_format, write_text

CHECK_FORMATS = ("table", "json", "github")

# What check and export take as context: given flags win over a plan file, which wins over an accelerate config,
# so every default is left unset here (None) and applied once the sources are merged.
CONTEXT_MODEL = uses(ModelInputs, "params", "model", "hidden", "largest_layer_params", unset=True)
CONTEXT_HARDWARE = uses(HardwareInputs, "gpus", "gpus_per_node", "gpu", "cluster", "presets_file", "cpu_memory",
                        "nvme", "gpu_memory", unset=True)
CONTEXT_STEP = ("micro_batch", "grad_accum", "global_batch", "seq_len", "recompute", "flash_attention",
                "capacity_factor", "finetune", "lora_rank", "lora_targets", "quant", "double_quant", "freeze",
                "finetune_recipe")

Files = Annotated[list[Path], typer.Argument(
    help="DeepSpeed JSON configs, zeroplan plan files (YAML) or accelerate configs (YAML).", show_default=False,
    metavar="FILE...")]


class CheckFailed(RunFailed):
    """Findings at a failing level: the CLI prints this line on stderr and exits 1."""


@command(uses(OutputInputs, "plan"), CONTEXT_MODEL, CONTEXT_HARDWARE, uses(ParallelInputs, "tp", "pp", "ep", "etp", unset=True),
         uses(StepInputs, *CONTEXT_STEP[:3], "precision", *CONTEXT_STEP[3:], unset=True),
         uses(OutputInputs, "output_format", "output", "strict", "units", "assumptions"), formats=CHECK_FORMATS,
         extra=(inspect.Parameter("files", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Files),))
def check(files: list[Path], output: OutputInputs, model: ModelInputs, hardware: HardwareInputs,
          parallel: ParallelInputs, step: StepInputs) -> None:
    """Check DeepSpeed configs for mistakes DeepSpeed rejects, silently ignores, or that will not fit."""
    from zeroplan.deepspeed.context import from_sections
    from zeroplan.deepspeed.findings import summary_text
    from zeroplan.check.runner import check_files
    from zeroplan.core.errors import InputError

    output_format = check_format(output.output_format, CHECK_FORMATS)
    if step.precision is not None and step.precision not in ("bf16", "fp16", "fp32"):
        raise InputError("precision", f"unknown precision '{step.precision}'", "use bf16, fp16 or fp32")
    context = from_sections(model, hardware, parallel, step, units=output.units)
    strict = output.strict
    reports, failed = check_files(files, context, output.plan, strict)
    inputs = [*files, output.plan, model.model, *(report.checked_file for report in reports)]  # -o never replaces one
    if output_format == "json":
        from zeroplan.check.render import to_json

        write_text(to_json(reports, failed, strict), output.output, inputs)
    elif output_format == "github":
        from zeroplan.check.annotations import render

        write_text(render(reports), output.output, inputs)
    else:
        from zeroplan.check.render import render_table

        console = canvas_for(output.output)
        render_table(reports, console, show_assumptions=output.assumptions)
        write_text(console.text(), output.output, inputs)
    if failed:
        names = ", ".join(report.file for report in reports if report.failed(strict))
        raise CheckFailed(f"check failed ({summary_text(reports)}{', strict' if strict else ''}): {names}")
