"""Real sharded training on local gloo ranks: every rank's model states must equal the prediction to the byte.
Real runs pay every rank's torch start-up: the 2-rank run is made once and its measured results are
reused where only the prediction side changes."""

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")

from zeroplan.validate import ValidateFailed, runner  # noqa: E402
from zeroplan.validate.config import build_config  # noqa: E402
from zeroplan.validate.runner import run_validate  # noqa: E402
from zeroplan.validate.shape import TinyShape  # noqa: E402

pytestmark = pytest.mark.slow  # real runs / traces / pre-commit: `pytest -m "not slow"` skips them

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "SLURM_PROCID",
                 "SLURM_NTASKS", "ZEROPLAN_TEST_FAULT")
RANKS_DIR = str(Path(__file__).parent / "ranks")
# Odd sizes and a tied embedding; at 4 ranks the 5-row position table leaves rank 3 only padding.
UNEVEN = ["--layers", "2", "--hidden", "24", "--heads", "3", "--ffn", "52", "--vocab", "101", "--seq-len", "5"]


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch):
    for name in LAUNCHER_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def validate_cli(cli):
    """`zeroplan validate ARGS` through the real entry point."""
    return lambda *args: cli("validate", *args)


def _check_exact(report, world):
    assert report["ok"] and report["meta"]["world_size"] == world
    assert [stage["stage"] for stage in report["stages"]] == [0, 1, 2, 3]
    for stage in report["stages"]:
        assert stage["model_states_exact"], stage["mismatches"]
        assert stage["measured"] == {key: value for key, value in stage["predicted"].items()}  # every rank, byte for byte
        assert len(stage["predicted"]) == 6 * world
        assert stage["measured_most_loaded_rank"] == stage["most_loaded_rank"]
        rows = {row["component"]: row for row in stage["rows"]}
        assert rows["model states"]["status"] == "exact" and rows["model states"]["error_bytes"] == 0
        assert rows["activations (saved)"]["measured"] > 0
    return {stage["stage"]: stage for stage in report["stages"]}


@pytest.fixture(scope="module")
def two_rank_run():
    """One real 2-rank fp32 run of all four stages through the CLI: (exit, stdout, stderr, rank results)."""
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    from zeroplan.cli.app import main

    saved = {name: os.environ.pop(name) for name in LAUNCHER_VARS if name in os.environ}
    real_launch, captured = runner._launch, []

    def spy(*args, **kwargs):
        results = real_launch(*args, **kwargs)
        captured.append(results)
        return results

    runner._launch = spy
    out, err = StringIO(), StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as done:
            main(["validate", *UNEVEN, "--nproc", "2", "--backend", "gloo", "--format", "json"])
    finally:
        runner._launch = real_launch
        os.environ.update(saved)
    return done.value.code, out.getvalue(), err.getvalue(), captured[0] if captured else None


def test_stages_0_to_3_on_2_ranks_fp32_match_to_the_byte(two_rank_run):
    code, out, err, _ = two_rank_run
    assert code == 0, err
    stages = _check_exact(json.loads(out), 2)
    # ZeRO-1 shards only the optimizer; FSDP2 shards everything (padded); DDP holds it all
    assert stages[1]["predicted"]["rank0/gpu/params"] == stages[0]["predicted"]["rank0/gpu/params"]
    assert stages[3]["predicted"]["rank1/gpu/params"] < stages[1]["predicted"]["rank1/gpu/params"]


def test_stages_0_to_3_on_4_ranks_bf16_mixed_match_to_the_byte(validate_cli):
    code, out, err = validate_cli(*UNEVEN, "--nproc", "4", "--backend", "gloo", "--precision", "mixed",
                                  "--steps", "1", "--format", "json")
    assert code == 0, err
    stages = _check_exact(json.loads(out), 4)
    held = stages[3]["measured"]
    assert held["rank3/gpu/params"] == held["rank0/gpu/params"]  # padded shards, even where only padding
    assert held["rank3/gpu/optimizer_states"] < held["rank0/gpu/optimizer_states"]
    for stage in (0, 1, 2):  # autocast's weight copies, FSDP2's bf16 unsharded parameters: exact too
        copies = {row["component"]: row for row in stages[stage]["rows"]}["param copies (fwd)"]
        assert copies["measured"] == copies["predicted"] > 0


