"""What the machine says no to (issue 23, item 5) ends as one line and the right exit status, never as an
"internal error": a name too long, a deleted working directory, stdout closed or on a full device, a reader
that left the pipe, a bogus MPLBACKEND, and stderr closed (a bad input still exits 2).

Each case runs zeroplan in a child process (the file descriptors are the case). The full device is a twin of
/dev/full made with mknod in the test's own directory, never the machine's."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ESTIMATE = ["estimate", "--params", "7e9", "--gpus", "8"]


def _run(args, cwd=None, env=None, **streams) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **streams}
    return subprocess.run([sys.executable, "-m", "zeroplan", *args], cwd=cwd, env=environment, timeout=120,
                          **options)


def _one_error_line(stderr: bytes) -> str:
    lines = stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zeroplan: error: "), lines
    assert "internal error" not in lines[0] and "Traceback" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("option", ["-o", pytest.param("--plot", marks=pytest.mark.slow)])  # --plot: matplotlib
def test_a_file_name_too_long_is_named(tmp_path, option):
    name = "a" * 300 + (".png" if option == "--plot" else ".txt")
    done = _run([*ESTIMATE, option, name], cwd=tmp_path)
    assert done.returncode == 2 and "too long" in _one_error_line(done.stderr)


def test_a_deleted_working_directory_is_named(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    child = subprocess.Popen([sys.executable, "-c", "import os, sys, time; sys.stdin.readline(); "
                              "os.execv(sys.executable, [sys.executable, '-m', 'zeroplan', *sys.argv[1:]])",
                              *ESTIMATE, "-o", "report.txt"], cwd=gone, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(SRC)})
    gone.rmdir()  # removed under the running process, as a shell's `rm -r` from another terminal does
    _, err = child.communicate(b"go\n", timeout=120)
    assert child.returncode == 2 and "working directory no longer exists" in _one_error_line(err)


def test_stdout_closed_is_named(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os, runpy, sys; os.close(1); sys.argv = ['zeroplan', "
                           + ", ".join(repr(a) for a in ESTIMATE) + "]; runpy.run_module('zeroplan', "
                           "run_name='__main__')"], stderr=subprocess.PIPE, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 2 and "stdout" in _one_error_line(done.stderr)


@pytest.mark.slow  # matplotlib or a pipe in a subprocess: seconds
def test_a_reader_that_left_the_pipe_ends_the_run_quietly():
    read, write = os.pipe()
    os.close(read)  # `| head -1` that has already exited
    try:
        done = _run(["plan", "--model", "llama-2-7b", "--gpus", "64", "--global-batch", "512", "-f", "csv"],
                    stdout=write)
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == b""


def _full_device(tmp_path: Path) -> Path:
    twin = tmp_path / "full"
    try:
        os.mknod(twin, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers, in our own directory
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return twin


def test_stdout_on_a_full_device_is_an_error_not_a_silent_loss(tmp_path):
    twin = _full_device(tmp_path)
    with open(twin, "w") as full:
        done = _run(ESTIMATE, stdout=full)
    assert done.returncode == 2 and "No space left" in _one_error_line(done.stderr)
    assert stat.S_ISCHR(os.lstat(twin).st_mode)


def test_output_onto_a_full_device_is_an_error(tmp_path):
    twin = _full_device(tmp_path)
    done = _run([*ESTIMATE, "-o", str(twin)])
    assert done.returncode == 2 and "No space left" in _one_error_line(done.stderr)
    assert stat.S_ISCHR(os.lstat(twin).st_mode)


@pytest.mark.slow  # matplotlib or a pipe in a subprocess: seconds
def test_a_bogus_mplbackend_does_not_stop_a_plot(tmp_path):
    pytest.importorskip("matplotlib")
    done = _run([*ESTIMATE, "--plot", str(tmp_path / "memory.png")], env={"MPLBACKEND": "bogus"})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "memory.png").read_bytes()[:4] == b"\x89PNG"


def test_with_stderr_closed_a_bad_input_still_exits_2():
    done = subprocess.run([sys.executable, "-c", "import os, runpy, sys; os.close(2); sys.argv = ['zeroplan', "
                           "'estimate', '--params', '7e9', '--gpus', '0']; runpy.run_module('zeroplan', "
                           "run_name='__main__')"], stdout=subprocess.PIPE, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 2
