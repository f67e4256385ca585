"""The model and the training step from flags: preset or config.json, activation shape, batch sizes,
DeepSpeed bucket settings. Every default applied is recorded as an assumption."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from zeroplan.inputs import presets
from zeroplan.core.memory.activations import IMPLEMENTATIONS, RECOMPUTE_MODES, ActivationConfig, DEFAULT_SEQ_LEN_CAP, default_seq_len
from zeroplan.core.memory.deepspeed_buffers import BufferConfig
from zeroplan.core.errors import InputError, ref
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.parallel.rules import context_parallel_problem

if TYPE_CHECKING:
    from zeroplan.inputs.sections import BufferInputs, ModelInputs, StepInputs

DEFAULT_ACTIVATIONS = "transformers"  # what a user training with Hugging Face transformers runs


def _looks_like_path(text: str) -> bool:
    return text.endswith(".json") or "/" in text or Path(text).is_file()


def load_model(name: str) -> ModelSpec:
    """A built-in or user preset, a Hugging Face Hub id (ORG/NAME[@REVISION]), or a local config.json."""
    from zeroplan.inputs.hf_config import load_hf_config
    from zeroplan.inputs.hub import fetch_config, looks_like_hub_id

    if looks_like_hub_id(name):
        return load_hf_config(fetch_config(name), name=name.split("@", 1)[0])
    if _looks_like_path(name):
        return load_hf_config(name)
    return presets.model(name)


def resolve_model(inputs: ModelInputs) -> ModelSpec:
    if inputs.params is not None and inputs.model is not None:
        raise InputError("params/model", "give one of them, not both",
                         f"{ref('model')} already fixes the parameter count")
    if inputs.model is not None:
        return load_model(inputs.model)
    if inputs.params is None:
        raise InputError("params", "no model given",
                         f"pass {ref('params', '13e9')}, {ref('model', 'llama-2-13b')} or "
                         f"{ref('model', 'path/to/config.json')}")
    return ModelSpec(params=inputs.params)


def resolve_activations(inputs: StepInputs, model: ModelSpec, parallel: ParallelDims,
                        assumptions: list[str], cp: int = 1) -> ActivationConfig | None:
    """The step's activation shape when the model's shape is known; None keeps the reserve."""
    step_flags = {"seq_len": inputs.seq_len, "recompute": inputs.recompute,
                  "sequence_parallel": inputs.sequence_parallel or None}
    if model.shape is None:
        given = [flag for flag, value in step_flags.items() if value is not None]
        if given:
            raise InputError(given[0], f"activations need the model's shape, and {ref('params')} gives only a count",
                             f"use {ref('model')} with a preset or a config.json")
        return None
    if inputs.recompute is not None and inputs.recompute not in RECOMPUTE_MODES:
        raise InputError("recompute", f"unknown mode '{inputs.recompute}'", f"use {recompute_choices()}")
    seq_len = inputs.seq_len
    if seq_len is None:
        context = model.shape.max_seq_len or DEFAULT_SEQ_LEN_CAP
        seq_len = default_seq_len(model)
        assumptions.append(f"sequence length {seq_len} (the default: the model's context {context}"
                           f"{f' capped at {DEFAULT_SEQ_LEN_CAP}' if context > DEFAULT_SEQ_LEN_CAP else ''}; --seq-len)")
    micro_batch = inputs.micro_batch if inputs.micro_batch is not None else 1
    if inputs.micro_batch is None:
        assumptions.append("micro-batch 1 sequence per GPU (the default; --micro-batch, or --max-micro-batch)")
    recompute = inputs.recompute or "none"
    if inputs.recompute is None:
        assumptions.append("activation recompute: none (the default; --recompute selective|full)")
    if inputs.sequence_parallel and parallel.tp == 1:
        raise InputError("sequence_parallel", "sequence parallelism splits activations over tp, and tp is 1",
                         f"add {ref('tp', 2)} or more, or drop {ref('sequence_parallel')}")
    accumulation = grad_accum_steps(inputs, parallel, micro_batch, assumptions, cp)
    if cp > 1:
        if context_parallel_problem(seq_len, cp):
            raise InputError("cp", f"context parallelism cuts each sequence into 2·cp({cp}) = {2 * cp} chunks, and "
                             f"{seq_len} is not divisible by {2 * cp}", f"use a {ref('seq_len')} divisible by {2 * cp}")
        assumptions.append(f"context parallelism cp({cp}): each rank holds {seq_len // cp} of every sequence's "
                           f"{seq_len} tokens (activations counted on them); ZeRO shards over dp × cp = "
                           f"{parallel.dp} ranks")
        seq_len //= cp
    implementation = (inputs.activations or DEFAULT_ACTIVATIONS).strip().lower()
    if cp > 1 and implementation == "transformers":
        if inputs.activations is not None:
            raise InputError("activations", "transformers runs no context parallelism",
                             f"use {ref('activations', 'megatron')} with {ref('cp')}")
        implementation = "megatron"  # the default follows the layout, as for --tp/--pp (the note says so)
        assumptions.append("activations: Megatron's formula with --cp (transformers runs no context parallelism)")
    if implementation not in IMPLEMENTATIONS:
        raise InputError("activations", f"unknown implementation '{inputs.activations}'",
                         f"use {' or '.join(IMPLEMENTATIONS)}")
    return ActivationConfig(seq_len=seq_len, micro_batch=micro_batch, recompute=recompute,
                            flash_attention=inputs.flash_attention, sequence_parallel=inputs.sequence_parallel,
                            tp=parallel.tp, pp=parallel.pp, num_micro_batches=accumulation,
                            dtype_bytes=activation_dtype_bytes(inputs.precision), implementation=implementation,
                            ep=parallel.ep, capacity_factor=inputs.capacity_factor)


def recompute_choices() -> str:
    """The recompute modes, as an error's fix names them."""
    return ", ".join(RECOMPUTE_MODES[:-1]) + " or " + RECOMPUTE_MODES[-1]


