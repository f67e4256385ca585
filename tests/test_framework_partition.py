"""core.memory.framework_partition against hand-computed cases, and its shapes against transformers."""

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroplan.core.model.families import architecture_from_hf_config
from zeroplan.core.errors import InputError
from zeroplan.core.memory.framework_partition import (
    ParamSpec, framework_partition, most_loaded_rank_bytes, params_from_architecture, params_from_shapes,
    unshardable_ranks, zero1_owners,
)
from zeroplan.core.memory.model_states import paper_model_states
from zeroplan.core.options import Option
from zeroplan.core.precision import bytes_per_param

FP32_ADAM = bytes_per_param("fp32", "adam")  # 4 + 4 + 8
MIXED_ADAM = bytes_per_param("mixed", "adam")  # 2 + 2 + 12


def _specs(*sizes):
    return [ParamSpec(f"p{i}", (size,)) for i, size in enumerate(sizes)]


def test_zero1_greedy_largest_first_to_the_emptiest_rank_ties_to_the_lowest():
    # sorted: p0=6 -> r0; p1=6 -> r1 (0 < 6); p2=4: 6 vs 6, tie -> r0; p3=4 -> r1 (10 vs 6); p4=2: 10 vs 10 -> r0
    assert zero1_owners(_specs(6, 6, 4, 4, 2), 2) == [0, 1, 0, 1, 0]
    # the sort is stable: equal sizes keep their input order
    assert zero1_owners(_specs(2, 6, 6), 3) == [2, 0, 1]
    assert zero1_owners(_specs(5, 5, 5, 5), 3) == [0, 1, 2, 0]


def test_zero1_bytes_follow_ownership_with_a_step_tensor_per_owned_parameter():
    part = framework_partition(_specs(6, 6, 4, 4, 2), 2, FP32_ADAM, "torch-zero1", per_tensor_state_bytes=4)
    assert part.rank(0)["gpu/optimizer_states"] == 12 * 8 + 3 * 4  # p0, p2, p4
    assert part.rank(1)["gpu/optimizer_states"] == 10 * 8 + 2 * 4  # p1, p3
    for rank in (0, 1):  # parameters and gradients stay whole
        assert part.rank(rank)["gpu/params"] == 22 * 4 and part.rank(rank)["gpu/gradients"] == 22 * 4
    assert part.most_loaded_rank == 0
    assert part.breakdown["rank1/gpu/optimizer_states"] == 88


def test_fsdp2_pads_each_dim0_chunk_and_a_rank_can_hold_only_padding():
    params = [ParamSpec("w", (5, 3)), ParamSpec("b", (7,))]
    part = framework_partition(params, 4, FP32_ADAM, "fsdp2-zero3", per_tensor_state_bytes=4)
    # w: chunks of ceil(5/4) = 2 rows -> 2, 2, 1, 0 real rows; b: 2, 2, 2, 1
    for rank in range(4):
        assert part.rank(rank)["gpu/params"] == (2 * 3 + 2) * 4  # padded storage on every rank
        assert part.rank(rank)["gpu/gradients"] == (2 * 3 + 2) * 4  # a view of the padded reduce-scatter output
    assert part.rank(0)["gpu/optimizer_states"] == (6 + 2) * 8 + 2 * 4
    assert part.rank(2)["gpu/optimizer_states"] == (3 + 2) * 8 + 2 * 4
    assert part.rank(3)["gpu/optimizer_states"] == (0 + 1) * 8 + 2 * 4  # w: padding only, still a step
    assert part.most_loaded_rank == 0
    zero2 = framework_partition(params, 4, FP32_ADAM, "fsdp2-zero2", per_tensor_state_bytes=4)
    assert zero2.breakdown == part.breakdown  # the same at rest


def test_fsdp2_offload_puts_everything_on_the_host_with_unpadded_gradients():
    params = [ParamSpec("w", (5, 3)), ParamSpec("b", (7,))]
    part = framework_partition(params, 4, FP32_ADAM, "fsdp2-zero3", offload=True, per_tensor_state_bytes=4)
    assert part.rank(3) == {"gpu/params": 0, "gpu/gradients": 0, "gpu/optimizer_states": 0,
                            "cpu/params": 32, "cpu/gradients": 4, "cpu/optimizer_states": 16}


