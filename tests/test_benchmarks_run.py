"""The benchmark scripts still run against today's library (they import it directly, so a refactor can break
them without any other test noticing): each one's cheapest real path, not its timing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_published_runs_predicts_a_calibration_and_a_held_out_run():
    runs = _load("published_runs")
    for name in ("calibration", "heldout"):
        outcome = runs.predict(runs.load(name)[0])
        assert outcome is not None


def test_plan_search_builds_the_llama_405b_request_and_measures_one_size():
    search = _load("plan_search")
    assert search.llama_request() is not None
    seconds, total, layouts, plans, fitting = search.measure(64, 1536, 1)
    assert plans > 0 and 0 < fitting <= plans


def test_the_other_scripts_import():
    for name in ("startup", "fit_step_time", "trace_accuracy", "bench_overhead"):
        _load(name)
