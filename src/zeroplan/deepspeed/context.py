"""What the checker knows besides the DeepSpeed config: flags first, then a plan file, then an accelerate config.

Every field is optional; a rule that needs a missing one is skipped and says which flag would let it run.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field

from zeroplan.deepspeed.plan_file import PlanFile
from zeroplan.core.errors import InputError
from zeroplan.inputs.sections import as_count
from zeroplan.core.units import parse_bytes
from zeroplan.core.memory.activations import RECOMPUTE_MODES
from zeroplan.inputs.training import recompute_choices


@dataclass
class CheckContext:
    model: str | None = None
    params: str | int | None = None  # as given: text (13e9) from a flag, a number from a plan file
    hidden: int | None = None
    largest_layer_params: str | int | None = None
    gpus: int | None = None
    gpu: str | None = None
    cluster: str | None = None
    gpus_per_node: int | None = None
    cpu_memory: str | None = None
    nvme: str | None = None
    gpu_memory: str | None = None
    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    etp: int | None = None
    capacity_factor: float | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    global_batch: int | None = None
    precision: str | None = None  # bf16, fp16 or fp32: resolves fp16/bf16 "enabled": "auto"
    optimizer: str | None = None
    seq_len: int | None = None
    recompute: str | None = None
    flash_attention: bool | None = None
    finetune: str | None = None  # full, lora, qlora (None: full)
    lora_rank: int | None = None
    lora_targets: str | None = None
    quant: str | None = None
    double_quant: bool | None = None
    freeze: str | None = None
    finetune_recipe: str | None = None  # peft or torchtune (None: peft)
    units: str = "iec"
    origin: dict[str, str] = field(default_factory=dict)  # field -> "flag", "plan" or "accelerate"
    # The text fields above parsed once, as the context is built (the text stays for reports and plan files).
    params_count: int | None = field(default=None, init=False, repr=False, compare=False)
    largest_layer_count: int | None = field(default=None, init=False, repr=False, compare=False)
    gpu_memory_bytes: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Every value given must be usable: a zero or negative count is an error, never a silent 1."""
        counts = {"gpus": self.gpus, "gpus_per_node": self.gpus_per_node, "tp": self.tp, "pp": self.pp,
                  "ep": self.ep, "etp": self.etp,
                  "micro_batch": self.micro_batch, "grad_accum": self.grad_accum,
                  "global_batch": self.global_batch, "seq_len": self.seq_len, "hidden": self.hidden}
        for flag, value in counts.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InputError(flag, f"must be a positive whole number, got {value!r}")
            if value is not None and value > 2**40:
                raise InputError(flag, f"{value} is beyond any real setup")
        if self.units not in ("iec", "si"):
            raise InputError("units", f"unknown units '{self.units}'", "use iec (GiB) or si (GB)")
        if self.recompute is not None and self.recompute not in RECOMPUTE_MODES:
            raise InputError("recompute", f"unknown mode '{self.recompute}'", f"use {recompute_choices()}")
        if self.params is not None:
            self.params_count = as_count(self.params, "params")
        if self.largest_layer_params is not None:
            self.largest_layer_count = as_count(self.largest_layer_params, "largest_layer_params")
        for flag, size in (("cpu_memory", self.cpu_memory), ("nvme", self.nvme), ("gpu_memory", self.gpu_memory)):
            if size is not None:
                parsed = parse_bytes(size, flag)
                if flag == "gpu_memory":
                    self.gpu_memory_bytes = parsed
        for flag, name in (("gpu", self.gpu), ("cluster", self.cluster), ("model", self.model)):
            if name is not None and not str(name).strip():
                raise InputError(flag, "is empty", "name a preset (zeroplan presets list)")

    def under(self, fallback: "CheckContext") -> "CheckContext":
        """These values, with the fallback's filling the gaps (the fallback's origins kept). A model or a
        GPU given here replaces the fallback's whole model or hardware description, not just one field."""
        merged = dataclasses.replace(self, origin=dict(self.origin))
        replaced: set[str] = set()
        for triggers, group in _GROUPS:
            if any(getattr(self, name) is not None for name in triggers):
                replaced.update(group)
        for item in dataclasses.fields(self):
            if item.name in ("units", "origin") or item.name in replaced:
                continue
            if getattr(merged, item.name) is None and getattr(fallback, item.name) is not None:
                setattr(merged, item.name, getattr(fallback, item.name))
                merged.origin[item.name] = fallback.origin.get(item.name, "")
        return merged

    @property
    def has_model(self) -> bool:
        return self.model is not None or self.params is not None

    @property
    def has_hardware(self) -> bool:
        return self.gpu is not None or self.cluster is not None or self.gpu_memory is not None


