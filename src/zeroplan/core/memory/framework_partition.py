"""Framework-aware model states: what each rank of a real framework holds, to the byte (docs/formulas.md §6).

The paper convention shards Ψ evenly; real frameworks do not. Per rank, from a list of parameters:

- ddp: every rank holds everything (P + G + K per element).
- torch-zero1 (ZeroRedundancyOptimizer): whole parameters, sorted by numel largest first (a stable sort,
  so equal sizes keep their order), each given to the rank with the smallest total so far, ties to the
  lowest rank. Parameters and gradients stay whole on every rank; optimizer states follow ownership.
- fsdp2-zero2 / fsdp2-zero3 (fully_shard): each parameter is chunked along dim 0 into ceil(rows/N) rows
  per rank. A rank's parameter storage is padded to that chunk (a rank can hold only padding), and so
  is its gradient (a view into the group's padded reduce-scatter output); optimizer states are made with
  zeros_like on the unpadded local shard. The two differ only while a step runs (zero2 keeps unsharded
  parameters from forward to backward): at rest they hold the same. With offload (CPUOffloadPolicy on a
  GPU) all three live in host memory, and gradients are copied there unpadded, one tensor per parameter.
- deepspeed-zero12: the 16-bit parameters are one flat buffer padded to a multiple of 2·N elements, held
  whole on every rank; each rank owns an equal slice of it for optimizer states (stage 1 and 2) and
  gradients (stage 2; stage 1 keeps full gradients). One parameter group; the fp32 copy of the gradient
  slice DeepSpeed builds for the optimizer step (its estimator's extra 4 bytes) is transient, not counted.
- deepspeed-zero3: every parameter padded to a multiple of N; each rank holds numel_padded/N of each.

Bytes per element come from the BytesPerParam given. per_tensor_state_bytes covers optimizer state that
is one small tensor per stepped tensor whatever its size (torch Adam/AdamW keep `step` as a 4-byte fp32
scalar per parameter; DeepSpeed steps one flat partition per rank). "gpu" is the rank's compute device
(the CPU itself in a CPU-only run), "cpu" is host memory states were offloaded to.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from math import prod
from typing import Iterable, Mapping, Sequence

from zeroplan.core.errors import InputError, ref
from zeroplan.core.precision import BytesPerParam
from zeroplan.core.units import ceil_div

FRAMEWORKS = ("ddp", "torch-zero1", "fsdp2-zero2", "fsdp2-zero3", "deepspeed-zero12", "deepspeed-zero3")
COMPONENTS = ("params", "gradients", "optimizer_states")
TIERS = ("gpu", "cpu")
DEEPSPEED_ZERO12_ALIGNMENT = 2  # nccl_start_alignment_factor: the flat buffer is a multiple of 2·N elements


@dataclass(frozen=True)
class ParamSpec:
    """One parameter tensor. tied_to names the parameter it shares storage with (counted there once)."""

    name: str
    shape: tuple[int, ...]
    tied_to: str | None = None

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def rows(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def row_numel(self) -> int:
        return prod(self.shape[1:])


@dataclass(frozen=True)
class FrameworkPartition:
    framework: str
    world_size: int
    breakdown: dict[str, int]  # "rank3/gpu/optimizer_states" -> bytes
    most_loaded_rank: int

    def rank(self, rank: int) -> dict[str, int]:
        """One rank's entries without the rank prefix: {"gpu/params": ..., "cpu/gradients": ...}."""
        prefix = f"rank{rank}/"
        return {key[len(prefix):]: value for key, value in self.breakdown.items() if key.startswith(prefix)}

    def rank_total(self, rank: int, tier: str = "gpu") -> int:
        return sum(self.breakdown[f"rank{rank}/{tier}/{component}"] for component in COMPONENTS)


