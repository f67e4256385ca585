"""Mixture-of-experts layouts: Megatron-Core's expert folding, the rules that make a layout legal, and the model
states of the two parameter groups (dense over dp, routed experts over edp) against Megatron-LM's own
theoretical memory function (tests/data/megatron/theoretical_memory_usage.py, verbatim)."""

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

MEGATRON = Path(__file__).parent / "data" / "megatron" / "theoretical_memory_usage.py"


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
    assert info.value.input_name == "--ep" and "ep(16) × etp(2) = 32 does not divide the 16 ranks" in str(info.value)
    mixtral = load_model("mixtral-8x7b")
    with pytest.raises(InputError) as info:
        check_model_layout(mixtral, ParallelDims(48, ep=3, gpus_per_node=8))
    assert info.value.input_name == "--ep" and "ep(3) does not divide the 8 experts" in str(info.value)
    with pytest.raises(InputError) as info:
        check_model_layout(load_model("llama-2-7b"), ParallelDims(16, ep=2))
    assert info.value.input_name == "--ep" and "dense model" in str(info.value)
    with pytest.raises(InputError) as info:
        check_model_layout(mixtral, ParallelDims(48, tp=1, ep=1, etp=3))
    assert info.value.input_name == "--etp" and "etp(3) does not divide the expert MLP width 14336" in str(info.value)


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
