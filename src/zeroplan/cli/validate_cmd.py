"""`zeroplan validate`: prove the predictions against real sharded training runs.

Registered by the CLI as app.command("validate")(validate). Nothing here imports torch at module
import; the validate code paths do, so other commands stay fast.
"""

from __future__ import annotations

from zeroplan.cli.options import command, uses
from zeroplan.inputs.command_sections import RunInputs, TinyModelInputs, ValidateRunInputs
from zeroplan.inputs.sections import HardwareInputs, OutputInputs


@command(uses(ValidateRunInputs, "stage"), uses(RunInputs, "nproc", "backend"),
         uses(ValidateRunInputs, "precision", "optimizer", "cpu_offload", "steps", "micro_batch", "timeout"),
         uses(TinyModelInputs), uses(HardwareInputs, "presets_file"), uses(OutputInputs, "output_format"), uses(ValidateRunInputs, "perturb_prediction"),
         formats=("table", "json"))
def validate(training: ValidateRunInputs, run: RunInputs, tiny: TinyModelInputs, hardware: HardwareInputs,
             output: OutputInputs) -> None:
    """Train a tiny GPT on N ranks as DDP, ZeRO-1, FSDP2 (stage 2/3 behaviour) and compare every rank's
    measured memory with zeroplan's prediction. Model states must match to the byte (exit 1 otherwise)."""
    from zeroplan.validate.config import build_config
    from zeroplan.validate.shape import TinyShape, scaled_from_preset

    defaults = TinyShape()
    chosen_hidden = defaults.hidden if tiny.hidden is None else tiny.hidden
    chosen_layers = defaults.layers if tiny.layers is None else tiny.layers
    chosen_seq = defaults.seq_len if tiny.seq_len is None else tiny.seq_len
    if tiny.model is not None:
        from zeroplan.inputs import presets

        base = scaled_from_preset(presets.model(tiny.model), chosen_hidden, chosen_layers, chosen_seq)
    else:
        base = defaults
    given = {"style": tiny.style, "layers": tiny.layers, "hidden": tiny.hidden, "heads": tiny.heads,
             "ffn": tiny.ffn, "vocab": tiny.vocab, "seq_len": tiny.seq_len}
    fields = {**base.to_dict(), **{key: value for key, value in given.items() if value is not None}}
    if tiny.heads is not None and tiny.kv_heads is None:
        fields["kv_heads"] = tiny.heads
    if tiny.kv_heads is not None:
        fields["kv_heads"] = tiny.kv_heads
    if tiny.untied:
        fields["tied"] = False
    config = build_config(
        stage=training.stage, shape=TinyShape(**fields), precision=training.precision, optimizer=training.optimizer,
        micro_batch=training.micro_batch, steps=training.steps, backend=run.backend, nproc=run.nproc,
        cpu_offload=training.cpu_offload, timeout=training.timeout, output_format=output.output_format,
        perturb_bytes=training.perturb_prediction)
    from zeroplan.validate.runner import run_validate  # imports torch

    run_validate(config)  # a failed rank or a missed prediction raises ValidateFailed (exit 1)
