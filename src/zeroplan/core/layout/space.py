"""The plan search space: which dp × tp × pp layouts exist for a GPU count, which are ruled out before
any memory is counted (and why), and which micro-batches reach the global batch exactly (docs/formulas.md §17.2)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from zeroplan.core.memory.activations import RECOMPUTE_MODES
from zeroplan.core.errors import InputError, ref
from zeroplan.core.parallel.rules import (  # noqa: F401 - the reasons plan reports
    CP_SEQUENCE, MAX_SEQ_LEN, PP_LAYERS, SP_SEQUENCE, TP_CROSSES_NODES, TP_HEADS, TP_KV_HEADS,
    context_parallel_problem, model_layout_problem,
)
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.options import PAPER_OPTIONS, Option
from zeroplan.core.parallel.grid import MAX_WORLD, ParallelDims
from zeroplan.core.units import ceil_div

# An uneven pipeline split is accepted while the busiest stage carries at most this much more than an
# even share of the layers (pp·ceil(L/pp)/L - 1): 96 layers on 64 stages (33%) is not a sensible split.
MAX_PP_IMBALANCE = Fraction(1, 8)
PIPELINE_STAGES = (0, 1)  # DeepSpeed's pipeline engine runs ZeRO stages 0-1 only

# Reasons a layout (dp, tp, pp) is ruled out before evaluation, in the order they are checked.
EP_RANKS = "ep × etp does not divide a pipeline stage's ranks"
PP_UNEVEN = "pp splits the layers unevenly"
DP_BATCH = "dp does not divide the global batch"
NO_MICRO_BATCH = "no --micro-batches value divides the per-rank batch"
# Reasons a (layout, option, step shape) combination is skipped without evaluation.
PIPELINE_STAGE = "ZeRO-2/3 with pipeline parallelism (DeepSpeed supports stages 0-1 there; --fsdp-with-pp)"
INTERLEAVE_PIPELINE = "interleaving needs a pipeline (pp > 1)"
INTERLEAVE_LAYERS = ("interleaving needs at least one layer per chunk (pp × virtual stages chunks, the first and last of "
                     "which may hold only the embedding and the head)")
INTERLEAVE_MICRO_BATCHES = "interleaving needs micro-batches divisible by pp"
EP_WITHOUT_SP = "expert parallelism with tp > 1 needs sequence parallelism (Megatron-Core)"


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True)
class SearchSpace:
    """What the search varies and what it holds fixed."""

    gpus: int
    global_batch: int  # sequences per optimizer step
    seq_len: int
    stages: tuple[int, ...] = (0, 1, 2, 3)
    offload: bool = True  # also try CPU/NVMe offload tiers
    recompute: tuple[str, ...] = RECOMPUTE_MODES
    sequence_parallel: tuple[bool, ...] = (False, True)  # True is tried only with tp > 1
    virtual_stages: tuple[int, ...] = (1,)
    micro_batches: tuple[int, ...] | None = None  # None: every divisor of the per-rank batch
    tp: tuple[int, ...] | None = None  # None: every divisor that passes the checks
    pp: tuple[int, ...] | None = None
    allow_cross_node_tp: bool = False
    flash_attention: bool = True
    cp: tuple[int, ...] = (1,)  # context-parallel degrees to try
    fsdp_pipeline: bool = False  # also ZeRO-2/3 (FSDP) with pp > 1, as torchtitan and Llama 3 run
    dp_shard: tuple[int, ...] = ()  # hybrid sharding: shard-group sizes to try beside full sharding (search.py)
    ep: tuple[int, ...] = (1,)  # expert-parallel degrees to try (mixture-of-experts models)
    etp: tuple[int, ...] | None = None  # expert tensor-parallel degrees; None: etp = tp (Megatron's default)
    capacity_factor: float | None = None  # MoE expert capacity (None: dropless), for the activations

    def __post_init__(self) -> None:
        for name, value in (("gpus", self.gpus), ("global_batch", self.global_batch),
                            ("seq_len", self.seq_len)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(name, f"must be a positive whole number, got {value!r}")
        # Bounds that keep the divisor enumeration (√n steps) instant; both are far past real runs.
        for name, value, limit in (("gpus", self.gpus, MAX_WORLD), ("global_batch", self.global_batch, 10**9),
                                   ("seq_len", self.seq_len, MAX_SEQ_LEN)):
            if value > limit:
                raise InputError(name, f"{value} is beyond any real run (more than {limit})")
        lists = (("stages", self.stages, lambda s: s in (0, 1, 2, 3), "0, 1, 2 or 3"),
                 ("recompute", self.recompute, lambda r: r in RECOMPUTE_MODES, "none, selective, full or selective-op"),
                 ("virtual_stages", self.virtual_stages, _positive, "positive whole numbers"),
                 ("micro_batches", self.micro_batches or (1,), _positive, "positive whole numbers"),
                 ("tp", self.tp or (1,), _positive, "positive whole numbers"),
                 ("pp", self.pp or (1,), _positive, "positive whole numbers"),
                 ("cp", self.cp, _positive, "positive whole numbers"),
                 ("ep", self.ep, _positive, "positive whole numbers"),
                 ("etp", self.etp or (1,), _positive, "positive whole numbers"),
                 ("dp_shard", self.dp_shard or (2,), lambda n: _positive(n) and n > 1, "whole numbers above 1"))
        for name, values, valid, expected in lists:
            bad = [v for v in values if not valid(v)]
            if bad or not values:
                raise InputError(name, f"got {', '.join(map(str, bad)) or 'nothing'}", f"use {expected}")

    def options(self) -> tuple[Option, ...]:
        return tuple(o for o in PAPER_OPTIONS if o.stage in self.stages and (self.offload or not o.offloads))


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def layouts(space: SearchSpace) -> list[tuple[int, int]]:
    """Every (tp, pp) whose product divides the GPU count, narrowed by --tp/--pp."""
    found = []
    for tp in divisors(space.gpus):
        if space.tp is not None and tp not in space.tp:
            continue
        for pp in divisors(space.gpus // tp):
            if space.pp is None or pp in space.pp:
                found.append((tp, pp))
    if not found:  # only possible when --tp/--pp narrowed it: say so rather than search nothing
        asked = " and ".join(f"{flag} {','.join(map(str, values))}" for flag, values in
                             (("tp", space.tp), ("pp", space.pp)) if values)
        raise InputError("tp/pp", f"no tp × pp from {asked} divides the {space.gpus} GPUs",
                         f"choose degrees whose product divides {ref('gpus')}")
    return found


def layout_problem(model: ModelSpec, parallel: ParallelDims, space: SearchSpace, cp: int = 1) -> str | None:
    """Why this layout cannot run this model and batch, or None. parallel.dp counts the dp·cp ranks that share
    the ZeRO partitions; the batch is split over dp = parallel.dp / cp."""
    tp, pp = parallel.tp, parallel.pp
    dp = parallel.dp // cp
    problem = model_layout_problem(model, parallel)  # sequence parallelism is a per-plan choice: below
    if problem is not None and problem != PP_LAYERS:
        return problem
    if not space.allow_cross_node_tp and not parallel.tp_intra_node:
        return TP_CROSSES_NODES
    if problem is not None:
        return problem
    if space.sequence_parallel == (True,) and tp > 1 and space.seq_len % tp:
        return SP_SEQUENCE
    if context_parallel_problem(space.seq_len, cp):
        return CP_SEQUENCE
    layers = model.shape.layers if model.shape is not None else pp
    if Fraction(pp * ceil_div(layers, pp), layers) - 1 > MAX_PP_IMBALANCE:
        return PP_UNEVEN
    if space.global_batch % dp:
        return DP_BATCH
    if not micro_batch_choices(space, dp):
        return NO_MICRO_BATCH
    return None


def expert_layouts(space: SearchSpace, tp: int) -> list[tuple[int, int]]:
    """The (ep, etp) pairs to try with this tp: --ep's degrees, --etp's (default: etp = tp)."""
    return [(ep, etp) for ep in space.ep for etp in (space.etp or (tp,))]


def micro_batch_choices(space: SearchSpace, dp: int) -> list[int]:
    """Micro-batches that divide each rank's share of the global batch (global = micro × accum × dp)."""
    per_rank = space.global_batch // dp
    return [b for b in divisors(per_rank) if space.micro_batches is None or b in space.micro_batches]


def interleave_problem(layers: int, pp: int, virtual_stages: int, grad_accum: int) -> str | None:
    """Megatron's interleaved schedule: micro-batches in whole rounds of pp, at least a layer per chunk. Chunks
    need not be equal: uneven stages (Llama 3's first and last stages hold a layer less) are priced by the
    busiest stage. The first chunk may hold only the embedding and the last only the head and loss, as Llama 3's
    schedule does (arXiv 2407.21783 sec 3.3.2: one layer per chunk, 126 layers on 16 stages × 8 chunks), so
    pp × virtual stages may reach layers + 2."""
    if virtual_stages == 1:
        return None
    if pp == 1:
        return INTERLEAVE_PIPELINE
    if layers + 2 < pp * virtual_stages:
        return INTERLEAVE_LAYERS
    if grad_accum % pp:
        return INTERLEAVE_MICRO_BATCHES
    return None
