"""`zeroplan bench` input handling: every bad input is one line and exit 2, before any rank starts."""

import re
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from zeroplan.bench import __main__ as bench_main
from zeroplan.distributed.rendezvous import launcher_env
from zeroplan.cli.bench_cmd import bench
from zeroplan.inputs.flag_names import cli_message
from zeroplan.core.errors import InputError

SMALL = ["--min-bytes", "64KiB", "--max-bytes", "256KiB", "--iters", "2", "--warmup", "0"]
BAD_INPUTS = [
    (["--nproc", "1"], "--nproc"),
    (["--nproc", "0"], "--nproc"),
    (["--nproc", "1025"], "--nproc"),
    (["--dtype", "int8"], "--dtype"),
    (["--min-bytes", "lots"], "--min-bytes"),
    (["--min-bytes", "1MiB", "--max-bytes", "64KiB"], "--max-bytes"),
    (["--factor", "1"], "--factor"),
    (["--format", "xml"], "--format"),
    (["--collectives", "broadcast"], "--collectives"),
    (["--iters", "0"], "--iters"),
    (["--warmup", "-1"], "--warmup"),
    (["--timeout", "0"], "--timeout"),
    (["--backend", "mpi"], "--backend"),
    (["--save-calibration", "/no/such/folder/calib.yaml"], "--save-calibration"),
]


def _local_app() -> typer.Typer:
    app = typer.Typer()
    app.command("bench")(bench)

    @app.callback()
    def root() -> None:  # a group, as in the real CLI: `zeroplan bench ...`
        pass

    return app


@pytest.mark.parametrize("args, flag", BAD_INPUTS)
def test_bad_input_raises_input_error_naming_the_flag(args, flag):
    result = CliRunner().invoke(_local_app(), ["bench", *args])
    assert isinstance(result.exception, InputError), result.output
    assert cli_message(result.exception).startswith(flag)  # the line the CLI's error table prints
    assert "\n" not in str(result.exception)


@pytest.mark.parametrize("args, flag", BAD_INPUTS[:4])
def test_module_entry_exits_2_with_one_line(args, flag, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["python -m zeroplan.bench", *args])
    assert bench_main.main() == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0]


def test_real_cli_exits_2_once_bench_is_registered(capsys):
    app_module = pytest.importorskip("zeroplan.cli.app")
    if "bench" not in typer.main.get_command(app_module.app).commands:
        pytest.skip("zeroplan.cli.app does not register bench yet")
    with pytest.raises(SystemExit) as info:
        app_module.main(["bench", "--nproc", "1"])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--nproc" in lines[0]


def test_nccl_without_cuda_is_exit_2(monkeypatch, capsys):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, whatever the machine has
    monkeypatch.setattr(sys, "argv", ["bench", "--backend", "nccl", *SMALL])
    assert bench_main.main() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--backend: nccl needs CUDA" in err[0]


@pytest.mark.slow  # imports torch
def test_nproc_must_match_the_launcher(monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    monkeypatch.setattr(sys, "argv", ["bench", "--nproc", "4", "--backend", "gloo", *SMALL])
    assert bench_main.main() == 2
    assert "--nproc: is 4 but the launcher started 2 ranks" in capsys.readouterr().err


def test_launcher_env_detection():
    assert launcher_env({}) is None
    assert launcher_env({"RANK": "0", "WORLD_SIZE": "2"}) is None  # no MASTER_ADDR: not a job
    env = launcher_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1",
                        "MASTER_PORT": "1234", "GROUP_RANK": "1"})
    assert (env.rank, env.world_size, env.local_rank, env.master_port, env.node_id) == (3, 8, 1, 1234, "1")
    slurm = launcher_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "5",
                          "SLURM_NODEID": "0", "MASTER_ADDR": "node-a"})
    assert (slurm.rank, slurm.world_size, slurm.local_rank, slurm.master_port, slurm.node_id) == (
        5, 16, 5, 29500, "0")
    with pytest.raises(InputError, match="WORLD_SIZE"):
        launcher_env({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "x"})
    with pytest.raises(InputError, match="RANK"):
        launcher_env({"RANK": "two", "WORLD_SIZE": "2", "MASTER_ADDR": "x"})


