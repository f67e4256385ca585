"""Mixture-of-experts layouts: Megatron-Core's expert folding, the rules that make a layout legal, and the model
states of the two parameter groups (dense over dp, routed experts over edp) against Megatron-LM's own
theoretical memory function (tests/data/megatron/theoretical_memory_usage.txt, verbatim)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroplan.core.errors import InputError
from zeroplan.core.evaluate.estimate import expert_group_states
from zeroplan.core.model.experts import active_params, expert_params
from zeroplan.core.model.pipeline_stages import expert_shard_params
from zeroplan.core.options import Option
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.parallel.rules import check_model_layout
from zeroplan.core.precision import BytesPerParam
from zeroplan.inputs.training import load_model

# Kept as .txt: it is Megatron-LM's file, not ours (the repository's doc-reference checks read our .py files).
MEGATRON = Path(__file__).parent / "data" / "megatron" / "theoretical_memory_usage.txt"


def _megatron():
    """Megatron-LM's module, its one relative import (`.utils`) replaced by the two names it uses."""
    source = MEGATRON.read_text(encoding="utf-8").replace("from .utils import is_hybrid_model, print_rank_0", "")
    module = types.ModuleType("theoretical_memory_usage")
    module.is_hybrid_model = lambda args: False
    module.print_rank_0 = print
    exec(compile(source, str(MEGATRON), "exec"), module.__dict__)
    return module


# ---- layout ----

def test_megatron_folding_rank_order():
    """Megatron-Core's expert grid tp-ep-dp-pp: etp innermost, then ep, then edp, inside each pipeline stage."""
    dims = ParallelDims(64, tp=1, pp=4, gpus_per_node=8, ep=8)
    assert (dims.dp, dims.edp, dims.etp) == (16, 2, 1)
    assert dims.ep_group() == list(range(8)) and dims.edp_group() == [0, 8]
    assert dims.ep_group(pp_index=1) == list(range(16, 24))
    assert dims.ep_intra_node and not dims.edp_intra_node
    dims = ParallelDims(32, tp=4, pp=1, gpus_per_node=8, ep=4, etp=2)
    assert dims.edp == 4 and dims.ep_group(0, 1) == [1, 3, 5, 7] and dims.edp_group(0, 0) == [0, 8, 16, 24]
    assert not dims.ep_intra_node or dims.ep * dims.etp <= 8
    # ep = 1 with etp = tp is the plain grid, equal to one built without them
    assert ParallelDims(16, 2, 2, 8) == ParallelDims(16, 2, 2, 8, ep=1, etp=2)
    assert not ParallelDims(16, 2, 2, 8).has_experts_grid


@given(world_exp=st.integers(0, 9), tp_exp=st.integers(0, 3), pp_exp=st.integers(0, 3), ep_exp=st.integers(0, 6),
       etp_exp=st.integers(0, 3), node=st.sampled_from([1, 2, 4, 6, 8]))
