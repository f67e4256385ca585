"""How well `zeroplan plan`'s step time holds on published training runs, each pinned to its published layout.

Two sets, scored separately (benchmarks/data/):
- calibration_runs.json: shared/reference/published-runs.md (Narayanan Tables 1-2, MT-NLG, Korthikanti Table 5,
  BLOOM, OPT). The only runs the step-time constants may be fitted on (benchmarks/fit_step_time.py).
- heldout_runs.json: 41 other published runs (DGXC/NeMo recipes, torchtitan, MosaicML, Llama 3, Nemotron-4, ...),
  never fitted on. The headline uses the tier-A rows whose every figure the step needs is published; the rest
  are listed and summarised apart.

Each run goes through the same path as `zeroplan plan`: PlanInputs -> resolve -> layout_search.search with every
search dimension pinned to the published value (tp, pp, cp, virtual stages, ZeRO stage, micro-batch, recompute,
sequence parallelism, flash attention); the step time is the evaluated plan's, whether or not zeroplan thinks it
fits in memory (a "no fit" is reported). A layout zeroplan cannot express or refuses is counted as refused.

The published metric becomes seconds per optimizer step exactly as the source counts it (see `published_step`).
Score: |ln(predicted / published)|: mean and worst, per set; for the calibration set also leave-one-out
cross-validated when the fit script is importable (each run predicted with constants fitted on the others).

Usage: python benchmarks/published_runs.py [--set calibration|heldout|all] [--runs] [--json OUT] [--no-cv]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from zeroplan.core.errors import InputError
from zeroplan.core.layout_search import search
from zeroplan.core.step_time import narayanan_flops_per_iteration
from zeroplan.search.inputs import PlanInputs, resolve

DATA = Path(__file__).resolve().parent / "data"
_CONFIG_DIR = Path(tempfile.mkdtemp(prefix="zeroplan-runs-"))


def load(name: str) -> list[dict]:
    return json.loads((DATA / f"{name}_runs.json").read_text())["runs"]


def _field(run: dict, key: str, default=None):
    layout = run.get("layout")
    if layout is not None and key in layout:
        return layout[key]
    return run.get(key, default)


def layout_of(run: dict) -> dict:
    """The published layout, with the held-out file's field names mapped and unknowns filled (and noted)."""
    notes = list(run.get("assumptions", []))
    tp, pp = _field(run, "tp"), _field(run, "pp")
    cp = _field(run, "cp", 1) or 1
    v = _field(run, "virtual_stages") or _field(run, "vpp") or 1
    stage = _field(run, "zero_stage")
    if stage is None:
        stage = 1
        notes.append("ZeRO stage not published: ZeRO-1")
    mb = _field(run, "micro_batch")
    gpus = run["gpus"]
    dp = gpus // (tp * pp * cp)
    batch = run.get("global_batch")
    if batch is None:
        batch = dp * (mb or 1) * max(1, pp * v if pp > 1 else 1)
        notes.append(f"global batch not published: {batch} (one round of micro-batches)")
    if mb is None:
        per_rank = batch // dp
        mb = next(b for b in (8, 4, 2, 1) if per_rank % b == 0)
        notes.append(f"micro-batch not published: {mb}")
    recompute = _field(run, "recompute")
    if recompute in (None, "unknown"):
        recompute = "selective"
        notes.append("recompute not published: selective")
    sp = bool(_field(run, "sequence_parallel", False)) and tp > 1
    flash = bool(_field(run, "flash_attention", False))
    return dict(tp=tp, pp=pp, cp=cp, dp=dp, v=v, stage=stage, mb=mb, batch=batch, recompute=recompute, sp=sp,
                flash=flash, notes=notes)