def activation_dtype_bytes(precision: str) -> int:
    """Activations are kept in the compute dtype: 4 bytes in fp32, 2 in mixed/bf16/fp16."""
    return 4 if precision.strip().lower() == "fp32" else 2


def grad_accum_steps(inputs: StepInputs, parallel: ParallelDims, micro_batch: int,
                     assumptions: list[str], cp: int = 1) -> int:
    """Micro-batches per optimizer step, from --grad-accum or from the batch-size identity
    global_batch = micro_batch × grad_accum × dp, checked exactly. A pipeline with neither given gets pp
    micro-batches, the fewest that fill it (and what 1F1B's first stage then holds)."""
    if inputs.grad_accum is not None and inputs.grad_accum < 1:
        raise InputError("grad_accum", f"must be at least 1, got {inputs.grad_accum}")
    if inputs.global_batch is None:
        if inputs.grad_accum is not None:
            return inputs.grad_accum
        if parallel.pp > 1:
            assumptions.append(f"{parallel.pp} micro-batches per step, the fewest that fill pp({parallel.pp}) "
                               "(the default; --grad-accum or --global-batch)")
            return parallel.pp
        return 1
    if inputs.global_batch < 1:
        raise InputError("global_batch", f"must be positive, got {inputs.global_batch}")
    dp = parallel.dp // cp  # context-parallel ranks share their sequences: the batch splits over dp only
    per_step = micro_batch * dp
    if inputs.global_batch % per_step:
        raise InputError("global_batch", f"{inputs.global_batch} is not a multiple of micro_batch({micro_batch}) × "
                         f"dp({dp}) = {per_step}",
                         f"change {ref('global_batch')}, {ref('micro_batch')} or {ref('gpus')}")
    steps = inputs.global_batch // per_step
    if inputs.grad_accum is not None and inputs.grad_accum != steps:
        raise InputError("grad_accum", f"micro_batch({micro_batch}) × grad_accum({inputs.grad_accum}) × "
                         f"dp({dp}) = {micro_batch * inputs.grad_accum * dp} ≠ "
                         f"global_batch({inputs.global_batch})",
                         f"drop one of {ref('grad_accum')} and {ref('global_batch')}")
    return steps


def resolve_buffers(inputs: BufferInputs) -> BufferConfig:
    overrides = {}
    for given, field_name in (("reduce_bucket_size", "reduce_bucket_elements"),
                              ("allgather_bucket_size", "allgather_bucket_elements"),
                              ("prefetch_bucket_size", "prefetch_bucket_elements"),
                              ("max_live_parameters", "max_live_parameters"), ("sub_group_size", "sub_group_size")):
        if getattr(inputs, given) is not None:
            overrides[field_name] = getattr(inputs, given)
    if inputs.overlap_comm is not None:
        overrides["overlap_comm"] = inputs.overlap_comm
    return dataclasses.replace(BufferConfig(), **overrides)


