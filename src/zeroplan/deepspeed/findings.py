"""What `zeroplan check` reports: the rule catalogue (stable ids), findings, and the report of one file.

A rule id never changes meaning once released, so CI logs and suppressions stay valid. Severities:
- error: DeepSpeed refuses the config, or the run is predicted not to fit (exit 1);
- warning: DeepSpeed accepts it but silently does something else than it says (exit 1 with --strict);
- note: something could not be checked (an unresolved "auto"); never fails the check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR = "error"
WARNING = "warning"
NOTE = "note"
SEVERITIES = (ERROR, WARNING, NOTE)


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    summary: str


RULES: dict[str, Rule] = {rule.id: rule for rule in (
    Rule("ZP001", "batch-size-identity",
         "train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps × dp world size"),
    Rule("ZP002", "fp16-and-bf16", "fp16 and bf16 cannot both be enabled"),
    Rule("ZP003", "offload-ignored", "offload_param below stage 3 (or any offload at stage 0) is silently ignored"),
    Rule("ZP004", "nvme-below-stage-3", "NVMe offload below stage 3 silently runs on CPU memory"),
    Rule("ZP005", "nvme-without-path", "an NVMe offload block needs nvme_path"),
    Rule("ZP006", "partial-offload-below-stage-3", "offload_optimizer.ratio < 1 needs stage 3"),
    Rule("ZP007", "deprecated-key", "a deprecated key, with its replacement"),
    Rule("ZP008", "unknown-key", "a key DeepSpeed does not know (a typo?), with the closest known key"),
    Rule("ZP009", "world-not-divisible", "the world size is not divisible by tp × pp"),
    Rule("ZP010", "tp-across-nodes", "a tensor-parallel group spans nodes"),
    Rule("ZP011", "gpu-oom", "predicted GPU memory above the usable budget"),
    Rule("ZP012", "cpu-ram-overflow", "predicted CPU RAM per node above the usable host memory"),
    Rule("ZP013", "nvme-overflow", "predicted NVMe use per node above the drive capacity"),
    Rule("ZP014", "bucket-budget", "communication buckets take too much of the usable GPU memory"),
    Rule("ZP015", "unresolved-auto", "an \"auto\" value that no flag resolves, so a rule could not run"),
    Rule("ZP016", "invalid-value", "a value DeepSpeed rejects (wrong type or out of range)"),
    Rule("ZP017", "duplicate-key", "a key given twice in one object (DeepSpeed rejects the file)"),
    Rule("ZP018", "pipeline-with-zero-2-3", "pipeline parallelism (pp > 1) with ZeRO stage 2 or 3"),
    Rule("ZP019", "coerced-value", "a value DeepSpeed converts before use (\"3\" is read as stage 3); says what it reads"),
    Rule("ZP020", "removed-key", "a key DeepSpeed has removed: it refuses the config at start-up"),
    Rule("ZP021", "ep-not-dividing-experts", "expert parallelism (ep) does not divide the model's experts"),
    Rule("ZP022", "expert-layout", "ep × etp does not divide a pipeline stage's ranks, or an expert tensor-parallel "
         "size DeepSpeed's AutoEP does not support"),
    Rule("ZP023", "ep-across-nodes", "an expert-parallel group spans nodes: its all-to-all runs on the network"),
    Rule("ZP024", "capacity-drops-tokens", "an expert capacity factor drops the tokens routed beyond it"),
)}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    message: str
    fix: str = ""
    path: tuple[str, ...] = ()  # DeepSpeed key path the finding is about, e.g. ("zero_optimization", "stage")
    file: str = ""
    line: int | None = None
    column: int | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown rule id {self.rule}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity}")

    @property
    def name(self) -> str:
        return RULES[self.rule].name

    @property
    def key(self) -> str:
        return ".".join(self.path)

    def to_dict(self) -> dict:
        return {"rule": self.rule, "name": self.name, "severity": self.severity, "message": self.message,
                "fix": self.fix, "key": self.key or None, "file": self.file, "line": self.line,
                "column": self.column}


@dataclass(frozen=True)
class Skipped:
    """A rule that could not run, and what would let it run."""

    rules: tuple[str, ...]
    reason: str

    def to_dict(self) -> dict:
        return {"rules": list(self.rules), "reason": self.reason}


@dataclass
class FileReport:
    file: str
    kind: str  # "deepspeed", "plan" or "accelerate"
    checked_file: str  # the DeepSpeed config actually checked (an accelerate config may point elsewhere)
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    repeated: int = 0  # findings left out: the same ones on the same lines, reported above for checked_file

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def failed(self, strict: bool) -> bool:
        return self.count(ERROR) > 0 or (strict and self.count(WARNING) > 0)

    def to_dict(self) -> dict:
        return {"file": self.file, "kind": self.kind, "checked_file": self.checked_file,
                "findings": [f.to_dict() for f in self.findings],
                "skipped": [s.to_dict() for s in self.skipped], "assumptions": list(self.assumptions),
                "repeated": self.repeated,
                "summary": {s + "s": self.count(s) for s in SEVERITIES}}


def summary_text(reports: list[FileReport]) -> str:
    counts = {s: sum(r.count(s) for r in reports) for s in SEVERITIES}
    parts = [f"{n} {s}{'' if n == 1 else 's'}" for s, n in counts.items()]
    return ", ".join(parts)
