"""`zeroplan plan --write-deepspeed FILE`: the top plan as a ds_config.json, through zeroplan.export."""

from __future__ import annotations

from collections.abc import Iterable

from zeroplan.render.sink import write_text
from zeroplan.search.run import PlanOutcome

_PRECISIONS = {"mixed": "bf16", "bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}


def write_deepspeed_config(outcome: PlanOutcome, path: str, input_paths: Iterable[str | None] = ()) -> None:
    from zeroplan.deepspeed.context import from_sections
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
