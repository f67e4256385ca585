"""Paper-convention model states against the ZeRO paper and the seed check (docs/formulas.md §3-§4)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroplan.core.evaluate.estimate import evaluate_options
from zeroplan.core.memory.model_states import paper_model_states
from zeroplan.core.options import Option
from zeroplan.core.precision import bytes_per_param

from conftest import make_request

MIXED_ADAM = bytes_per_param("mixed", "adam")


def model_states(stage: int, params: int, dp: int, per_param=MIXED_ADAM) -> int:
    b = paper_model_states(Option(stage), params, dp, per_param, gpus_in_node=8)
    return b["gpu/params"] + b["gpu/gradients"] + b["gpu/optimizer_states"]


@pytest.mark.parametrize("precision,optimizer,expected", [
    ("mixed", "adam", (2, 2, 12)), ("bf16", "adamw", (2, 2, 12)), ("fp16", "adam", (2, 2, 12)),
    ("fp32", "adam", (4, 4, 8)), ("mixed", "sgd-momentum", (2, 2, 8)), ("mixed", "sgd", (2, 2, 4)),
    ("mixed", "adam-8bit", (2, 2, 6)),
])
def test_bytes_per_param_table(precision, optimizer, expected):
    per_param = bytes_per_param(precision, optimizer)
    assert (per_param.params, per_param.gradients, per_param.optimizer_states) == expected


def test_seed_check_at_64_gpus():
    """ZeRO paper / seed: at N_d = 64 stages 1-3 hold 26.2%, 13.9% and 1.6% of 16Ψ."""
    params = 7_500_000_000  # the paper's 7.5B example
    baseline = model_states(0, params, 64)
    assert baseline == 16 * params == 120 * 10**9  # the paper's 120 GB
    shares = [round(float(100 * Fraction(model_states(stage, params, 64), baseline)), 1) for stage in (1, 2, 3)]
    assert shares == [26.2, 13.9, 1.6]
    # The paper's Figure 1 figures for the same model: 31.4 GB, 16.6 GB, 1.9 GB.
    assert [round(model_states(s, params, 64) / 1e9, 1) for s in (1, 2, 3)] == [31.4, 16.6, 1.9]


def test_seed_13b_example_correct_figures():
    """docs/formulas.md §4.3: 13B mixed Adam is 208 GB without ZeRO and 48.75 GB at ZeRO-2 on 8 GPUs (not 104/26)."""
    assert model_states(0, 13 * 10**9, 8) == 208 * 10**9
    assert model_states(2, 13 * 10**9, 8) == 48_750_000_000


def test_seed_70b_zero3_params_per_gpu():
    """docs/formulas.md §4.3: 2-byte parameters of a 70B model over 4 GPUs are 35 GB per card, not 8.75 GB."""
    b = paper_model_states(Option(3), 70 * 10**9, 4, MIXED_ADAM, 4)
    assert b["gpu/params"] == 35 * 10**9


@settings(max_examples=200, deadline=None)
@given(params=st.integers(1, 10**13), dp=st.integers(1, 4096),
       precision=st.sampled_from(["mixed", "fp32"]),
       optimizer=st.sampled_from(["adam", "sgd-momentum", "sgd", "adam-8bit"]))
def test_stages_are_ordered_and_formulas_hold(params, dp, precision, optimizer):
    per_param = bytes_per_param(precision, optimizer)
    values = [model_states(stage, params, dp, per_param) for stage in range(4)]
    assert values[3] <= values[2] <= values[1] <= values[0]
    p, g, k = per_param.params, per_param.gradients, per_param.optimizer_states
    shard = -(-params // dp)  # the most loaded rank holds ceil(Ψ/N) whole elements of each partition
    assert values == [(p + g + k) * params, (p + g) * params + k * shard, p * params + (g + k) * shard,
                      (p + g + k) * shard]
    if dp == 1:
        assert len(set(values)) == 1  # N_d = 1: no stage saves anything


@settings(max_examples=100, deadline=None)
@given(params=st.integers(10**6, 10**12), dp=st.integers(1, 2048), stage=st.integers(0, 3))
def test_non_increasing_in_dp(params, dp, stage):
    assert model_states(stage, params, dp + 1) <= model_states(stage, params, dp)


def test_offload_moves_states_to_host():
    request = make_request(params=13 * 10**9, world=8, gpus_per_node=8)
    by_key = {e.option.key: e for e in evaluate_options(request)}
    offload = by_key["zero2/opt_cpu/params_none"]
    assert offload.gpu_bytes["optimizer_states"] == offload.gpu_bytes["gradients"] == 0
    assert by_key["zero1/opt_cpu/params_none"].gpu_bytes["gradients"] == 2 * 13 * 10**9  # stage 1 keeps them
    # CPU per node: 8 ranks × (12 + 4 fp32 gradient bytes) × Ψ/8 = 16Ψ.
    assert offload.cpu_bytes_per_node == 16 * 13 * 10**9
    infinity = by_key["zero3/opt_nvme/params_nvme"]
    assert infinity.gpu_bytes["params"] == infinity.gpu_bytes["optimizer_states"] == 0
    assert infinity.nvme_bytes_per_node == (12 + 4 + 2) * 13 * 10**9  # states, fp32 gradients, 16-bit params
    # Host RAM holds only DeepSpeed's pinned aio swap buffers: 4 optimizer buffers of one fp32 sub-group
    # (1e9 elements) and 5 parameter buffers of 1e8 16-bit elements, per rank.
    assert infinity.cpu_bytes_per_node == 8 * (4 * 10**9 * 4 + 5 * 10**8 * 2)
    assert infinity.part("cpu/buffers") == infinity.cpu_bytes_per_node


def test_tp_pp_divide_the_shard():
    request = make_request(params=175 * 10**9, world=64, tp=8, pp=8)
    assert request.parallel.dp == 1
    assert request.shard_params == -(-(-(-175 * 10**9 // 8)) // 8)
    zero0 = evaluate_options(request)[0]
    assert zero0.model_state_bytes == 16 * request.shard_params


def test_offload_traffic_per_step():
    from zeroplan.core.timing.dp_offload import offload_traffic as traffic_record

    def offload_traffic(*args):
        return traffic_record(*args).as_dict()

    psi, dp, node = 13 * 10**9, 16, 8
    partition = 2 * -(-psi // dp)  # a 16-bit partition
    # Optimizer offload at stage 2: gradients down every micro-batch, updated parameters up once.
    assert offload_traffic(Option(2, "cpu"), psi, dp, MIXED_ADAM, node, 4)["pcie/bytes_per_gpu"] == 5 * partition
    # Stage 1 reduces (and moves) gradients once per step.
    assert offload_traffic(Option(1, "cpu"), psi, dp, MIXED_ADAM, node, 4)["pcie/bytes_per_gpu"] == 2 * partition
    # Parameters on the host too: no upload after the step, a fetch for forward and one for backward.
    both = offload_traffic(Option(3, "cpu", "cpu"), psi, dp, MIXED_ADAM, node, 1)
    assert both["pcie/bytes_per_gpu"] == 3 * partition
    # NVMe optimizer: the 12-byte states and the 4-byte fp32 gradients are written and read once per step.
    nvme = offload_traffic(Option(3, "nvme"), psi, dp, MIXED_ADAM, node, 2)
    assert nvme["nvme/read_bytes_per_node"] == nvme["nvme/write_bytes_per_node"] == node * 16 * -(-psi // dp)
