"""Shared builders: core requests without presets, so core tests need no YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from zeroplan.core.memory.budget import MemoryBudget
from zeroplan.core.hardware import ClusterSpec, GpuSpec, Link
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.options import PAPER_OPTIONS
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.precision import bytes_per_param
from zeroplan.core.evaluate.estimate import EstimateRequest

GIB = 2**30


def make_cluster(memory=80 * GIB, gpus_per_node=8, cpu=2 * 10**12, nvme=15 * 10**12) -> ClusterSpec:
    gpu = GpuSpec("test-gpu", memory, 2_000_000_000_000, 312 * 10**12, Link(300_000_000_000, 5e-6))
    return ClusterSpec("test-node", gpu, gpus_per_node, Link(25_000_000_000, 10e-6), cpu, nvme,
                       25_000_000_000, 31_500_000_000, 4)


def make_request(params=13 * 10**9, world=8, tp=1, pp=1, gpus_per_node=8, options=PAPER_OPTIONS,
                 precision="mixed", optimizer="adam", convention="paper", largest=None, cluster=None, **kwargs):
    cluster = cluster or make_cluster(gpus_per_node=gpus_per_node)
    return EstimateRequest(
        model=ModelSpec(params=params), cluster=cluster,
        parallel=ParallelDims(world, tp, pp, cluster.gpus_per_node), per_param=bytes_per_param(precision, optimizer),
        budget=MemoryBudget(cluster.gpu.memory_bytes), options=tuple(options), convention=convention,
        largest_layer_params=largest or max(1, params // 50), **kwargs)


@pytest.fixture
def request_factory():
    return make_request


@pytest.fixture(autouse=True)
def _no_user_presets(tmp_path_factory, monkeypatch):
    """Tests never read the user's presets file: the config directory is an empty one, and no --presets
    file is left over from an earlier test."""
    from zeroplan.inputs import presets

    monkeypatch.setattr(presets, "user_config_dir", lambda: tmp_path_factory.getbasetemp() / "no-user-config")
    presets.use_presets_file(None)
    yield
    presets.use_presets_file(None)


@pytest.fixture
def cli(capsys):
    """zeroplan's real entry point (zeroplan.cli.app.main): returns (exit status, stdout, stderr)."""
    from zeroplan.cli.app import main

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as done:
            main(list(args))
        captured = capsys.readouterr()
        return done.value.code, captured.out, captured.err

    return run


@pytest.fixture
def run(cli):
    return cli


_WHOLE_MODULE_SLOW = "pytestmark = pytest.mark.slow"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`-m "not slow"` does not even import a module marked slow as a whole: those import torch, transformers or
    DeepSpeed at the top, seconds of the developer's quick loop spent on tests it then deselects."""
    if config.getoption("markexpr", "").replace(" ", "") != "notslow" or collection_path.suffix != ".py" \
            or not collection_path.name.startswith("test_"):
        return None
    return _WHOLE_MODULE_SLOW in collection_path.read_text(encoding="utf-8") or None
