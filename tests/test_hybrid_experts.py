"""Hybrid sharding (--dp-shard: FSDP2 HSDP) with expert parallelism, as torchtitan lays it out
(torchtitan/distributed/parallel_dims.py): dense parameters shard over dp_shard (× cp) and replicate over
dp_replicate = dp / dp_shard; routed experts shard over the sparse mesh's "efsdp" = dp_shard·cp·tp / ep ranks and
replicate over the same dp_replicate (["pp", "dp_replicate", "efsdp", "ep"]). Hand computations of those rules
against estimate, plan and the layout rules (docs/formulas.md §20.2)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from zeroplan.core.errors import InputError
from zeroplan.core.memory.deepspeed_buffers import BufferConfig
from zeroplan.core.model.pipeline_stages import expert_shard_params
from zeroplan.core.options import Option
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.parallel.rules import HYBRID_EXPERTS, check_hybrid_experts, hybrid_expert_problem
from zeroplan.core.timing.dp_offload import hybrid_dp_seconds, zero_dp_seconds
from zeroplan.core.timing.dp_traffic import replica_allreduce
from zeroplan.search.inputs import PlanInputs, resolve
from zeroplan.inputs.training import load_model


def _breakdown(out: str) -> dict:
    document = json.loads(out)
    return (document["options"] if "options" in document else document["estimates"])[0]["breakdown"]


@pytest.mark.parametrize("stage", [1, 3])
def test_estimate_shards_experts_over_efsdp_and_dense_over_dp_shard(cli, stage):
    """Mixtral 8x7B on 64 GPUs, EP 8, dp_shard 16 (tp 1, cp 1): torchtitan's meshes are dp_replicate 4, fsdp 16,
    efsdp 16·1/8 = 2. Dense states (P + G + K = 2 + 2 + 12 bytes) over 16 ranks, the rank's 1/8 of the experts over
    2; stage 1 keeps 16-bit params and gradients whole."""
    code, out, err = cli("estimate", "--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--ep", "8",
                         "--stage", str(stage), "--seq-len", "4096", "--dp-shard", "16", "-f", "json")
    assert code == 0, err
    breakdown = _breakdown(out)
    dense, experts = expert_shard_params(load_model("mixtral-8x7b"), 1, 1, 8, 1)
    assert breakdown["gpu/optimizer_states/dense"] == 12 * -(-dense // 16)
    assert breakdown["gpu/optimizer_states/experts"] == 12 * -(-experts // 2)
    if stage == 3:
        assert breakdown["gpu/params/dense"] == 2 * -(-dense // 16)
        assert breakdown["gpu/params/experts"] == 2 * -(-experts // 2)
    else:
        assert breakdown["gpu/params/experts"] == 2 * experts and breakdown["gpu/gradients/dense"] == 2 * dense


def test_estimate_collectives_run_inside_the_shard_group_and_across_the_replicas(cli):
    """The gradient traffic per rank, stage 1, one micro-batch: each group's ReduceScatter inside its shard group
    (dense over 16 ranks, experts over 2), then its reduced partition AllReduced over the 4 replicas as a
    ReduceScatter + AllGather (replica_allreduce), and each group's updated parameters AllGathered inside the shard
    group. Bytes per GPU of a ring: (n − 1)/n of the buffer; everything crosses nodes (dp_shard·tp = 16 > 8)."""
    code, out, err = cli("estimate", "--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--ep", "8",
                         "--stage", "1", "--seq-len", "4096", "--dp-shard", "16", "-f", "json")
    assert code == 0, err
    breakdown = _breakdown(out)
    dense, experts = expert_shard_params(load_model("mixtral-8x7b"), 1, 1, 8, 1)

    def ring(buffer: int, ranks: int) -> int:
        return buffer * (ranks - 1) // ranks

    expected = 0
    for count, ranks in ((dense, 16), (experts, 2)):
        expected += ring(2 * count, ranks)  # ReduceScatter of the 16-bit gradients in the shard group
        expected += 2 * ring(2 * -(-count // ranks), 4)  # the replicas' AllReduce of the reduced partition
        expected += ring(2 * count, ranks)  # AllGather of the updated 16-bit parameters
    assert breakdown["comm/intra_node_bytes"] == 0
    assert breakdown["comm/inter_node_bytes"] == pytest.approx(expected, rel=1e-6)


def test_layout_rule_names_every_factor(cli):
    """A shard group must hold whole EP groups: ep × etp divides dp_shard × tp (efsdp = dp_shard·cp·tp // ep)."""
    parallel = ParallelDims(64, 1, 1, 8, ep=8)
    assert hybrid_expert_problem(parallel, 4) == HYBRID_EXPERTS and hybrid_expert_problem(parallel, 8) is None
    assert parallel.expert_shard(16) == 2 and parallel.expert_shard(None) == parallel.edp == 8
    with pytest.raises(InputError) as error:
        check_hybrid_experts(ParallelDims(64, 2, 1, 8, ep=8, etp=2), 4)
    for factor in ("ep(8)", "etp(2)", "dp_shard(4)", "tp(2)", "dp(32)"):
        assert factor in str(error.value)
    code, out, err = cli("estimate", "--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--ep", "8",
                         "--stage", "3", "--dp-shard", "4")
    assert code == 2 and err.count("\n") == 1 and "--dp-shard" in err and "ep(8)" in err


def test_plan_searches_hybrid_sharding_with_ep(cli):
    """plan --dp-shard with --ep: a hybrid plan's model states are those of full sharding on one shard group's
    world (dp_shard·tp·pp GPUs, same ep: its edp is efsdp), a shard of 4 is skipped under EP 8 (the rule), and the
    DP time is the two groups' hybrid_dp_seconds (dense over dp_shard, tp apart; experts over efsdp, ep·etp apart;
    both across the same replicas)."""
    base = ["--model", "mixtral-8x7b", "--gpu", "h100-80g", "--seq-len", "4096", "--tp", "1", "--pp", "1",
            "--ep", "8", "--stages", "3", "--comm-overlap", "fsdp", "--no-offload", "--recompute", "full",
            "--micro-batches", "1"]
    code, out, err = cli("plan", *base, "--format", "csv", "--gpus", "64", "--global-batch", "128",
                         "--dp-shard", "4,16")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {row["dp_shard"] for row in rows} == {"0", "16"}  # 4 × tp 1 does not hold an EP group of 8
    hybrid = next(row for row in rows if row["dp_shard"] == "16")
    code, out, err = cli("plan", *base, "--format", "json", "--gpus", "16", "--global-batch", "32")
    assert code == 0, err
    group = json.loads(out)["top"][0]
    for part in ("params", "gradients", "optimizer_states"):
        assert int(hybrid[f"gpu_bytes_{part}"]) == group[f"gpu_bytes_{part}"]
    request = resolve(PlanInputs.of(model="mixtral-8x7b", gpu="h100-80g", gpus=64, global_batch=128, seq_len=4096,
                                    comm_overlap="fsdp")).request
    links = request.machine.links  # the fsdp rule's links (rings over every NIC of a node)
    dense, experts = expert_shard_params(load_model("mixtral-8x7b"), 1, 1, 8, 1)
    per_param = request.per_param
    dense_time = hybrid_dp_seconds(Option(3), dense, 64, 16, 1, 8, per_param, 2, BufferConfig(), links)
    expert_time = hybrid_dp_seconds(Option(3), experts, 8, 2, 8, 8, per_param, 2, BufferConfig(), links)
    # experts: ZeRO-3 over the 2 efsdp ranks (8 apart, across nodes), the AllReduce over the 4 replicas
    inside = zero_dp_seconds(Option(3), experts, 2, per_param, False, 2, BufferConfig(), links, 1)
    assert expert_time.gather_forward == inside.gather_forward
    assert expert_time.reduce > inside.reduce
    assert float(hybrid["seconds_dp_total"]) == pytest.approx(dense_time.total + expert_time.total, rel=1e-6)
    assert replica_allreduce(experts, 2, 4, 2, 1)[0].buffer_bytes == 2 * -(-experts // 2)


@pytest.mark.parametrize("ep", [1, 8])
def test_fsdp2_hsdp_holds_what_fsdp2_holds_on_one_shard_group(cli, ep):
    """--convention framework --framework torch with --dp-shard: FSDP2's HSDP (fully_shard on a 2-D replicate ×
    shard mesh) shards each tensor over the shard mesh only, so a rank holds what FSDP2 holds on a world of one shard
    group (16 GPUs here), with EP too (torchtitan's efsdp = 16·1/8 = 2 on both worlds); its gradients add one fp32
    AllReduce of each group's reduced shard over the 4 replicas, every micro-batch. Stages 0-1 are refused."""
    base = ("estimate", "--model", "qwen3-30b-a3b", "--gpu", "h100-80g", "--convention", "framework",
            "--framework", "torch", "--stage", "3", "--seq-len", "4096", "--ep", str(ep), "-f", "json")
    code, out, err = cli(*base, "--gpus", "64", "--dp-shard", "16")
    assert code == 0, err
    hybrid = _breakdown(out)
    code, out, err = cli(*base, "--gpus", "16")
    assert code == 0, err
    group = _breakdown(out)
    for key in ("gpu/params", "gpu/gradients", "gpu/optimizer_states"):
        assert hybrid[key] == group[key]
    assert {k: v for k, v in hybrid.items() if k.startswith("gpu/buffers")} == \
        {k: v for k, v in group.items() if k.startswith("gpu/buffers")}
    extra = hybrid["comm/inter_node_bytes"] - group["comm/inter_node_bytes"]
    model = load_model("qwen3-30b-a3b")
    if ep == 1:
        shards = [(model.params, 16)]
    else:
        dense, experts = expert_shard_params(model, 1, 1, 8, 1)
        shards = [(dense, 16), (experts, 2)]
    assert extra == sum(2 * (4 * -(-count // ranks)) * 3 // 4 for count, ranks in shards)  # RS + AG halves, 4 ranks
    code, out, err = cli(*base[:-2], "--gpus", "64", "--dp-shard", "16", "--stage", "1")
    assert code == 2 and err.count("\n") == 1 and "--dp-shard" in err
