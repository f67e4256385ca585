"""Check one file: find what it is, gather the context, run every rule, and place each finding on a line.

A DeepSpeed config is checked as it is. A plan file is checked through the DeepSpeed config it names
(deepspeed_config:) or, without one, through the config `zeroplan export deepspeed` would write for it.
An accelerate config is checked through its deepspeed_config_file, or its inline deepspeed_config keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from zeroplan.check import config_rules, hardware_rules
from zeroplan.deepspeed import planning, startup_model
from zeroplan.inputs import config_files as loaders
from zeroplan.deepspeed.batch import Batch, deepspeed_fill
from zeroplan.deepspeed.config_view import AUTO, ConfigView
from zeroplan.deepspeed.context import CheckContext, from_accelerate, from_plan
from zeroplan.deepspeed.findings import NOTE, SEVERITIES, FileReport, Finding
from zeroplan.inputs.config_files import Source
from zeroplan.deepspeed.plan_file import PLAN_KEY_FOR, PlanFile, referenced_config, validate_plan
from zeroplan.core.errors import InputError, ref

# Where the DeepSpeed settings an inline accelerate config holds sit in its YAML.
ACCELERATE_KEY_FOR = {
    "zero_optimization.stage": ("deepspeed_config", "zero_stage"),
    "zero_optimization.offload_optimizer": ("deepspeed_config", "offload_optimizer_device"),
    "zero_optimization.offload_param": ("deepspeed_config", "offload_param_device"),
    "gradient_accumulation_steps": ("deepspeed_config", "gradient_accumulation_steps"),
    "fp16": ("mixed_precision",),
    "bf16": ("mixed_precision",),
}
Mapper = Callable[[tuple[str, ...]], tuple[str, ...]]


def _same(path: tuple[str, ...]) -> tuple[str, ...]:
    return path


def _mapper(table: Mapping[str, tuple[str, ...]]) -> Mapper:
    def to_file_key(path: tuple[str, ...]) -> tuple[str, ...]:
        for end in range(len(path), 0, -1):  # the longest prefix the table knows
            if ".".join(path[:end]) in table:
                return table[".".join(path[:end])]
        return ()
    return to_file_key


def run_rules(data: dict, context: CheckContext, duplicates: Sequence[tuple[str, ...]] = ()) -> FileReport:
    """Every rule over one DeepSpeed config dict (findings not yet placed on lines)."""
    report = FileReport(file="", kind="deepspeed", checked_file="")
    view = ConfigView(data, planning.environment(context, data))
    findings: list[Finding] = list(config_rules.duplicates(list(duplicates)))
    findings += config_rules.unknown_keys(view)
    findings += config_rules.deprecated(view)
    findings += config_rules.precision(view)
    findings += config_rules.offload(view)
    findings += config_rules.batch_identity(view, report.skipped)
    findings += config_rules.parallel(view, report.skipped)
    findings += config_rules.experts(view, context, report.skipped)
    if not any(f.rule in ("ZP009", "ZP016", "ZP018", "ZP021", "ZP022") for f in findings) and not startup_model.refusals(data):
        findings += hardware_rules.memory(view, context, report.skipped, report.assumptions)
    findings += hardware_rules.buckets(view, context, report.skipped)
    findings += view.findings
    findings += config_rules.refusals(view, findings)
    findings += _overridden_flags(data, context)
    order = {severity: index for index, severity in enumerate(SEVERITIES)}
    report.findings = sorted(findings, key=lambda f: (order[f.severity], f.rule))
    return report


def _overridden_flags(data: dict, context: CheckContext) -> list[Finding]:
    """A flag that fills an "auto" is used; one the config contradicts with a value of its own is not —
    and says so, rather than being ignored silently."""
    notes = []
    for flag, key, given in (("--micro-batch", "train_micro_batch_size_per_gpu", context.micro_batch),
                             ("--grad-accum", "gradient_accumulation_steps", context.grad_accum),
                             ("--global-batch", "train_batch_size", context.global_batch)):
        value = data.get(key) if isinstance(data, dict) else None
        if given is not None and context.origin.get(_FLAG_FIELDS[flag]) == "flag" and isinstance(value, int) \
                and not isinstance(value, bool) and value != given:
            notes.append(Finding("ZP015", NOTE, f"{flag} {given} not used: the config sets {key} = {value}",
                                 f"set {key} to \"auto\" to take it from the flag, or drop {flag}", (key,)))
    return notes


_FLAG_FIELDS = {"--micro-batch": "micro_batch", "--grad-accum": "grad_accum", "--global-batch": "global_batch"}


def _placed(report: FileReport, source: Source, mapper: Mapper) -> FileReport:
    placed = []
    for finding in report.findings:
        key = mapper(finding.path) if finding.path else ()
        mark = source.locate(key, occurrence=2 if finding.rule == "ZP017" else 1) if key else None
        if mark is None and key:  # the key itself is absent: point at its parent block when there is one
            for end in range(len(key) - 1, 0, -1):
                mark = source.locate(key[:end])
                if mark:
                    break
        line, column = mark if mark else (None, None)
        placed.append(Finding(finding.rule, finding.severity, finding.message, finding.fix, finding.path,
                              source.name, line, column))
    report.findings = placed
    return report


def _check_deepspeed(source: Source, context: CheckContext, shown_as: str, kind: str) -> FileReport:
    if loaders.detect_kind(source) != "deepspeed":
        raise InputError(source.name, "is not a DeepSpeed config", "point at the ds_config.json file")
    report = _placed(run_rules(source.mapping(), context, source.duplicates), source, _same)
    report.file, report.kind, report.checked_file = shown_as, kind, source.name
    return report


def _resolve_relative(reference: str, base: Path) -> Path:
    candidate = Path(reference)
    if candidate.is_absolute() or not (base.parent / candidate).exists():
        return candidate  # accelerate resolves it from the working directory
    return base.parent / candidate


def _check_plan(source: Source, context: CheckContext) -> FileReport:
    plan = validate_plan(source)
    context = context.under(from_plan(plan))
    reference = referenced_config(plan, source.path)
    if reference is not None:
        return _check_deepspeed(loaders.load(reference), context, source.name, "plan")
    from zeroplan.deepspeed import config_writer as deepspeed_config
    from zeroplan.deepspeed.choose import choose

    given = {"train_batch_size": context.global_batch, "train_micro_batch_size_per_gpu": context.micro_batch,
             "gradient_accumulation_steps": context.grad_accum}
    zero = plan.zero
    try:
        # The option and buckets come from export (the closest one when nothing fits, for ZP011 to report);
        # the batch keys stay as the plan gives them, for ZP001.
        choice = choose(_consistent_batch(context), stage=zero.stage if zero else None,
                        offload_optimizer=zero.offload_optimizer if zero else None,
                        offload_params=zero.offload_params if zero else None, force=True)
    except InputError as exc:  # something in the plan is invalid: name the plan section it came from
        raise InputError(f"{source.name}: {_plan_section(exc.input_name, plan)}", exc.problem, exc.fix) from None
    data = deepspeed_config.build(choice, zero.nvme_path if zero else None)
    if any(value is not None for value in given.values()):
        for key, value in given.items():
            data.pop(key)
            if value is not None:
                data[key] = value
    report = _placed(run_rules(data, context), source, _mapper(PLAN_KEY_FOR))
    report.file, report.kind, report.checked_file = source.name, "plan", source.name
    return report


_SECTION_OF_FIELD = {
    "gpu": "cluster", "cluster": "cluster", "gpus": "cluster", "gpus_per_node": "cluster",
    "cpu_memory": "cluster", "nvme": "cluster", "gpu_memory": "cluster", "model": "model",
    "params": "model", "largest_layer_params": "model", "hidden": "model", "tp": "parallel",
    "pp": "parallel", "micro_batch": "training", "grad_accum": "training", "global_batch": "training",
    "seq_len": "training", "recompute": "training", "precision": "training", "optimizer": "training",
}


_ZERO_FIELDS = ("stage", "offload_optimizer", "offload_params", "nvme_path", "zeropp")


def _plan_section(input_name: str, plan: PlanFile) -> str:
    """Where in the plan file an error's input comes from: its section for a field, model.config for the
    config.json it names, zero for stage and offload choices, else the input as the error named it."""
    section = next((section for name, section in _SECTION_OF_FIELD.items() if input_name.startswith(name)), None)
    if section is None and input_name.startswith(_ZERO_FIELDS):
        section = "zero"
    if section is not None:
        return section
    if plan.model is not None and plan.model.config and input_name.endswith(plan.model.config):
        return f"model.config: {input_name}"
    return ref(input_name)  # a field is still written as its reader typed it


def _consistent_batch(context: CheckContext) -> CheckContext:
    """The context with a batch export can use: DeepSpeed's own inference where the identity holds,
    the plan's micro batch and accumulation alone where it does not (ZP001 then reports it)."""
    env = planning.environment(context, {})
    filled = None
    if env.dp is not None and (context.global_batch is not None or context.micro_batch is not None):
        filled = deepspeed_fill(context.global_batch, context.micro_batch, context.grad_accum, env.dp)
    if isinstance(filled, Batch):
        return dataclasses.replace(context, micro_batch=filled.micro_batch, grad_accum=filled.accumulation,
                                   global_batch=None)
    return dataclasses.replace(context, global_batch=None)


