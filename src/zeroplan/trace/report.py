"""The trace beside the estimate as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json

from zeroplan.core.units import format_bytes
from zeroplan.trace.compare import ESTIMATE_PARTS, TraceResult, to_dict
from zeroplan.core.memory.activations_gated_families import routing_note
from zeroplan.core.memory.activations_moe_families import routing_note as moe_routing_note


def to_json(result: TraceResult) -> str:
    return json.dumps(to_dict(result), indent=2) + "\n"


def to_csv(result: TraceResult) -> str:
    traced = result.trace_parts()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["part", "trace_bytes", "estimate_bytes"])
    for part in (*ESTIMATE_PARTS, "total"):
        writer.writerow([part, traced[part], result.estimate[part]])
    return buffer.getvalue()


def _finetune_note(finetune: str, settings: dict) -> str:
    adapters = f", PEFT LoRA r{settings['lora_rank']} on {','.join(settings['lora_targets'])}"
    if finetune == "lora":
        return adapters + " (16-bit base frozen, fp32 adapters)"
    if finetune == "qlora":
        double = "double quantisation" if settings.get("double_quant", True) else "no double quantisation"
        return (adapters + f" (base frozen in bitsandbytes' Linear4bit: NF4, {double}, bf16 quant storage; "
                "gemm_4bit as its CUDA kernel runs it, see docs/trace.md)")
    return ""


def to_table(result: TraceResult, units: str = "iec") -> str:
    request, trace, traced = result.request, result.trace, result.trace_parts()
    how = (f"layers {trace['layers_traced']} traced, extrapolated to {trace['layers']}" if trace["extrapolated"]
           else f"all {trace['layers']} layers traced")
    lines = [f"zeroplan trace: {result.model_name} ({result.family}) on {request.gpus} ranks, ZeRO stage "
             f"{request.stage}, {request.precision}, recompute {request.recompute}, seq {result.seq_len} × "
             f"micro-batch {request.micro_batch}, {request.attention} attention"
             + _finetune_note(request.finetune, trace["settings"]),
             f"  measured with torch's FSDPMemTracker on fake tensors, {trace['settings']['steps']} steps ({how}, "
             f"{trace['wall_s']:.1f} s)", ""]
    lines.append(f"  {'per GPU':<18}{'trace':>16}{'estimate':>16}{'trace bytes':>18}{'estimate bytes':>18}")
    for part in (*ESTIMATE_PARTS, "total"):
        lines.append(f"  {part:<18}{format_bytes(traced[part], units, 2):>16}"
                     f"{format_bytes(result.estimate[part], units, 2):>16}{traced[part]:>18,}{result.estimate[part]:>18,}")
    lines.append("")
    lines.append(f"  estimate / trace = {result.estimate['total'] / trace['peak_bytes']:.3f} "
                 f"({result.error:+.1%})")
    where = trace["where"]
    lines.append(f"  peak: {where.get('phase')} of {where.get('module')} ({where.get('op')})")
    if result.activations_freed_at_peak:
        lines.append(f"  estimate's peak moment comes after {format_bytes(result.activations_freed_at_peak, units, 2)} "
                     "of the backward start's activations are freed: activations shown as alive then")
    note = f" ({result.activation_note})" if result.activation_note else ""
    lines.append(f"  activations estimated with the {result.activation_model} implementation{note}")

    note = routing_note(result.family) or moe_routing_note(result.family)
    if note:
        lines.append(f"  {note}")
    if result.real_peak_bytes is not None:
        lines.append(f"  real run: torch.cuda.max_memory_allocated = {format_bytes(result.real_peak_bytes, units)} "
                     f"(estimate / real = {result.estimate['total'] / result.real_peak_bytes:.3f})")
    return "\n".join(lines) + "\n"
