"""`zeroplan sweep`: one estimate per (model, GPU type, GPU count) and one row per ZeRO stage, for capacity
planning. Each row: per-GPU memory of the stage without offload, whether it fits, the option `estimate`
recommends for that combination, and the fewest GPUs at which the stage fits (by bisection over dp: every
option's per-GPU bytes are non-increasing in dp)."""

from __future__ import annotations

import dataclasses
from math import lcm
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from zeroplan.core.errors import InputError, ref
from zeroplan.core.evaluate.estimate import EstimateRequest, evaluate_options
from zeroplan.core.options import PAPER_OPTIONS, Option
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.evaluate.recommend import fewest_gpus
from zeroplan.inputs.command_sections import GridInputs
from zeroplan.inputs.sections import (CommandInputs, BudgetInputs, HardwareInputs, ModelInputs, ParallelInputs, StepInputs, flag_of,
                                      Section)
from zeroplan.planning.estimate_plan import build_plan
from zeroplan.inputs.estimate_inputs import EstimateInputs
from zeroplan.inputs.training import resolve_model

PART_NAMES = ("params", "gradients", "optimizer_states", "activations", "buffers")


# The fields `zeroplan sweep` takes from each section (the CLI's options, and the JSON's "inputs").
FIELDS: dict[type[Section], tuple[str, ...]] = {
    GridInputs: ("models", "params", "gpus", "gpu_types", "stages"),
    ParallelInputs: ("tp", "pp", "ep", "etp"),
    HardwareInputs: ("gpus_per_node", "presets_file"),
    StepInputs: ("seq_len", "micro_batch", "recompute", "flash_attention", "precision", "optimizer",
                 "finetune", "lora_rank", "lora_targets", "quant", "double_quant", "freeze", "finetune_recipe"),
    BudgetInputs: ("runtime_reserve", "fragmentation"),
}


@dataclass
class SweepInputs(CommandInputs):
    grid: GridInputs = field(default_factory=GridInputs)
    parallel: ParallelInputs = field(default_factory=ParallelInputs)
    hardware: HardwareInputs = field(default_factory=HardwareInputs)
    step: StepInputs = field(default_factory=StepInputs)
    budget: BudgetInputs = field(default_factory=BudgetInputs)
    units: str = "iec"
    FIELDS: ClassVar[dict[Any, tuple[str, ...]]] = FIELDS

    def echo(self) -> dict[str, Any]:
        values = {name: getattr(self, section.key).as_given(name) for section, names in FIELDS.items()
                  for name in names if flag_of(section, name).echo}
        return {**values, "units": self.units}


def _models(inputs: SweepInputs) -> list[tuple[str, dict[str, str]]]:
    """(label, EstimateInputs fields) per model, in the order given."""
    models = [(name, {"model": name}) for name in inputs.grid.models or ()]
    models += [(count, {"params": count}) for count in inputs.grid.params or ()]
    if not models:
        raise InputError("model/params", "no model given",
                         f"e.g. {ref('models', 'llama-2-7b,llama-2-13b')} or {ref('params', '7e9,13e9')}")
    return models


def _fewest(request: EstimateRequest, option: Option | None) -> int | None:
    """The fewest GPUs (a multiple of tp·pp) at which `option` fits, or any option when None."""
    parallel = request.parallel
    smallest = ParallelDims(lcm(parallel.tp * parallel.pp, parallel.pp * parallel.ep * parallel.etp), parallel.tp,
                            parallel.pp, parallel.gpus_per_node, ep=parallel.ep, etp=parallel.etp)
    options = request.options if option is None else (option,)
    trial = dataclasses.replace(request, parallel=smallest, options=options, micro_batches_per_step=1)
    if any(e.fits for e in evaluate_options(trial)):
        return smallest.world
    found = fewest_gpus(trial)
    return None if found is None else found[0]


