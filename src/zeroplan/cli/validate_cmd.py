"""`zeroplan validate`: prove the predictions against real sharded training runs.

Registered by the CLI as app.command("validate")(validate). Nothing here imports torch at module
import; the validate code paths do, so other commands stay fast.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from zeroplan.cli import options as opt

MODEL = "Model"
RUN = "Run"
OUTPUT = "Output"


Layers = Annotated[Optional[int], typer.Option("--layers", help="Transformer layers (default 2).", rich_help_panel=MODEL)]
Hidden = Annotated[Optional[int], typer.Option("--hidden", help="Hidden size (default 128).", rich_help_panel=MODEL)]
Heads = Annotated[Optional[int], typer.Option("--heads", help="Attention heads (default 4).", rich_help_panel=MODEL)]
KvHeads = Annotated[Optional[int], typer.Option(
    "--kv-heads", help="Key/value heads, llama style (default: --heads).", rich_help_panel=MODEL)]
Ffn = Annotated[Optional[int], typer.Option("--ffn", help="MLP width (default 500).", rich_help_panel=MODEL)]
Vocab = Annotated[Optional[int], typer.Option("--vocab", help="Vocabulary (default 2047).", rich_help_panel=MODEL)]
SeqLen = Annotated[Optional[int], typer.Option(
    "--seq-len", help="Sequence length, also the learned positions (default 127).", rich_help_panel=MODEL)]


def validate(
    stage: Annotated[str, typer.Option(
        "--stage", help="all, or a comma list of 0-3 / ddp, torch-zero1, fsdp2-zero2, fsdp2-zero3.",
        rich_help_panel=RUN)] = "all",
    nproc: Annotated[Optional[int], typer.Option(
        "--nproc", help="Local ranks to spawn (default: GPUs for nccl, 2 for gloo); leave out under torchrun.",
        rich_help_panel=RUN)] = None,
    backend: Annotated[str, typer.Option(
        "--backend", help="auto (nccl with CUDA, else gloo), gloo or nccl.", rich_help_panel=RUN)] = "auto",
    precision: Annotated[str, typer.Option(
        "--precision", help="fp32, or mixed (bf16; torch keeps fp32 states, see docs/accuracy.md).",
        rich_help_panel=RUN)] = "fp32",
    optimizer: Annotated[str, typer.Option(
        "--optimizer", help="adam, adamw, sgd-momentum or sgd.", rich_help_panel=RUN)] = "adam",
    cpu_offload: Annotated[bool, typer.Option(
        "--cpu-offload", help="FSDP2's CPUOffloadPolicy (stages 2-3, CUDA only).", rich_help_panel=RUN)] = False,
    steps: Annotated[int, typer.Option(
        "--steps", help="Training steps; states are measured after the last.", rich_help_panel=RUN)] = 2,
    micro_batch: Annotated[int, typer.Option(
        "--micro-batch", help="Sequences per rank per step.", rich_help_panel=RUN)] = 2,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds before a run that has not finished is stopped.", rich_help_panel=RUN)] = 600.0,
    model: Annotated[Optional[str], typer.Option(
        "--model", help="A model preset, scaled down to --hidden (its style, ratios and tied head).",
        rich_help_panel=MODEL)] = None,
    presets_file: opt.PresetsFile = None,
    style: Annotated[Optional[str], typer.Option(
        "--style", help="gpt2 (LayerNorm, biases, learned positions) or llama (RMSNorm, SwiGLU, GQA).",
        rich_help_panel=MODEL)] = None,
    layers: Layers = None,
    hidden: Hidden = None,
    heads: Heads = None,
    kv_heads: KvHeads = None,
    ffn: Ffn = None,
    vocab: Vocab = None,
    seq_len: SeqLen = None,
    untied: Annotated[bool, typer.Option(
        "--untied", help="A separate LM head instead of the tied embedding.", rich_help_panel=MODEL)] = False,
    output_format: Annotated[str, typer.Option(
        "--format", "-f", help="table or json.", rich_help_panel=OUTPUT)] = "table",
    perturb_prediction: Annotated[int, typer.Option(
        "--perturb-prediction", hidden=True, help="Tests only: add BYTES to the prediction.")] = 0,
) -> None:
    """Train a tiny GPT on N ranks as DDP, ZeRO-1, FSDP2 (stage 2/3 behaviour) and compare every rank's
    measured memory with zeroplan's prediction. Model states must match to the byte (exit 1 otherwise)."""
    from zeroplan.validate.config import build_config
    from zeroplan.validate.shape import TinyShape, scaled_from_preset

    defaults = TinyShape()
    chosen_hidden = defaults.hidden if hidden is None else hidden
    chosen_layers = defaults.layers if layers is None else layers
    chosen_seq = defaults.seq_len if seq_len is None else seq_len
    if model is not None:
        from zeroplan.inputs import presets

        base = scaled_from_preset(presets.model(model), chosen_hidden, chosen_layers, chosen_seq)
    else:
        base = defaults
    given = {"style": style, "layers": layers, "hidden": hidden, "heads": heads, "ffn": ffn, "vocab": vocab,
             "seq_len": seq_len}
    fields = {**base.to_dict(), **{key: value for key, value in given.items() if value is not None}}
    if style is not None:
        fields["style"] = style.strip().lower()
    if heads is not None and kv_heads is None:
        fields["kv_heads"] = heads
    if kv_heads is not None:
        fields["kv_heads"] = kv_heads
    if untied:
        fields["tied"] = False
    config = build_config(
        stage=stage, shape=TinyShape(**fields), precision=precision, optimizer=optimizer, micro_batch=micro_batch,
        steps=steps, backend=backend, nproc=nproc, cpu_offload=cpu_offload, timeout=timeout,
        output_format=output_format, perturb_bytes=perturb_prediction)
    from zeroplan.validate.runner import run_validate  # imports torch

    run_validate(config)  # a failed rank or a missed prediction raises ValidateFailed (exit 1)