def test_importing_the_command_does_not_import_torch():
    """Nor does a local run up to the launch: the launching process decides backend and ranks without
    torch (only the ranks import it)."""
    code = """
import json, os, sys
import zeroplan.cli.bench_cmd, zeroplan.inputs.calibration, zeroplan.distributed.launcher
assert "torch" not in sys.modules, "importing the command imported torch"
for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "SLURM_PROCID"):
    os.environ.pop(name, None)
os.environ["CUDA_VISIBLE_DEVICES"] = ""
from zeroplan.bench import runner
from zeroplan.bench.config import build_config
from zeroplan.distributed.launcher import LaunchOutcome
seen = []
def fake_launch(launch, read_results):
    seen.append(launch)
    return LaunchOutcome(exit_code=1, message="not run")
runner.launch_local = fake_launch
config = build_config(collectives="all_reduce", min_bytes="64KiB", max_bytes="256KiB", factor=4, dtype="float32",
                      warmup=0, iters=1, backend="auto", nproc=None, timeout=30, output_format="json",
                      save_calibration=None)
try:
    runner.run_bench(config)
except runner.BenchFailed as exc:
    assert str(exc) == "not run" and exc.exit_code == 1
assert "torch" not in sys.modules, "the launching process imported torch"
(launch,) = seen
assert (launch.worker_module, launch.nproc, launch.progress_timeout_s) == ("zeroplan.bench.worker", 2, 30.0)
assert json.loads(launch.config_json)["backend"] == "gloo"
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_gpus_are_counted_from_the_driver_and_cuda_visible_devices(tmp_path):
    from zeroplan.distributed.devices import launcher_backend, local_world, visible_gpu_count

    for index in range(4):
        (tmp_path / f"0000:0{index}:00.0").mkdir()
    assert visible_gpu_count({}, str(tmp_path)) == 4
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "2,3"}, str(tmp_path)) == 2
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,-1,2"}, str(tmp_path)) == 1  # CUDA stops at -1
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": ""}, str(tmp_path)) == 0
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5"}, str(tmp_path)) == 4
    assert launcher_backend("auto", 0) == "gloo" and launcher_backend("auto", 4) == "auto"
    assert launcher_backend("gloo", 4) == "gloo" and launcher_backend("nccl", 4) == "nccl"
    with pytest.raises(InputError, match="--backend: nccl needs CUDA GPUs"):
        launcher_backend("nccl", 0)
    assert local_world(None, "auto", 4, "a collective") == 4  # one rank per GPU
    assert local_world(None, "gloo", 4, "a collective") == 2
    with pytest.raises(InputError, match="--nproc: 8 ranks but 4 GPU"):
        local_world(8, "nccl", 4, "a collective")
    with pytest.raises(InputError, match="--nproc: a collective needs at least 2 ranks, got 1"):
        local_world(None, "auto", 1, "a collective")


def test_the_table_says_microseconds_and_falls_back_to_ascii():
    import io

    from zeroplan.bench.report import emit, result_rows, screen_text
    from zeroplan.bench.result import BenchRun, fits_on_mean
    from zeroplan.inputs.calibration import Calibration, Measurement

    measurements = [Measurement(collective="all_reduce", span="intra_node", ranks=2, size_bytes=size,
                                time_s_median=t, time_s_min=t / 2, time_s_max=t * 3)
                    for size, t in ((65536, 1e-4), (1048576, 1e-3))]
    means = [2e-4, 1.5e-3]
    run = BenchRun(Calibration(created="2025-01-01T00:00:00+00:00", backend="gloo", dtype="float32", world_size=2,
                               nodes=1, gpus_per_node=2, hostnames=["h"], device="CPU", torch_version="2",
                               fits=fits_on_mean(measurements, means, "gloo"), measurements=measurements), tuple(means))
    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    emit(run, "table", out=utf8)
    utf8.seek(0)
    text = utf8.read()
    assert "µs" in text and not re.search(r"\bus\b", text) and "α" in text
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    emit(run, "table", out=ascii_out)  # would raise UnicodeEncodeError if a µ, α or · got through
    ascii_out.seek(0)
    plain = ascii_out.read()
    assert "us per ring step" in plain and "alpha" in plain and "R^2" in plain
    assert screen_text("1 µs · R²", "utf-8") == "1 µs · R²"
    assert screen_text("1 µs · R²", "ascii") == "1 us * R^2"
    csv_out, csv_err = io.StringIO(), io.StringIO()
    emit(run, "csv", out=csv_out, err=csv_err)
    lines = csv_out.getvalue().splitlines()
    assert lines[0].startswith("collective,span,ranks,size_bytes,count,dtype,time_us_mean,time_us_median,")
    assert len(lines) == 3 and lines[1].startswith("all_reduce,intra_node,2,65536,16384,float32,200.0")
    assert csv_err.getvalue().startswith("note: time:")  # notes on stderr: stdout stays one clean table
    rows = {row["size_bytes"]: row for row in result_rows(run)}
    assert rows[65536]["time_us_mean"] == pytest.approx(200.0) and rows[65536]["time_us_median"] == pytest.approx(100.0)
    assert rows[65536]["algbw_gbps"] == pytest.approx(65536 / 2e-4 / 1e9)  # bandwidth on the mean
