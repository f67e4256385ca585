"""Per-step time of the data-parallel collectives, the offload transfers and the optimizer step
(docs/formulas.md §10, §13), split by what compute each part can hide behind (core.timing.step_time.compose).

DP: the ZeRO collectives of core.timing.dp_traffic (the same list the memory estimate prices), each priced as NCCL runs it
(core.timing.step_time.collective_seconds, built on core.timing.collectives.alpha_beta_seconds: ring bandwidth on the
group's span, hop latencies once per phase, a launch per bucket). Offload: one OffloadTraffic record of the
bytes a step moves (offload_traffic), which both commands price: `zeroplan estimate` serially
(offload_serial_seconds), `zeroplan plan` split by what each transfer can hide behind (offload_seconds;
core.timing.step_time's module note). Standard library only.
"""

from __future__ import annotations


from dataclasses import dataclass, replace

from zeroplan.core.timing.dp_traffic import Collective, dp_collectives, replica_allreduce
from zeroplan.core.options import Option
from zeroplan.core.precision import BytesPerParam
from zeroplan.core.timing.collectives import LinkTable, collective_seconds
from zeroplan.core.memory.deepspeed_buffers import BufferConfig, bucket_calls
from zeroplan.core.memory.model_states import HOST_GRADIENT_BYTES, sharded

from zeroplan.core.timing.machine import Machine
from zeroplan.core.units import ceil_div


@dataclass(frozen=True)
class DpSeconds:
    """Data-parallel collective time per step, by where it can hide."""

    reduce: float  # gradient ReduceScatter (stage 0: the AllReduce's first half)
    gather_forward: float  # stage 3
    gather_backward: float  # stage 3
    gather_after_step: float  # stages 0-2 (stage 0: the AllReduce's second half)

    @property
    def total(self) -> float:
        return self.reduce + self.gather_forward + self.gather_backward + self.gather_after_step


def dp_seconds(collectives: list[Collective], links: LinkTable, ranks_per_node: int = 1) -> DpSeconds:
    """ranks_per_node: how many of a DP group's ranks share a node (they share its NICs)."""
    parts = {"reduce": 0.0, "gather_forward": 0.0, "gather_backward": 0.0, "gather_after_step": 0.0}
    for c in collectives:
        kind = c.kind
        per_node = c.ranks if c.span == "intra_node" else min(ranks_per_node, c.ranks - 1)
        seconds = c.repeats * collective_seconds(kind, c.buffer_bytes, c.ranks, links, per_node, c.calls)
        if kind == "reduce_scatter" or c.name.startswith("allgather_gradients"):  # the gradient reduction
            parts["reduce"] += seconds
        elif c.name.startswith("allgather_parameters_forward"):
            parts["gather_forward"] += seconds
        elif c.name.startswith("allgather_parameters_backward"):
            parts["gather_backward"] += seconds
        else:
            parts["gather_after_step"] += seconds
    return DpSeconds(**parts)


def zero_dp_seconds(option: Option, shard_params: int, dp: int, per_param: BytesPerParam, dp_intra_node: bool,
                    micro_batches: int, buffers: BufferConfig, links: LinkTable,
                    ranks_per_node: int = 1, stage3_gather: tuple[int, int] | None = None) -> DpSeconds:
    """DP time from core.timing.dp_traffic's collectives, with the buckets the memory model uses.
    stage3_gather: fine-tuning (docs/formulas.md §21.4): shard_params is then the trainable count, and stage 3
    gathers (bytes, parameters) instead, every parameter in its storage bytes, frozen ones too."""
    calls_reduce, calls_gather = bucket_calls(option.stage, shard_params, buffers)
    span = "intra_node" if dp_intra_node else "inter_node"
    # FSDP's FP8 AllGather (BytesPerParam.gathered) is its per-layer gather of stage 3; stages 0-2 gather 16 bits
    gathered = per_param.gather_bytes if option.stage == 3 else per_param.params
    collectives = dp_collectives(option.stage, shard_params, dp, gathered, per_param.gradients, span,
                                 frozenset(), 1, calls_reduce, calls_gather, micro_batches)
    if stage3_gather is not None and option.stage == 3:
        stored, params = stage3_gather
        gathers = bucket_calls(3, params, buffers)[1]
        collectives = [replace(c, buffer_bytes=stored, calls=gathers) if c.kind == "all_gather" else c
                       for c in collectives]
    return dp_seconds(collectives, links, ranks_per_node)