def _check(params: Sequence[ParamSpec], world_size: int, framework: str) -> list[ParamSpec]:
    if framework not in FRAMEWORKS:
        raise InputError("framework", f"unknown framework '{framework}'", f"use one of {', '.join(FRAMEWORKS)}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise InputError("world_size", f"must be a positive whole number, got {world_size!r}")
    names = {param.name for param in params}
    if len(names) != len(params):
        raise InputError("parameters", "two parameters share a name", "give every parameter a unique name")
    for param in params:
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in param.shape):
            raise InputError("parameters", f"'{param.name}' has shape {param.shape}", "use positive dimensions")
        if param.tied_to is not None and param.tied_to not in names:
            raise InputError("parameters", f"'{param.name}' is tied to unknown '{param.tied_to}'",
                             "name a parameter of the same list")
        if framework.startswith("fsdp2") and not param.shape and param.tied_to is None:
            raise InputError("parameters", f"'{param.name}' is a scalar; fully_shard chunks along dim 0",
                             "give it shape (1,)")
    owned = [param for param in params if param.tied_to is None]
    if not owned:
        raise InputError("parameters", "no parameters to partition", "give at least one")
    return owned


def zero1_owners(params: Sequence[ParamSpec], world_size: int) -> list[int]:
    """ZeroRedundancyOptimizer's rank for each parameter (input order).

    Each parameter goes to the rank with the smallest total so far, the lowest such rank on a tie: the least
    (total, rank) pair, kept in a heap (log N per parameter, not a scan of every rank). Ranks that own
    nothing yet all have total 0, so only the first min(N, parameters) ranks can ever be chosen."""
    order = sorted(range(len(params)), key=lambda i: params[i].numel, reverse=True)  # stable, as torch's
    owners = [0] * len(params)
    heap = [(0, rank) for rank in range(min(world_size, len(params)))]  # already a heap: sorted
    for index in order:
        total, rank = heapq.heappop(heap)
        owners[index] = rank
        heapq.heappush(heap, (total + params[index].numel, rank))
    return owners


def fsdp2_rows(param: ParamSpec, world_size: int, rank: int) -> tuple[int, int]:
    """(padded rows, real rows) of a parameter's dim-0 chunk on a rank."""
    chunk = ceil_div(param.rows, world_size)
    return chunk, max(0, min(chunk, param.rows - rank * chunk))


def _elements(params: list[ParamSpec], world_size: int, framework: str, rank: int, stage: int | None,
              offload: bool, owners: Sequence[int] = ()) -> dict[str, tuple[str, int, int]]:
    """component -> (tier, elements, stepped tensors) for one rank; owners: zero1_owners(params, world_size)
    (torch-zero1 only), computed once by the caller rather than once per rank."""
    total = sum(p.numel for p in params)
    count = len(params)
    if framework == "ddp":
        return {"params": ("gpu", total, 0), "gradients": ("gpu", total, 0), "optimizer_states": ("gpu", total, count)}
    if framework == "torch-zero1":
        owned = [p for p, owner in zip(params, owners) if owner == rank]
        return {"params": ("gpu", total, 0), "gradients": ("gpu", total, 0),
                "optimizer_states": ("gpu", sum(p.numel for p in owned), len(owned))}
    if framework.startswith("fsdp2"):
        padded = local = 0
        for param in params:
            chunk, real = fsdp2_rows(param, world_size, rank)
            padded += chunk * param.row_numel
            local += real * param.row_numel
        tier = "cpu" if offload else "gpu"
        return {"params": (tier, padded, 0), "gradients": (tier, local if offload else padded, 0),
                "optimizer_states": (tier, local, count)}
    if framework == "deepspeed-zero12":
        alignment = DEEPSPEED_ZERO12_ALIGNMENT * world_size
        flat = ceil_div(total, alignment) * alignment
        part = flat // world_size
        return {"params": ("gpu", flat, 0), "gradients": ("gpu", part if stage == 2 else total, 0),
                "optimizer_states": ("gpu", part, 1)}
    part = sum(ceil_div(p.numel, world_size) for p in params)  # deepspeed-zero3
    return {"params": ("gpu", part, 0), "gradients": ("gpu", part, 0), "optimizer_states": ("gpu", part, 1)}


