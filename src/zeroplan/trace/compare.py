"""`zeroplan trace`: the traced peak beside estimate's prediction for the same inputs (no torch at import)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zeroplan.core.errors import InputError
from zeroplan.planning.estimate_plan import build_plan
from zeroplan.inputs.estimate_inputs import EstimateInputs
from zeroplan.core.memory.activations import applied_implementation
from zeroplan.inputs.training import load_model
from zeroplan.trace.real import real_peak_bytes

ESTIMATE_PARTS = ("params", "gradients", "optimizer_states", "activations", "buffers")
# Which traced categories each estimate part stands for (the rest of the trace is in "buffers").
TRACE_PARTS = {"params": ("parameters",), "gradients": ("gradients",), "optimizer_states": ("optimizer_states",),
               "activations": ("activations", "inputs"),
               "buffers": ("temporaries", "all_gather", "reduce_scatter", "buffers")}


@dataclass(frozen=True)
class TraceRequest:
    model: str
    gpus: int
    stage: int
    precision: str = "mixed"
    recompute: str = "none"
    seq_len: int | None = None
    micro_batch: int = 1
    attention: str = "sdpa"
    activations: str = "transformers"
    steps: int = 2
    layers_to_trace: int = 3  # 0: the whole model
    gpu: str | None = None
    real: bool = False
    finetune: str = "full"  # "lora": PEFT's LoRA on a frozen 16-bit base; "qlora": on bitsandbytes' NF4 Linear4bit
    lora_rank: int | None = None
    lora_targets: str | None = None
    double_quant: bool = True  # qlora: bnb_4bit_use_double_quant


@dataclass
class TraceResult:
    request: TraceRequest
    model_name: str
    family: str
    seq_len: int
    trace: dict[str, Any]
    estimate: dict[str, int]
    activation_model: str
    activation_note: str
    real_peak_bytes: int | None = None
    assumptions: list[str] = field(default_factory=list)
    activations_freed_at_peak: int = 0  # estimate's activations (backward start) not alive at its peak moment

    @property
    def error(self) -> float:
        """(estimate − trace) / trace: positive when estimate is above the measurement."""
        return (self.estimate["total"] - self.trace["peak_bytes"]) / self.trace["peak_bytes"]

    def trace_parts(self) -> dict[str, int]:
        categories = self.trace["categories"]
        parts = {part: sum(categories[c] for c in cats) for part, cats in TRACE_PARTS.items()}
        parts["total"] = self.trace["peak_bytes"]
        return parts


def _precision(value: str) -> str:
    precision = value.strip().lower()
    if precision in ("mixed", "bf16"):
        return "mixed"
    if precision == "fp32":
        return "fp32"
    raise InputError("--precision", f"a trace runs mixed (bf16) or fp32, got '{value}'", "use --precision mixed or fp32")


def estimate_for(request: TraceRequest, assumptions: list[str]):
    """estimate's plan for the same inputs: torch's wrappers (framework convention), the traced stage."""
    inputs = EstimateInputs.of(model=request.model, gpus=request.gpus, gpu=request.gpu, stage=request.stage,
                               precision=_precision(request.precision), optimizer="adamw", convention="framework",
                               framework="torch", seq_len=request.seq_len, micro_batch=request.micro_batch,
                               recompute=request.recompute, activations=request.activations,
                               flash_attention=request.attention == "sdpa", finetune=request.finetune,
                               lora_rank=request.lora_rank, lora_targets=request.lora_targets,
                               double_quant=request.double_quant)
    plan = build_plan(inputs)
    assumptions.extend(plan.assumptions)
    (row,) = [e for e in plan.estimates if e.option.stage == request.stage and not e.option.offloads]
    return plan, row


def run(request: TraceRequest) -> TraceResult:
    if request.finetune not in ("full", "lora", "qlora"):
        raise InputError("--finetune", f"a trace runs full, lora or qlora, got '{request.finetune}'",
                         "use --finetune full, lora or qlora")
    if request.real and request.finetune == "qlora":
        raise InputError("--real", "a real QLoRA step is not run by trace (bitsandbytes' CUDA kernels on one GPU)",
                         "drop --real: the fake trace runs bitsandbytes' modules")
    if request.attention not in ("sdpa", "eager"):
        raise InputError("--attention", f"must be sdpa or eager, got '{request.attention}'")
    if request.layers_to_trace < 0:
        raise InputError("--layers-to-trace", f"must be 0 (the whole model) or more, got {request.layers_to_trace}")
    model = load_model(request.model)
    config = model.extra.get("hf_config")
    if config is None:
        raise InputError("--model", f"'{model.name}' has no config.json to build the model from",
                         "use a preset of a supported family or a config.json")
    assumptions: list[str] = []
    plan, row = estimate_for(request, assumptions)
    activations = plan.request.activations
    implementation, note = applied_implementation(plan.request.model, activations)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise InputError("trace", f"needs torch and transformers ({exc.name} is missing)",
                         "pip install 'zeroplan[trace]'") from None
    from zeroplan.trace.engine import TraceSettings, trace_peak

    settings = TraceSettings(world_size=request.gpus, stage=request.stage, precision=_precision(request.precision),
                             recompute=activations.recompute, seq_len=activations.seq_len,
                             micro_batch=activations.micro_batch, attention=request.attention, steps=request.steps,
                             finetune=request.finetune, lora_rank=plan.request.finetune.rank,
                             lora_targets=plan.request.finetune.targets if request.finetune != "full" else (),
                             double_quant=plan.request.finetune.double_quant)
    real_peak = None
    if request.real:
        real_peak = real_peak_bytes(config, settings)
    trace = trace_peak(config, settings, request.layers_to_trace or None)
    estimate, freed = estimate_parts_at_peak(row.gpu_bytes)
    return TraceResult(request, model.name, (model.shape.family if model.shape else None) or str(config.get("model_type")), activations.seq_len,
                       trace, estimate, implementation, note, real_peak, assumptions, freed)


def estimate_parts_at_peak(parts: dict[str, int]) -> tuple[dict[str, int], int]:
    """(the estimate's parts as the comparison shows them, the activation bytes moved). estimate counts the
    activations of the backward start and its buffers as the peak moment's excess over them, which is negative where
    the peak comes after the activations are freed (the optimizer step, the end of backward): then the activations
    shown are the ones alive at the peak and the buffers none below zero (the total unchanged)."""
    shown = dict(parts)
    freed = max(0, -shown.get("buffers", 0))
    if freed:
        shown["activations"] -= freed
        shown["buffers"] = 0
    return shown, freed


def to_dict(result: TraceResult) -> dict[str, Any]:
    trace = result.trace
    return {
        "model": result.model_name, "family": result.family, "gpus": result.request.gpus,
        "stage": result.request.stage, "precision": _precision(result.request.precision),
        "finetune": result.request.finetune,
        "recompute": result.request.recompute, "seq_len": result.seq_len,
        "micro_batch": result.request.micro_batch, "attention": result.request.attention,
        "activation_model": result.activation_model, "activation_model_note": result.activation_note,
        "trace": {"peak_bytes": trace["peak_bytes"], "categories": trace["categories"],
                  "by_estimate_part": result.trace_parts(), "module": trace["where"].get("module"),
                  "phase": trace["where"].get("phase"), "op": trace["where"].get("op"),
                  "layers": trace["layers"], "layers_traced": trace["layers_traced"],
                  "extrapolated": trace["extrapolated"], "steps": trace["settings"]["steps"],
                  "wall_s": trace["wall_s"]},
        "estimate": dict(result.estimate),
        "ratio": result.estimate["total"] / trace["peak_bytes"],
        "error": result.error,
        "real_max_memory_allocated": result.real_peak_bytes,
        "estimate_activations_freed_at_peak": result.activations_freed_at_peak,
    }
