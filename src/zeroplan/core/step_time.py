"""Time of one optimizer step: compute, tensor/pipeline/data-parallel communication, the pipeline
bubble, offload transfers and the optimizer step (FORMULAS.md §4, §5, §8, §9). Standard library only.

Compute (§8): 6Ψ FLOPs per token plus attention 12·L·w·s (w = heads × head_dim, the query width);
full recompute re-runs each transformer layer's forward (+2Ψ_layers + 4·L·w·s), selective recompute
re-runs only the attention core (+4·L·w·s). Ψ counts the parameters a token meets (MoE: k of E
experts). The GPUs run these FLOPs at `efficiency` × dense bf16 peak.

Communication (α-β, ring collectives, §4): time = steps·α + bytes/B on the slowest link the group
crosses, placed by the rank grid (tp innermost, then dp, then pp).
- TP (Megatron): 4 AllReduces of s·b·h per layer per micro-batch (2 forward, 2 backward; 6 with full
  recompute). Sequence parallelism replaces each by AllGather + ReduceScatter: the same bytes and steps.
  Not overlapped with compute.
- PP: one activation forward and one gradient backward per boundary per micro-batch (×v with
  interleaving), point to point; with tp > 1 each rank sends 1/t of it (Megatron's scatter/gather).
- DP: ZeRO's collectives from core.comm (stage 2 reduces, stage 3 also gathers, every micro-batch).
Overlap assumption (DeepSpeed's overlap_comm, PyTorch DDP buckets): without a pipeline, gradient
reduction hides behind backward and stage 3's parameter gathers behind forward/backward, up to the
compute they overlap; the post-step parameter AllGather of stages 1-2 is exposed. With a pipeline
(pp > 1) DeepSpeed reduces gradients after the flush: all DP time is exposed.

Pipeline (1F1B, §5): m micro-batches take (m + (p-1)/v) stage-times; the bubble is (p-1)/v of them.
Offload (§9): gradients stream to the host during backward (hidden up to the backward time), updated
parameters come back after the CPU optimizer step (exposed), the CPU Adam step runs at
`cpu_adam_params_per_s` per node, NVMe swaps are exposed; offloaded parameters are fetched over PCIe
(and from NVMe) for forward and backward of every micro-batch, overlapped like stage-3 gathers.
GPU optimizer step: memory bound, reading and writing the optimizer states once per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil
from typing import TYPE_CHECKING

from zeroplan.core.errors import InputError
from zeroplan.core.hardware import Link
from zeroplan.core.model import ModelSpec
from zeroplan.core.pipeline import layers_per_stage
from zeroplan.core.units import ceil_div
from zeroplan.core.collectives import ALL_GATHER, ALL_REDUCE, ring_time

if TYPE_CHECKING:
    from zeroplan.core.traffic import DpSeconds, OffloadSeconds

DEFAULT_EFFICIENCY = 0.5  # share of dense bf16 peak the kernels reach (Megatron measures 44-52% end to end)
# DeepSpeed CPU Adam, per node: the step is memory bound (~30 bytes per parameter read or written), so a
# two-socket server streaming 50-100 GB/s manages a few 1e9 parameters/s; the ZeRO-Offload paper's CPU-Adam
# latencies sit near 1 s per 1e9 parameters. 1e9 per node is the conservative default (--cpu-adam-rate).
DEFAULT_CPU_ADAM_PARAMS_PER_S = 1_000_000_000
ACTIVATION_ELEMENT_BYTES = 2  # TP/PP messages carry 16-bit activations


def check_efficiency(value: float) -> float:
    if not 0.001 <= value <= 1:  # below 0.1% of peak no step-time figure means anything (and may underflow)
        raise InputError("--efficiency", f"must be a fraction in [0.001, 1], got {value:g}", "write e.g. 0.5")
    return value


@dataclass(frozen=True)
class FlopModel:
    """The shape FLOP counting needs: per-token parameters and the attention width."""

    params: int  # Ψ a token meets (total for dense models)
    layer_params: int  # per transformer layer, active
    layers: int
    hidden: int
    attention_width: int  # heads × head_dim

    @classmethod
    def from_model(cls, model: ModelSpec) -> FlopModel:
        if not model.has_shape:
            raise InputError("--model", f"the step time needs the shape of '{model.name}' (layers, hidden, heads, "
                             "vocab)", "use --model with a preset or config.json, or give --layers/--hidden/--heads")
        layers, hidden = model.layers, model.hidden
        head_dim = model.head_dim or model.extra.get("head_dim") or hidden // model.heads
        if model.layer_params is not None:
            layer = model.layer_params
        else:  # embeddings (and an untied head) aside, the rest is in the layers
            outside = model.vocab * hidden * (1 if model.tied_embeddings else 2)
            layer = max(1, (model.params - outside) // layers)
        params = model.params
        if model.experts and model.experts_per_token:
            gated = model.gated_mlp if model.gated_mlp is not None else model.extra.get("gated_mlp", False)
            expert = (3 if gated else 2) * hidden * (model.ffn or 4 * hidden)
            idle = (model.experts - model.experts_per_token) * expert  # per layer, not met by a token
            layer -= idle
            params -= idle * layers
        return cls(params, layer, layers, hidden, model.heads * head_dim)

    def model_flops_per_token(self) -> int:
        """The MFU numerator: 6Ψ (forward 2Ψ, backward 4Ψ)."""
        return 6 * self.params

    def hardware_flops_per_token(self, seq_len: int, recompute: str) -> int:
        """What the GPUs execute: 6Ψ + attention 12·L·w·s, plus the recomputed forward."""
        attention = 4 * self.layers * self.attention_width * seq_len  # forward QKᵀ and AV
        total = 6 * self.params + 3 * attention
        if recompute == "full":
            total += 2 * self.layer_params * self.layers + attention
        elif recompute == "selective":
            total += attention
        return total


@dataclass(frozen=True)
class StageFlops:
    """Per-token FLOPs of the busiest pipeline stage (before the split over tp)."""

    forward: int
    backward: int  # including recompute


def stage_flops(flops: FlopModel, seq_len: int, recompute: str, pp: int) -> StageFlops:
    """The busiest stage: the first holds the most layers, the last the layers plus the LM head."""
    attention = 4 * flops.attention_width * seq_len
    layer_forward = 2 * flops.layer_params + attention
    rest_forward = 2 * (flops.params - flops.layer_params * flops.layers)  # embedding + head, on the last stage
    recompute_per_layer = {"full": layer_forward, "selective": attention}.get(recompute, 0)
    counts = layers_per_stage(flops.layers, pp)
    candidates = [(counts[0], 0 if pp > 1 else rest_forward), (counts[-1], rest_forward)]
    forward, layers = max((n * layer_forward + extra, n) for n, extra in candidates)
    return StageFlops(forward, 2 * forward + layers * recompute_per_layer)


@dataclass(frozen=True)
class LinkTable:
    """Links by span, with optional measured ones per collective ("all_reduce/intra_node")."""

    intra_node: Link
    inter_node: Link
    measured: dict[str, Link] = field(default_factory=dict)

    def link(self, collective: str, intra_node: bool) -> Link:
        span = "intra_node" if intra_node else "inter_node"
        return self.measured.get(f"{collective}/{span}") or (self.intra_node if intra_node else self.inter_node)


@dataclass(frozen=True)
class Machine:
    """The throughput side of the hardware."""

    peak_flops: float  # dense bf16 per GPU
    hbm_bytes_per_s: float
    pcie_bytes_per_s: float
    nvme_bytes_per_s: float | None  # per node
    links: LinkTable
    efficiency: float = DEFAULT_EFFICIENCY
    cpu_adam_params_per_s: float = DEFAULT_CPU_ADAM_PARAMS_PER_S  # per node

    @property
    def flops_per_s(self) -> float:
        return self.peak_flops * self.efficiency


def ring_seconds(buffer_bytes: float, ranks: int, link: Link, allreduce: bool) -> float:
    """Ring AllGather/ReduceScatter ((n-1) steps, (n-1)/n·S) or AllReduce (twice both): core.collectives'."""
    return ring_time(ALL_REDUCE if allreduce else ALL_GATHER, buffer_bytes, ranks, link.latency_s,
                     link.bandwidth_bytes_per_s)


