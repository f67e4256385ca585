"""Typed reads of a DeepSpeed config dict, with Hugging Face "auto" values resolved from what is known.

Hugging Face's Trainer (and accelerate) fill "auto" at launch: micro batch and accumulation from the
training arguments, train_batch_size = micro × accumulation × world, reduce_bucket_size = h²,
stage3_prefetch_bucket_size = 0.9·h², stage3_param_persistence_threshold = 10·h (h = hidden size).
An "auto" nothing here resolves becomes a note, and the rules that needed it are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from zeroplan.deepspeed import startup_model
from zeroplan.deepspeed.findings import ERROR, NOTE, WARNING, Finding

AUTO = "auto"
TIERS = ("none", "cpu", "nvme")


@dataclass
class Environment:
    """Facts about the run, resolved from the check context (None = unknown)."""

    world: int | None = None
    tp: int = 1
    pp: int = 1
    sp: int = 1  # DeepSpeed's sequence_parallel_size also divides the data-parallel world
    gpus_per_node: int | None = None
    hidden: int | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    global_batch: int | None = None
    precision: str | None = None
    ep: int = 1  # expert parallelism: flags or a plan file, else the config's expert_parallel (AutoEP) block
    etp: int = 1

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.sp

    @property
    def dp(self) -> int | None:
        if self.world is None or self.world % self.model_parallel:
            return None
        return self.world // self.model_parallel


def _as_count(value) -> int | None:
    """A batch size as DeepSpeed uses it (raw: it does arithmetic on the value, never converts a string).

    Whole numbers only (hjson already reads 8.0 as 8); booleans are not counts."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _shown(value) -> str:
    return json.dumps(value) if isinstance(value, (str, bool, int, float)) or value is None else repr(value)