def resolve_finetune(inputs: StepInputs, mode: str | None = None):
    """The Finetune the step flags describe (mode overrides --finetune: `auto` tries each); defaults filled as
    PEFT and bitsandbytes fill them. Flags that do not apply to the mode are refused, never ignored."""
    from zeroplan.core.model.adapters import DEFAULT_LORA_RANK, LORA_TARGETS, Finetune, parse_freeze, parse_targets

    mode = mode or getattr(inputs, "finetune", None) or "full"
    rank, targets = getattr(inputs, "lora_rank", None), getattr(inputs, "lora_targets", None)
    quant, double_quant = getattr(inputs, "quant", None), getattr(inputs, "double_quant", True)
    freeze = getattr(inputs, "freeze", None)
    recipe = getattr(inputs, "finetune_recipe", None)
    if mode == "full":
        for name, value in (("lora_rank", rank), ("lora_targets", targets), ("finetune_recipe", recipe)):
            if value is not None:
                raise InputError(name, f"applies to {ref('finetune', 'lora')} or qlora, asked with full",
                                 f"add {ref('finetune', 'lora')}")
    if quant is not None and mode not in ("qlora", "auto"):
        raise InputError("quant", f"quantises the frozen base of {ref('finetune', 'qlora')}, asked with {mode}",
                         f"add {ref('finetune', 'qlora')}, or drop {ref('quant')}")
    if double_quant is False and mode != "auto" and (mode != "qlora" or (quant or "nf4") != "nf4"):
        raise InputError("double_quant", "turning double quantisation off is an nf4 setting (qlora)",
                         f"use it with {ref('finetune', 'qlora')} {ref('quant', 'nf4')}, or drop it")
    embeddings, layers = parse_freeze(freeze) if freeze is not None else (False, 0)
    if embeddings and mode in ("lora", "qlora"):
        raise InputError("freeze", f"embeddings are frozen by {mode} already", f"drop 'embeddings' from {ref('freeze')}")
    return Finetune(mode=mode, rank=DEFAULT_LORA_RANK if rank is None else rank,
                    targets=LORA_TARGETS if targets is None else parse_targets(targets),
                    quant=(quant or "nf4") if mode == "qlora" else None, double_quant=bool(double_quant),
                    freeze_embeddings=embeddings, freeze_layers=layers, recipe=recipe or "peft")


def finetune_assumption(finetune, inputs: StepInputs) -> str | None:
    """What the fine-tuning mode assumed, for the report (None when every parameter trains)."""
    if finetune.trains_everything:
        return None
    text = f"fine-tuning: {finetune.describe()}"
    if finetune.adapters:
        given = [flag for flag, value in (("rank 16", getattr(inputs, "lora_rank", None)),
                                          ("all-linear targets", getattr(inputs, "lora_targets", None)))
                 if value is None]
        if given:
            text += f" ({' and '.join(given)} by default: --lora-rank, --lora-targets)"
        if finetune.recipe == "torchtune":
            text += ("; torchtune's recipe: adapters, gradients and AdamW states in bf16 (the model's dtype), "
                     "LoRALinear keeping no copy of its input, CEWithChunkedOutputLoss (8 chunks) for the loss")
        else:
            text += ("; adapters in fp32 with fp32 gradients and optimizer states (PEFT's autocast_adapter_dtype), "
                     "PEFT keeping an fp32 copy of each adapted linear's input")
        text += "; frozen weights sharded at ZeRO-3/FSDP, whole on every rank at stages 0-2"
    if finetune.storage == "nf4":
        text += ("; NF4 storage: 4 bits per weight, one absmax per 64 weights "
                 + ("quantised to 8 bits with one fp32 absmax per 256 blocks (double quantisation)"
                    if finetune.double_quant else "in fp32 (no double quantisation)")
                 + ", constants kept whole on every rank (FSDP shards the packed weights, bnb_4bit_quant_storage), "
                 "each linear dequantised to bf16 while it runs")
    elif finetune.storage == "int8":
        text += "; int8 storage (LLM.int8): 1 byte per weight and an fp32 scale per row"
    return text
