"""One planning option: a ZeRO stage with its offload tiers, and the options each convention covers."""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError, ref

TIERS = ("none", "cpu", "nvme")
CONVENTIONS = ("paper", "deepspeed", "framework")


@dataclass(frozen=True)
class Option:
    stage: int
    offload_optimizer: str = "none"
    offload_params: str = "none"

    def __post_init__(self) -> None:
        if self.stage not in (0, 1, 2, 3):
            raise InputError("stage", f"ZeRO stage must be 0, 1, 2 or 3, got {self.stage}")
        for flag, tier in (("offload_optimizer", self.offload_optimizer), ("offload_params", self.offload_params)):
            if tier not in TIERS:
                raise InputError(flag, f"unknown offload tier '{tier}'", "use none, cpu or nvme")
        if self.offload_params != "none" and self.stage != 3:
            raise InputError("offload_params", f"parameter offload needs ZeRO stage 3, asked with stage {self.stage}",
                             f"DeepSpeed ignores offload_param below stage 3; use {ref('stage', 3)}")
        if self.offload_optimizer != "none" and self.stage == 0:
            raise InputError("offload_optimizer", "optimizer offload needs ZeRO stage 1, 2 or 3",
                             f"use {ref('stage')} 1, 2 or 3")
        if self.offload_optimizer == "nvme" and self.stage != 3:
            raise InputError("offload_optimizer", f"NVMe offload needs ZeRO stage 3, asked with stage {self.stage}",
                             f"DeepSpeed silently uses CPU below stage 3; use {ref('stage', 3)} or "
                             f"{ref('offload_optimizer', 'cpu')}")
        if self.offload_params != "none" and self.offload_optimizer == "none":
            raise InputError("offload_params", "parameter offload without optimizer offload is not a DeepSpeed setup",
                             f"also give {ref('offload_optimizer', 'cpu')} or nvme")
        if TIERS.index(self.offload_params) > TIERS.index(self.offload_optimizer):
            raise InputError("offload_params", f"parameters on {self.offload_params} but optimizer states on "
                             f"{self.offload_optimizer}", "offload the optimizer at least as far as the parameters")

    @property
    def offloads(self) -> bool:
        return self.offload_optimizer != "none" or self.offload_params != "none"

    @property
    def tier_rank(self) -> int:
        """How far from the GPU the states go: no offload < CPU < CPU+params < NVMe < NVMe+params."""
        return _TIER_ORDER[(self.offload_optimizer, self.offload_params)]

    @property
    def label(self) -> str:
        """'ZeRO-3 + optimizer→nvme + params→cpu' for sentences."""
        return self._describe(" + optimizer→", " + params→")

    @property
    def short_label(self) -> str:
        """'ZeRO-3 opt:nvme par:cpu' for table rows."""
        return self._describe(" opt:", " par:")

    def _describe(self, optimizer_prefix: str, params_prefix: str) -> str:
        text = f"ZeRO-{self.stage}"
        if self.offload_optimizer != "none":
            text += optimizer_prefix + self.offload_optimizer
        if self.offload_params != "none":
            text += params_prefix + self.offload_params
        return text

    @property
    def key(self) -> str:
        """A stable path-friendly id: 'zero3/opt_cpu/params_cpu'."""
        return f"zero{self.stage}/opt_{self.offload_optimizer}/params_{self.offload_params}"


_TIER_ORDER = {
    ("none", "none"): 0,
    ("cpu", "none"): 1,
    ("cpu", "cpu"): 2,
    ("nvme", "none"): 3,
    ("nvme", "cpu"): 4,
    ("nvme", "nvme"): 5,
}

PAPER_OPTIONS = (
    Option(0),
    Option(1), Option(1, "cpu"),
    Option(2), Option(2, "cpu"),
    Option(3), Option(3, "cpu"), Option(3, "cpu", "cpu"),
    Option(3, "nvme"), Option(3, "nvme", "cpu"), Option(3, "nvme", "nvme"),
)
# DeepSpeed's estimators cover exactly these (ZeRO-2 with/without CPU offload; ZeRO-3's three rows).
DEEPSPEED_OPTIONS = (
    Option(2), Option(2, "cpu"),
    Option(3), Option(3, "cpu"), Option(3, "cpu", "cpu"),
)


# The framework convention partitions real tensors for the on-GPU stages (offload stays paper-only).
FRAMEWORK_OPTIONS = (Option(0), Option(1), Option(2), Option(3))


def options_for(convention: str, stage: int | None = None, offload_optimizer: str | None = None,
                offload_params: str | None = None) -> tuple[Option, ...]:
    """The options a convention evaluates, narrowed by whatever the user fixed."""
    if convention not in CONVENTIONS:
        raise InputError("convention", f"unknown convention '{convention}'", "use paper, deepspeed or framework")
    if stage is not None and stage not in (0, 1, 2, 3):
        raise InputError("stage", f"ZeRO stage must be 0, 1, 2 or 3, got {stage}")
    for flag, tier in (("offload_optimizer", offload_optimizer), ("offload_params", offload_params)):
        if tier is not None and tier not in TIERS:
            raise InputError(flag, f"unknown offload tier '{tier}'", "use none, cpu or nvme")
    if stage is not None or offload_optimizer is not None or offload_params is not None:
        # Validate the combination the user asked for explicitly (raises with the reason).
        if stage is not None and offload_optimizer is not None and offload_params is not None:
            Option(stage, offload_optimizer, offload_params)
        elif stage is not None and offload_params not in (None, "none"):
            Option(stage, offload_optimizer or offload_params, offload_params)
        elif stage is not None and offload_optimizer not in (None, "none"):
            Option(stage, offload_optimizer)
    pool = {"paper": PAPER_OPTIONS, "deepspeed": DEEPSPEED_OPTIONS, "framework": FRAMEWORK_OPTIONS}[convention]
    chosen = tuple(
        option for option in pool
        if (stage is None or option.stage == stage)
        and (offload_optimizer is None or option.offload_optimizer == offload_optimizer)
        and (offload_params is None or option.offload_params == offload_params)
    )
    if not chosen:
        asked = ", ".join(f"{k}={v}" for k, v in (("stage", stage), ("offload_optimizer", offload_optimizer),
                                                  ("offload_params", offload_params)) if v is not None)
        raise InputError("stage/offload_*", f"the {convention} convention has no option with {asked}",
                         {"deepspeed": "DeepSpeed's estimators cover ZeRO-2 (none/cpu) and ZeRO-3 (none, cpu, cpu+params)",
                          "framework": "the framework convention covers stages 0-3 without offload"}.get(
                              convention, "relax the filters"))
    return chosen