@dataclass(frozen=True)
class Layout:
    """Where a plan's ranks sit and how a step is cut up."""

    dp: int
    tp: int
    pp: int
    virtual_stages: int
    seq_len: int
    micro_batch: int
    grad_accum: int
    recompute: str
    sequence_parallel: bool
    tp_intra_node: bool
    dp_intra_node: bool
    pp_intra_node: bool


def microbatch_seconds(layout: Layout, flops: FlopModel, hidden: int,
                       machine: Machine) -> tuple[float, float, float, float]:
    """(forward, backward, TP comm, PP comm) seconds of one micro-batch on the busiest stage."""
    stage = stage_flops(flops, layout.seq_len, layout.recompute, layout.pp)
    tokens = layout.seq_len * layout.micro_batch
    rate = machine.flops_per_s * layout.tp
    forward, backward = tokens * stage.forward / rate, tokens * stage.backward / rate
    tp_seconds = pp_seconds = 0.0
    message = tokens * hidden * ACTIVATION_ELEMENT_BYTES
    layers = ceil_div(flops.layers, layout.pp)
    if layout.tp > 1:
        collectives = 6 if layout.recompute == "full" else 4
        link = machine.links.link("all_reduce", layout.tp_intra_node)
        tp_seconds = layers * collectives * ring_seconds(message, layout.tp, link, allreduce=True)
    if layout.pp > 1:
        link = machine.links.link("p2p", layout.pp_intra_node)
        per_transfer = link.latency_s + message / layout.tp / link.bandwidth_bytes_per_s
        pp_seconds = 2 * layout.virtual_stages * per_transfer
    return forward, backward, tp_seconds, pp_seconds