def test_deepspeed_zero12_flat_buffer_is_padded_to_a_multiple_of_2n():
    params = _specs(6, 7)  # 13 elements
    stage2 = framework_partition(params, 4, MIXED_ADAM, "deepspeed-zero12", stage=2)
    for rank in range(4):  # 13 -> 16 (a multiple of 8); each rank owns 4
        assert stage2.rank(rank) == {"gpu/params": 16 * 2, "gpu/gradients": 4 * 2, "gpu/optimizer_states": 4 * 12,
                                     "cpu/params": 0, "cpu/gradients": 0, "cpu/optimizer_states": 0}
    stage1 = framework_partition(params, 4, MIXED_ADAM, "deepspeed-zero12", stage=1)
    assert stage1.rank(0)["gpu/gradients"] == 13 * 2
    three = framework_partition(params, 3, MIXED_ADAM, "deepspeed-zero12", stage=2)
    assert three.rank(2)["gpu/params"] == 18 * 2 and three.rank(2)["gpu/optimizer_states"] == 6 * 12


def test_deepspeed_zero3_pads_every_parameter_to_a_multiple_of_n():
    params = [ParamSpec("w", (5, 3)), ParamSpec("b", (7,))]  # ceil(15/4) + ceil(7/4) = 4 + 2
    part = framework_partition(params, 4, MIXED_ADAM, "deepspeed-zero3", per_tensor_state_bytes=4)
    assert part.rank(3) == {"gpu/params": 12, "gpu/gradients": 12, "gpu/optimizer_states": 6 * 12 + 4,
                            "cpu/params": 0, "cpu/gradients": 0, "cpu/optimizer_states": 0}


def test_tied_parameters_count_once_and_ddp_matches_the_paper_stage_0():
    params = [ParamSpec("wte", (11, 4)), ParamSpec("ln", (4,)), ParamSpec("head", (11, 4), tied_to="wte")]
    part = framework_partition(params, 2, MIXED_ADAM, "ddp")
    paper = paper_model_states(Option(0), 48, 2, MIXED_ADAM, 1)
    assert part.rank(1)["gpu/params"] == paper["gpu/params"] == 96
    assert sum(part.rank(1).values()) == 16 * 48


def test_bad_input_is_an_input_error_naming_it():
    with pytest.raises(InputError, match="^framework: "):
        framework_partition(_specs(4), 2, FP32_ADAM, "megatron")
    with pytest.raises(InputError, match="^stage: "):
        framework_partition(_specs(4), 2, FP32_ADAM, "deepspeed-zero12")
    with pytest.raises(InputError, match="^cpu_offload: "):
        framework_partition(_specs(4), 2, FP32_ADAM, "ddp", offload=True)
    with pytest.raises(InputError, match="unknown 'nope'"):
        framework_partition([ParamSpec("a", (4,), tied_to="nope")], 2, FP32_ADAM, "ddp")
    with pytest.raises(InputError, match="^world_size: "):
        framework_partition(_specs(4), 0, FP32_ADAM, "ddp")
    with pytest.raises(InputError, match="scalar"):
        framework_partition([ParamSpec("s", ())], 2, FP32_ADAM, "fsdp2-zero3")


def test_a_model_too_small_to_shard_names_the_idle_ranks():
    assert unshardable_ranks([ParamSpec("w", (1, 4))], 2, "fsdp2-zero3") == [1]
    assert unshardable_ranks(_specs(3, 2), 3, "torch-zero1") == [2]
    assert unshardable_ranks(_specs(3, 2), 2, "fsdp2-zero2") == []
    assert unshardable_ranks(_specs(3), 4, "ddp") == []


def test_params_from_shapes_takes_a_mapping_or_named_tuples():
    assert params_from_shapes({"a": (3, 2), "b": [4]}) == [ParamSpec("a", (3, 2)), ParamSpec("b", (4,))]
    named = params_from_shapes([("wte", (5, 2)), ("head", (5, 2), "wte")])
    assert named[1].tied_to == "wte" and named[1].numel == 10


