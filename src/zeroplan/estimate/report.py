"""The plan as data: the JSON contract, and the CSV/markdown rows derived from it.

JSON and CSV carry exact integer bytes; only the table and markdown round for people.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from zeroplan import __version__
from zeroplan.render.spreadsheet import spreadsheet_safe
from zeroplan.core.evaluate.estimate import OptionEstimate
from zeroplan.core.units import format_bytes, format_seconds
from zeroplan.planning.estimate_plan import Plan
from zeroplan.core.memory.activations import applied_implementation

SCHEMA_VERSION = 1


def option_dict(estimate: OptionEstimate) -> dict[str, Any]:
    option = estimate.option
    breakdown = estimate.breakdown
    return {
        "key": option.key,
        "label": option.label,
        "stage": option.stage,
        "offload_optimizer": option.offload_optimizer,
        "offload_params": option.offload_params,
        "convention": estimate.convention,
        "gpu_bytes": estimate.gpu_bytes,
        "model_state_bytes": estimate.model_state_bytes,
        "cpu_bytes_per_node": estimate.cpu_bytes_per_node,
        "nvme_bytes_per_node": estimate.nvme_bytes_per_node,
        "comm_bytes_per_gpu_per_step": estimate.comm_bytes_per_gpu_per_step,
        "comm_bytes_by_link": {"intra_node": breakdown["comm/intra_node_bytes"],
                               "inter_node": breakdown["comm/inter_node_bytes"]},
        "comm_paper_elements": breakdown["comm/paper_elements"],
        "comm_seconds_per_step": estimate.comm_seconds_per_step,
        "pcie_bytes_per_gpu_per_step": breakdown.get("traffic/pcie/bytes_per_gpu", 0),
        "nvme_io_bytes_per_node_per_step": (breakdown.get("traffic/nvme/read_bytes_per_node", 0)
                                            + breakdown.get("traffic/nvme/write_bytes_per_node", 0)),
        "offload_seconds_per_step": estimate.offload_seconds_per_step,
        "fits": estimate.fits,
        "limits": list(estimate.limits),
        "max_micro_batch": estimate.max_micro_batch,
        "accumulation_micro_batch": estimate.accumulation_micro_batch,
        "grad_accum_steps": estimate.grad_accum_steps,
        "host_checked": estimate.host_checked,
        "breakdown": dict(breakdown),
    }


def plan_dict(plan: Plan) -> dict[str, Any]:
    request, recommendation = plan.request, plan.recommendation
    model, cluster, parallel, budget = request.model, request.cluster, request.parallel, request.budget
    chosen = recommendation.option
    return {
        "zeroplan_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "inputs": plan.inputs.echo(),
        "model": {
            "name": model.name, "family": model.reported("family"), "params": model.params,
            "largest_layer_params": request.largest_layer_params, "shard_params": request.shard_params,
            **{name: model.reported(name) for name in (
                "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts", "experts_per_token",
                "max_seq_len", "tied_embeddings", "gated_mlp", "layer_params", "input_params", "output_params")},
        },
        "training": _training_dict(request),
        "precision": {"name": request.per_param.precision, "optimizer": request.per_param.optimizer,
                      "bytes_per_param": {"params": request.per_param.params,
                                          "gradients": request.per_param.gradients,
                                          "optimizer_states": request.per_param.optimizer_states}},
        "cluster": {
            "name": cluster.name, "gpu": cluster.gpu.name, "gpus_per_node": cluster.gpus_per_node,
            "nodes": parallel.nodes, "gpu_memory_bytes": cluster.gpu.memory_bytes,
            "usable_gpu_bytes": budget.usable_gpu_bytes, "runtime_reserve_bytes": budget.runtime_reserve,
            "fragmentation_bytes": budget.fragmentation_bytes,
            "cpu_memory_bytes_per_node": cluster.cpu_memory_bytes,
            "usable_cpu_bytes_per_node": budget.usable_host_bytes(cluster.cpu_memory_bytes),
            "nvme_bytes_per_node": cluster.nvme_bytes,
            "intra_node_bandwidth_bytes_per_s": request.links["intra_node"].bandwidth_bytes_per_s,
            "inter_node_bandwidth_bytes_per_s": request.links["inter_node"].bandwidth_bytes_per_s,
            "pcie_bandwidth_bytes_per_s": cluster.pcie_bandwidth_bytes_per_s,
            "nvme_bandwidth_bytes_per_s": cluster.nvme_bandwidth_bytes_per_s,
        },
        "parallel": {"world": parallel.world, "dp": parallel.dp, "tp": parallel.tp, "pp": parallel.pp,
                     "dp_span": request.dp_span},
        "convention": request.convention,
        "options": [option_dict(e) for e in plan.estimates],
        "recommendation": {
            "stage": chosen.option.stage if chosen else None,
            "offload_optimizer": chosen.option.offload_optimizer if chosen else None,
            "offload_params": chosen.option.offload_params if chosen else None,
            "key": chosen.option.key if chosen else None,
            "reason": recommendation.reason,
            "fewest_gpus": recommendation.fewest_gpus,
            "fewest_gpus_option": recommendation.fewest_gpus_option,
        },
        "assumptions": plan.assumptions,
    }


def _training_dict(request) -> dict[str, Any]:
    activations = request.activations
    counted = "reserve" if activations is None and request.activation_bytes is None else "counted"
    block: dict[str, Any] = {"activations": counted, "micro_batches_per_step": request.micro_batches_per_step,
                             "global_batch": request.global_batch}
    if activations is not None:
        block.update(seq_len=activations.seq_len, micro_batch=activations.micro_batch, recompute=activations.recompute,
                     flash_attention=activations.flash_attention, sequence_parallel=activations.sequence_parallel)

        implementation, why = applied_implementation(request.model, activations)
        block.update(activation_implementation=implementation, activation_dtype_bytes=activations.dtype_bytes)
        if why:
            block["activation_implementation_note"] = why
    return block


def to_json(plan: Plan, explain: list[str] | None = None) -> str:
    data = plan_dict(plan)
    if explain is not None:
        data["explain"] = explain
    # allow_nan=False: NaN or Infinity would be invalid JSON; every figure must be finite by now.
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


CSV_FIELDS = (
    "model", "params", "gpu", "world", "dp", "tp", "pp", "convention", "stage", "offload_optimizer",
    "offload_params", "gpu_bytes_params", "gpu_bytes_gradients", "gpu_bytes_optimizer_states",
    "gpu_bytes_activations", "gpu_bytes_buffers", "gpu_bytes_total", "usable_gpu_bytes", "cpu_bytes_per_node",
    "nvme_bytes_per_node", "comm_bytes_per_gpu_per_step", "comm_seconds_per_step", "offload_seconds_per_step",
    "fits", "max_micro_batch", "grad_accum_steps", "recommended", "activation_implementation",
)


def csv_rows(plan: Plan) -> list[dict[str, Any]]:
    data = plan_dict(plan)
    chosen_key = data["recommendation"]["key"]
    rows = []
    for option in data["options"]:
        row = {"model": data["model"]["name"], "params": data["model"]["params"], "gpu": data["cluster"]["gpu"],
               **{k: data["parallel"][k] for k in ("world", "dp", "tp", "pp")}}
        row.update({k: option[k] for k in ("convention", "stage", "offload_optimizer", "offload_params",
                                           "cpu_bytes_per_node", "nvme_bytes_per_node", "comm_bytes_per_gpu_per_step",
                                           "comm_seconds_per_step", "offload_seconds_per_step", "fits",
                                           "max_micro_batch", "grad_accum_steps")})
        row.update({f"gpu_bytes_{k}": v for k, v in option["gpu_bytes"].items()})
        row["usable_gpu_bytes"] = data["cluster"]["usable_gpu_bytes"]
        row["recommended"] = option["key"] == chosen_key
        row["activation_implementation"] = data["training"].get("activation_implementation", "")
        rows.append({k: spreadsheet_safe(row[k]) for k in CSV_FIELDS})
    return rows


def to_csv(plan: Plan) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(plan))
    return buffer.getvalue()


def to_markdown(plan: Plan) -> str:
    units = plan.inputs.units
    lines = ["| option | params | gradients | optimizer | activations | buffers | total/GPU | CPU/node | "
             "NVMe/node | comm/GPU/step | comm time | fits |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for e in plan.estimates:
        g = e.gpu_bytes
        cells = [e.option.label] + [format_bytes(g[k], units) for k in
                                    ("params", "gradients", "optimizer_states", "activations", "buffers", "total")]
        cells += [format_bytes(e.cpu_bytes_per_node, units), format_bytes(e.nvme_bytes_per_node, units),
                  format_bytes(e.comm_bytes_per_gpu_per_step, "si"), format_seconds(e.comm_seconds_per_step),
                  "yes" if e.fits else "no (" + ", ".join(e.limits) + ")"]
        lines.append("| " + " | ".join(cells) + " |")
    chosen = plan.recommendation.option
    lines += ["", f"**Recommendation:** {chosen.option.label if chosen else 'nothing fits'}. "
              f"{plan.recommendation.reason}", "", "Assumptions:"]
    lines += [f"- {note}" for note in plan.assumptions]
    return "\n".join(lines) + "\n"