@dataclass
class ConfigView:
    """Typed reads of a DeepSpeed config, each value as DeepSpeed 0.19.8 reads it.

    What DeepSpeed refuses is reported once, by startup_model.refusals (check's runner turns those into
    ZP016/ZP020); a typed read of a refused value gives None (or the default) and reports nothing more.
    A value DeepSpeed converts ("3" -> 3, "on" -> true, "auto" dropped outside the Trainer's keys) is
    used as converted, with a ZP019 note.
    """

    data: dict
    env: Environment
    findings: list[Finding] = field(default_factory=list)
    _reported: set = field(default_factory=set)

    def _report(self, finding: Finding) -> None:
        if (finding.rule, finding.path) not in self._reported:
            self._reported.add((finding.rule, finding.path))
            self.findings.append(finding)

    def raw(self, *path: str):
        node = self.data
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    def coerced(self, path: tuple[str, ...], value, convert):
        """`value` as DeepSpeed converts it, or None when it refuses it (reported by the refusal pass)."""
        try:
            result = convert(value)
        except startup_model.Refused:
            return None
        if type(result) is not type(value) and not (isinstance(value, float) and isinstance(result, int)):
            self._report(Finding("ZP019", NOTE, f"{'.'.join(path)} is {_shown(value)}: DeepSpeed reads it as "
                                 f"{_shown(result)}", f"write {_shown(result)} to say what DeepSpeed reads", path))
        return result

    @property
    def zero(self) -> dict:
        value = self.data.get("zero_optimization")
        if isinstance(value, bool):  # the deprecated boolean form means stage 1 (or 0)
            return {"stage": int(value)}
        return value if isinstance(value, dict) else {}  # null, a string or a list: refused (ZP016)

    @property
    def stage(self) -> int | None:
        path = ("zero_optimization", "stage")
        value = self.zero.get("stage", 0)
        if value == AUTO:  # DeepSpeed drops "auto" and uses the default; no launcher fills the stage
            self._report(Finding("ZP019", NOTE, 'zero_optimization.stage is "auto": DeepSpeed drops it and uses '
                                 "stage 0 (ZeRO off)", "write the stage you mean, 0-3", path))
            return 0
        return self.coerced(path, value, startup_model.to_stage)

    @property
    def overlap_comm(self) -> bool | None:
        """As DeepSpeed reads it ("yes" is true); None when absent, "auto" or refused (DeepSpeed: stage == 3)."""
        value = self.zero.get("overlap_comm")
        if value is None or value == AUTO:
            return None
        return self.coerced(("zero_optimization", "overlap_comm"), value, startup_model.to_bool)

    def offload(self, block: str) -> dict:
        value = self.zero.get(block)
        return value if isinstance(value, dict) else {}  # null means off; anything else is refused (ZP016)

    def device(self, block: str) -> str:
        value = self.offload(block).get("device", "none")
        if value == AUTO:  # dropped by DeepSpeed: the default, none
            return "none"
        return value if value in TIERS else "none"  # anything else is refused (ZP016)

    def count(self, path: tuple[str, ...], default: int | None = None, positive: bool = False) -> int | None:
        """A whole-number setting; "auto" resolved where possible; None when absent, unresolved or invalid.

        Inside zero_optimization the value is coerced as DeepSpeed's model does ("5" -> 5); the batch keys
        at the top level are used raw, as DeepSpeed does, so a string there is refused here."""
        value = self.raw(*path)
        if value is None:
            return default
        if value == AUTO:
            return self._auto(path)
        if path[0] == "zero_optimization":
            return self.coerced(path, value, startup_model.to_int)
        number = _as_count(value)
        if number is None or number < (1 if positive else 0):
            need = "a positive whole number" if positive else "a whole number ≥ 0"
            if isinstance(value, float) and value >= (1 if positive else 0):
                self._report(Finding("ZP001", WARNING, f"{'.'.join(path)} is {value!r}, not a whole number: "
                                     "DeepSpeed's start-up arithmetic may accept it, but a batch holds whole "
                                     "samples", f"write {need}", path))
                return None
            why = " (DeepSpeed does arithmetic on it and fails on a string)" if isinstance(value, str) else ""
            self._report(Finding("ZP016", ERROR, f"{'.'.join(path)} must be {need}, got {value!r}{why}",
                                 f"write {need}", path))
            return None
        return number

    def enabled(self, section: str) -> bool | None:
        """fp16/bf16 "enabled": True, False, or None for an "auto" nothing resolves (or a refused value)."""
        block = self.data.get(section)
        if not isinstance(block, dict):
            return False  # absent, or refused (ZP016)
        value = block.get("enabled", False)
        if value == AUTO:
            if self.env.precision is None:
                return None
            return self.env.precision == section
        return self.coerced((section, "enabled"), value, startup_model.to_bool)

    def _auto(self, path: tuple[str, ...]) -> int | None:
        env, key = self.env, path[-1]
        hidden = env.hidden
        resolved, needs = None, ""
        if key == "train_micro_batch_size_per_gpu":
            resolved, needs = env.micro_batch, "--micro-batch"
        elif key == "gradient_accumulation_steps":
            resolved, needs = env.grad_accum, "--grad-accum"
        elif key == "train_batch_size":
            resolved, needs = env.global_batch, "--global-batch (or --micro-batch, --grad-accum and --gpus)"
            if resolved is None and env.dp is not None:
                micro = self.count(("train_micro_batch_size_per_gpu",), positive=True)
                accum = self.count(("gradient_accumulation_steps",), positive=True)
                if micro is not None and accum is not None:
                    resolved = micro * accum * env.dp
        elif key == "reduce_bucket_size":
            resolved, needs = (None if hidden is None else hidden * hidden), "--hidden or a --model preset (h²)"
        elif key in ("stage3_prefetch_bucket_size", "prefetch_bucket_size"):
            resolved, needs = (None if hidden is None else 9 * hidden * hidden // 10), "--hidden or --model (0.9·h²)"
        elif key in ("stage3_param_persistence_threshold", "param_persistence_threshold"):
            resolved, needs = (None if hidden is None else 10 * hidden), "--hidden or --model (10·h)"
        else:
            needs = "a concrete value"
        if resolved is None:
            self._report(Finding("ZP015", NOTE, f'{".".join(path)} is "auto" (filled by the Hugging Face Trainer '
                                 "or accelerate at launch); the rules that need it were skipped",
                                 f"give {needs} to check it", path))
        return resolved
