"""Ring factors, nccl-tests bandwidth conventions and the α-β fit (pure math, no torch)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroplan.core.timing.collectives import (
    ALL_GATHER, ALL_REDUCE, ALLREDUCE_THEN_CHUNK, REDUCE_SCATTER, algbw, busbw, busbw_factor,
    canonical_collective, fit_alpha_beta, parse_collectives, ring_steps, ring_time, sweep_sizes,
    wire_bytes_per_rank,
)
from zeroplan.core.errors import InputError


@pytest.mark.parametrize("ranks, ar, ag", [(1, 0.0, 0.0), (2, 1.0, 0.5), (4, 1.5, 0.75), (8, 1.75, 0.875)])
def test_busbw_factors_follow_nccl_tests(ranks, ar, ag):
    assert busbw_factor(ALL_REDUCE, ranks) == ar
    assert busbw_factor(ALL_GATHER, ranks) == ag
    assert busbw_factor(REDUCE_SCATTER, ranks) == ag


def test_algbw_and_busbw_on_a_known_point():
    # 8 ranks, S = 1 GB in 10 ms: algbw 100 GB/s, AllReduce busbw 175 GB/s, AllGather 87.5 GB/s.
    assert algbw(10**9, 0.01) == pytest.approx(100e9)
    assert busbw(ALL_REDUCE, 10**9, 0.01, 8) == pytest.approx(175e9)
    assert busbw("all_gather_into_tensor", 10**9, 0.01, 8) == pytest.approx(87.5e9)


def test_gloo_reduce_scatter_sends_twice_a_ring_reduce_scatter():
    ring = wire_bytes_per_rank(REDUCE_SCATTER, 1 << 20, 4)
    gloo = wire_bytes_per_rank(REDUCE_SCATTER, 1 << 20, 4, ALLREDUCE_THEN_CHUNK)
    assert ring == 0.75 * (1 << 20)
    assert gloo == 2 * ring == wire_bytes_per_rank(ALL_REDUCE, 1 << 20, 4)


def test_ring_steps():
    assert ring_steps(ALL_GATHER, 8) == 7
    assert ring_steps(REDUCE_SCATTER, 8) == 7
    assert ring_steps(ALL_REDUCE, 8) == 14


def test_collective_names_and_aliases():
    assert parse_collectives("all_gather_into_tensor, reduce_scatter_tensor,all_reduce,all_reduce") == (
        ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE)
    assert canonical_collective("AllGather") == ALL_GATHER
    assert canonical_collective("reduce-scatter") == REDUCE_SCATTER
    with pytest.raises(InputError, match="unknown collective 'broadcast'"):
        parse_collectives("broadcast")
    with pytest.raises(InputError, match="is empty"):
        parse_collectives(" , ")


def test_sweep_is_nccl_tests_style_and_aligned():
    assert sweep_sizes(1024, 16384, 2, 8) == [1024, 2048, 4096, 8192, 16384]
    assert sweep_sizes(1000, 100000, 10, 48) == [960, 9984, 99984]  # rounded down to whole elements
    assert sweep_sizes(100, 100, 2, 8) == [96]
    with pytest.raises(InputError, match="^factor: "):
        sweep_sizes(1, 10, 1, 1)
    with pytest.raises(InputError, match="^max_bytes: "):
        sweep_sizes(100, 10, 2, 1)
    with pytest.raises(InputError, match="one element per rank"):
        sweep_sizes(4, 7, 2, 8)


def _synthetic(collective, ranks, alpha, bandwidth, sizes, noise=()):
    times = [ring_time(collective, s, ranks, alpha, bandwidth) for s in sizes]
    return [t * (1 + (noise[i % len(noise)] if noise else 0)) for i, t in enumerate(times)]


SIZES = [2**k for k in range(12, 30, 2)]


@pytest.mark.parametrize("collective", [ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE])
def test_fit_recovers_alpha_and_beta_exactly(collective):
    times = _synthetic(collective, 8, 5e-6, 150e9, SIZES)
    fit = fit_alpha_beta(collective, 8, SIZES, times)
    assert fit.latency_s == pytest.approx(5e-6, rel=1e-9)
    assert fit.bandwidth_bytes_per_s == pytest.approx(150e9, rel=1e-9)
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.max_relative_residual < 1e-9
    assert fit.points == len(SIZES)
    assert fit.predict(1 << 30) == pytest.approx(ring_time(collective, 1 << 30, 8, 5e-6, 150e9))


def test_fit_with_noise_stays_close_and_reports_residuals():
    noise = (0.03, -0.02, 0.01, -0.03, 0.02)
    times = _synthetic(ALL_GATHER, 4, 20e-6, 10e9, SIZES, noise)
    fit = fit_alpha_beta(ALL_GATHER, 4, SIZES, times)
    assert fit.latency_s == pytest.approx(20e-6, rel=0.1)
    assert fit.bandwidth_bytes_per_s == pytest.approx(10e9, rel=0.05)
    assert 0.03 < fit.max_relative_residual < 0.1
    assert fit.r_squared > 0.99


def test_latency_bound_sweep_has_no_bandwidth():
    fit = fit_alpha_beta(ALL_REDUCE, 2, [8, 16, 32], [1e-4, 0.9e-4, 0.95e-4])
    assert fit.bandwidth_bytes_per_s is None
    assert fit.latency_s == pytest.approx(0.95e-4 / 2, rel=0.1)


def test_negative_intercept_is_clamped_to_zero_latency():
    fit = fit_alpha_beta(ALL_GATHER, 2, [1000, 2000, 4000], [0.9e-6, 2.0e-6, 4.1e-6])
    assert fit.latency_s == 0.0
    assert fit.bandwidth_bytes_per_s > 0


def test_fit_rejects_bad_input():
    with pytest.raises(InputError, match="two different sizes"):
        fit_alpha_beta(ALL_GATHER, 4, [1024, 1024], [1e-3, 1e-3])
    with pytest.raises(InputError, match="at least 2 ranks"):
        fit_alpha_beta(ALL_GATHER, 1, [1, 2], [1e-3, 2e-3])
    with pytest.raises(InputError, match="positive"):
        fit_alpha_beta(ALL_GATHER, 2, [1, 2], [0.0, 2e-3])


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(1e-7, 1e-3), gbps=st.floats(0.1, 1000.0), ranks=st.integers(2, 1024),
       collective=st.sampled_from([ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE]))
def test_fit_round_trips_any_link(alpha, gbps, ranks, collective):
    times = _synthetic(collective, ranks, alpha, gbps * 1e9, SIZES)
    fit = fit_alpha_beta(collective, ranks, SIZES, times)
    assert math.isclose(fit.latency_s, alpha, rel_tol=1e-6)
    assert math.isclose(fit.bandwidth_bytes_per_s, gbps * 1e9, rel_tol=1e-6)
