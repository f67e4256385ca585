"""The deepspeed convention against DeepSpeed's documented estimator output (docs/formulas.md §5)."""

from __future__ import annotations

import pytest

from zeroplan.core.memory import deepspeed_estimator as ds
from zeroplan.core.errors import InputError
from zeroplan.core.evaluate.estimate import evaluate_options
from zeroplan.core.options import DEEPSPEED_OPTIONS, Option

from conftest import make_request

GIB = 2**30

# docs/code-docs/source/memory.rst: t5-3b, 1 node × 8 GPUs, per CPU | per GPU in GiB (printed as "GB").
T5_3B = dict(total_params=2_851_000_000, largest_layer_params=32_000_000, gpus_per_node=8, nodes=1)
T5_3B_DOC = [  # (offload_optimizer, offload_params, zero_init, cpu GiB, gpu GiB)
    (True, True, True, 71.69, 0.12),
    (True, False, True, 63.72, 0.78),
    (False, False, True, 1.43, 6.09),
]
# The same printout for t5-small on 1 GPU (60,506,624 params; shared embedding 32128 × 512), zero_init 1 and 0.
T5_SMALL = dict(total_params=60_506_624, largest_layer_params=32128 * 512, gpus_per_node=1, nodes=1)
T5_SMALL_DOC = [
    (True, True, True, 1.52, 0.06), (True, True, False, 1.52, 0.06),
    (True, False, True, 1.35, 0.17), (True, False, False, 1.35, 0.17),
    (False, False, True, 0.09, 1.08), (False, False, False, 0.34, 1.08),
]


@pytest.mark.parametrize("shape,rows", [(T5_3B, T5_3B_DOC), (T5_SMALL, T5_SMALL_DOC)])
def test_zero3_matches_documented_printout(shape, rows):
    for offload_optimizer, offload_params, zero_init, cpu_gib, gpu_gib in rows:
        cpu, gpu = ds.zero3(cpu_offload=offload_optimizer, cpu_offload_params=offload_params, zero_init=zero_init,
                            **shape)
        assert (round(cpu / GIB, 2), round(gpu / GIB, 2)) == (cpu_gib, gpu_gib)


def test_zero3_t5_3b_exact_bytes():
    # Integer-exact expectations written out from DeepSpeed's formula for t5-3b.
    assert ds.zero3(cpu_offload=True, cpu_offload_params=True, zero_init=True, **T5_3B) == (76_977_000_000, 128_000_000)
    assert ds.zero3(cpu_offload=True, cpu_offload_params=False, zero_init=True, **T5_3B) == (68_424_000_000, 840_750_000)
    assert ds.zero3(cpu_offload=False, cpu_offload_params=False, zero_init=True, **T5_3B) == (1_536_000_000, 6_542_750_000)


def test_zero2_current_formula():
    # 2P + int(18P/G) since DeepSpeed PR #5099; CPU offload: P·max(4G, 16)·f.
    cpu, gpu = ds.zero2(2_851_000_000, 8, 1, cpu_offload=False)
    assert gpu == 2 * 2_851_000_000 + int(18 * 2_851_000_000 / 8)
    assert cpu == int(2_851_000_000 * 4 * 8 * 1.5)
    cpu, gpu = ds.zero2(2_851_000_000, 8, 1, cpu_offload=True)
    assert (cpu, gpu) == (int(2_851_000_000 * 32 * 1.5), 2 * 2_851_000_000)


def test_float_truncation_is_reproduced_across_nodes():
    # 3 nodes: DeepSpeed multiplies by the float 1/3 and truncates; the result must be its exact output.
    cpu, _ = ds.zero3(1_000_000_001, 1000, 8, 3, True, True, True)
    assert cpu == int(1_000_000_001 * 18 * (1 / 3) * 1.5)


def test_estimate_rows_add_up_to_deepspeed_totals():
    request = make_request(params=2_851_000_000, world=8, options=DEEPSPEED_OPTIONS, convention="deepspeed",
                           largest=32_000_000)
    for estimate in evaluate_options(request):
        option = estimate.option
        without_activations = estimate.gpu_bytes["total"] - estimate.gpu_bytes["activations"]
        if option.stage == 2:
            cpu, gpu = ds.zero2(2_851_000_000, 8, 1, option.offload_optimizer == "cpu")
        else:
            cpu, gpu = ds.zero3(2_851_000_000, 32_000_000, 8, 1, option.offload_optimizer == "cpu",
                                option.offload_params == "cpu", True)
        assert (without_activations, estimate.cpu_bytes_per_node) == (gpu, cpu)
        assert min(estimate.gpu_bytes.values()) >= 0


def test_deepspeed_convention_rejects_what_deepspeed_cannot_estimate():
    with pytest.raises(InputError, match="no estimator"):
        ds.deepspeed_model_states(Option(1), 10**9, 10**7, 8, 8, True, 1.5)
    with pytest.raises(InputError, match="pure data parallelism"):
        make_request(world=16, tp=2, options=DEEPSPEED_OPTIONS, convention="deepspeed")
    with pytest.raises(InputError, match="whole nodes"):
        ds.node_layout(12, 8)