def _checked(params: Sequence[ParamSpec], world_size: int, framework: str, stage: int | None, offload: bool,
             per_tensor_state_bytes: int) -> list[ParamSpec]:
    owned = _check(params, world_size, framework)
    if framework == "deepspeed-zero12" and stage not in (1, 2):
        raise InputError("stage", f"deepspeed-zero12 needs stage 1 or 2, got {stage}",
                         "stage 1 keeps full gradients, stage 2 shards them")
    if offload and not framework.startswith("fsdp2"):
        raise InputError("cpu_offload", f"offload is modelled for fsdp2-zero2/3 only, not {framework}",
                         f"drop {ref('cpu_offload')} or use stage 2 or 3")
    if isinstance(per_tensor_state_bytes, bool) or not isinstance(per_tensor_state_bytes, int) \
            or per_tensor_state_bytes < 0:
        raise InputError("per_tensor_state_bytes", f"must be a whole number of bytes, got {per_tensor_state_bytes!r}")
    return owned


def _rank_bytes(owned: list[ParamSpec], world_size: int, per_param: BytesPerParam, framework: str, rank: int,
                stage: int | None, offload: bool, per_tensor_state_bytes: int, owners: Sequence[int]) -> dict[str, int]:
    """One rank's "tier/component" -> bytes, every tier and component present."""
    element_bytes = {"params": per_param.params, "gradients": per_param.gradients,
                     "optimizer_states": per_param.optimizer_states}
    held = {f"{tier}/{component}": 0 for tier in TIERS for component in COMPONENTS}
    for component, (tier, elements, tensors) in _elements(owned, world_size, framework, rank, stage, offload,
                                                          owners).items():
        held[f"{tier}/{component}"] = (elements * element_bytes[component]
                                       + tensors * per_tensor_state_bytes * (component == "optimizer_states"))
    return held


def framework_partition(params: Sequence[ParamSpec], world_size: int, per_param: BytesPerParam, framework: str,
                        *, stage: int | None = None, offload: bool = False,
                        per_tensor_state_bytes: int = 0) -> FrameworkPartition:
    """Per-rank bytes of params, gradients and optimizer states, and the most loaded rank: every rank
    listed (what validate compares rank by rank); most_loaded_rank_bytes gives the most loaded one alone.

    stage: 1 or 2, required for deepspeed-zero12 only. offload: FSDP2's CPUOffloadPolicy (fsdp2-* only).
    The most loaded rank holds the most on its device (then in host memory); ties go to the lowest rank.
    """
    owned = _checked(params, world_size, framework, stage, offload, per_tensor_state_bytes)
    breakdown: dict[str, int] = {}
    owners = zero1_owners(owned, world_size) if framework == "torch-zero1" else ()
    for rank in range(world_size):
        for key, value in _rank_bytes(owned, world_size, per_param, framework, rank, stage, offload,
                                      per_tensor_state_bytes, owners).items():
            breakdown[f"rank{rank}/{key}"] = value
    partition = FrameworkPartition(framework, world_size, breakdown, 0)
    loads = [(partition.rank_total(r, "gpu"), partition.rank_total(r, "cpu"), -r) for r in range(world_size)]
    return FrameworkPartition(framework, world_size, breakdown, -max(loads)[2])


def most_loaded_rank_bytes(params: Sequence[ParamSpec], world_size: int, per_param: BytesPerParam, framework: str,
                           *, stage: int | None = None, offload: bool = False,
                           per_tensor_state_bytes: int = 0) -> tuple[int, dict[str, int]]:
    """(the most loaded rank, its "tier/component" -> bytes): framework_partition's most_loaded_rank and that
    rank's entries, without visiting every rank (an estimate at 16,384 GPUs costs what one at 8 does).

    - ddp, deepspeed-zero12, deepspeed-zero3: every rank holds the same bytes, so rank 0 (ties: lowest).
    - fsdp2: every rank's padded chunk is the same; its real rows max(0, min(chunk, rows − rank·chunk)) never
      grow with the rank, so neither does any tier's total: rank 0.
    - torch-zero1: parameters and gradients are whole everywhere; ranks differ in the optimizer states they
      own. One pass over the owners sums each rank's elements and tensors; ranks that own nothing all hold
      the least, so the busiest is among the owners (or rank 0 when some rank owns nothing and all tie).
    tests/test_framework_partition.py checks this against framework_partition rank by rank."""
    owned = _checked(params, world_size, framework, stage, offload, per_tensor_state_bytes)
    owners: Sequence[int] = ()
    rank = 0
    if framework == "torch-zero1":
        owners = zero1_owners(owned, world_size)
        elements: dict[int, int] = {}
        tensors: dict[int, int] = {}
        for param, owner in zip(owned, owners):
            elements[owner] = elements.get(owner, 0) + param.numel
            tensors[owner] = tensors.get(owner, 0) + 1
        loads = {owner: elements[owner] * per_param.optimizer_states + tensors[owner] * per_tensor_state_bytes
                 for owner in elements}
        if len(loads) < world_size:
            loads.setdefault(min(set(range(len(loads) + 1)) - set(loads)), 0)  # the lowest rank owning nothing
        rank = min(loads, key=lambda r: (-loads[r], r))
    return rank, _rank_bytes(owned, world_size, per_param, framework, rank, stage, offload, per_tensor_state_bytes,
                             owners)