shapes = st.lists(st.lists(st.integers(1, 9), min_size=1, max_size=3), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(shapes, st.integers(1, 6))
def test_shards_cover_every_element_exactly_once(dims, world):
    params = [ParamSpec(f"p{i}", tuple(d)) for i, d in enumerate(dims)]
    total = sum(p.numel for p in params)
    per = bytes_per_param("fp32", "sgd-momentum")  # 4 bytes each: states count elements
    for framework in ("torch-zero1", "fsdp2-zero3"):
        part = framework_partition(params, world, per, framework)
        assert sum(part.rank(r)["gpu/optimizer_states"] for r in range(world)) == 4 * total
        assert all(part.rank(r)["gpu/params"] * world >= 4 * total or framework == "torch-zero1"
                   for r in range(world))
    ds = framework_partition(params, world, per, "deepspeed-zero12", stage=2)
    assert ds.rank(0)["gpu/params"] % (4 * 2 * world) == 0 and ds.rank(0)["gpu/params"] >= 4 * total


CONFIG_DIR = Path(__file__).parent / "configs"
CONFIGS = sorted(path.name for path in CONFIG_DIR.glob("*.json"))


@pytest.mark.parametrize("path", CONFIGS)
def test_architecture_parameter_list_adds_up_to_the_exact_count(path):
    with open(CONFIG_DIR / path, encoding="utf-8") as handle:
        architecture = architecture_from_hf_config(json.load(handle))
    assert sum(p.numel for p in params_from_architecture(architecture)) == architecture.params


@pytest.mark.slow  # builds the model in transformers on the meta device
@pytest.mark.parametrize("name", ["gpt2", "llama-2-7b-hf", "mixtral-8x7b-v0.1", "opt-1.3b", "falcon-7b"])
def test_architecture_shapes_match_transformers(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with open(CONFIG_DIR / f"{name}.json", encoding="utf-8") as handle:
        config = json.load(handle)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
    real = Counter(tuple(p.shape) for p in model.parameters())
    assert Counter(p.shape for p in params_from_architecture(architecture_from_hf_config(config))) == real


def _zero1_owners_by_scanning(params, world_size):
    """ZeroRedundancyOptimizer's rule as torch writes it: a scan of every rank for the first minimum."""
    order = sorted(range(len(params)), key=lambda i: params[i].numel, reverse=True)
    totals, owners = [0] * world_size, [0] * len(params)
    for index in order:
        rank = totals.index(min(totals))
        owners[index] = rank
        totals[rank] += params[index].numel
    return owners


CASES = [(framework, stage, offload) for framework, stage, offload in (
    ("ddp", None, False), ("torch-zero1", None, False), ("fsdp2-zero2", None, False), ("fsdp2-zero3", None, False),
    ("fsdp2-zero2", None, True), ("fsdp2-zero3", None, True), ("deepspeed-zero12", 1, False),
    ("deepspeed-zero12", 2, False), ("deepspeed-zero3", None, False))]


def _same_as_every_rank(params, world, per, step_bytes):
    for framework, stage, offload in CASES:
        partition = framework_partition(params, world, per, framework, stage=stage, offload=offload,
                                        per_tensor_state_bytes=step_bytes)
        rank, held = most_loaded_rank_bytes(params, world, per, framework, stage=stage, offload=offload,
                                            per_tensor_state_bytes=step_bytes)
        assert (rank, held) == (partition.most_loaded_rank, partition.rank(partition.most_loaded_rank)), framework


@settings(max_examples=80, deadline=None)
@given(shapes, st.integers(1, 40), st.sampled_from(["fp32", "mixed"]), st.sampled_from(["adam", "sgd", "sgd-momentum"]),
       st.integers(0, 8))
def test_the_most_loaded_rank_computed_directly_is_the_one_every_rank_gives(dims, world, precision, optimizer,
                                                                            step_bytes):
    params = [ParamSpec(f"p{i}", tuple(d)) for i, d in enumerate(dims)]
    assert zero1_owners(params, world) == _zero1_owners_by_scanning(params, world)
    _same_as_every_rank(params, world, bytes_per_param(precision, optimizer), step_bytes)


@pytest.mark.slow  # every rank's partition of a real model, rank by rank: seconds
@pytest.mark.parametrize("path", ["gpt2.json", "mixtral-8x7b-v0.1.json", "falcon-7b.json"])
def test_the_most_loaded_rank_of_real_models_at_uneven_world_sizes(path):
    with open(CONFIG_DIR / path, encoding="utf-8") as handle:
        params = params_from_architecture(architecture_from_hf_config(json.load(handle)))
    assert zero1_owners(params, 1000) == _zero1_owners_by_scanning(params, 1000)
    for world in (3, 8, 100, 1000):
        _same_as_every_rank(params, world, MIXED_ADAM, 4)


# ---- expert parallelism as torchtitan shards it (FSDP2 + EP) ----

@pytest.mark.parametrize("experts,ep,efsdp,dim", [
    # torchtitan's own cases (tests/unit_tests/test_fsdp_moe_sharding.py): Shard(1) when efsdp × ep > experts
    (4, 2, 4, 1), (8, 2, 4, 0), (128, 8, 2, 0), (8, 8, 2, 1)])
def test_experts_split_over_ep_then_sharded_over_efsdp_on_torchtitans_dim(experts, ep, efsdp, dim):
    """torchtitan (distributed/fsdp.py apply_fsdp_to_decoder): a stacked (E, a, b) experts tensor keeps E/ep experts
    per EP rank, and fully_shard shards them over efsdp on dim 0, or on dim 1 when efsdp × ep > E."""
    from zeroplan.core.memory.framework_partition import expert_parallel_params

    params = [ParamSpec("experts.0.0", (experts, 96, 16)), ParamSpec("shared_experts.0.0", (experts, 96, 16)),
              ParamSpec("q_proj.0.0", (32, 16))]
    dense, local = expert_parallel_params(params, experts, ep, efsdp, fsdp=True)
    assert [p.name for p in dense] == ["shared_experts.0.0", "q_proj.0.0"]
    (spec,) = local
    assert spec.shape == ((experts // ep, 96, 16) if dim == 0 else (96, experts // ep, 16))
    # what a rank holds is fully_shard's chunk of its local tensor along that dim: ceil(rows / efsdp) rows
    rows = spec.shape[0]
    chunk = -(-rows // efsdp)
    part = framework_partition([spec], efsdp, bytes_per_param("fp32", "adam"), "fsdp2-zero3")
    assert part.rank(0)["gpu/params"] == 4 * chunk * (96 * 16 * experts // ep) // rows


def test_fsdp2_with_ep_holds_the_dense_shard_plus_the_local_experts_shard():
    """Per rank: the dense tensors sharded over dp plus the E/ep local experts sharded over edp (rank 0, the most
    loaded of both groups); stage 0 keeps the local experts whole; the deepspeed framework refuses EP."""
    from zeroplan.core.memory.framework_partition import expert_parallel_params
    from zeroplan.core.memory.framework_states import framework_model_states
    from zeroplan.core.options import Option

    experts = 16
    params = (ParamSpec("embed_tokens.0", (1000, 64)), ParamSpec("q_proj.0.0", (64, 64)),
              ParamSpec("experts.0.0", (experts, 256, 64)), ParamSpec("experts.0.1", (experts, 64, 128)))
    mixed = bytes_per_param("mixed", "adam")
    dp, ep, edp = 32, 8, 4
    found = framework_model_states(Option(3), params, dp, mixed, "torch", ep=ep, edp=edp, experts=experts)
    dense, local = expert_parallel_params(params, experts, ep, edp, fsdp=True)
    assert [p.shape for p in local] == [(256, 2, 64), (64, 2, 128)]  # efsdp 4 × ep 8 > 16 experts: dim 1
    fp32 = bytes_per_param("fp32", "adam")
    expected = (most_loaded_rank_bytes(dense, dp, fp32, "fsdp2-zero3", per_tensor_state_bytes=4)[1]["gpu/params"]
                + most_loaded_rank_bytes(local, edp, fp32, "fsdp2-zero3", per_tensor_state_bytes=4)[1]["gpu/params"])
    assert found["gpu/params"] == expected == 4 * (-(-1000 // 32) * 64 + 2 * 64 + 64 * 2 * 64 + 16 * 2 * 128)
    whole = framework_model_states(Option(0), params, dp, mixed, "torch", ep=ep, edp=edp, experts=experts)
    assert whole["gpu/params"] == 4 * (1000 * 64 + 64 * 64 + 2 * 256 * 64 + 2 * 64 * 128)  # E/ep = 2 experts kept
    with pytest.raises(InputError, match="torchtitan"):
        framework_model_states(Option(1), params, dp, mixed, "deepspeed", ep=ep, edp=edp, experts=experts)
