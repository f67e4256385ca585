"""Predicted against measured, per stage: every rank's model states byte for byte, and for the most
loaded rank a table of each component with its error. Model states must match exactly; activations
and CUDA memory are reported with their error (see docs/accuracy.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from zeroplan.core.memory.framework_partition import COMPONENTS, TIERS
from zeroplan.validate import FRAMEWORK_LABELS, STAGE_FRAMEWORKS
from zeroplan.validate.config import ValidateConfig
from zeroplan.validate.predict import param_copy_bytes, predict_activations, predict_cuda, predict_states
from zeroplan.render.terminal import Table

PEAK_GOAL = 0.03  # CUDA peak within 3% of the prediction
COMPONENT_LABELS = {"params": "parameters", "gradients": "gradients", "optimizer_states": "optimizer states"}
CUDA_ROWS = (("at_rest", "CUDA allocated at rest"), ("peak_forward_backward", "CUDA peak, fwd+bwd"),
             ("peak_optimizer_step", "CUDA peak, optimizer"), ("peak", "CUDA peak"))


@dataclass
class StageReport:
    stage: int
    framework: str
    most_loaded_rank: int
    measured_most_loaded_rank: int
    rows: list[dict]
    mismatches: list[dict]
    predicted: dict[str, int]
    measured: dict[str, int]
    extra: dict = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return not self.mismatches


def _row(component: str, predicted: int | None, measured: int | None, exact: bool = False) -> dict:
    row: dict[str, str | int | float | None] = {"component": component, "predicted": predicted, "measured": measured,
           "error_bytes": None, "error_pct": None, "status": "not measured"}
    if predicted is None or measured is None:
        return row
    row["error_bytes"] = measured - predicted
    row["error_pct"] = round(100.0 * (measured - predicted) / predicted, 3) if predicted else None
    if exact:
        row["status"] = "exact" if measured == predicted else "MISMATCH"
    elif component == "CUDA peak":
        within = predicted and abs(measured - predicted) <= PEAK_GOAL * predicted
        row["status"] = "within 3%" if within else "off by more than 3%"
    else:
        row["status"] = "reported"
    return row


def _most_loaded(breakdown: dict[str, int], world_size: int) -> int:
    def total(rank: int, tier: str) -> int:
        return sum(breakdown.get(f"rank{rank}/{tier}/{c}", 0) for c in COMPONENTS)
    return -max((total(r, "gpu"), total(r, "cpu"), -r) for r in range(world_size))[2]


def stage_report(config: ValidateConfig, world_size: int, stage: int, results: list[dict]) -> StageReport:
    partition = predict_states(config, world_size, stage)
    by_rank = {item["rank"]: item for item in results if item["stage"] == stage}
    measured = {f"rank{rank}/{key}": value for rank, item in by_rank.items() for key, value in item["held"].items()}
    mismatches = [{"key": key, "predicted": value, "measured": measured.get(key, 0)}
                  for key, value in partition.breakdown.items() if measured.get(key, 0) != value]
    rank = partition.most_loaded_rank
    item = by_rank[rank]
    rows = []
    for tier in TIERS:
        for component in COMPONENTS:
            key = f"rank{rank}/{tier}/{component}"
            if partition.breakdown[key] or measured.get(key, 0):
                where = "" if tier == "gpu" else " (host)"
                rows.append(_row(COMPONENT_LABELS[component] + where, partition.breakdown[key],
                                 measured.get(key, 0), exact=True))
    rows.append(_row("model states", sum(partition.rank(rank).values()),
                     sum(v for k, v in measured.items() if k.startswith(f"rank{rank}/")), exact=True))
    rows.append(_row("activations (saved)", predict_activations(config), item["activations"]))
    rows.append(_row("param copies (fwd)", param_copy_bytes(config, world_size, stage),
                     item["param_copies"]))
    cuda = item.get("cuda")
    predicted_cuda = predict_cuda(config, world_size, stage, partition, rank)
    for key, label in CUDA_ROWS:
        rows.append(_row(label, predicted_cuda[key], cuda[key] if cuda else None))
    extra = {"loss": item["loss"]}
    if cuda:
        extra["activation_share_of_peak_pct"] = round(100.0 * cuda["forward_growth"] / cuda["peak"], 2)
        extra["cuda"] = cuda
    return StageReport(stage, STAGE_FRAMEWORKS[stage], rank, _most_loaded(measured, world_size), rows, mismatches,
                       partition.breakdown, measured, extra)


def build_reports(config: ValidateConfig, world_size: int, results: list[dict]) -> list[StageReport]:
    return [stage_report(config, world_size, stage, results) for stage in config.stages]


def to_json(meta: dict, reports: list[StageReport]) -> str:
    stages = [{"stage": r.stage, "framework": r.framework, "wrapper": FRAMEWORK_LABELS[r.framework],
               "most_loaded_rank": r.most_loaded_rank, "measured_most_loaded_rank": r.measured_most_loaded_rank,
               "model_states_exact": r.exact, "rows": r.rows, "mismatches": r.mismatches,
               "predicted": r.predicted, "measured": r.measured, **r.extra} for r in reports]
    return json.dumps({"meta": meta, "ok": all(r.exact for r in reports), "stages": stages}, indent=2) + "\n"


SHOWN_WITHOUT_CUDA = ("CUDA allocated at rest", "CUDA peak")


def _bytes(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _error(row: dict) -> str:
    if row["error_bytes"] is None:
        return "–"
    if row["error_bytes"] == 0:
        return "0"
    pct = f" ({row['error_pct']:+.1f}%)" if row["error_pct"] is not None else ""
    return f"{row['error_bytes']:+,}{pct}"


def render(meta: dict, reports: list[StageReport], console) -> None:
    console.print(f"zeroplan validate · {meta['world_size']} ranks · {meta['backend']} on {meta['device']} · "
                  f"{meta['precision']} · {meta['optimizer']} · {meta['model']}")
    for report in reports:
        title = (f"stage {report.stage} · {FRAMEWORK_LABELS[report.framework]} ({report.framework}) · "
                 f"most loaded rank {report.most_loaded_rank}")
        table = Table(["component", "predicted", "measured", "error", "status"], "lrrrl", title=title,
                      caption="bytes on the most loaded rank", wrap=("component", "status"))
        for row in report.rows:
            if row["measured"] is None and row["component"] not in SHOWN_WITHOUT_CUDA:
                continue  # per-phase CUDA rows only when there are CUDA numbers
            status = "needs CUDA" if row["measured"] is None else row["status"]
            table.add_row(row["component"], _bytes(row["predicted"]), _bytes(row["measured"]), _error(row), status)
        console.print(table)
        ranks = meta["world_size"]
        if report.exact:
            console.print(f"  model states: exact on all {ranks} ranks")
        else:
            first = report.mismatches[0]
            console.print(f"  model states: {len(report.mismatches)} mismatch(es), first {first['key']}: "
                          f"predicted {first['predicted']:,} B, measured {first['measured']:,} B")
        if "activation_share_of_peak_pct" in report.extra:
            console.print(f"  activations' share of the peak (growth over forward): "
                          f"{report.extra['activation_share_of_peak_pct']:.1f}%")
