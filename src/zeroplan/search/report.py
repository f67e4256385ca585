"""`zeroplan plan` as data: the JSON document and the CSV of every evaluated plan (exact integer bytes)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from zeroplan import __version__
from zeroplan.core.layout.search import PlanRecord, plan_alltoall_seconds
from zeroplan.core.timing.step_time import FlopModel
from zeroplan.render.spreadsheet import spreadsheet_safe
from zeroplan.search.reasons import infeasible_summary, search_line
from zeroplan.search.run import PlanOutcome

SCHEMA_VERSION = 1
GPU_PARTS = ("params", "gradients", "optimizer_states", "activations", "buffers")


def plan_row(outcome: PlanOutcome, plan: PlanRecord) -> dict[str, Any]:
    """One plan, flat: what the CSV writes and the JSON nests."""
    request = outcome.resolved.request
    row: dict[str, Any] = {
        "world": plan.world, "dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "cp": plan.cp,
        "ep": plan.ep, "etp": plan.etp or plan.tp, "virtual_stages": plan.virtual_stages,
        "stage": plan.option.stage, "offload_optimizer": plan.option.offload_optimizer,
        "offload_params": plan.option.offload_params, "micro_batch": plan.micro_batch,
        "grad_accum": plan.grad_accum, "recompute": plan.recompute, "sequence_parallel": plan.sequence_parallel,
    }
    row.update({f"gpu_bytes_{name}": value for name, value in zip(GPU_PARTS, plan.gpu)})
    row.update(gpu_bytes_total=plan.gpu_total, usable_gpu_bytes=request.budget.usable_gpu_bytes,
               cpu_bytes_per_node=plan.cpu_bytes_per_node, nvme_bytes_per_node=plan.nvme_bytes_per_node,
               fits=plan.fits, limits=";".join(plan.limits), host_checked=plan.host_checked,
               step_seconds=plan.time.total)
    row.update({f"seconds_{name}": value for name, value in plan.time.parts().items()})
    row["seconds_dp_total"] = plan.time.dp_comm
    row["seconds_ep_alltoall"] = plan_alltoall_seconds(request, plan)  # inside seconds_tp_comm, exposed
    metrics = outcome.throughput(plan)
    row.update(tokens_per_step=metrics.tokens_per_step, tokens_per_second=metrics.tokens_per_second,
               mfu=metrics.mfu, hardware_tflops_per_gpu=metrics.hardware_tflops_per_gpu,
               train_seconds=metrics.train_seconds, gpu_hours=metrics.gpu_hours)
    return row


def top_entries(outcome: PlanOutcome) -> list[dict[str, Any]]:
    entries = []
    for rank, plan in enumerate(outcome.top, start=1):
        entry = {"rank": rank, "label": plan.option.label, **plan_row(outcome, plan),
                 "reason": outcome.reason(plan)}
        entries.append(entry)
    return entries


def plan_document(outcome: PlanOutcome) -> dict[str, Any]:
    resolved, result = outcome.resolved, outcome.result
    request = resolved.request
    model, cluster, space, machine = request.model, request.cluster, request.space, request.machine
    flops = FlopModel.from_model(model)
    return {
        "zeroplan_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "command": "plan",
        "inputs": outcome.inputs.echo(),
        "model": {"name": model.name, "params": model.params, "active_params": flops.params,
                  **{name: model.reported(name) for name in ("layers", "hidden", "heads", "kv_heads", "vocab")},
                  "largest_layer_params": request.largest_layer_params},
        "cluster": {"name": cluster.name, "gpu": cluster.gpu.name, "gpus_per_node": cluster.gpus_per_node,
                    "gpu_memory_bytes": cluster.gpu.memory_bytes, "usable_gpu_bytes": request.budget.usable_gpu_bytes,
                    "peak_flops": cluster.gpu.bf16_flops, "efficiency": machine.efficiency,
                    "intra_node_bandwidth_bytes_per_s": machine.links.intra_node.bandwidth_bytes_per_s,
                    "inter_node_bandwidth_bytes_per_s": machine.links.inter_node.bandwidth_bytes_per_s,
                    "measured_links": {k: link.bandwidth_bytes_per_s for k, link in machine.links.measured.items()},
                    "pcie_bandwidth_bytes_per_s": machine.pcie_bytes_per_s,
                    "cpu_adam_params_per_s": machine.cpu_adam_params_per_s},
        "search": {"gpus": space.gpus, "global_batch": space.global_batch, "seq_len": space.seq_len,
                   "training_tokens": resolved.training_tokens, "layouts": result.layouts_total,
                   "layouts_ruled_out": sum(result.rejected_layouts.values()), "plans_evaluated": len(result.plans),
                   "plans_fitting": len(result.feasible), "seconds": result.seconds,
                   "plans_per_second": len(result.plans) / result.seconds if result.seconds else None,
                   "summary": search_line(result)},
        "top": top_entries(outcome),
        "infeasible": {"plans_by_limit": result.infeasible_by_limit(), "layouts_by_reason": result.rejected_layouts,
                       "not_evaluated_by_reason": result.skipped, "summary": infeasible_summary(result)},
        "assumptions": resolved.assumptions,
    }


def to_json(outcome: PlanOutcome) -> str:
    return json.dumps(plan_document(outcome), indent=2, ensure_ascii=False) + "\n"


def to_csv(outcome: PlanOutcome) -> str:
    """Every evaluated plan: fitting ones first, fastest first (time_rank 1..), then the rest as evaluated."""
    result = outcome.result
    fitting = result.feasible
    ordered = fitting + [p for p in result.plans if not p.fits]
    model = outcome.resolved.request.model
    rows = []
    for index, plan in enumerate(ordered):
        row = {"model": model.name, "gpu": outcome.resolved.request.cluster.gpu.name,
               "time_rank": index + 1 if plan.fits else "", **plan_row(outcome, plan)}
        rows.append({k: spreadsheet_safe(v) for k, v in row.items()})
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()