def test_a_wrong_prediction_fails_the_run_after_printing_the_table(two_rank_run, validate_cli, monkeypatch):
    """The measured side is the real 2-rank run's (perturbing changes only the prediction)."""
    results = two_rank_run[3]
    assert results is not None
    monkeypatch.setattr(runner, "_launch", lambda config, world, pids: results)
    code, out, err = validate_cli(*UNEVEN, "--nproc", "2", "--backend", "gloo", "--stage", "1",
                                  "--perturb-prediction", "4096")
    assert code == 1
    assert "MISMATCH" in out and "exact" in out  # the table still shows what matched
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "model states differ from the prediction at stage 1" in lines[0]
    assert "optimizer_states predicted" in lines[0] and "measured" in lines[0]


def test_a_failing_rank_is_named_and_no_rank_is_left_running(monkeypatch):
    """Validate's side of a failed launch (torch is irrelevant here: the rank is tests/ranks/fake_rank)."""
    monkeypatch.setattr(runner, "WORKER", "fake_rank")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (RANKS_DIR, os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("ZEROPLAN_TEST_FAULT", "1:exit:1")
    config = build_config(stage="0", shape=TinyShape(layers=1, hidden=24, heads=3, kv_heads=3, ffn=52, vocab=101,
                                                     seq_len=5),
                          precision="fp32", optimizer="adam", micro_batch=1, steps=1, backend="gloo", nproc=2,
                          cpu_offload=False, timeout=120.0, output_format="json")
    pids = []
    with pytest.raises(ValidateFailed) as failed:
        run_validate(config, pids=pids)
    assert failed.value.exit_code == 1
    assert str(failed.value).startswith("rank 1 exited with code 17; its last lines:")
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize("args, message", [
    (["--nproc", "1"], "--nproc: sharding needs at least 2 ranks"),
    (["--nproc", "1025"], "--nproc: 1025 local ranks is more than this command starts (at most 1024)"),
    (["--stage", "5"], "--stage: unknown stage or framework '5'"),
    (["--stage", "deepspeed-zero12"], "--stage: deepspeed-zero12 is predicted by zeroplan but cannot be run"),
    (["--backend", "nccl"], "--backend: nccl needs CUDA GPUs"),
    (["--stage", "3", "--cpu-offload", "--backend", "gloo"], "--cpu-offload: offload moves states"),
    (["--nproc", "64", "--layers", "1", "--hidden", "8", "--heads", "1", "--ffn", "8", "--vocab", "8",
      "--seq-len", "2"], "--nproc: the model is too small to shard over 64 ranks"),
    (["--hidden", "10", "--heads", "3"], "--heads: 3 heads do not divide --hidden 10"),
])
def test_bad_input_is_one_line_and_exit_2(validate_cli, args, message):
    code, out, err = validate_cli(*args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"zeroplan: error: {message}")


def test_the_cli_module_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, zeroplan.cli.validate_cmd; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_model_builds_exactly_the_parameters_the_prediction_lists():
    from zeroplan.validate.model import TinyGpt

    for shape in (TinyShape(), TinyShape(style="llama", heads=4, kv_heads=2, tied=False),
                  TinyShape(layers=1, hidden=24, heads=3, kv_heads=3, ffn=52, vocab=101, seq_len=5)):
        built = [(name, tuple(p.shape)) for name, p in TinyGpt(shape).named_parameters(remove_duplicate=False)]
        assert built == [(spec.name, spec.shape) for spec in shape.param_specs()]
