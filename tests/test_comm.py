"""Ring volumes and ZeRO traffic (docs/formulas.md §9, §10)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zeroplan.core.timing import dp_traffic as comm
from zeroplan.core.evaluate.estimate import evaluate_options
from zeroplan.core.hardware import Link
from zeroplan.core.options import Option

from conftest import make_request


@given(size=st.integers(0, 10**13), ranks=st.integers(1, 10**5))
def test_ring_bytes_exact(size, ranks):
    sent = comm.ring_bytes(size, ranks)
    assert sent * ranks >= size * (ranks - 1) > (sent - 1) * ranks or size * (ranks - 1) == 0
    assert sent <= size


def test_quantized_bytes_are_done_in_bits():
    assert comm.quantized_bytes(3, 4) == 2  # 12 bits round up to 2 bytes, not 3 // 2
    assert comm.quantized_bytes(10, 8) == 10


def test_collective_time_alpha_beta():
    link = Link(100 * 10**9, 5e-6)
    collective = comm.Collective("x", 8 * 10**9, 8, "intra_node", calls=2)
    assert collective.bytes_per_gpu == 7 * 10**9
    assert abs(collective.seconds(link) - (2 * 7 * 5e-6 + 0.07)) < 1e-12


def _estimate(stage, world=8, gpus_per_node=8, zeropp=frozenset(), params=13 * 10**9, **kw):
    request = make_request(params=params, world=world, gpus_per_node=gpus_per_node, options=(Option(stage),),
                           zeropp=zeropp, **kw)
    return evaluate_options(request)[0]


def test_zero_traffic_is_two_and_three_psi_times_ring_factor():
    psi = 13 * 10**9
    for stage, collectives in ((0, 2), (1, 2), (2, 2), (3, 3)):
        e = _estimate(stage)
        assert e.comm_bytes_per_gpu_per_step == collectives * -(-2 * psi * 7 // 8)
        assert e.breakdown["comm/paper_elements"] == collectives * psi
    # Stage 3 is 1.5× plain data parallelism.
    assert _estimate(3).comm_bytes_per_gpu_per_step * 2 == _estimate(0).comm_bytes_per_gpu_per_step * 3


def test_single_gpu_sends_nothing():
    for stage in range(4):
        assert _estimate(stage, world=1).comm_bytes_per_gpu_per_step == 0


def test_dp_across_nodes_uses_the_inter_node_link():
    inside = _estimate(2, world=8, gpus_per_node=8)
    across = _estimate(2, world=16, gpus_per_node=8)
    assert inside.breakdown["comm/inter_node_bytes"] == 0
    assert across.breakdown["comm/intra_node_bytes"] == 0
    assert across.comm_seconds_per_step > inside.comm_seconds_per_step * 5


def test_zeropp_volumes_and_hpz_memory():
    psi, world = 13 * 10**9, 64
    base = _estimate(3, world=world)
    full = _estimate(3, world=world, zeropp=frozenset({"qwz", "hpz", "qgz"}))
    ring = lambda size: -(-size * (world - 1) // world)  # noqa: E731
    # Cross-node: qwZ int8 forward gather (0.5M) + qgZ int4 gradients (0.25M) instead of 3M (M = 2Ψ bytes).
    assert base.breakdown["comm/inter_node_bytes"] == 3 * ring(2 * psi)
    assert full.breakdown["comm/inter_node_bytes"] == ring(psi) + ring(psi // 2)
    # hpZ: the backward gather stays inside the 8-GPU node.
    assert full.breakdown["comm/intra_node_bytes"] == -(-2 * psi * 7 // 8)
    assert full.breakdown["gpu/buffers/hpz_secondary_partition"] == 2 * psi // 8
    assert "gpu/buffers/hpz_secondary_partition" not in base.breakdown