def published_step(run: dict, layout: dict, model) -> float:
    """Seconds per optimizer step, from the metric as its source counts it."""
    metric = run.get("metric") or {"kind": run["metric_kind"], "value": run["value"]}
    kind, value = metric["kind"], float(metric["value"])
    gpus, seq, batch = run["gpus"], run.get("seq") or run.get("seq_len"), layout["batch"]
    tokens = batch * seq
    if kind == "step_s":
        return value
    if kind == "tokens_per_s_per_gpu":
        return tokens / (value * gpus)
    if kind in ("nar_tflops", "hw_tflops"):
        flops = narayanan_flops_per_iteration(batch, seq, model.layers, model.hidden, model.vocab)
        return flops / (value * 1e12 * gpus)
    if kind == "bloom_tflops":
        return 8 * metric.get("params", model.params) * tokens / (value * 1e12 * gpus)
    if kind == "tflops_per_gpu":
        counting = run.get("counting", "")
        if "hardware" in counting.lower() or "recompute" in run.get("name", "").lower() or "NeoX" in run["id"]:
            flops = narayanan_flops_per_iteration(batch, seq, model.layers, model.hidden, model.vocab)
        else:  # model FLOPs: 6N + attention (12·L·w·s per token), no recompute
            width = model.heads * (model.head_dim or model.hidden // model.heads)
            flops = tokens * (6 * model.params + 12 * model.layers * width * seq)
        return flops / (value * 1e12 * gpus)
    raise ValueError(f"unknown metric kind {kind}")


@dataclass
class Outcome:
    run: dict
    published: float | None
    predicted: float | None
    fits: bool | None
    refused: str | None
    notes: list[str]
    plan: object = None

    @property
    def error(self) -> float | None:
        if self.predicted is None or self.published is None:
            return None
        return math.log(self.predicted / self.published)


def plan_inputs(run: dict, layout: dict) -> PlanInputs:
    path = _CONFIG_DIR / (run["id"].replace("/", "_").replace(" ", "_") + ".json")
    path.write_text(json.dumps(run["model_config"]))
    overrides = dict(run.get("overrides", {}))
    if run.get("inter_node_bandwidth"):
        overrides["inter_node_bandwidth"] = run["inter_node_bandwidth"]
    extra = {}
    if layout["cp"] > 1:
        extra["cp"] = str(layout["cp"])
    if layout["stage"] >= 2 and layout["pp"] > 1:
        extra["fsdp_pipeline"] = True
    return PlanInputs(gpus=run["gpus"], global_batch=layout["batch"], seq_len=run.get("seq"), model=str(path),
                      cluster=run["cluster"], stages=str(layout["stage"]), offload=False,
                      recompute=layout["recompute"], sequence_parallel="on" if layout["sp"] else "off",
                      virtual_stages=str(layout["v"]), micro_batches=str(layout["mb"]), tp=str(layout["tp"]),
                      pp=str(layout["pp"]), allow_cross_node_tp=True, flash_attention=layout["flash"],
                      **overrides, **extra)


def resolve_run(run: dict):
    """(layout, resolved plan request or None, refusal reason or None)."""
    layout = layout_of(run)
    try:
        inputs = plan_inputs(run, layout)
    except TypeError as exc:  # a flag zeroplan does not have (e.g. cp before it existed)
        return layout, None, f"not expressible: {exc}"
    try:
        return layout, resolve(inputs).request, None
    except InputError as exc:
        return layout, None, f"refused: {exc}"


def predict(run: dict, request=None, layout=None) -> Outcome:
    if request is None:
        layout, request, refused = resolve_run(run)
        if request is None:
            return Outcome(run, None, None, None, refused, layout["notes"])
    model = request.model
    published = published_step(run, layout, model)
    try:
        result = search(request)
    except InputError as exc:
        return Outcome(run, published, None, None, f"refused: {exc}", layout["notes"])
    plans = [p for p in result.plans if not p.option.offloads]
    if not plans:
        reasons = {**result.rejected_layouts, **result.skipped}
        return Outcome(run, published, None, None, "refused: " + "; ".join(reasons) or "nothing evaluated",
                       layout["notes"])
    plan = min(plans, key=lambda p: p.time.total)
    return Outcome(run, published, plan.time.total, plan.fits, None, layout["notes"], plan)


def summary(outcomes: list[Outcome]) -> dict:
    errors = [abs(o.error) for o in outcomes if o.error is not None]
    refused = [o for o in outcomes if o.refused]
    if not errors:
        return {"runs": len(outcomes), "scored": 0, "refused": len(refused)}
    worst = max(outcomes, key=lambda o: abs(o.error) if o.error is not None else -1)
    return {"runs": len(outcomes), "scored": len(errors), "refused": len(refused),
            "mean_abs_ln": statistics.fmean(errors), "worst_abs_ln": max(errors),
            "worst_factor": math.exp(max(errors)), "worst_run": worst.run["id"],
            "within_25pct": sum(e <= math.log(1.25) for e in errors)}


def print_runs(title: str, outcomes: list[Outcome], cv: dict[str, float] | None = None) -> None:
    print(f"\n{title}")
    head = f"{'run':<52} {'published s':>11} {'predicted s':>11} {'ratio':>6}"
    print(head + ("  cv ratio" if cv else "") + "  note")
    for o in outcomes:
        name = o.run["id"][:52]
        if o.predicted is None:
            pub = f"{o.published:11.3f}" if o.published else f"{'-':>11}"
            print(f"{name:<52} {pub} {'-':>11} {'-':>6}  {o.refused}")
            continue
        ratio = o.predicted / o.published
        cv_text = f"  {cv[o.run['id']]:8.2f}" if cv and o.run["id"] in cv else ("  " + " " * 8 if cv else "")
        note = "" if o.fits else "  (zeroplan: does not fit in memory)"
        print(f"{name:<52} {o.published:11.3f} {o.predicted:11.3f} {ratio:6.2f}{cv_text}{note}")


def print_summary(label: str, s: dict) -> None:
    if not s.get("scored"):
        print(f"{label}: {s['runs']} runs, none scored ({s['refused']} refused)")
        return
    print(f"{label}: {s['scored']}/{s['runs']} scored, {s['refused']} refused; mean |ln(pred/pub)| "
          f"{s['mean_abs_ln']:.3f}, worst {s['worst_abs_ln']:.3f} ({s['worst_factor']:.2f}x, {s['worst_run']}); "
          f"within 25%: {s['within_25pct']}/{s['scored']}")


def cross_validated(runs: list[dict]) -> dict[str, float] | None:
    """Leave-one-out: predicted/published of each run with constants fitted on the others (fit_step_time)."""
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import fit_step_time
    except ImportError:
        return None
    return fit_step_time.leave_one_out(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("calibration", "heldout", "all"), default="all")
    parser.add_argument("--runs", action="store_true", help="print every run, not only the summary")
    parser.add_argument("--no-cv", action="store_true", help="skip the leave-one-out cross-validation")
    parser.add_argument("--json", help="write every outcome and summary here")
    args = parser.parse_args()
    report: dict = {}
    if args.set in ("calibration", "all"):
        runs = load("calibration")
        outcomes = [predict(run) for run in runs]
        cv = None if args.no_cv else cross_validated(runs)
        if args.runs:
            print_runs("CALIBRATION (in-sample; cv = leave-one-out)", outcomes, cv)
        s = summary(outcomes)
        print_summary("calibration, in-sample", s)
        report["calibration"] = s
        if cv:
            errors = [abs(math.log(r)) for r in cv.values()]
            worst = max(cv, key=lambda k: abs(math.log(cv[k])))
            print(f"calibration, leave-one-out: {len(errors)} runs; mean |ln| {statistics.fmean(errors):.3f}, "
                  f"worst {max(errors):.3f} ({math.exp(max(errors)):.2f}x, {worst})")
            report["calibration_loo"] = {"mean_abs_ln": statistics.fmean(errors), "worst_abs_ln": max(errors)}
        report["calibration_runs"] = [_row(o) for o in outcomes]
    if args.set in ("heldout", "all"):
        runs = load("heldout")
        outcomes = [predict(run) for run in runs]
        headline = [o for o in outcomes if o.run["headline"]]
        rest = [o for o in outcomes if not o.run["headline"]]
        if args.runs:
            print_runs("HELD-OUT, headline (tier A, every figure published)", headline)
            print_runs("HELD-OUT, the rest (tier B/C or figures assumed)", rest)
        for label, group in (("held-out headline", headline), ("held-out rest", rest), ("held-out all", outcomes)):
            s = summary(group)
            print_summary(label, s)
            report[label] = s
        report["heldout_runs"] = [_row(o) for o in outcomes]
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


def _row(o: Outcome) -> dict:
    return {"id": o.run["id"], "published_s": o.published, "predicted_s": o.predicted, "fits": o.fits,
            "refused": o.refused, "notes": o.notes}


if __name__ == "__main__":
    main()
