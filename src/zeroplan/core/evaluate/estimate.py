"""Evaluate every option of a request: memory per GPU and node, traffic, time, fit (docs/formulas.md §4-§15).

Each OptionEstimate carries one flat breakdown dict with path keys ("gpu/params",
"gpu/buffers/reduce_bucket", "cpu/optimizer_states", "comm/inter_node_bytes", ...) from which
the table, JSON and CSV are all derived.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from zeroplan.core.timing import dp_traffic as comm
from zeroplan.core.memory.activations import ActivationConfig, activation_memory
from zeroplan.core.memory.deepspeed_buffers import (FP32_BYTES, BufferConfig, bucket_calls, gpu_buffer_bytes,
                                                    host_buffer_bytes)
from zeroplan.core.memory.deepspeed_estimator import DEFAULT_BUFFER_FACTOR, deepspeed_model_states
from zeroplan.core.errors import InputError, ref
from zeroplan.core.memory.budget import MemoryBudget
from zeroplan.core.hardware import ClusterSpec, Link
from zeroplan.core.model.adapters import FULL, Finetune, FinetuneCounts, finetune_counts
from zeroplan.core.model.spec import ModelSpec, ParamLayout
from zeroplan.core.evaluate.micro_batch import with_max_micro_batch
from zeroplan.core.memory.model_states import paper_model_states
from zeroplan.core.evaluate.option_estimate import OptionEstimate
from zeroplan.core.options import Option, options_for
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.parallel.rules import check_hybrid_experts
from zeroplan.core.precision import BytesPerParam
from zeroplan.core.units import ceil_div, format_count
from zeroplan.core.model.pipeline_stages import expert_shard_params, shard_params
from zeroplan.core.timing.collectives import LinkTable
from zeroplan.core.timing.dp_offload import OffloadTraffic, offload_serial_seconds, offload_traffic


@dataclass(frozen=True)
class EstimateRequest:
    model: ModelSpec
    cluster: ClusterSpec
    parallel: ParallelDims
    per_param: BytesPerParam
    budget: MemoryBudget
    options: tuple[Option, ...]
    convention: str = "paper"
    largest_layer_params: int = 0  # resolved by the caller (preset, flag or default_largest_layer_params)
    activation_bytes: int | None = None  # a fixed figure; None: count from `activations`, else keep the reserve
    activations: ActivationConfig | None = None  # the step's shape, when the model's shape is known
    micro_batches_per_step: int = 1  # gradient accumulation steps
    global_batch: int | None = None  # sequences per optimizer step, for the accumulation that reaches it
    max_micro_batch: bool = False  # also find the largest micro-batch each option fits
    buffers: BufferConfig = field(default_factory=BufferConfig)
    zero_init: bool = True
    buffer_factor: float = DEFAULT_BUFFER_FACTOR
    zeropp: frozenset[str] = frozenset()
    hpz_partition_size: int | None = None
    dp_shard: int | None = None  # hybrid sharding: ZeRO partitions over groups of this many dp ranks (zero_ranks)
    intra_node_link: Link | None = None  # None: the GPU preset's link
    inter_node_link: Link | None = None  # None: the cluster preset's link
    # Measured links (zeroplan bench) by (collective, span), e.g. ("all_gather", "inter_node").
    calibrated_links: tuple[tuple[tuple[str, str], Link], ...] = ()
    # The framework convention: which framework, and the model's parameter tensors it partitions.
    framework: str = "deepspeed"
    parameters: tuple = ()  # core.memory.framework_partition.ParamSpec, imported only when this convention runs
    finetune: Finetune = FULL  # what trains and how the frozen base is stored (core.model.adapters)
    cp: int = 1  # context parallelism: parallel.dp counts the dp × cp ranks sharing ZeRO's partitions

    def __post_init__(self) -> None:
        if not self.finetune.trains_everything:
            self._check_finetune()
        torchtitan_ep = (self.convention == "framework" and self.framework == "torch" and self.parallel.etp == 1)
        if self.convention in ("deepspeed", "framework") and self.parallel.has_experts_grid and not torchtitan_ep:
            what = ("has expert groups as torchtitan's FSDP2 shards them (ep with etp 1, torch) only"
                    if self.convention == "framework" else "has no expert groups (ep/etp)")
            raise InputError("convention", f"the {self.convention} convention {what}",
                             f"use {ref('convention', 'paper')} with {ref('ep')}/{ref('etp')}")
        if self.convention in ("deepspeed", "framework") and (self.parallel.tp > 1 or self.parallel.pp > 1):
            what = ("DeepSpeed's estimators model" if self.convention == "deepspeed"
                    else "the framework convention partitions whole tensors for")
            raise InputError("convention", f"{what} pure data parallelism (no tp/pp)",
                             f"use {ref('convention', 'paper')} with {ref('tp')}/{ref('pp')}")
        if self.convention == "framework" and not self.parameters:
            raise InputError("convention", "the framework convention needs the model's tensors",
                             f"use {ref('model')} with a preset or a config.json")
        comm.validate_zeropp(self.zeropp)
        if self.micro_batches_per_step < 1:
            raise InputError("grad_accum", f"must be at least 1, got {self.micro_batches_per_step}")
        if self.activations is not None and not self.model.has_shape:
            raise InputError("seq_len", "activations need the model's shape",
                             f"use {ref('model')} with a preset or config.json")
        if self.hpz_partition_size is not None and self.hpz_partition_size < 1:
            raise InputError("hpz_partition_size", f"must be at least 1, got {self.hpz_partition_size}")
        if self.dp_shard is not None:
            if self.dp_shard < 2 or self.parallel.dp % self.dp_shard or self.dp_shard >= self.parallel.dp:
                raise InputError("dp_shard", f"a shard group of {self.dp_shard} must divide dp({self.parallel.dp}) "
                                 "and be between 2 and dp - 1", "choose a divisor of the data-parallel degree")
            torch_hsdp = self.convention == "framework" and self.framework == "torch"
            if (self.convention != "paper" and not torch_hsdp) or self.zeropp:
                raise InputError("dp_shard", "hybrid sharding is priced in the paper convention and as FSDP2's HSDP "
                                 f"({ref('convention', 'framework')} {ref('framework', 'torch')}), without ZeRO++",
                                 f"drop {ref('convention')}/{ref('zeropp')}, or {ref('dp_shard')}")
            if torch_hsdp and any(option.stage < 2 for option in self.options):
                raise InputError("dp_shard", "FSDP2's HSDP (fully_shard on a replicate × shard mesh) covers stages 2-3 "
                                 "under the torch framework convention", f"use {ref('stage', 3)} (or 2)")
            check_hybrid_experts(self.parallel, self.dp_shard)
        if "hpz" in self.zeropp and self.parallel.dp % self.hpz_ranks:
            raise InputError("hpz_partition_size",
                             f"hpZ groups of {self.hpz_ranks} do not divide dp({self.parallel.dp})",
                             "choose a partition size that divides the data-parallel degree")

    def _check_finetune(self) -> None:
        torch_lora = (self.convention == "framework" and self.framework == "torch" and self.finetune.adapters
                      and self.finetune.storage in (None, "nf4"))
        if self.convention != "paper" and not torch_lora:
            raise InputError("convention", f"fine-tuning ({self.finetune.mode}, frozen parameters) is modelled in the "
                             f"paper convention, and LoRA and NF4 QLoRA also under torch's wrappers "
                             f"({ref('convention', 'framework')} {ref('framework', 'torch')}); asked {self.convention}",
                             f"use {ref('convention', 'paper')}")
        if self.parallel.tp > 1 or self.parallel.pp > 1:
            raise InputError("tp/pp", "fine-tuning is modelled for data parallelism (ZeRO, FSDP) only",
                             f"use {ref('tp', 1)} {ref('pp', 1)}: LoRA and QLoRA runs shard with ZeRO-3 or FSDP")
        if self.zeropp:
            raise InputError("zeropp", "ZeRO++ is not modelled with frozen parameters", f"drop {ref('zeropp')}")
        if self.max_micro_batch:
            raise InputError("max_micro_batch", "is not modelled with fine-tuning yet", f"give {ref('micro_batch')}")
        self.finetune_counts  # noqa: B018  # raises on a bad --freeze or target before any option is evaluated

    @property
    def finetune_counts(self) -> FinetuneCounts | None:
        """Trainable and frozen counts; None when every parameter trains."""
        if self.finetune.trains_everything:
            return None
        return finetune_counts(self.model, self.finetune)

    @property
    def trainable_shard_params(self) -> int:
        """Parameters of the most loaded shard that get gradients and optimizer states."""
        counts = self.finetune_counts
        return self.shard_params if counts is None else counts.trainable

    @property
    def shard_params(self) -> int:
        """Parameters on the most loaded model-parallel shard: the busiest pipeline stage, split over tp (with
        expert parallelism: its dense part over tp, its routed experts over ep × etp)."""
        split = self.expert_split
        if split is not None:
            return split[0] + split[1]
        return shard_params(self.model, self.parallel.tp, self.parallel.pp)

    @property
    def expert_split(self) -> tuple[int, int] | None:
        """(dense, routed-expert) parameters of the most loaded rank when experts are cut apart from the dense
        layers (ep > 1 or etp != tp), else None: the two groups shard their ZeRO states over dp and edp."""
        parallel = self.parallel
        if not parallel.has_experts_grid:
            return None
        return expert_shard_params(self.model, parallel.tp, parallel.pp, parallel.ep, parallel.etp)

    @property
    def shard_largest_layer_params(self) -> int:
        return ceil_div(self.largest_layer_params, self.parallel.tp)

    @property
    def links(self) -> dict[str, Link]:
        return {"intra_node": self.intra_node_link or self.cluster.gpu.intra_node_link,
                "inter_node": self.inter_node_link or self.cluster.inter_node_link}

    @property
    def link_table(self) -> LinkTable:
        """Preset links by span, calibrated ones by collective and span (the table `zeroplan plan` uses)."""
        return LinkTable(self.links["intra_node"], self.links["inter_node"],
                         {f"{kind}/{span}": link for (kind, span), link in self.calibrated_links})

    def link_for(self, collective: comm.Collective) -> Link:
        """The calibrated link for this collective's kind and span, else the preset link of its span."""
        return self.link_table.link(collective.kind, collective.span == "intra_node")

    @property
    def dp_span(self) -> str:
        if self.dp_shard:  # a shard group is dp_shard consecutive DP ranks, tp apart
            return "intra_node" if self.dp_shard * self.parallel.tp <= self.parallel.gpus_per_node else "inter_node"
        return "intra_node" if self.parallel.dp_intra_node else "inter_node"

    @property
    def zero_ranks(self) -> int:
        """The ranks ZeRO partitions over: the data-parallel group, or its hybrid shard group."""
        return self.dp_shard or self.parallel.dp

    @property
    def expert_zero_ranks(self) -> int:
        """The ranks the routed experts' ZeRO states shard over: edp, or under hybrid sharding the expert ranks of
        one shard group (ParallelDims.expert_shard: torchtitan's efsdp)."""
        return self.parallel.expert_shard(self.dp_shard)

    @property
    def replicas(self) -> int:
        """Hybrid sharding's replicas of each shard group (dense and expert groups alike); 1 without it."""
        return self.parallel.dp // self.dp_shard if self.dp_shard else 1

    @property
    def hpz_ranks(self) -> int:
        return min(self.hpz_partition_size or self.parallel.gpus_per_node, self.parallel.dp)

    @property
    def hpz_span(self) -> str:
        """An hpZ group is hpz_ranks consecutive DP ranks, tp apart: inside a node when the block fits
        a node and lines up with its boundaries."""
        block, per_node = self.hpz_ranks * self.parallel.tp, self.parallel.gpus_per_node
        return "intra_node" if block <= per_node and per_node % block == 0 else "inter_node"