def sweep_rows(inputs: SweepInputs, progress: Callable[[int, int], None] | None = None
               ) -> tuple[list[dict[str, Any]], list[str]]:
    """Every row, and the assumptions shared by all of them; progress(done, total) after each grid cell
    (a model × GPU type × GPU count)."""
    grid = inputs.grid
    counts = grid.gpus
    stages = grid.stages or (0, 1, 2, 3)
    gpu_types: list[str | None] = list(grid.gpu_types or ()) or [None]
    rows: list[dict[str, Any]] = []
    assumptions: list[str] = []
    fewest_cache: dict[tuple, int | None] = {}
    models = _models(inputs)
    total, done = len(models) * len(gpu_types) * len(counts), 0
    for label, model_fields in models:
        model = ModelInputs(**model_fields)
        # The step's shape goes only with a shaped model (a bare count has no activations to size).
        step = (inputs.step if resolve_model(model).shape is not None
                else StepInputs(precision=inputs.step.precision, optimizer=inputs.step.optimizer))
        for gpu in gpu_types:
            for count in counts:
                plan = build_plan(EstimateInputs(
                    model=model, hardware=dataclasses.replace(inputs.hardware, gpus=count, gpu=gpu),
                    parallel=inputs.parallel, step=step, budget=inputs.budget, units=inputs.units))
                assumptions.extend(note for note in plan.assumptions if note not in assumptions)
                rows.extend(_rows_for(plan, label, stages, fewest_cache))
                done += 1
                if progress is not None:
                    progress(done, total)
    return rows, assumptions


def _rows_for(plan, label: str, stages: tuple[int, ...], fewest_cache: dict) -> list[dict[str, Any]]:
    request, recommended = plan.request, plan.recommendation.option
    parallel, cluster = request.parallel, request.cluster
    by_option = {e.option: e for e in plan.estimates}
    rows = []
    for stage in stages:
        option = Option(stage)
        estimate = by_option.get(option)
        key = (label, cluster.gpu.name, parallel.tp, parallel.pp, parallel.ep, parallel.etp)
        if (key, stage) not in fewest_cache:
            fewest_cache[(key, stage)] = _fewest(request, option) if estimate is not None else None
        if (key, None) not in fewest_cache:
            fewest_cache[(key, None)] = _fewest(dataclasses.replace(request, options=PAPER_OPTIONS if parallel.pp == 1
                                                                    else request.options), None)
        row: dict[str, Any] = {
            "model": label if request.model.name == "custom" else request.model.name,
            "params": request.model.params, "gpu": cluster.gpu.name,
            "gpus": parallel.world, "nodes": parallel.nodes, "dp": parallel.dp, "tp": parallel.tp, "pp": parallel.pp,
            "stage": stage}
        if parallel.has_experts_grid:  # the experts' cut, only where it differs from the dense layers'
            row.update(ep=parallel.ep, etp=parallel.etp, edp=parallel.edp)
        parts = estimate.gpu_bytes if estimate is not None else {}
        row.update({f"gpu_bytes_{name}": parts.get(name, "") for name in PART_NAMES})
        row.update(gpu_bytes_total=parts.get("total", ""), usable_gpu_bytes=request.budget.usable_gpu_bytes,
                   gpu_capacity_bytes=cluster.gpu.memory_bytes,
                   fits="" if estimate is None else "gpu" not in estimate.limits,
                   min_gpus_stage=fewest_cache[(key, stage)] or "",
                   # as estimate's column: whether this row's option is the one estimate recommends
                   recommended=recommended is not None and recommended.option == option,
                   recommended_option=recommended.option.label if recommended else "",
                   recommended_gpu_bytes=recommended.gpu_bytes["total"] if recommended else "",
                   min_gpus_any_option=fewest_cache[(key, None)] or "",
                   note="" if estimate is not None else "DeepSpeed's pipeline engine runs ZeRO stages 0-1 only")
        rows.append(row)
    return rows