def unshardable_ranks(params: Sequence[ParamSpec], world_size: int, framework: str) -> list[int]:
    """Ranks that would own no element of the sharded state at all (the model is too small to shard)."""
    owned = _check(params, world_size, framework)
    if framework == "torch-zero1":
        owners = set(zero1_owners(owned, world_size))
        return [rank for rank in range(world_size) if rank not in owners]
    if framework.startswith("fsdp2"):
        return [rank for rank in range(world_size)
                if not any(fsdp2_rows(param, world_size, rank)[1] for param in owned)]
    return []


def is_routed_experts(param: ParamSpec, experts: int) -> bool:
    """A stacked routed-experts tensor (E, …, …): transformers' fused experts (gate_up_proj (E, 2f, h), down_proj
    (E, h, f)) and the architecture description's; shared experts are dense."""
    name = param.name.lower()
    return (experts > 1 and len(param.shape) == 3 and param.shape[0] == experts and "expert" in name
            and "shared" not in name)


def expert_parallel_params(params: Sequence[ParamSpec], experts: int, ep: int, edp: int,
                           fsdp: bool) -> tuple[list[ParamSpec], list[ParamSpec]]:
    """(dense tensors, one EP rank's routed-expert tensors) under expert parallelism as torchtitan lays them out
    (torchtitan/distributed/expert_parallel.py, fsdp.py apply_fsdp_to_decoder): each stacked (E, a, b) tensor is
    split over ep on dim 0, E/ep experts per rank; FSDP2 then shards it over the efsdp ranks (edp) on dim 0, or on
    dim 1 when efsdp × ep > E (torchtitan's Shard(1) placement, which avoids padding whole experts). A dim-1
    shard is given here as (a, E/ep, b): fully_shard's dim-0 chunking of it is the same arithmetic."""
    dense, local = [], []
    for param in params:
        if param.tied_to is None and is_routed_experts(param, experts):
            count, a, b = param.shape
            kept = ceil_div(count, ep)
            shape = (a, kept, b) if fsdp and edp * ep > count else (kept, a, b)
            local.append(ParamSpec(param.name, shape))
        else:
            dense.append(param)
    return dense, local


def params_from_shapes(shapes: Mapping[str, Sequence[int]] | Iterable[tuple]) -> list[ParamSpec]:
    """ParamSpecs from torch-like shapes: {"wte.weight": (50257, 768)}, or (name, shape[, tied_to]) tuples
    (e.g. [(n, tuple(p.shape)) for n, p in model.named_parameters(remove_duplicate=False)])."""
    items = shapes.items() if isinstance(shapes, Mapping) else shapes
    specs: list[ParamSpec] = []
    for item in items:
        name, shape, *rest = item
        specs.append(ParamSpec(str(name), tuple(int(d) for d in shape), rest[0] if rest else None))
    return specs