def hybrid_dp_seconds(option: Option, shard_params: int, zero_ranks: int, dp_shard: int, tp: int, gpus_per_node: int,
                      per_param: BytesPerParam, micro_batches: int, buffers: BufferConfig,
                      links: LinkTable) -> DpSeconds:
    """Hybrid sharding (FSDP2 HSDP, DeepSpeed ZeRO++ hpZ-style and MiCS groups): of the zero_ranks ranks sharing the
    model-parallel shard, groups of dp_shard consecutive ranks (tp apart) partition ZeRO's states and run its
    collectives among themselves (zero_dp_seconds over dp_shard ranks, on the span the group crosses); the
    zero_ranks/dp_shard replicas of each partition then AllReduce their reduced gradient partition (shard_params /
    dp_shard elements) across groups, on the links the replica group crosses (its members are dp_shard·tp GPUs
    apart), as often as the gradients are reduced (every micro-batch from stage 2 on). The AllReduce is part of the
    gradient reduction, so it hides behind backward like the ReduceScatter (core.timing.step_time.exposed_seconds).
    Torch's HSDP (torch.distributed.fsdp.fully_shard with a 2-D DeviceMesh, "replicate" × "shard") reduces
    gradients with a ReduceScatter in the shard mesh then an AllReduce in the replicate mesh (FSDP2 docs)."""
    span_gpus = dp_shard * tp
    shard_intra_node = span_gpus <= gpus_per_node
    shard_per_node = max(1, gpus_per_node // tp) if tp <= gpus_per_node else 1
    inside = zero_dp_seconds(option, shard_params, dp_shard, per_param, shard_intra_node, micro_batches, buffers,
                             links, min(shard_per_node, dp_shard))
    repeats = micro_batches if option.stage >= 2 else 1
    # one replica per node: a shard group spans at least a node (core.layout.search.hybrid_shard_problem)
    across = dp_seconds(replica_allreduce(shard_params, dp_shard, zero_ranks // dp_shard, per_param.gradients,
                                          repeats), links, 1)
    return DpSeconds(inside.reduce + across.reduce, inside.gather_forward, inside.gather_backward,
                     inside.gather_after_step)


@dataclass(frozen=True)
class OffloadTraffic:
    """Bytes one optimizer step of `micro_batches` micro-batches moves for an offloading option, by transfer.

    - Optimizer offload: the 16-bit gradient partition goes down to the host, every micro-batch from
      stage 2 on (partitioned gradients are moved as they are reduced), once per step at stage 1; the
      updated 16-bit parameter partition comes back up once per step, unless parameters live on the
      host too (then the next fetch brings them). NVMe optimizer: the states and the fp32 gradient
      partition are written and read back once per step.
    - Parameter offload: the rank's partition crosses PCIe for forward and again for backward, every
      micro-batch; on NVMe it is read for both and the updated partition written back once per step.
      Frozen parameters (fine-tuning) are fetched and read with the others in their storage bytes (ZeRO-3's
      offload_param moves every parameter it partitioned, trainable or not) and never written back.
    """

    gradient_down_bytes: int  # per GPU, per move
    gradient_moves: int
    param_up_bytes: int  # per GPU, once per step
    param_fetch_bytes: int  # per GPU, per pass (forward or backward of one micro-batch)
    fetch_passes: int  # 2 × micro-batches with parameter offload
    nvme_swap_bytes_per_node: int  # optimizer states + fp32 gradients, read once and written once
    nvme_param_read_bytes_per_node: int  # per pass
    nvme_param_write_bytes_per_node: int  # once per step

    @property
    def pcie_bytes_per_gpu(self) -> int:
        return (self.gradient_moves * self.gradient_down_bytes + self.param_up_bytes
                + self.fetch_passes * self.param_fetch_bytes)

    @property
    def nvme_read_bytes_per_node(self) -> int:
        return self.nvme_swap_bytes_per_node + self.fetch_passes * self.nvme_param_read_bytes_per_node

    @property
    def nvme_write_bytes_per_node(self) -> int:
        return self.nvme_swap_bytes_per_node + self.nvme_param_write_bytes_per_node

    def as_dict(self) -> dict[str, int]:
        """The estimate's breakdown keys (under traffic/)."""
        return {"pcie/bytes_per_gpu": self.pcie_bytes_per_gpu,
                "nvme/read_bytes_per_node": self.nvme_read_bytes_per_node,
                "nvme/write_bytes_per_node": self.nvme_write_bytes_per_node}


def offload_traffic(option: Option, shard_params: int, dp: int, per_param: BytesPerParam, gpus_in_node: int,
                    micro_batches: int = 1, frozen_bytes: int = 0) -> OffloadTraffic:
    """The one offload-traffic formula (docs/formulas.md §13); see OffloadTraffic for what moves when.
    shard_params counts what trains; frozen_bytes is the frozen parameters' storage, all ranks together."""
    gradient_partition = sharded(per_param.gradients, shard_params, dp)
    param_partition = sharded(per_param.params, shard_params, dp)
    down = moves = up = fetch = passes = swap = nvme_read = nvme_write = 0
    if option.offload_optimizer != "none":
        down, moves = gradient_partition, micro_batches if option.stage >= 2 else 1
        if option.offload_params == "none":
            up = param_partition
        if option.offload_optimizer == "nvme":
            swap = gpus_in_node * (sharded(per_param.optimizer_states, shard_params, dp)
                                   + sharded(HOST_GRADIENT_BYTES, shard_params, dp))
    if option.offload_params != "none":
        frozen_partition = ceil_div(frozen_bytes, dp)
        fetch, passes = param_partition + frozen_partition, 2 * micro_batches
        if option.offload_params == "nvme":
            nvme_read = gpus_in_node * (param_partition + frozen_partition)
            nvme_write = gpus_in_node * param_partition
    return OffloadTraffic(down, moves, up, fetch, passes, swap, nvme_read, nvme_write)


def offload_serial_seconds(traffic: OffloadTraffic, pcie_bytes_per_s: float, nvme_bytes_per_s: float | None) -> float:
    """`zeroplan estimate`'s figure: every offload byte at its link's rate, nothing overlapped."""
    seconds = traffic.pcie_bytes_per_gpu / pcie_bytes_per_s
    nvme_io = traffic.nvme_read_bytes_per_node + traffic.nvme_write_bytes_per_node
    if nvme_io and nvme_bytes_per_s:
        seconds += nvme_io / nvme_bytes_per_s
    return seconds


@dataclass(frozen=True)
class OffloadSeconds:
    gradients_down: float  # per repeat, hides behind backward
    gradient_repeats: int
    exposed: float  # parameters back up, CPU optimizer step, NVMe swaps and write-back
    param_fetch: float  # per pass (forward or backward of a micro-batch), hides like stage-3 gathers

    def total(self, micro_batches: int) -> float:
        """All offload time with nothing hidden: 2 fetch passes per micro-batch."""
        fetch_passes = 2 * micro_batches if self.param_fetch else 0
        return self.gradients_down * self.gradient_repeats + self.exposed + fetch_passes * self.param_fetch


def offload_seconds(traffic: OffloadTraffic, partition: int, gpus_in_node: int, machine: Machine,
                    optimizer_offloaded: bool) -> OffloadSeconds:
    """`zeroplan plan`'s pricing of the same OffloadTraffic, split by what each transfer hides behind;
    the CPU optimizer step (gpus_in_node partitions per node) is added when the optimizer is offloaded."""
    pcie, nvme = machine.pcie_bytes_per_s, machine.nvme_bytes_per_s
    down = traffic.gradient_down_bytes / pcie
    exposed = traffic.param_up_bytes / pcie
    if optimizer_offloaded:
        exposed += gpus_in_node * partition / machine.cpu_adam_params_per_s
    fetch = traffic.param_fetch_bytes / pcie
    if nvme:
        exposed += (2 * traffic.nvme_swap_bytes_per_node + traffic.nvme_param_write_bytes_per_node) / nvme
        fetch += traffic.nvme_param_read_bytes_per_node / nvme
    return OffloadSeconds(down, traffic.gradient_moves, exposed, fetch)


def gpu_optimizer_seconds(option: Option, partition: int, per_param: BytesPerParam, machine: Machine) -> float:
    """A fused Adam step reads and writes the states, reads the gradient, writes the 16-bit parameter."""
    if option.offload_optimizer != "none":
        return 0.0
    bytes_per_param = 2 * per_param.optimizer_states + per_param.gradients + per_param.params
    return partition * bytes_per_param / machine.hbm_bytes_per_s