def test_expert_groups_inside_a_node_match_brute_force(world_exp, tp_exp, pp_exp, ep_exp, etp_exp, node):
    world, tp, pp, ep, etp = 2**world_exp, 2**tp_exp, 2**pp_exp, 2**ep_exp, 2**etp_exp
    if world % (tp * pp) or (world // pp) % (ep * etp):
        return
    dims = ParallelDims(world, tp, pp, node, ep=ep, etp=etp)
    ep_groups = [dims.ep_group(d, t, p) for p in range(pp) for d in range(dims.edp) for t in range(etp)]
    edp_groups = [dims.edp_group(e, t, p) for p in range(pp) for e in range(ep) for t in range(etp)]
    assert sorted(r for g in ep_groups for r in g) == list(range(world))  # a partition of the ranks
    assert dims.ep_intra_node == all(len({r // node for r in g}) == 1 for g in ep_groups)
    assert dims.edp_intra_node == all(len({r // node for r in g}) == 1 for g in edp_groups)


def test_each_violation_names_its_factor():
    with pytest.raises(InputError) as info:
        ParallelDims(64, tp=2, pp=4, ep=16)
    assert info.value.input_name == "ep" and "ep(16) × etp(2) = 32 does not divide the 16 ranks" in str(info.value)
    mixtral = load_model("mixtral-8x7b")
    with pytest.raises(InputError) as info:
        check_model_layout(mixtral, ParallelDims(48, ep=3, gpus_per_node=8))
    assert info.value.input_name == "ep" and "ep(3) does not divide the 8 experts" in str(info.value)
    with pytest.raises(InputError) as info:
        check_model_layout(load_model("llama-2-7b"), ParallelDims(16, ep=2))
    assert info.value.input_name == "ep" and "dense model" in str(info.value)
    with pytest.raises(InputError) as info:
        check_model_layout(mixtral, ParallelDims(48, tp=1, ep=1, etp=3))
    assert info.value.input_name == "etp" and "etp(3) does not divide the expert MLP width 14336" in str(info.value)


# ---- parameter groups ----

def test_mixtral_split_counts_every_parameter_once():
    mixtral = load_model("mixtral-8x7b")
    split = expert_params(mixtral.shape)
    assert split is not None and split.routed_total == 32 * 8 * 3 * 4096 * 14336
    # transformers' own modules (core.model.families, exact against the meta device): the fused experts module
    # is the routed side, the router (gate) is dense
    from zeroplan.core.model.families import architecture_from_hf_config

    modules = {m.name: m for m in architecture_from_hf_config(mixtral.extra["hf_config"], "mixtral").modules}
    assert split.routed_per_layer == modules["experts"].params and split.router_params == modules["router"].params
    assert active_params(mixtral) == mixtral.params - 32 * 6 * 3 * 4096 * 14336  # 12.9B active of 46.7B
    assert round(active_params(mixtral) / 1e9, 1) == 12.9
    assert expert_params(load_model("llama-2-7b").shape) is None


def _megatron_args(model, world, tp, pp, ep, etp):
    shape = model.shape
    return types.SimpleNamespace(
        kv_channels=shape.head_dim, num_attention_heads=shape.heads, hidden_size=shape.hidden,
        group_query_attention=shape.kv_heads != shape.heads, num_query_groups=shape.kv_heads,
        num_experts=shape.experts, swiglu=shape.gated_mlp, moe_shared_expert_intermediate_size=None,
        moe_layer_freq=1, num_layers=shape.layers, moe_ffn_hidden_size=shape.ffn, mtp_num_layers=None,
        normalization="RMSNorm", multi_latent_attention=False, padded_vocab_size=shape.vocab,
        untie_embeddings_and_output_weights=not shape.tied_embeddings, ffn_hidden_size=shape.ffn,
        moe_latent_size=None, moe_router_topk=shape.experts_per_token, add_bias_linear=False,
        expert_tensor_parallel_size=etp, expert_model_parallel_size=ep, pipeline_model_parallel_size=pp,
        world_size=world, tensor_model_parallel_size=tp, data_parallel_size=world // (tp * pp),
        use_distributed_optimizer=True)


# Megatron's distributed optimizer (bf16 parameters, fp32 main gradients, fp32 main parameters and Adam states
# sharded over the data-parallel group: "6 + 12/dp" bytes per parameter) is ZeRO-1 with 4-byte gradients.
MEGATRON_BYTES = BytesPerParam("mixed", "adam", params=2, gradients=4, optimizer_states=12)
ZERO1 = Option(1)


@pytest.mark.parametrize("world,tp,pp,ep,etp", [
    (8, 1, 1, 8, 1), (64, 1, 1, 8, 1), (64, 1, 4, 8, 1), (128, 1, 8, 4, 1), (64, 2, 1, 8, 1), (64, 2, 4, 4, 2),
    (32, 1, 1, 1, 1)])
def test_model_states_match_megatron_theoretical_memory(world, tp, pp, ep, etp):
    """Per-GPU weights + gradients + optimizer states of the most loaded rank against Megatron-LM's
    compute_weight_and_optimizer_memory on the same layout, component by component. Where both count the same
    parameters they agree to the rounding of a shard (Megatron divides in floats, zeroplan holds whole elements:
    ceil(Ψ/dp)); the differences are named and added back:
    - replicated parameters: Megatron keeps norms and the router whole on every tp rank; zeroplan splits a
      stage's dense parameters over tp, so it holds (tp-1)/tp of them less;
    - the final norm: Megatron spreads it over the stages (1/pp each, whole on every tp rank) and counts the first
      stage (embedding); zeroplan counts the busiest stage, the last (the LM head, as large as the embedding,
      plus the final norm split over tp)."""
    mixtral = load_model("mixtral-8x7b")
    shape = mixtral.shape
    megatron = _megatron()
    args = _megatron_args(mixtral, world, tp, pp, ep, etp)
    expected = megatron.compute_weight_and_optimizer_memory(args)

    dims = ParallelDims(world, tp, pp, 8, ep=ep, etp=etp)
    dense, experts = expert_shard_params(mixtral, tp, pp, ep, etp)
    states = expert_group_states(ZERO1, (dense, experts), dims, MEGATRON_BYTES)
    held = sum(value for key, value in states.items() if key.startswith("gpu/"))

    # Megatron's most loaded shard, component by component, from its own variables' formulas
    h, layers = shape.hidden, shape.layers
    replicated_per_layer = 2 * h + h * shape.experts  # two RMSNorms and the router
    final_norm = h
    megatron_experts = 32 * 8 * 3 * h * shape.ffn / pp / (ep * etp)
    assert experts == megatron_experts  # routed experts: exactly the same count
    # Megatron minus zeroplan: replicated norms and router kept whole on each tp rank; the final norm, 1/pp of it
    # replicated in Megatron's count, its tp share on zeroplan's busiest (last) stage
    named = (replicated_per_layer * layers / pp) * (tp - 1) / tp
    named += final_norm / pp - final_norm / tp
    megatron_dense = dense + named
    bytes_dense = 6 * megatron_dense + 12 * megatron_dense / dims.dp
    bytes_experts = 6 * experts + 12 * experts / dims.edp
    assert abs((bytes_dense + bytes_experts) - expected) < 1e-3 * expected / 1e6  # the decomposition is Megatron's
    # zeroplan's figure is Megatron's less the named differences, to the rounding of the two shards
    difference = 6 * named + 12 * named / dims.dp
    assert abs(held - (expected - difference)) <= 12 * 2
    # and the per-group entries hold what each group shards
    assert states["gpu/optimizer_states/experts"] == 12 * -(-experts // dims.edp)
    assert states["gpu/params/experts"] == 2 * experts and states["gpu/gradients/experts"] == 4 * experts


def test_expert_states_are_conserved_over_the_ranks():
    """ZeRO-3 with EP: every parameter is held exactly once over the world (2 bytes each), dense and expert."""
    mixtral = load_model("mixtral-8x7b")
    for world, tp, ep, etp in ((64, 1, 8, 1), (64, 2, 4, 1), (128, 2, 8, 2)):
        dims = ParallelDims(world, tp, 1, 8, ep=ep, etp=etp)
        dense, experts = expert_shard_params(mixtral, tp, 1, ep, etp)
        states = expert_group_states(Option(3), (dense, experts), dims, MEGATRON_BYTES)
        split = expert_params(mixtral.shape)
        assert states["gpu/params/experts"] * world == 2 * split.routed_total
        assert states["gpu/params/dense"] * world == 2 * (mixtral.params - split.routed_total)


# ---- time ----

def test_all_to_all_prices_each_peer_share_on_its_link():
    """An all-to-all sends S/n to each of the n-1 peers: inside a node all on NVLink; across nodes the peers of
    other nodes take (n - per_node)/n·S on the NIC, concurrently with the NVLink share."""
    from zeroplan.core.hardware import Link
    from zeroplan.core.timing.collectives import (ALL_TO_ALL, NCCL_LAUNCH_S, NIC_EFFICIENCY, NVLINK_EFFICIENCY,
                                                  LinkTable, collective_seconds)

    nvlink, nic = Link(400e9, 3e-6, "preset"), Link(50e9, 5e-6, "preset")
    links = LinkTable(nvlink, nic)
    size = 64 * 2**20
    inside = collective_seconds(ALL_TO_ALL, size, 8, links, 8)
    assert inside == pytest.approx(3e-6 + 7 / 8 * size / (400e9 * NVLINK_EFFICIENCY) + NCCL_LAUNCH_S)
    across = collective_seconds(ALL_TO_ALL, size, 64, links, 8)
    assert across == pytest.approx(5e-6 + 56 / 64 * size / (50e9 * NIC_EFFICIENCY) + NCCL_LAUNCH_S)
    # the frameworks whose rings spread over a node's NICs (node_rails) do not make an all-to-all faster: each of
    # the node's 8 ranks sends its own 56/64 across at once, one NIC's worth each
    import dataclasses

    assert collective_seconds(ALL_TO_ALL, size, 64, dataclasses.replace(links, node_rails=True), 8) == across
    assert collective_seconds(ALL_TO_ALL, size, 1, links, 8) == 0.0


def test_ep_adds_exposed_all_to_all_and_leaves_compute_alone():
    from zeroplan.core.timing.step_time import FlopModel, Layout, ep_alltoall_layer_seconds, microbatch_seconds
    from zeroplan.core.hardware import Link
    from zeroplan.core.timing.collectives import LinkTable
    from zeroplan.core.timing.machine import Machine

    mixtral = load_model("mixtral-8x7b")
    flops = FlopModel.from_model(mixtral)
    machine = Machine(peak_flops=989e12, hbm_bytes_per_s=3.35e12, pcie_bytes_per_s=63e9, nvme_bytes_per_s=None,
                      links=LinkTable(Link(450e9, 3e-6, "preset"), Link(50e9, 5e-6, "preset")))
    base = Layout(8, 1, 1, 1, 4096, 1, 8, "selective", False, True, True, True)
    with_ep = Layout(8, 1, 1, 1, 4096, 1, 8, "selective", False, True, True, True, ep=8, ep_per_node=8)
    f0, b0, c0, _ = microbatch_seconds(base, flops, flops.hidden, machine)
    f1, b1, c1, _ = microbatch_seconds(with_ep, flops, flops.hidden, machine)
    # The same FLOPs per rank (balanced routing spreads T·k tokens over the ranks, 1024 rows per expert: whole
    # 128-row tiles); but without EP a rank runs all 8 experts and reads their 8 weights per GEMM, with EP 8 its one
    # (docs/formulas.md §14.2): 7 more experts' h·2f + f·h bf16 weights per layer at HBM bandwidth, forward and twice
    # backward (data- and weight-gradient GEMMs).
    reads = 32 * 7 * 3 * 4096 * 14336 * 2 / 3.35e12
    assert f0 - f1 == pytest.approx(reads) and b0 - b1 == pytest.approx(2 * reads)
    each = ep_alltoall_layer_seconds(with_ep, flops, machine)
    assert c1 - c0 == pytest.approx(32 * each)
    # 4 all-to-alls per layer of T·k·h 16-bit elements (T = 4096 tokens, k = 2, h = 4096)
    from zeroplan.core.timing.collectives import ALL_TO_ALL, collective_seconds

    assert each == pytest.approx(4 * collective_seconds(ALL_TO_ALL, 4096 * 2 * 4096 * 2, 8, machine.links, 8))
    # MFU counts the active parameters: 6 × (12.9B) per token, not 6 × 46.7B
    assert flops.model_flops_per_token() == 6 * active_params(mixtral)


def test_dropless_alltoall_sync_is_per_moe_layer_and_the_a2a_overlap_hides_up_to_compute():
    """The host sync of dropless routing (core.timing.machine MOE_DROPLESS_SYNC_S: the paired published B200
    measurements) is paid once per MoE layer and micro-batch in forward (again under full recompute), never on dense
    models; --moe-a2a-overlap hides the stage's all-to-all behind up to its compute."""
    import dataclasses

    from zeroplan.core.hardware import Link
    from zeroplan.core.timing.collectives import LinkTable
    from zeroplan.core.timing.machine import (MOE_DROPLESS_SYNC_HIDDEN_A2A, MOE_DROPLESS_SYNC_PAIRS, MOE_DROPLESS_SYNC_S,
                                              Machine)
    from zeroplan.core.timing.step_time import FlopModel, Layout, ep_alltoall_layer_seconds, microbatch_seconds

    # the pairs: (dropless - token-drop step seconds) / MoE layer-micro-batch slots, from the published throughputs
    assert MOE_DROPLESS_SYNC_PAIRS["qwen3-30b-a3b dgx-b200"] == pytest.approx(
        (512 * 4096 / 8 / 9299 - 512 * 4096 / 8 / 18066) / (64 * 48), abs=5e-6)
    # the 235B pair's dropless side hid its all-to-all behind its a2a overlap; the token-drop side did not: added back
    # (MOE_DROPLESS_SYNC_HIDDEN_A2A, recomputed from the row's layout in tests/test_benchmarks_run.py)
    assert MOE_DROPLESS_SYNC_PAIRS["qwen3-235b-a22b dgx-b200"] - MOE_DROPLESS_SYNC_HIDDEN_A2A["qwen3-235b-a22b dgx-b200"] \
        == pytest.approx((1024 * 4096 / 64 / 3269 - 1024 * 4096 / 64 / 4275) / ((128 + 7 / 2) * 12), abs=5e-6)
    mixtral = load_model("mixtral-8x7b")
    flops = FlopModel.from_model(mixtral)
    machine = Machine(peak_flops=989e12, hbm_bytes_per_s=3.35e12, pcie_bytes_per_s=63e9, nvme_bytes_per_s=None,
                      links=LinkTable(Link(450e9, 3e-6, "preset"), Link(50e9, 5e-6, "preset")))
    synced = dataclasses.replace(machine, moe_sync_s=MOE_DROPLESS_SYNC_S)
    layout = Layout(8, 1, 1, 1, 4096, 1, 8, "selective", False, True, True, True, ep=8, ep_per_node=8)
    f0, b0, c0, _ = microbatch_seconds(layout, flops, flops.hidden, machine)
    f1, b1, c1, _ = microbatch_seconds(layout, flops, flops.hidden, synced)
    assert f1 - f0 == pytest.approx(32 * MOE_DROPLESS_SYNC_S) and (b1, c1) == (b0, c0)
    full = dataclasses.replace(layout, recompute="full")
    (fa, ba, _, _), (fb, bb, _, _) = (microbatch_seconds(full, flops, flops.hidden, m) for m in (machine, synced))
    assert (fb + bb) - (fa + ba) == pytest.approx(2 * 32 * MOE_DROPLESS_SYNC_S)  # the recomputed forward syncs too
    dense = FlopModel.from_model(load_model("llama-2-7b"))
    plain = Layout(8, 1, 1, 1, 4096, 1, 8, "selective", False, True, True, True)
    assert microbatch_seconds(plain, dense, dense.hidden, synced) == microbatch_seconds(plain, dense, dense.hidden,
                                                                                         machine)
    # the overlap: exposed all-to-all = max(0, all-to-all - the stage's forward and backward compute)
    hidden = dataclasses.replace(machine, moe_a2a_hidden=True)
    _, _, c2, _ = microbatch_seconds(layout, flops, flops.hidden, hidden)
    alltoall = 32 * ep_alltoall_layer_seconds(layout, flops, machine)
    assert c0 == pytest.approx(alltoall) and c2 == pytest.approx(max(0.0, alltoall - f0 - b0))
    slow = dataclasses.replace(hidden, links=LinkTable(Link(450e9, 3e-6, "preset"), Link(0.5e9, 5e-6, "preset")))
    across = dataclasses.replace(layout, ep=64, dp=64, ep_per_node=8)
    fs, bs, cs, _ = microbatch_seconds(across, flops, flops.hidden, slow)
    exposed = 32 * ep_alltoall_layer_seconds(across, flops, slow) - fs - bs
    assert exposed > 0 and cs == pytest.approx(exposed)  # more all-to-all than compute: the rest stays exposed


def test_plan_prices_the_sync_by_dispatcher_and_capacity_factor(cli):
    """--moe-dispatcher hybridep and --capacity-factor each remove the dropless alltoall sync; the notes say which."""
    import json

    base = ("plan", "--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--global-batch", "512",
            "--seq-len", "4096", "--ep", "8", "--tp", "1", "--pp", "1", "--micro-batches", "1", "--stages", "1",
            "--recompute", "none", "-f", "json")
    plans = {}
    for name, extra in (("alltoall", ()), ("hybridep", ("--moe-dispatcher", "hybridep")),
                        ("capacity", ("--capacity-factor", "1.25")), ("overlap", ("--moe-a2a-overlap",))):
        code, out, err = cli(*base, *extra)
        assert code == 0, err
        document = json.loads(out)
        plans[name] = document["top"][0]
        notes = " ".join(document["assumptions"])
        assert ("ms per MoE layer and micro-batch (dropless" in notes) == (name in ("alltoall", "overlap"))
    from zeroplan.core.timing.machine import MOE_DROPLESS_SYNC_S

    synced, free = plans["alltoall"], plans["hybridep"]
    assert synced["grad_accum"] == free["grad_accum"] == 8  # 512 sequences / dp 64 / micro-batch 1
    assert synced["seconds_compute"] - free["seconds_compute"] == pytest.approx(8 * 32 * MOE_DROPLESS_SYNC_S)
    assert plans["capacity"]["seconds_compute"] == pytest.approx(free["seconds_compute"])
    hidden = plans["overlap"]
    assert synced["seconds_ep_alltoall"] > 0 and hidden["seconds_ep_alltoall"] < synced["seconds_ep_alltoall"]
    assert hidden["step_seconds"] < synced["step_seconds"]


@pytest.mark.parametrize("experts,k,groups,nodes", [(8, 2, None, 4), (16, 3, None, 2), (16, 4, (4, 2), 4),
                                                     (16, 4, (8, 3), 4), (16, 4, (4, 2), 8)])
def test_expected_remote_nodes_match_enumerating_every_routing(experts, k, groups, nodes):
    """A token's remote nodes under balanced routing, by enumerating every equally likely choice: k of the experts
    (or, group-limited, k experts inside topk_group of n_group groups), experts in contiguous blocks per node."""
    import itertools
    import statistics

    from zeroplan.core.timing.step_time import FlopModel, expected_remote_nodes

    flops = FlopModel(1, 1, 1, 1, 1, experts_per_token=k, experts=experts, route_groups=groups)
    per_node = experts // nodes
    home = 0  # the sender's node: by symmetry any
    if groups is None or groups[0] % nodes:
        choices = itertools.combinations(range(experts), k)
        counts = [len({e // per_node for e in chosen} - {home}) for chosen in choices]
    else:
        count, top = groups
        size = experts // count
        counts = []
        for picked in itertools.combinations(range(count), top):  # the experts inside the picked groups: the
            pool = [e for g in picked for e in range(g * size, (g + 1) * size)]  # nodes they sit on, whatever k
            counts.append(len({e // per_node for e in pool} - {home}))
    assert expected_remote_nodes(flops, nodes) == pytest.approx(statistics.fmean(counts))


def test_deepseek_v3_routes_to_at_most_4_nodes_and_deepep_sends_once_per_node():
    """DeepSeek-V3's config limits routing to 4 of 8 groups (n_group, topk_group): over EP 64 on 8 nodes a token
    reaches 3.5 other nodes on average; a node-deduplicating dispatcher (DeepEP, HybridEP) sends it once to each,
    where the alltoall dispatcher sends each of the k = 8 copies that leave the node."""
    import dataclasses

    from zeroplan.core.hardware import Link
    from zeroplan.core.timing.collectives import ALL_TO_ALL, LinkTable, collective_seconds
    from zeroplan.core.timing.machine import Machine
    from zeroplan.core.timing.step_time import FlopModel, Layout, ep_alltoall_layer_seconds, expected_remote_nodes

    model = load_model("deepseek-v3")
    assert model.shape.moe.route_groups == (8, 4)
    flops = FlopModel.from_model(model)
    assert expected_remote_nodes(flops, 8) == pytest.approx(3.5)
    machine = Machine(peak_flops=989e12, hbm_bytes_per_s=3.35e12, pcie_bytes_per_s=63e9, nvme_bytes_per_s=None,
                      links=LinkTable(Link(200e9, 3e-6, "preset"), Link(50e9, 5e-6, "preset")))
    layout = Layout(128, 1, 16, 1, 4096, 1, 120, "none", False, True, False, False, ep=64, ep_per_node=8)
    plain = ep_alltoall_layer_seconds(layout, flops, machine)
    dedup = ep_alltoall_layer_seconds(layout, flops, dataclasses.replace(machine, moe_node_dedup=True))
    token = 4096 * 7168 * 2
    assert plain == pytest.approx(4 * collective_seconds(ALL_TO_ALL, 8 * token, 64, machine.links, 8))
    nvlink = token * 8 * (7 / 64 + 56 / 64 * 7 / 8)
    assert dedup == pytest.approx(4 * collective_seconds(ALL_TO_ALL, 8 * token, 64, machine.links, 8,
                                                         split=(nvlink, 3.5 * token)))
    assert dedup / plain == pytest.approx(3.5 / 7, rel=0.01)  # the NIC share sets both: 3.5 node copies, not 7


# ---- commands ----

def test_estimate_with_ep_shards_experts_over_edp(cli):
    import json

    code, out, err = cli("estimate", "--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--ep", "8",
                         "--stage", "1", "--seq-len", "4096", "-f", "json")
    assert code == 0, err
    document = json.loads(out)
    option = document["options"][0] if "options" in document else document["estimates"][0]
    breakdown = option["breakdown"]
    mixtral = load_model("mixtral-8x7b")
    dense, experts = expert_shard_params(mixtral, 1, 1, 8, 1)
    assert breakdown["gpu/params/experts"] == 2 * experts and breakdown["gpu/params/dense"] == 2 * dense
    assert breakdown["gpu/optimizer_states/experts"] == 12 * -(-experts // 8)  # edp = 64 / 8
    assert breakdown["gpu/optimizer_states/dense"] == 12 * -(-dense // 64)
    assert document["inputs"]["ep"] == 8


def test_estimate_framework_convention_shards_experts_as_torchtitan(cli):
    """--convention framework --framework torch with --ep: FSDP2 over dp for the dense tensors and over edp for each
    rank's E/ep experts (torchtitan); the totals equal the fully sharded Ψ/N when nothing pads, and the deepspeed
    framework refuses EP in one line."""
    import json

    base = ("estimate", "--model", "qwen3-30b-a3b", "--gpus", "16", "--gpu", "h100-80g", "--convention", "framework",
            "--stage", "3", "--seq-len", "4096", "-f", "json")
    code, out, err = cli(*base, "--framework", "torch", "--ep", "8")
    assert code == 0, err
    with_ep = json.loads(out)["options"][0]["breakdown"]
    code, out, err = cli(*base, "--framework", "torch")
    without = json.loads(out)["options"][0]["breakdown"]
    # FSDP2 shards everything: 1/16 of every tensor either way (128 experts / 8 = 16 per rank, over edp 2: no padding)
    assert abs(with_ep["gpu/params"] - without["gpu/params"]) < 0.001 * without["gpu/params"]
    code, out, err = cli(*base, "--stage", "0", "--framework", "torch", "--ep", "8")
    assert code == 0, err
    states = json.loads(out)["options"][0]["breakdown"]["gpu/params"]
    model = load_model("qwen3-30b-a3b")
    routed = expert_params(model.shape).routed_total
    assert states == 4 * (model.params - routed + routed // 8)  # DDP: the dense whole, 16 of 128 experts
    code, out, err = cli(*base, "--framework", "deepspeed", "--ep", "8")
    assert code == 2 and err.count("\n") == 1 and "torchtitan" in err


@pytest.mark.slow
def test_deepseek_v3_on_2048_h800_with_deepseeks_traits_hides_the_all_to_all(cli):
    """docs/plan.md, DeepSeek-V3 on 2048 H800: DeepSeek's layout (PP 16 × EP 64 over 8 nodes, no TP) exposes its
    k-copy all-to-all by default; node-limited dispatch halves it and DualPipe's overlap hides it; with those traits
    the free search's top plan spreads the experts over at least 64 ranks."""
    import json

    base = ("plan", "--model", "deepseek-v3", "--gpus", "2048", "--gpu", "h800-80g", "--global-batch", "15360",
            "--seq-len", "4096", "-f", "json")
    pinned = ("--tp", "1", "--pp", "16", "--ep", "64", "--stages", "1", "--recompute", "full")
    seconds = {}
    for name, extra in (("alltoall", ()), ("deepep", ("--moe-dispatcher", "deepep")),
                        ("dualpipe", ("--moe-dispatcher", "deepep", "--moe-a2a-overlap"))):
        code, out, err = cli(*base, *pinned, *extra)
        assert code == 0, err
        seconds[name] = json.loads(out)["top"][0]["seconds_ep_alltoall"]
    assert seconds["alltoall"] > 10 and seconds["deepep"] == pytest.approx(seconds["alltoall"] / 2, rel=0.02)
    assert seconds["dualpipe"] == 0.0
    code, out, err = cli(*base, "--moe-dispatcher", "deepep", "--moe-a2a-overlap", "--comm-overlap", "megatron")
    assert code == 0, err
    top = json.loads(out)["top"][0]
    assert top["ep"] >= 64 and top["seconds_ep_alltoall"] == 0.0


@pytest.mark.parametrize("args,expected", [
    (("--model", "mixtral-8x7b", "--gpus", "48", "--ep", "3"),
     "zeroplan: error: --ep: ep(3) does not divide the 8 experts of mixtral-8x7b"),
    (("--model", "llama-2-7b", "--gpus", "16", "--ep", "2"), "zeroplan: error: --ep: ep(2) / etp(1) cut experts"),
    (("--model", "mixtral-8x7b", "--gpus", "8", "--ep", "16"), "zeroplan: error: --ep: ep(16) × etp(1) = 16 does"),
])
def test_estimate_refuses_a_broken_expert_layout_in_one_line(cli, args, expected):
    code, out, err = cli("estimate", *args)
    assert code == 2 and not out and err.startswith(expected) and err.count("\n") == 1


@pytest.mark.parametrize("flag", [("--moe-dispatcher", "deepep"), ("--moe-a2a-overlap",)])
def test_plan_refuses_moe_traits_on_a_dense_model_in_one_line(cli, flag):
    code, out, err = cli("plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", *flag)
    assert code == 2 and not out and err.startswith(f"zeroplan: error: {flag[0]}: prices a mixture-of-experts")
    assert err.count("\n") == 1


def test_plan_explains_why_ep_wins(cli):
    code, out, err = cli("plan", "--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--global-batch",
                         "512", "--seq-len", "4096", "--ep", "1,8", "--tp", "1,2", "--pp", "1,2",
                         "--recompute", "selective")
    assert code == 0, err
    text = " ".join(out.split())
    assert "expert parallelism: the best plan with EP (ep 8" in text
    assert "exposed all-to-all" in text and "the same layout without EP needs" in text
    assert "Ψ the active parameters (12.9B of 46.7B" in text


# ---- activations ----

@pytest.mark.parametrize("capacity,share", [(None, 0.1), (1.25, 0.25), (2.0, 1.0)])
def test_moe_imbalance_is_the_share_of_the_routed_copies(capacity, share):
    """The most loaded EP rank's excess: share × the routed terms of Korthikanti's row (k dispatched copies of
    the MLP input, k × the expert MLP's inner activations split over tp), per layer and micro-batch in flight."""
    from fractions import Fraction

    from zeroplan.core.memory.activations import ActivationConfig, activation_memory

    mixtral = load_model("mixtral-8x7b")
    s, b, tp, pp, h, f, k = 4096, 1, 2, 4, 4096, 14336, 2
    config = ActivationConfig(seq_len=s, micro_batch=b, tp=tp, pp=pp, num_micro_batches=8, ep=8,
                              capacity_factor=capacity, flash_attention=True)
    found = activation_memory(mixtral, config).breakdown
    routed_row = s * b * 2 * (k * h + Fraction(3 * f * k, tp))  # 16-bit copies and gate/up/down inputs
    layers_in_flight = 8 * 4  # 32 layers / pp 4 on the first stage × pp micro-batches in flight
    expected = Fraction(share).limit_denominator(100) * routed_row * layers_in_flight
    assert found["activations/moe_imbalance"] == -(-expected.numerator // expected.denominator)
    without = activation_memory(mixtral, ActivationConfig(seq_len=s, micro_batch=b, tp=tp, pp=pp,
                                                          num_micro_batches=8, flash_attention=True)).breakdown
    assert "activations/moe_imbalance" not in without  # ep = 1: every rank routes its own tokens
    assert {k: v for k, v in found.items() if k != "activations/moe_imbalance"} == without


# ---- check and export ----

def _ds_config(tmp_path, expert_parallel=None, name="ds.json"):
    import json

    config = {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
              "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}
    if expert_parallel is not None:
        config["expert_parallel"] = expert_parallel
    path = tmp_path / name
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def _rules(out):
    import json

    return sorted(f["rule"] for report in json.loads(out)["files"] for f in report["findings"])


MIXTRAL_ON_64 = ("--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--seq-len", "4096", "-f", "json")


def test_check_reads_autoep_and_its_expert_memory(cli, tmp_path):
    """Without EP Mixtral's ZeRO-1 states do not fit 64 H100 (ZP011); DeepSpeed AutoEP's block with
    autoep_size 8 shards the experts over edp 8, and the config fits."""
    code, out, _ = cli("check", _ds_config(tmp_path), *MIXTRAL_ON_64)
    assert code == 1 and _rules(out) == ["ZP011"]
    code, out, _ = cli("check", _ds_config(tmp_path, {"enabled": True, "autoep_size": 8}), *MIXTRAL_ON_64)
    assert code == 0 and _rules(out) == []
    # ep 2: the experts' half per rank does not fit, and ZP011 says how much of the states they are
    code, out, _ = cli("check", _ds_config(tmp_path, {"enabled": True, "autoep_size": 2}), *MIXTRAL_ON_64)
    import json

    (finding,) = json.loads(out)["files"][0]["findings"]
    assert finding["rule"] == "ZP011"
    assert "of which routed experts" in finding["message"] and "sharded over edp(32)" in finding["message"]
    # a disabled block is not read (DeepSpeed's parse_autoep_config: enabled defaults to false)
    code, out, _ = cli("check", _ds_config(tmp_path, {"enabled": False, "autoep_size": 8}), *MIXTRAL_ON_64)
    assert _rules(out) == ["ZP011"]


@pytest.mark.parametrize("block,flags,expected", [
    ({"enabled": True, "autoep_size": 16}, (), ["ZP021", "ZP023"]),  # 8 experts; 16 ranks span 2 nodes
    ({"enabled": True, "autoep_size": 8, "expert_tensor_parallel_size": 2}, (), ["ZP022", "ZP023"]),
    (None, ("--ep", "3"), ["ZP021", "ZP022"]),  # 3 divides neither 8 experts nor 64 ranks
    (None, ("--ep", "2", "--model", "llama-2-7b"), ["ZP021"]),  # a dense model
])
def test_check_expert_rules(cli, tmp_path, block, flags, expected):
    args = list(MIXTRAL_ON_64)
    if "--model" in flags:
        args[1] = flags[flags.index("--model") + 1]
        flags = flags[:flags.index("--model")]
    code, out, _ = cli("check", _ds_config(tmp_path, block), *args, *flags)
    found = _rules(out)
    assert [rule for rule in found if rule.startswith("ZP02")] == expected, found


def test_export_writes_autoep_and_the_plan_file_reads_back(cli, tmp_path):
    import json

    import yaml

    ds, plan = tmp_path / "ds.json", tmp_path / "plan.yaml"
    args = ("--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--ep", "8", "--seq-len", "4096",
            "--micro-batch", "1", "--global-batch", "512")
    code, _, err = cli("export", "deepspeed", *args, "-o", str(ds))
    assert code == 0, err
    assert json.loads(ds.read_text())["expert_parallel"] == {"enabled": True, "autoep_size": 8,
                                                             "expert_tensor_parallel_size": 1}
    code, _, err = cli("export", "plan", *args, "--capacity-factor", "1.0", "-o", str(plan))
    assert code == 0, err
    data = yaml.safe_load(plan.read_text())
    assert data["parallel"] == {"tp": 1, "pp": 1, "ep": 8, "etp": 1} and data["training"]["capacity_factor"] == 1.0
    code, out, _ = cli("check", str(plan), "-f", "json")
    assert _rules(out) == ["ZP024"]  # capacity 1.0: below the 10% allowance, tokens dropped every step
    code, _, err = cli("export", "deepspeed", *args, "--etp", "2", "-o", str(tmp_path / "x.json"))
    assert code == 2 and "--etp: DeepSpeed's AutoEP supports expert_tensor_parallel_size 1 only" in err


def test_fewest_gpus_keeps_the_expert_grid():
    """When nothing fits, the recommendation's fewest-GPUs search walks worlds that hold whole ep × etp blocks
    and keeps ep: each world it tries is evaluated with the same experts' cut."""
    import zeroplan

    asked = dict(model="mixtral-8x7b", gpu="h100-80g", ep=8, stage=1, offload_optimizer="none", seq_len=4096)
    result = zeroplan.estimate(gpus=8, **asked)
    assert result.to_dict()["inputs"]["ep"] == 8
    reason = result.recommendation.reason
    assert "nothing fits on 8" in reason and "the fewest h100-80g GPUs that fit: 64 (ZeRO-1)" in reason
    # the same layout at 64 fits and at the node below does not: the search kept ep = 8
    assert zeroplan.estimate(gpus=64, **asked).recommendation.label == "ZeRO-1"
    assert zeroplan.estimate(gpus=56, **asked).recommendation.label is None
    plan = zeroplan.plan(model="mixtral-8x7b", gpus=64, gpu="h100-80g", global_batch=512, seq_len=4096,
                         ep="8", tp="1", pp="1", recompute="selective")
    assert plan.top and plan.to_dict()["top"][0]["ep"] == 8 and (plan.top[0].ep, plan.top[0].etp) == (8, 1)


def test_sweep_rows_carry_the_expert_grid(cli):
    import csv
    import io

    code, out, err = cli("sweep", "--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h100-80g", "--ep", "8",
                         "--stages", "1", "--seq-len", "4096")
    assert code == 0, err
    (row,) = list(csv.DictReader(io.StringIO(out)))
    dense, experts = expert_shard_params(load_model("mixtral-8x7b"), 1, 1, 8, 1)
    assert (row["ep"], row["edp"]) == ("8", "8")
    assert int(row["gpu_bytes_optimizer_states"]) == 12 * -(-dense // 64) + 12 * -(-experts // 8)


# ---- estimate --cp ----

def test_estimate_cp_matches_the_plan_search_to_the_byte():
    """estimate --cp 2 and plan's pinned cp = 2 layout count the same per-GPU memory: activations of s/cp tokens,
    ZeRO over the dp × cp ranks, the batch over dp."""
    import zeroplan

    plan = zeroplan.plan(model="llama-2-7b", gpus=16, global_batch=64, seq_len=32768, cp="2", tp="1", pp="1",
                         stages="1", offload=False, recompute="full", micro_batches="1", sequence_parallel="off")
    top = plan.to_dict()["top"][0]
    estimate = zeroplan.estimate(model="llama-2-7b", gpus=16, cp=2, seq_len=32768, global_batch=64, stage=1,
                                 offload_optimizer="none", recompute="full", micro_batch=1, activations="megatron")
    option = estimate.to_dict()["options"][0]
    assert (top["cp"], top["dp"]) == (2, 8)
    assert option["gpu_bytes"]["total"] == top["gpu_bytes_total"]
    assert option["gpu_bytes"]["activations"] == top["gpu_bytes_activations"]
    assert option["grad_accum_steps"] is None or option["grad_accum_steps"] == 8  # 64 = 1 × 8 × dp 8


@pytest.mark.parametrize("args,expected", [
    (("--cp", "3"), "--cp: cp(3) does not divide the 16 ranks"),
    (("--cp", "2", "--seq-len", "4098"), "--cp: context parallelism cuts each sequence into 2·cp(2) = 4 chunks"),
    (("--cp", "2", "--activations", "transformers"), "--activations: transformers runs no context parallelism"),
])
def test_estimate_cp_refusals(cli, args, expected):
    code, out, err = cli("estimate", "--model", "llama-2-7b", "--gpus", "16", *args)
    assert code == 2 and not out and err.startswith(f"zeroplan: error: {expected}")


DEEPSEEK_V3 = Path(__file__).parent / "configs" / "models" / "deepseek-v3.json"


@pytest.mark.parametrize("world,tp,ep", [(64, 1, 8), (64, 1, 64), (128, 2, 8)])
def test_deepseek_v3_states_match_megatron(world, tp, ep):
    """DeepSeek-V3 (MLA, a shared expert, three dense layers first) through the architecture description, against
    Megatron-LM's compute_weight_and_optimizer_memory: the routed experts to the parameter, the dense group to the
    parameter at tp 1, and at tp 2 less exactly half of what Megatron keeps whole on each tp rank (two RMSNorms
    per layer, the router of each MoE layer, the final norm). Runs where the description reads the config."""
    if not DEEPSEEK_V3.exists():
        pytest.skip("needs the architecture description's DeepSeek-V3 reader (tests/configs/models/deepseek-v3.json)")
    model = load_model(str(DEEPSEEK_V3))
    if getattr(model.shape, "moe", None) is None:
        pytest.skip("the shape carries no MoE description")
    args = types.SimpleNamespace(
        kv_channels=128, num_attention_heads=128, hidden_size=7168, group_query_attention=False, num_query_groups=128,
        num_experts=256, swiglu=True, moe_shared_expert_intermediate_size=2048, moe_layer_freq=[0] * 3 + [1] * 58,
        num_layers=61, moe_ffn_hidden_size=2048, mtp_num_layers=None, normalization="RMSNorm",
        multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64,
        v_head_dim=128, padded_vocab_size=129280, untie_embeddings_and_output_weights=True, ffn_hidden_size=18432,
        moe_latent_size=None, moe_router_topk=8, add_bias_linear=False, expert_tensor_parallel_size=1,
        expert_model_parallel_size=ep, pipeline_model_parallel_size=1, world_size=world,
        tensor_model_parallel_size=tp, data_parallel_size=world // tp, use_distributed_optimizer=True)
    expected = _megatron().compute_weight_and_optimizer_memory(args)
    dims = ParallelDims(world, tp, 1, 8, ep=ep, etp=1)
    dense, experts = expert_shard_params(model, tp, 1, ep, 1)
    assert experts * ep == 256 * 3 * 7168 * 2048 * 58  # Megatron's routed_expert_params × MoE layers
    megatron_dense = (expected - experts * (6 + 12 / dims.edp)) / (6 + 12 / dims.dp)
    replicated = 58 * (2 * 7168 + 7168 * 256) + 3 * 2 * 7168 + 7168
    assert megatron_dense - dense == pytest.approx(replicated * (tp - 1) / tp, abs=1e-3)


def test_explain_gives_each_parameter_group_its_formula(cli):
    code, out, err = cli("estimate", "--model", "mixtral-8x7b", "--gpus", "64", "--gpu", "h800-80g", "--ep", "8",
                         "--stage", "1", "--seq-len", "4096", "--explain")
    assert code == 0, err
    text = " ".join(out.split())
    dense, experts = expert_shard_params(load_model("mixtral-8x7b"), 1, 1, 8, 1)
    assert f"Ψ_d = {dense:,} dense parameters" in text and f"Ψ_e = {experts:,} routed-expert parameters" in text
    assert "ZeRO-1: dense Ψ_d: model states = (P+G)Ψ + KΨ/N_d" in text
    assert "routed experts Ψ_e: model states = (P+G)Ψ + KΨ/N_e = 4×5.6B + 12×5.6B/8" in text


def test_every_expert_layout_combination_is_evaluated_or_skipped():
    """With ep searched, every (layout, ep, option, step shape) is evaluated or counted under its reason; EP with
    tp > 1 keeps only sequence-parallel shapes (Megatron-Core's rule), the others counted as skipped."""
    from zeroplan.core.layout import space as plan_space
    from zeroplan.core.layout.search import search
    from zeroplan.search.inputs import PlanInputs, resolve

    request = resolve(PlanInputs.of(model="mixtral-8x7b", gpus=16, global_batch=32, seq_len=1024, tp="1,2",
                                    pp="1,2", ep="1,8", recompute="selective,full", gpu="h100-80g")).request
    result = search(request)
    space = request.space
    expected = 0
    for tp, pp in plan_space.layouts(space):
        for ep in space.ep:
            if (space.gpus // pp) % (ep * tp):
                continue
            parallel = ParallelDims(space.gpus, tp, pp, 8, ep=ep, etp=tp)
            if plan_space.layout_problem(request.model, parallel, space) is None:
                sp = 2 if tp > 1 else 1
                expected += len(space.options()) * sp * len(space.recompute) * len(
                    plan_space.micro_batch_choices(space, parallel.dp))
    assert len(result.plans) + sum(result.skipped.values()) == expected
    assert result.skipped[plan_space.EP_WITHOUT_SP] > 0
    assert all(p.sequence_parallel for p in result.plans if p.ep > 1 and p.tp > 1)


def test_the_formulas_reference_holds_the_worked_moe_numbers():
    """docs/formulas.md §20's worked numbers are what the code computes."""
    from zeroplan.core.timing.collectives import ALL_TO_ALL, LinkTable, collective_seconds
    from zeroplan.inputs import presets

    doc = (Path(__file__).resolve().parents[1] / "docs" / "formulas.md").read_text(encoding="utf-8")
    dense, experts = expert_shard_params(load_model("mixtral-8x7b"), 1, 1, 8, 1)
    for value in (dense, experts, 12 * -(-dense // 64), 12 * -(-experts // 8)):
        assert f"**{value:,}**" in doc
    node = presets.cluster("hgx-h800")
    links = LinkTable(node.gpu.intra_node_link, node.inter_node_link)
    size = 4096 * 2 * 4096 * 2
    assert f"**{collective_seconds(ALL_TO_ALL, size, 8, links, 8) * 1e6:,.0f} µs**" in doc
    assert f"**{collective_seconds(ALL_TO_ALL, size, 64, links, 8) * 1e6:,.0f} µs**" in doc


def test_latent_attention_projections_priced_from_the_description():
    """DeepSeek-V3's MLA (config.json: q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128,
    v_head_dim 128, 128 heads, hidden 7168): the step time prices its five low-rank projections, not heads × 192-wide
    Q, K and V (704M weights, what the widths alone would say), and its shared expert beside the routed ones."""
    from zeroplan.core.timing.step_time import FlopModel

    flops = FlopModel.from_model(load_model(str(Path(__file__).parent / "configs" / "models" / "deepseek-v3.json")))
    assert flops.attention_linears == ((7168, 1536), (1536, 128 * 192), (7168, 512 + 64), (512, 128 * (128 + 128)),
                                       (128 * 128, 7168))
    assert sum(i * o for i, o in flops.attention_linears) == 11_010_048 + 37_748_736 + 4_128_768 + 16_777_216 + 117_440_512
    assert flops.shared_ffn == 2048


def test_moe_dispatch_copies_only_on_moe_layers():
    """The dispatcher's memory-bound copies: none for a dense model; for a MoE model k·T·(8h + 3f) 16-bit elements at
    HBM bandwidth per MoE layer, averaged over the layers (DeepSeek-V3: 58 of 61)."""
    from zeroplan.core.timing.step_time import FlopModel, Layout, moe_dispatch_seconds

    machine = types.SimpleNamespace(hbm_bytes_per_s=1e12)
    layout = Layout(1, 1, 1, 1, 4096, 1, 1, "none", False, True, True, True)
    dense = FlopModel.from_model(load_model(str(Path(__file__).parent / "configs" / "models" / "llama-3.1-8b.json")))
    assert moe_dispatch_seconds(layout, dense, machine) == 0.0
    flops = FlopModel.from_model(load_model(str(Path(__file__).parent / "configs" / "models" / "deepseek-v3.json")))
    expected = 4096 * 8 * (8 * 7168 + 3 * 2048) * 2 / 1e12 * 58 / 61
    assert moe_dispatch_seconds(layout, flops, machine) == pytest.approx(expected, rel=1e-12)
