"""`zeroplan plan --write-deepspeed FILE`: the top plan as a ds_config.json, through zeroplan.export."""

from __future__ import annotations

from collections.abc import Iterable

from zeroplan.core.units import format_bytes
from zeroplan.render.sink import write_text
from zeroplan.search.run import PlanOutcome

_PRECISIONS = {"mixed": "bf16", "bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}


def write_deepspeed_config(outcome: PlanOutcome, path: str, input_paths: Iterable[str | None] = ()) -> list[str]:
    """Writes the top plan's ds_config.json; returns the lines that say what was written, what a DeepSpeed
    config cannot hold (tp, pp: set by the launcher) and the `zeroplan check` command that judges it."""
    from zeroplan.deepspeed.context import check_command, from_sections
    from zeroplan.deepspeed.choose import ExportError, choose

    if not outcome.top:  # exit status 1, as `zeroplan export` when nothing fits
        raise ExportError("nothing to write for --write-deepspeed: no plan fits")
    from zeroplan.deepspeed.config_writer import build, render

    inputs, best = outcome.inputs, outcome.top[0]
    space = outcome.resolved.request.space
    context = from_sections(
        inputs.model, inputs.hardware, gpus=best.world, tp=best.tp, pp=best.pp, micro_batch=best.micro_batch,
        grad_accum=best.grad_accum, global_batch=space.global_batch,
        precision=_PRECISIONS.get(inputs.step.precision, "bf16"), optimizer=inputs.step.optimizer,
        seq_len=space.seq_len, recompute=best.recompute, flash_attention=space.flash_attention, units=inputs.units)
    option = best.option
    choice = choose(context, stage=option.stage, offload_optimizer=option.offload_optimizer,
                    offload_params=option.offload_params, force=True)
    write_text(render(build(choice)), path, input_paths, option="--write-deepspeed")
    layout = f"dp {best.dp} × tp {best.tp} × pp {best.pp}" + (f" × cp {best.cp}" if best.cp > 1 else "")
    outside = [f"{name} {size}" for name, size in (("tp", best.tp), ("pp", best.pp), ("cp", best.cp)) if size > 1] + \
        (["sequence parallelism"] if best.sequence_parallel else []) + \
        ([f"{best.virtual_stages} virtual stages"] if best.virtual_stages > 1 else []) + \
        ([f"recompute {best.recompute}"] if best.recompute != "none" else [])
    return [f"wrote {path}: DeepSpeed config for plan #1 ({layout}, {option.label}, micro-batch {best.micro_batch} × "
            f"{best.grad_accum}), {format_bytes(best.gpu_total, inputs.units)} per GPU predicted",
            *([f"not in a DeepSpeed config, set them in your launcher and model code: {', '.join(outside)}"]
              if outside else []),
            f"check it with `{check_command(path, context, inputs.hardware.presets_file)}`"]