_GROUPS = (
    (("model", "params"), ("model", "params", "hidden", "largest_layer_params")),
    (("gpu", "cluster"), ("gpu", "cluster", "gpus_per_node", "gpu_memory", "cpu_memory", "nvme")),
)


def from_sections(*sections, **values) -> CheckContext:
    """The context from the command's input sections (the fields given, that the checker uses), then values."""
    names = {item.name for item in dataclasses.fields(CheckContext)} - {"units", "origin"}
    given = {name: value for section in sections for name, value in section.given().items() if name in names}
    return from_flags(**{**given, **values})


def from_flags(**values) -> CheckContext:
    context = CheckContext(**values)
    context.origin = {k: "flag" for k, v in values.items() if v is not None and k != "units"}
    return context


def from_plan(plan: PlanFile) -> CheckContext:
    model, cluster, training = plan.model, plan.cluster, plan.training
    context = CheckContext(
        model=model.preset or model.config, params=model.params, hidden=model.hidden,
        largest_layer_params=model.largest_layer_params,
        gpus=cluster.gpus, gpu=cluster.gpu, cluster=cluster.preset, gpus_per_node=cluster.gpus_per_node,
        cpu_memory=cluster.cpu_memory, nvme=cluster.nvme, gpu_memory=cluster.gpu_memory,
        tp=plan.parallel.tp, pp=plan.parallel.pp, ep=plan.parallel.ep, etp=plan.parallel.etp,
        capacity_factor=training.capacity_factor, micro_batch=training.micro_batch,
        grad_accum=training.grad_accum, global_batch=training.global_batch, precision=training.precision,
        optimizer=training.optimizer, seq_len=training.seq_len, recompute=training.recompute,
        flash_attention=training.flash_attention)
    if plan.finetune is not None:
        tuned = plan.finetune
        context.finetune, context.lora_rank, context.lora_targets = tuned.mode, tuned.lora_rank, tuned.lora_targets
        context.quant, context.double_quant, context.freeze = tuned.quant, tuned.double_quant, tuned.freeze
        context.finetune_recipe = tuned.recipe
    context.origin = {f.name: "plan" for f in dataclasses.fields(context) if f.name not in ("units", "origin")}
    return context


# The context's fields as `zeroplan check` flags, in the order a command line names them.
_CHECK_FLAGS = (("model", "--model"), ("params", "--params"), ("hidden", "--hidden"),
                ("largest_layer_params", "--largest-layer-params"), ("gpus", "--gpus"), ("cluster", "--cluster"),
                ("gpu", "--gpu"), ("gpus_per_node", "--gpus-per-node"), ("gpu_memory", "--gpu-memory"),
                ("cpu_memory", "--cpu-memory"), ("nvme", "--nvme"), ("tp", "--tp"), ("pp", "--pp"),
                ("seq_len", "--seq-len"), ("recompute", "--recompute"))


def check_command(path: str, context: CheckContext, presets_file: str | None = None) -> str:
    """The `zeroplan check` command line that judges the DeepSpeed config at `path` with this context: what a
    ds_config.json cannot hold (the model, the hardware, tp and pp, the step's shape) given as flags."""
    words = ["zeroplan", "check", path]
    for name, flag in _CHECK_FLAGS:
        value = getattr(context, name)
        if value is not None:
            words += [flag, str(value)]
    if context.flash_attention is False:
        words.append("--no-flash-attention")
    if presets_file is not None:
        words += ["--presets", presets_file]
    if context.units != "iec":
        words += ["--units", context.units]
    return shlex.join(words)


def _positive_int(data: dict, key: str, file: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{file}: {key}", f"must be a positive whole number, got {value!r}")
    return value


def from_accelerate(data: dict, file: str) -> CheckContext:
    """World size, GPUs per node, precision and accumulation from an accelerate config."""
    processes = _positive_int(data, "num_processes", file)
    machines = _positive_int(data, "num_machines", file) or 1
    ds_config = data.get("deepspeed_config")
    ds = ds_config if isinstance(ds_config, dict) else {}
    accum = ds.get("gradient_accumulation_steps")
    precision = {"bf16": "bf16", "fp16": "fp16", "no": "fp32"}.get(str(data.get("mixed_precision", "")).lower())
    context = CheckContext(
        gpus=processes, gpus_per_node=processes // machines if processes and processes % machines == 0 else None,
        grad_accum=accum if isinstance(accum, int) and not isinstance(accum, bool) and accum >= 1 else None,
        precision=precision)
    context.origin = {f.name: "accelerate" for f in dataclasses.fields(context)
                      if f.name not in ("units", "origin") and getattr(context, f.name) is not None}
    return context