def _inline_accelerate_config(settings: dict) -> dict:
    """The DeepSpeed config accelerate builds from inline deepspeed_config keys (batch sizes left "auto")."""
    zero: dict = {"stage": settings.get("zero_stage", 2)}
    for block, prefix in (("offload_optimizer", "offload_optimizer"), ("offload_param", "offload_param")):
        device = settings.get(f"{prefix}_device")
        if device not in (None, "none"):
            zero[block] = {"device": device}
            if settings.get(f"{prefix}_nvme_path"):
                zero[block]["nvme_path"] = settings[f"{prefix}_nvme_path"]
    return {"train_micro_batch_size_per_gpu": AUTO, "train_batch_size": AUTO,
            "gradient_accumulation_steps": settings.get("gradient_accumulation_steps", 1),
            "fp16": {"enabled": AUTO}, "bf16": {"enabled": AUTO}, "zero_optimization": zero}


def _check_accelerate(source: Source, context: CheckContext) -> FileReport:
    data = source.mapping()
    if str(data.get("distributed_type", "DEEPSPEED")).upper() != "DEEPSPEED":
        raise InputError(source.name, f"distributed_type is {data.get('distributed_type')}, not DEEPSPEED",
                         "zeroplan check reads DeepSpeed setups only")
    context = context.under(from_accelerate(data, source.name))
    settings = data.get("deepspeed_config") or {}
    if not isinstance(settings, dict):
        raise InputError(source.name, "deepspeed_config must be a mapping", "see accelerate's config docs")
    if settings.get("deepspeed_config_file"):
        reference = _resolve_relative(str(settings["deepspeed_config_file"]), source.path)
        if not reference.exists():
            raise InputError(f"{source.name}: deepspeed_config_file", f"{reference} does not exist (looked beside "
                             "the accelerate config and in the working directory)", "fix the path")
        try:
            referenced = loaders.load(reference)
        except InputError as exc:  # name the accelerate key that points at the unreadable file
            raise InputError(f"{source.name}: deepspeed_config_file: {exc.input_name}", exc.problem, exc.fix) from None
        return _check_deepspeed(referenced, context, source.name, "accelerate")
    report = _placed(run_rules(_inline_accelerate_config(settings), context), source, _mapper(ACCELERATE_KEY_FOR))
    report.file, report.kind, report.checked_file = source.name, "accelerate", source.name
    return report


