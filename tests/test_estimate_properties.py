"""Invariants of the whole estimate (hypothesis): sharding never costs memory, more GPUs never hurt."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from zeroplan.core.evaluate.estimate import evaluate_options
from zeroplan.core.options import Option
from zeroplan.core.evaluate.recommend import recommend

from conftest import make_request

NO_OFFLOAD = tuple(Option(stage) for stage in range(4))


@settings(max_examples=60, deadline=None)
@given(params=st.integers(10**6, 10**12), dp=st.integers(1, 512))
def test_model_states_ordered_by_stage(params, dp):
    states = [e.model_state_bytes for e in evaluate_options(make_request(params=params, world=dp, options=NO_OFFLOAD))]
    assert states[3] <= states[2] <= states[1] <= states[0]


@settings(max_examples=60, deadline=None)
@given(params=st.integers(10**6, 10**12), dp=st.integers(1, 512), tp=st.sampled_from([1, 2, 4, 8]))
def test_every_option_non_increasing_in_dp(params, dp, tp):
    before = evaluate_options(make_request(params=params, world=dp * tp, tp=tp))
    after = evaluate_options(make_request(params=params, world=(dp + 1) * tp, tp=tp))
    for small, large in zip(before, after):
        assert large.gpu_bytes["total"] <= small.gpu_bytes["total"]
        assert large.gpu_bytes["total"] >= 0


@settings(max_examples=40, deadline=None)
@given(params=st.integers(10**6, 10**12))
def test_one_gpu_saves_nothing_without_offload(params):
    states = {e.model_state_bytes for e in evaluate_options(make_request(params=params, world=1, options=NO_OFFLOAD))}
    assert len(states) == 1


@settings(max_examples=40, deadline=None)
@given(params=st.integers(10**8, 2 * 10**12), world=st.sampled_from([1, 2, 4, 8, 16, 64]))
def test_recommendation_fits_or_explains(params, world):
    request = make_request(params=params, world=world)
    estimates = evaluate_options(request)
    rec = recommend(request, estimates)
    if rec.option is not None:
        assert rec.option.fits and "≤" in rec.reason
        cheaper = [e for e in estimates if (e.option.tier_rank, e.comm_bytes_per_gpu_per_step, e.option.stage)
                   < (rec.option.option.tier_rank, rec.option.comm_bytes_per_gpu_per_step, rec.option.option.stage)]
        assert not any(e.fits for e in cheaper)
    else:
        assert not any(e.fits for e in estimates) and "nothing fits" in rec.reason
        if rec.fewest_gpus is not None:
            assert rec.fewest_gpus > world


def test_installed_console_script_runs():
    script = shutil.which("zeroplan") or str(Path(sys.executable).with_name("zeroplan"))
    result = subprocess.run([script, "estimate", "--params", "13e9", "--gpus", "8", "--format", "json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert '"recommendation"' in result.stdout and result.stderr == ""
    bad = subprocess.run([script, "estimate", "--params", "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