@dataclass(frozen=True)
class StepTime:
    compute: float  # forward + backward (+ recompute) of every micro-batch, busiest stage
    tp_comm: float
    pp_comm: float
    bubble: float
    dp_comm: float  # all DP collective time, hidden or not
    dp_exposed: float
    offload: float  # exposed host/NVMe time and the CPU optimizer step
    optimizer: float  # GPU optimizer step
    total: float

    def parts(self) -> dict[str, float]:
        return {"compute": self.compute, "tp_comm": self.tp_comm, "pp_comm": self.pp_comm, "bubble": self.bubble,
                "dp_exposed": self.dp_exposed, "offload": self.offload, "optimizer": self.optimizer}


def compose(layout: Layout, micro: tuple[float, float, float, float], dp: DpSeconds, offload: OffloadSeconds,
            optimizer_seconds: float, stage: int) -> StepTime:
    """One step from its per-micro-batch pieces and its per-step DP/offload pieces."""
    forward, backward, tp_comm, pp_comm = micro
    m = layout.grad_accum
    stage_time = forward + backward + tp_comm + pp_comm
    bubble = (layout.pp - 1) / layout.virtual_stages * stage_time
    gradients_down = offload.gradients_down * offload.gradient_repeats
    if layout.pp > 1:  # gradients reduced (and offloaded) after the pipeline flush
        dp_exposed = dp.total
        offload_exposed = gradients_down
    elif stage == 3:  # gathers (after any host fetch) and the reduction overlap each micro-batch's compute
        dp_exposed = m * (max(0.0, dp.gather_forward / m - forward)
                          + max(0.0, (dp.gather_backward + dp.reduce) / m - backward))
        with_fetch = m * (max(0.0, dp.gather_forward / m + offload.param_fetch - forward)
                          + max(0.0, (dp.gather_backward + dp.reduce) / m + offload.param_fetch - backward))
        offload_exposed = with_fetch - dp_exposed
        offload_exposed += offload.gradient_repeats * max(0.0, offload.gradients_down - backward)
    else:
        repeats = m if stage == 2 else 1  # stages 0-1 reduce once, during the last backward
        hidden = dp.reduce + (dp.gather_after_step if stage == 0 else 0.0)  # stage 0: the whole AllReduce
        dp_exposed = repeats * max(0.0, hidden / repeats - backward)
        dp_exposed += 0.0 if stage == 0 else dp.gather_after_step
        offload_exposed = offload.gradient_repeats * max(0.0, offload.gradients_down - backward)
    offload_exposed += offload.exposed
    total = m * stage_time + bubble + dp_exposed + offload_exposed + optimizer_seconds
    return StepTime(compute=m * (forward + backward), tp_comm=m * tp_comm, pp_comm=m * pp_comm, bubble=bubble,
                    dp_comm=dp.total, dp_exposed=dp_exposed, offload=offload_exposed, optimizer=optimizer_seconds,
                    total=total)


def pp_intra_node(world: int, gpus_per_node: int) -> bool:
    """Every pipeline group holds one rank per tp·dp block, so with more than one node some boundary
    crosses nodes and the slowest boundary sets the pace."""
    return world <= gpus_per_node


def train_seconds(step_seconds: float, tokens_per_step: int, training_tokens: int) -> float:
    """Whole optimizer steps to cover training_tokens."""
    return ceil(training_tokens / tokens_per_step) * step_seconds


def narayanan_flops_per_iteration(batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> int:
    """Narayanan et al. 2021: F = 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)) per iteration with full recompute,
    multiplied out: B·s·h·(96·L·h + 16·L·s + 6·V), an exact integer."""
    return batch * seq_len * hidden * (96 * layers * hidden + 16 * layers * seq_len + 6 * vocab)