def check_file(path: str | Path, context: CheckContext) -> FileReport:
    """The report for one file; InputError (exit 2) when it cannot be read or is not a known kind."""
    source = loaders.load(path)
    kind = loaders.detect_kind(source)
    if kind == "plan":
        return _check_plan(source, context)
    if kind == "accelerate":
        return _check_accelerate(source, context)
    return _check_deepspeed(source, context, source.name, "deepspeed")


def check_files(files: Sequence[str | Path], context: CheckContext, plan: str | Path | None = None,
                strict: bool = False) -> tuple[list[FileReport], bool]:
    """What `zeroplan check` and zeroplan.api.check run: the reports of the files (under a plan file's
    settings where one is given, flags first) and whether the check fails (errors; warnings too if strict)."""
    from zeroplan.deepspeed.context import from_plan

    if plan is not None:
        context = context.under(from_plan(validate_plan(loaders.load(plan))))
    reports = [check_file(path, context) for path in files]
    _drop_repeats(reports)
    return reports, any(report.failed(strict) for report in reports)


def _drop_repeats(reports: list[FileReport]) -> None:
    """A DeepSpeed config checked twice in one run (given itself and through the accelerate config or plan
    file that points at it, or named twice) has each finding reported once: a later report leaves out the
    findings already reported for the same file on the same line, and counts them (report.repeated)."""
    seen: dict[Path, set[tuple]] = {}
    for report in reports:
        try:
            key = Path(report.checked_file).resolve()
        except (OSError, RuntimeError):
            continue
        shown = seen.setdefault(key, set())
        kept = []
        for finding in report.findings:
            identity = (finding.rule, finding.severity, finding.message, finding.fix, finding.line, finding.column)
            if identity in shown:
                report.repeated += 1
            else:
                shown.add(identity)
                kept.append(finding)
        report.findings = kept
