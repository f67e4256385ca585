"""`zeroplan bench` input handling: every bad input is one line and exit 2, before any rank starts."""

import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from zeroplan.bench import __main__ as bench_main
from zeroplan.distributed.rendezvous import launcher_env
from zeroplan.cli.bench_cmd import bench
from zeroplan.core.errors import InputError

SMALL = ["--min-bytes", "64KiB", "--max-bytes", "256KiB", "--iters", "2", "--warmup", "0"]
BAD_INPUTS = [
    (["--nproc", "1"], "--nproc"),
    (["--nproc", "0"], "--nproc"),
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
    assert str(result.exception).startswith(flag)
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
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "argv", ["bench", "--backend", "nccl", *SMALL])
    assert bench_main.main() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--backend: nccl needs CUDA" in err[0]


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
    code = ("import sys, zeroplan.cli.bench_cmd, zeroplan.inputs.calibration, zeroplan.distributed.launcher; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