def _activation_breakdown(request: EstimateRequest) -> dict[str, int]:
    if request.activation_bytes is not None:
        return {"gpu/activations": request.activation_bytes}
    if request.activations is not None:
        estimate = activation_memory(request.model, request.activations)
        breakdown = {f"gpu/{key}": value for key, value in estimate.breakdown.items()}
        counts = request.finetune_counts
        if counts is not None:
            from zeroplan.core.memory.finetune import finetune_activations

            breakdown = finetune_activations(request.model, request.activations, request.finetune, counts, breakdown)
        return breakdown
    return {"gpu/activations/reserve": request.budget.activation_reserve_bytes}


def _evaluate(request: EstimateRequest, option: Option, activations: dict[str, int]) -> OptionEstimate:
    parallel, per_param = request.parallel, request.per_param
    shard = request.shard_params
    gpus_in_node = parallel.gpus_in_busiest_node
    if request.convention == "deepspeed":
        breakdown = deepspeed_model_states(option, shard, request.largest_layer_params, parallel.world,
                                           parallel.gpus_per_node, request.zero_init, request.buffer_factor)
        del breakdown["deepspeed/gpu_bytes"]
    elif request.finetune_counts is not None and request.convention == "framework":
        from zeroplan.core.memory.finetune import torch_finetune_states

        breakdown = torch_finetune_states(option, request.parameters, request.model, request.finetune,
                                          parallel.dp, per_param)
        if request.activations is not None and request.activation_bytes is None:
            from zeroplan.core.memory.finetune import adapter_peak_adjustment

            breakdown["gpu/buffers/not_alive_at_peak"] = adapter_peak_adjustment(
                request.model, request.activations, request.finetune, request.finetune_counts, activations,
                breakdown["gpu/gradients"], breakdown.get("gpu/buffers/dequantised_weight", 0))
    elif request.finetune_counts is not None:
        breakdown = _finetune_states(request, option, request.finetune_counts)
    else:
        if request.convention == "framework":
            from zeroplan.core.memory.framework_states import framework_model_states

            # hybrid sharding (FSDP2 HSDP): each group shards over its shard mesh, dp_shard and efsdp ranks
            breakdown = framework_model_states(option, request.parameters, request.zero_ranks, per_param,
                                               request.framework, ep=parallel.ep, edp=request.expert_zero_ranks,
                                               experts=_routed_experts(request))
        elif request.expert_split is not None:
            breakdown = expert_group_states(option, request.expert_split, parallel, per_param,
                                            request.zero_ranks, request.expert_zero_ranks)
        else:
            breakdown = paper_model_states(option, shard, request.zero_ranks, per_param, gpus_in_node)
        layout = request.model.layout
        if request.convention == "framework" and request.framework == "torch" and layout is not None:
            breakdown.update(_torch_buffers(request, layout, option, breakdown, activations))
        else:
            # torch's wrappers keep fp32 gradients: there is no fp32 copy to make for the optimizer step.
            fp32_step_copy = per_param.precision == "mixed" and not (
                request.convention == "framework" and request.framework == "torch")
            gpu_buffers = gpu_buffer_bytes(option.stage, shard, request.zero_ranks, request.shard_largest_layer_params,
                                           per_param.params, per_param.gradients, fp32_step_copy,
                                           option.offload_optimizer == "none", request.buffers)
            if request.expert_split is not None and "fp32_gradient_partition" in gpu_buffers:
                gpu_buffers["fp32_gradient_partition"] = _grouped_fp32_partition(request, option)
            breakdown.update({f"gpu/buffers/{name}": size for name, size in gpu_buffers.items()})
        host_buffers = host_buffer_bytes(option.offload_optimizer, option.offload_params, shard, request.zero_ranks,
                                         per_param.params, gpus_in_node, request.buffers)
        breakdown.update({f"cpu/buffers/{name}": size for name, size in host_buffers.items()})
    breakdown.update(activations)
    _overlap_step_temporary(breakdown)
    zeropp = request.zeropp if option.stage == 3 else frozenset()
    if "hpz" in zeropp and request.hpz_ranks < parallel.dp:
        breakdown["gpu/buffers/hpz_secondary_partition"] = comm.hpz_secondary_bytes(
            shard, per_param.params, request.hpz_ranks)

    stage = option.stage
    collectives = collectives_for(request, option)
    trained = request.trainable_shard_params
    breakdown["comm/intra_node_bytes"] = sum(c.bytes_per_gpu for c in collectives if c.span == "intra_node")
    breakdown["comm/inter_node_bytes"] = sum(c.bytes_per_gpu for c in collectives if c.span == "inter_node")
    breakdown["comm/paper_elements"] = comm.paper_elements(stage, trained) if parallel.dp > 1 else 0
    comm_seconds = sum(c.seconds(request.link_for(c)) for c in collectives)

    traffic = request_offload_traffic(request, option, request.micro_batches_per_step)
    breakdown.update({f"traffic/{k}": v for k, v in traffic.as_dict().items()})
    offload_seconds = offload_serial_seconds(traffic, request.cluster.pcie_bandwidth_bytes_per_s,
                                             request.cluster.nvme_bandwidth_bytes_per_s)

    estimate = OptionEstimate(option, request.convention, breakdown, comm_seconds, offload_seconds,
                              fits=True, limits=(), host_checked=True)
    if request.max_micro_batch and request.activations is not None:
        estimate = with_max_micro_batch(estimate, request.model, request.activations, request.budget.usable_gpu_bytes,
                                        request.global_batch, request.parallel.dp // request.cp)
    return _with_fit(request, estimate)


def request_offload_traffic(request: EstimateRequest, option: Option, micro_batches: int) -> OffloadTraffic:
    """The bytes `option` moves to and from the host per step under `request` (docs/formulas.md §13, §21.4):
    core.timing.dp_offload.offload_traffic over the trainable parameters of the most loaded shard, partitioned
    over the ZeRO ranks; with fine-tuning, the frozen parameters are fetched forward and backward in their storage
    bytes (ZeRO-3's offload_param moves every partitioned parameter) and never written back. `zeroplan estimate`
    and `zeroplan plan`'s search both call this one function."""
    frozen = 0
    counts = request.finetune_counts
    if counts is not None and option.offload_params != "none":
        from zeroplan.core.memory.finetune import frozen_storage

        plain, packed, _ = frozen_storage(request.model, request.finetune, counts, request.per_param.params)
        frozen = plain + packed
    return offload_traffic(option, request.trainable_shard_params, request.zero_ranks, request.per_param,
                           request.parallel.gpus_in_busiest_node, micro_batches, frozen)


def _finetune_states(request: EstimateRequest, option: Option, counts: FinetuneCounts) -> dict[str, int]:
    """Trainable states, frozen storage and buffers of a fine-tuning run (core.memory.finetune)."""
    from zeroplan.core.memory.finetune import finetune_gpu_buffers, finetune_model_states

    parallel, per_param, shard = request.parallel, request.per_param, request.shard_params
    breakdown = finetune_model_states(option, request.model, request.finetune, counts, shard, parallel.dp, per_param,
                                      parallel.gpus_in_busiest_node)
    buffers = finetune_gpu_buffers(option, request.model, request.finetune, counts, shard, parallel.dp,
                                   request.shard_largest_layer_params, per_param, per_param.precision == "mixed",
                                   request.buffers)
    breakdown.update({f"gpu/buffers/{name}": size for name, size in buffers.items()})
    host = host_buffer_bytes(option.offload_optimizer, option.offload_params, counts.trainable, parallel.dp,
                             per_param.params, parallel.gpus_in_busiest_node, request.buffers)
    breakdown.update({f"cpu/buffers/{name}": size for name, size in host.items()})
    return breakdown


def expert_group_states(option: Option, split: tuple[int, int], parallel: ParallelDims,
                        per_param: BytesPerParam, dense_ranks: int | None = None,
                        expert_ranks: int | None = None) -> dict[str, int]:
    """Model states of the most loaded rank with two parameter groups (the ZeRO paper's convention applied per
    group, as DeepSpeed-MoE's expert-data-parallel groups, Megatron's distributed optimizer and torchtitan's
    FSDP2 with EP shard them): the dense parameters over dp, the routed experts over edp, at every stage; under
    hybrid sharding over the shard group's dp_shard ranks and its dp_shard·tp/(ep·etp) expert ranks (dense_ranks,
    expert_ranks; docs/formulas.md §20.2). GPU entries are kept per group (gpu/params/dense, gpu/params/experts,
    ...); host and NVMe entries summed."""
    dense, experts = split
    gpus_in_node = parallel.gpus_in_busiest_node
    groups = {"dense": paper_model_states(option, dense, dense_ranks or parallel.dp, per_param, gpus_in_node),
              "experts": paper_model_states(option, experts, expert_ranks or parallel.edp, per_param, gpus_in_node)}
    breakdown: dict[str, int] = {}
    for key in groups["dense"]:
        if key.startswith("gpu/"):
            for group, states in groups.items():
                breakdown[f"{key}/{group}"] = states[key]
        else:
            breakdown[key] = groups["dense"][key] + groups["experts"][key]
    return breakdown


def _routed_experts(request: EstimateRequest) -> int:
    """The routed experts of a MoE layer (0 for a dense model)."""
    shape = request.model.shape
    return (shape.experts or 0) if shape is not None else 0


def _grouped_fp32_partition(request: EstimateRequest, option: Option) -> int:
    """The optimizer step's fp32 gradient partition with two groups: each group's partition (dense over dp,
    experts over edp), as gpu_buffer_bytes counts one group's."""
    assert request.expert_split is not None
    dense, experts = request.expert_split
    parallel = request.parallel
    if option.stage >= 1:
        elements = ceil_div(dense, request.zero_ranks) + ceil_div(experts, request.expert_zero_ranks)
    else:
        elements = dense + experts
    if option.stage == 3:
        elements = min(request.buffers.sub_group_size, elements)
    return elements * FP32_BYTES


def _torch_buffers(request: EstimateRequest, layout: ParamLayout, option: Option, breakdown: dict[str, int],
                   activations: dict[str, int]) -> dict[str, int]:
    from zeroplan.core.memory.activations import transformers_peak_moments
    from zeroplan.core.memory.torch_buffers import torch_gpu_buffers

    model, mixed = request.model, request.per_param.precision == "mixed"
    params, layer_params, root_params = model.params, layout.layer_params, layout.input_params + layout.output_params
    layers = model.shape.layers if model.shape is not None else 0
    if option.stage in (2, 3) and request.parameters and layers:
        # FSDP2 gathers each parameter padded to a multiple of the world along dim 0 (copies and buffers).
        from zeroplan.core.memory.framework_partition import fsdp2_rows

        def padded(spec, ranks: int) -> int:
            return fsdp2_rows(spec, ranks, 0)[0] * ranks * spec.row_numel

        dense_ranks, expert_ranks = request.zero_ranks, request.expert_zero_ranks  # HSDP: the shard meshes
        owned = [(spec, dense_ranks) for spec in request.parameters if spec.tied_to is None]
        if request.parallel.ep > 1:  # torchtitan's EP: a rank gathers its E/ep experts over edp, the rest over dp
            from zeroplan.core.memory.framework_partition import expert_parallel_params

            dense, local = expert_parallel_params(request.parameters, _routed_experts(request), request.parallel.ep,
                                                  expert_ranks, True)
            owned = [(spec, dense_ranks) for spec in dense] + [(spec, expert_ranks) for spec in local]
        params = sum(padded(spec, ranks) for spec, ranks in owned)
        root_params = sum(padded(spec, ranks) for spec, ranks in owned
                          if spec.name.count(".") < 2)  # layers: "<module>.<copy>.<i>"
        layer_params = (params - root_params) // layers
    moments = None
    if request.activations is not None and request.activation_bytes is None and model.has_shape:
        moments = transformers_peak_moments(model, request.activations)
    buffers = torch_gpu_buffers(option.stage, params, layer_params, root_params,
                                2 if mixed else 4, breakdown["gpu/optimizer_states"],
                                breakdown["gpu/gradients"], sum(activations.values()), request.per_param.optimizer,
                                request.zero_ranks, moments)
    return {f"gpu/buffers/{name}": size for name, size in buffers.items()}


def collectives_for(request: EstimateRequest, option: Option) -> list[comm.Collective]:
    """The data-parallel collectives one GPU takes part in per optimizer step under this option."""
    parallel, per_param, shard, stage = request.parallel, request.per_param, request.shard_params, option.stage
    calls_reduce, calls_gather = bucket_calls(stage, shard, request.buffers)
    if request.convention == "framework" and request.framework == "torch":
        split = request.expert_split
        # HSDP (dp_shard): FSDP2 reduce-scatters in the shard mesh, then all-reduces the fp32 shard in the replicate
        # mesh, every micro-batch (stages 2-3)
        def replicas(count: int, ranks: int) -> list[comm.Collective]:
            if not request.dp_shard:
                return []
            return comm.replica_allreduce(count, ranks, request.replicas, FP32_BYTES, request.micro_batches_per_step)

        if split is None:
            return comm.torch_collectives(stage, shard, request.zero_ranks, per_param.params, request.dp_span,
                                          calls_reduce, request.micro_batches_per_step) + \
                replicas(shard, request.zero_ranks)
        expert_span = request.dp_span if request.dp_shard else ("intra_node" if parallel.edp_intra_node
                                                                else "inter_node")  # torchtitan's EP: two FSDP groups
        return [collective for count, ranks, span in ((split[0], request.zero_ranks, request.dp_span),
                                                      (split[1], request.expert_zero_ranks, expert_span))
                for collective in comm.torch_collectives(stage, count, ranks, per_param.params, span,
                                                         bucket_calls(stage, count, request.buffers)[0],
                                                         request.micro_batches_per_step) + replicas(count, ranks)]
    zeropp = request.zeropp if stage == 3 else frozenset()
    counts = request.finetune_counts
    if counts is not None:
        return _finetune_collectives(request, option, counts)
    split = request.expert_split
    if split is None:
        collectives = comm.dp_collectives(stage, shard, request.zero_ranks, per_param.params, per_param.gradients,
                                          request.dp_span, zeropp, request.hpz_ranks, calls_reduce, calls_gather,
                                          request.micro_batches_per_step, request.hpz_span)
        if request.dp_shard and stage >= 1:  # hybrid: the gradient partition AllReduced across the replicas
            collectives += comm.replica_allreduce(shard, request.dp_shard, parallel.dp // request.dp_shard,
                                                  per_param.gradients,
                                                  request.micro_batches_per_step if stage >= 2 else 1)
        return collectives
    # Two groups: the dense parameters' collectives over dp, the experts' over edp (each on the span it crosses).
    # Hybrid sharding: each group's inside its shard group (dp_shard dense ranks, dp_shard·tp/(ep·etp) expert ranks,
    # both in the same block of dp_shard·tp consecutive ranks: dp_span), then each group's reduced gradient
    # partition AllReduced across the replicas (torchtitan's dp_replicate dimension, dense and sparse meshes alike).
    dense, experts = split
    expert_span = request.dp_span if request.dp_shard else ("intra_node" if parallel.edp_intra_node else "inter_node")
    found = []
    for count, ranks, span in ((dense, request.zero_ranks, request.dp_span),
                               (experts, request.expert_zero_ranks, expert_span)):
        reduce_calls, gather_calls = bucket_calls(stage, count, request.buffers)
        found += comm.dp_collectives(stage, count, ranks, per_param.params, per_param.gradients, span, zeropp,
                                     min(request.hpz_ranks, ranks), reduce_calls, gather_calls,
                                     request.micro_batches_per_step, request.hpz_span)
        if request.dp_shard and stage >= 1:
            found += comm.replica_allreduce(count, ranks, request.replicas, per_param.gradients,
                                            request.micro_batches_per_step if stage >= 2 else 1)
    return found


def _finetune_collectives(request: EstimateRequest, option: Option, counts: FinetuneCounts) -> list[comm.Collective]:
    """Gradients reduced and updated parameters gathered for the trainable parameters only; at stage 3 every
    parameter, frozen too, is gathered in its storage bytes for forward and again for backward (frozen layers
    still need their weights to pass input gradients back)."""
    from zeroplan.core.memory.finetune import storage_bytes_per_param

    parallel, per_param, stage = request.parallel, request.per_param, option.stage
    calls_reduce, calls_gather = bucket_calls(stage, counts.trainable, request.buffers)
    collectives = comm.dp_collectives(stage, counts.trainable, parallel.dp, per_param.params, per_param.gradients,
                                      request.dp_span, frozenset(), request.hpz_ranks, calls_reduce, calls_gather,
                                      request.micro_batches_per_step, request.hpz_span)
    if stage < 3:
        return collectives
    stored, _ = storage_bytes_per_param(request.model, request.finetune, counts, per_param.params)
    _, gathers = bucket_calls(stage, request.shard_params, request.buffers)
    return [dataclasses.replace(c, buffer_bytes=stored, calls=gathers) if c.kind == "all_gather" else c
            for c in collectives]


def _overlap_step_temporary(breakdown: dict[str, int]) -> None:
    """The optimizer step's fp32 gradient partition lives after backward has freed the activations:
    the peak is max(activations, temporary), so only the excess over the activations is counted."""
    temporary = breakdown.pop("gpu/buffers/fp32_gradient_partition", 0)
    if temporary:
        activations = sum(v for k, v in breakdown.items() if k.startswith("gpu/activations"))
        breakdown["temporaries/fp32_gradient_partition"] = temporary  # shown, not added twice
        breakdown["gpu/buffers/optimizer_step_beyond_activations"] = max(0, temporary - activations)


def _with_fit(request: EstimateRequest, estimate: OptionEstimate) -> OptionEstimate:
    budget, cluster = request.budget, request.cluster
    limits = []
    if estimate.gpu_bytes["total"] > budget.usable_gpu_bytes:
        limits.append("gpu")
    host_checked = True
    cpu_usable = budget.usable_host_bytes(cluster.cpu_memory_bytes)
    if estimate.cpu_bytes_per_node:
        if cpu_usable is None:
            host_checked = False
        elif estimate.cpu_bytes_per_node > cpu_usable:
            limits.append("cpu")
    if estimate.nvme_bytes_per_node:
        if cluster.nvme_bytes is None:
            host_checked = False
        elif estimate.nvme_bytes_per_node > cluster.nvme_bytes:
            limits.append("nvme")
    return dataclasses.replace(estimate, fits=not limits, limits=tuple(limits), host_checked=host_checked)


def evaluate_options(request: EstimateRequest) -> list[OptionEstimate]:
    activations = _activation_breakdown(request)  # the same for every option: compute it once
    return [_evaluate(request, option, activations) for option in request.options]


def default_largest_layer_params(params: int, vocab: int = 32_000, aspect_ratio: int = 128) -> int:
    """A stand-in for the largest module when only --params is known.

    Assumes a GPT-style shape with hidden/layers = 128 (GPT-3 and Llama families sit near it), so
    params ≈ 12·L·h² = 12·h³/128, and a 32,000-token vocabulary: the largest module is then the
    token embedding (vocab·h) or the MLP up-projection (4·h²), whichever is larger.
    """
    low, high = 1, 1
    while 12 * high**3 <= params * aspect_ratio:
        high *= 2
    while low < high - 1:  # integer cube root by bisection, no floats
        middle = (low + high) // 2
        low, high = (middle, high) if 12 * middle**3 <= params * aspect_ratio else (low, middle)
    hidden = low
    return min(params, max(vocab * hidden, 4 * hidden * hidden))


def model_largest_layer_params(model: ModelSpec) -> tuple[int, str | None]:
    """The largest module of a model, the one default every command uses (estimate, plan, check, export):
    the model's own figure; else, with its shape, the embedding (vocab·h) or an MLP projection (h·ffn),
    whichever is larger; else default_largest_layer_params. The note says what was assumed (None: nothing)."""
    if model.largest_layer_params is not None:
        return model.largest_layer_params, None
    if model.shape is not None:
        shape = model.shape
        largest = min(model.params, max(shape.vocab * shape.hidden, shape.hidden * shape.ffn))
        return largest, (f"largest layer: {format_count(largest)} parameters (the embedding or an MLP projection; "
                         "--largest-layer-params)")
    largest = default_largest_layer_params(model.params)
    return largest, (f"largest layer: {format_count(largest)} parameters, assumed from a GPT-style shape "
                     "(hidden/layers = 128, 32k vocabulary); give --largest-layer-params or --model")


__all__ = ["EstimateRequest", "OptionEstimate", "evaluate_options", "default_largest_layer_params",
           "model_largest_layer_params", "options_for"]
