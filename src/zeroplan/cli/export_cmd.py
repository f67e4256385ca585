"""`zeroplan export deepspeed|plan`: write a ready ds_config.json or a plan file for the recommended option
(or the one --stage/--offload-* or --plan picks). What it writes passes `zeroplan check`."""

from __future__ import annotations

from pathlib import Path

import typer

from zeroplan.cli.check_cmd import CONTEXT_HARDWARE, CONTEXT_MODEL, CONTEXT_STEP
from zeroplan.cli.options import command, uses
from zeroplan.core.errors import InputError
from zeroplan.inputs.sections import HardwareInputs, ModelInputs, OutputInputs, ParallelInputs, StepInputs
from zeroplan.render.sink import write_text

export_app = typer.Typer(help="Write a DeepSpeed config or a zeroplan plan file for the option to use.",
                         no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

# Everything but --plan, in both commands.
EXPORT_INPUTS = (CONTEXT_MODEL, CONTEXT_HARDWARE,
                 uses(ParallelInputs, "tp", "pp", "ep", "etp", "stage", "offload_optimizer", "offload_params", "nvme_path",
                      unset=True),
                 uses(StepInputs, "precision", "optimizer", *CONTEXT_STEP, unset=True),
                 uses(OutputInputs, "force", "output", "units"))


def _choice(output: OutputInputs, model: ModelInputs, hardware: HardwareInputs, parallel: ParallelInputs,
            step: StepInputs):
    from zeroplan.deepspeed.context import from_sections
    from zeroplan.deepspeed.choose import choose
    from zeroplan.export import choose_for_plan

    flags = from_sections(model, hardware, parallel, step, units=output.units)
    stage, tiers, nvme_path = parallel.stage, [parallel.offload_optimizer, parallel.offload_params], parallel.nvme_path
    if output.plan is not None:
        picked = choose_for_plan(output.plan, flags, stage, tiers[0], tiers[1], nvme_path)
        flags, stage, tiers, nvme_path = picked.context, picked.stage, [picked.offload_optimizer,
                                                                       picked.offload_params], picked.nvme_path
    return (choose(flags, stage=stage, offload_optimizer=tiers[0], offload_params=tiers[1], force=output.force),
            nvme_path)


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
@command(uses(OutputInputs, "plan"), *EXPORT_INPUTS)
def deepspeed(**sections) -> None:
    """A ready ds_config.json: stage, offload blocks, bucket sizes scaled to the model, precision, batch sizes."""
    from zeroplan.deepspeed import config_writer as deepspeed_config

    nvme_path = sections["parallel"].nvme_path
    if nvme_path is not None and not nvme_path.strip():
        raise InputError("--nvme-path", "is empty", "give the NVMe mount point, e.g. /local_nvme")
    choice, path = _choice(**sections)
    output = sections["output"].output
    read = (sections["output"].plan, sections["model"].model)  # -o never replaces an input
    write_text(deepspeed_config.render(deepspeed_config.build(choice, path)), output, read)
    _confirm(output, "DeepSpeed config", choice)


@export_app.command("plan")
@command(*EXPORT_INPUTS)
def plan_file(**sections) -> None:
    """A zeroplan plan file (YAML): model, cluster, parallel sizes, training settings and the ZeRO choice.

    Schema: zeroplan_plan (1), model {preset | config | params, hidden, largest_layer_params},
    cluster {gpus, preset | gpu, gpus_per_node, cpu_memory, nvme, gpu_memory}, parallel {tp, pp},
    training {precision, optimizer, micro_batch, grad_accum, global_batch, seq_len, recompute,
    flash_attention}, finetune {mode, lora_rank, lora_targets, quant, double_quant, freeze, recipe} (fine-tuning only),
    zero {stage, offload_optimizer, offload_params, nvme_path}, deepspeed_config (a path).
    """
    from zeroplan.deepspeed import plan_yaml

    choice, path = _choice(**sections)
    output = sections["output"].output
    name = Path(output).name if output else "plan.yaml"
    write_text(plan_yaml.render(plan_yaml.document(choice, path), name), output, (sections["model"].model,))
    _confirm(output, "plan", choice)