# Weight shapes of the modules core.model.families names, as transformers builds them: (rows, cols) with
# nn.Linear's (out, in) layout; GPT-2's Conv1D is (in, out). Whatever a module holds beyond its weight
# is its bias. None rows: derived from the module's size (Falcon's fused qkv).
_LINEAR_SHAPES = {
    "q_proj": lambda a: (a.heads * a.head_dim, a.hidden), "k_proj": lambda a: (a.kv_heads * a.head_dim, a.hidden),
    "v_proj": lambda a: (a.kv_heads * a.head_dim, a.hidden), "o_proj": lambda a: (a.hidden, a.heads * a.head_dim),
    "out_proj": lambda a: (a.hidden, a.hidden), "gate_proj": lambda a: (a.ffn, a.hidden),
    "up_proj": lambda a: (a.ffn, a.hidden), "down_proj": lambda a: (a.hidden, a.ffn),
    "fc1": lambda a: (a.ffn, a.hidden), "fc2": lambda a: (a.hidden, a.ffn),
    "qkv_proj": lambda a: ((a.heads + 2 * a.kv_heads) * a.head_dim, a.hidden),
    "gate_up_proj": lambda a: (2 * a.ffn, a.hidden), "router": lambda a: (a.experts, a.hidden),
    "attn.c_attn": lambda a: (a.hidden, 3 * a.hidden), "attn.c_proj": lambda a: (a.hidden, a.hidden),
    "mlp.c_fc": lambda a: (a.hidden, a.ffn), "mlp.c_proj": lambda a: (a.ffn, a.hidden),
    "attention.query_key_value": lambda a: (3 * a.hidden, a.hidden), "attention.dense": lambda a: (a.hidden, a.hidden),
    "mlp.dense_h_to_4h": lambda a: (a.ffn, a.hidden), "mlp.dense_4h_to_h": lambda a: (a.hidden, a.ffn),
    "self_attention.dense": lambda a: (a.hidden, a.hidden), "self_attention.query_key_value": lambda a: (None, a.hidden),
    "project_in": lambda a: (a.hidden, _embed_width(a)), "project_out": lambda a: (_embed_width(a), a.hidden),
    "embed_tokens": lambda a: (a.vocab, _embed_width(a)), "wte": lambda a: (a.vocab, a.hidden),
    "embed_in": lambda a: (a.vocab, a.hidden), "word_embeddings": lambda a: (a.vocab, a.hidden),
    "lm_head": lambda a: (a.vocab, _embed_width(a)), "wpe": lambda a: (a.max_seq_len, a.hidden),
    "embed_positions": lambda a: (a.max_seq_len + 2, a.hidden),
}
_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def _embed_width(arch) -> int:
    return arch.extra.get("word_embed_proj_dim", arch.hidden)


def _module_shapes(arch, name: str, size: int) -> list[tuple[int, ...]]:
    if name == "experts":  # transformers >= 5: gate_up_proj (E, 2·ffn, h) and down_proj (E, h, ffn), fused
        return [(arch.experts, 2 * arch.ffn, arch.hidden), (arch.experts, arch.hidden, arch.ffn)]
    if name in _LINEAR_SHAPES:
        rows, cols = _LINEAR_SHAPES[name](arch)
        if rows is None:
            rows = size // cols if size % cols == 0 else size // (cols + 1)
        bias = size - rows * cols
        bias_width = rows if name not in _CONV1D else cols
        if bias == 0:
            return [(rows, cols)]
        if bias == bias_width:
            return [(rows, cols), (bias,)]
    elif size % arch.hidden == 0:  # norms: a weight of width h, and a bias for LayerNorm
        return [(arch.hidden,)] * (size // arch.hidden)
    return [(size,)]  # a layout this table does not know: one flat tensor


def params_from_architecture(arch) -> list[ParamSpec]:
    """ParamSpecs for a core.model.families.Architecture (each module's tensor shapes, from the architecture
    description); a tied head is not listed (the embedding is it)."""
    specs: list[ParamSpec] = []
    for module in arch.modules:
        shapes = list(module.shapes) or _module_shapes(arch, module.name, module.params)
        for copy in range(module.copies):
            in_layer = getattr(module, "in_layer", False) and arch.layers > 1  # "<module>.<copy>": a layer's
            prefix = f"{module.name}.{copy}" if module.copies > 1 or in_layer else module.name
            specs.extend(ParamSpec(f"{prefix}.{index}", shape) for index, shape in enumerate(shapes))
    return specs
