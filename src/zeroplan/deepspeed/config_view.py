"""Typed reads of a DeepSpeed config dict, with Hugging Face "auto" values resolved from what is known.

Hugging Face's Trainer (and accelerate) fill "auto" at launch: micro batch and accumulation from the
training arguments, train_batch_size = micro × accumulation × world, reduce_bucket_size = h²,
stage3_prefetch_bucket_size = 0.9·h², stage3_param_persistence_threshold = 10·h (h = hidden size).
An "auto" nothing here resolves becomes a note, and the rules that needed it are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zeroplan.deepspeed.findings import ERROR, NOTE, Finding

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

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.sp

    @property
    def dp(self) -> int | None:
        if self.world is None or self.world % self.model_parallel:
            return None
        return self.world // self.model_parallel


def _as_count(value) -> int | None:
    """5e8, 500000000 or "500000000" -> 500000000; anything else -> None. Booleans are not counts."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


@dataclass
class ConfigView:
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

    @property
    def zero(self) -> dict:
        value = self.data.get("zero_optimization")
        if isinstance(value, bool):  # the deprecated boolean form means stage 1 (or 0)
            return {"stage": int(value)}
        if value is not None and not isinstance(value, dict):
            self._report(Finding("ZP016", ERROR, f"zero_optimization must be an object, got {value!r}",
                                 'write "zero_optimization": {"stage": 2, ...}', ("zero_optimization",)))
        return value if isinstance(value, dict) else {}

    @property
    def stage(self) -> int | None:
        value = self.zero.get("stage", 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 3:
            self._report(Finding("ZP016", ERROR, f"zero_optimization.stage must be 0, 1, 2 or 3, got {value!r}",
                                 "write a whole number 0-3", ("zero_optimization", "stage")))
            return None
        return value

    def offload(self, block: str) -> dict:
        value = self.zero.get(block)
        return value if isinstance(value, dict) else {}

    def device(self, block: str) -> str:
        value = self.offload(block).get("device", "none")
        text = "none" if value is None else str(value).lower()
        if text not in TIERS:
            self._report(Finding("ZP016", ERROR, f"{block}.device must be none, cpu or nvme, got {value!r}",
                                 "use none, cpu or nvme", ("zero_optimization", block, "device")))
            return "none"
        return text

    def count(self, path: tuple[str, ...], default: int | None = None, positive: bool = False) -> int | None:
        """A whole-number setting; "auto" resolved where possible; None when absent, unresolved or invalid."""
        value = self.raw(*path)
        if value is None:
            return default
        if value == AUTO:
            return self._auto(path)
        number = _as_count(value)
        if number is None or number < (1 if positive else 0):
            need = "a positive whole number" if positive else "a whole number ≥ 0"
            self._report(Finding("ZP016", ERROR, f"{'.'.join(path)} must be {need}, got {value!r}",
                                 f"write {need}", path))
            return None
        return number

    def enabled(self, section: str) -> bool | None:
        """fp16/bf16 "enabled": True, False, or None for an "auto" nothing resolves."""
        block = self.data.get(section)
        if block is not None and not isinstance(block, dict):
            self._report(Finding("ZP016", ERROR, f"{section} must be an object, got {block!r}",
                                 f'write "{section}": {{"enabled": true}}', (section,)))
        if not isinstance(block, dict):
            return False
        value = block.get("enabled", False)
        if value == AUTO:
            if self.env.precision is None:
                return None
            return self.env.precision == section
        if not isinstance(value, bool):
            self._report(Finding("ZP016", ERROR, f"{section}.enabled must be true or false, got {value!r}",
                                 "write true or false", (section, "enabled")))
            return None
        return value

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
