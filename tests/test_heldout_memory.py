"""Published layouts that really ran, judged by zeroplan's memory model under their real settings
(benchmarks/data/heldout_runs.json): none is refused, the ones whose settings the sources give fit, and every one
zeroplan still judges not to fit says why (its memory_note)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
GIB = 2**30


@pytest.fixture(scope="module")
def runs():
    spec = importlib.util.spec_from_file_location("benchmark_published_runs_memory", BENCHMARKS / "published_runs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run(runs, run_id: str) -> dict:
    (run,) = [r for r in runs.load("heldout") if r["id"] == run_id]
    return run


def test_gpt_neox_20b_is_scored_with_the_batch_its_config_trained_with(runs):
    # configs/20B.yml: 4 sequences per micro-batch, 32 accumulation steps, on dp = 96 / (tp2 · pp4) = 12 ranks.
    run = _run(runs, "C/GPT-NeoX-20B 96xA100-40G tp2 pp4")
    layout = runs.layout_of(run)
    assert layout["dp"] == 12 and layout["batch"] % (layout["dp"] * layout["mb"]) == 0
    outcome = runs.predict(run)
    assert outcome.refused is None
    assert outcome.plan.grad_accum == layout["batch"] // (layout["dp"] * layout["mb"])
    assert outcome.fits  # 20B on 40 GB A100s with full recompute, as trained


@pytest.mark.parametrize("run_id", ["A/torchtitan Llama3.1-8B FSDP 8 H100", "A/torchtitan Llama3.1-8B FSDP 128 H100"])
def test_torchtitan_llama3_8b_fits_under_op_level_checkpointing_and_matches_its_measured_memory(runs, run_id):
    run = _run(runs, run_id)
    assert run["recompute"] == "selective-op"  # torchtitan's selective_ac_option = "op"
    outcome = runs.predict(run)
    assert outcome.fits
    # The table's peak reserved memory holds the allocator's cached blocks on top of what is live: zeroplan's live
    # bytes sit just under it.
    measured = run["other_published"]["memory_gib"] * GIB
    assert 0.85 * measured <= outcome.plan.gpu_total <= measured


def test_no_published_layout_is_refused_and_every_no_fit_says_why(runs):
    outcomes = [runs.predict(run) for run in runs.load("heldout")]
    assert [o.run["id"] for o in outcomes if o.refused] == []
    for outcome in outcomes:
        if not outcome.fits:
            note = outcome.run.get("memory_note", "")
            # The note states zeroplan's own per-GPU total, to the GiB, against the whole GPU: above it, or (MosaicML's
            # micro-batches tuned to the edge of memory) under it and above the headroom zeroplan plans with.
            assert f"{outcome.plan.gpu_total / GIB:.0f} GiB" in note, outcome.run["id"]
            assert "HBM" in note
            if outcome.plan.gpu_total <= outcome.budget.gpu_capacity:
                assert outcome.plan.gpu_total > outcome.budget.usable_gpu_bytes and "headroom" in note


def test_a_no_fit_row_prints_its_bytes_against_the_usable_and_the_whole_gpu(runs, capsys):
    outcome = runs.predict(_run(runs, "A/DGXC Nemotron4-340B BF16 128 H100"))
    assert not outcome.fits
    runs.print_runs("t", [outcome])
    out = capsys.readouterr().out
    usable, capacity = outcome.budget.usable_gpu_bytes / GIB, outcome.budget.gpu_capacity / GIB
    assert f"{outcome.plan.gpu_total / GIB:.1f} GiB per GPU, {usable:.1f} usable of {capacity:.1f}" in out
    assert "why: " in out
