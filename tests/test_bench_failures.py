"""A rank that dies or hangs, a Ctrl-C, a taken port: the run ends in time, names the rank, leaves
no process behind. Faults come from the test-only ZEROPLAN_BENCH_FAULT variable (RANK:exit|hang:STEP;
steps: 1 started, 2 joined the group, 3+ before each barrier/collective)."""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

pytest.importorskip("torch")

from zeroplan.bench.config import build_config  # noqa: E402
from zeroplan.distributed.launcher import launch_local  # noqa: E402
from zeroplan.distributed.rendezvous import free_port  # noqa: E402

SWEEP = ["--backend", "gloo", "--collectives", "all_reduce", "--min-bytes", "64KiB", "--max-bytes", "256KiB",
         "--factor", "4", "--warmup", "1", "--iters", "3"]
STARTUP_ALLOWANCE_S = 90  # two ranks importing torch on a busy 2-core machine, plus the kill grace


def _config(timeout):
    return build_config(collectives="all_reduce", min_bytes="64KiB", max_bytes="256KiB", factor=4,
                        dtype="float32", warmup=1, iters=3, backend="gloo", nproc=2, timeout=timeout,
                        output_format="csv", save_calibration=None)


@pytest.fixture
def token(monkeypatch):
    """A marker in the environment every spawned rank inherits, to find leftovers through /proc."""
    value = f"zeroplan-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("ZEROPLAN_TEST_TOKEN", value)
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    return value


def _processes_with(marker):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as environ:
                    if marker.encode() in environ.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_rank_that_exits_fails_the_run_naming_it(token, monkeypatch):
    monkeypatch.setenv("ZEROPLAN_BENCH_FAULT", "1:exit:4")
    start = time.monotonic()
    outcome = launch_local(_config(timeout=30), 2)
    assert time.monotonic() - start < STARTUP_ALLOWANCE_S
    assert outcome.exit_code == 1 and outcome.failed_rank == 1
    assert outcome.message.startswith("rank 1 exited with code 17")
    assert len(outcome.pids) == 2 and all(_gone(pid) for pid in outcome.pids)
    assert _processes_with(token) == []


def test_a_hung_rank_ends_the_run_within_the_timeout(token, monkeypatch):
    monkeypatch.setenv("ZEROPLAN_BENCH_FAULT", "1:hang:5")
    start = time.monotonic()
    outcome = launch_local(_config(timeout=3), 2)
    # The no-progress clock starts when both ranks are ready, so start-up on a loaded machine is not
    # counted as a hang: only rank 1 (stuck at its 5th step) is blamed, never both.
    assert 3 <= time.monotonic() - start < 3 + STARTUP_ALLOWANCE_S
    assert outcome.exit_code == 1 and outcome.failed_rank == 1
    assert "rank 1 made no progress for 3 s" in outcome.message and "ranks" not in outcome.message
    assert all(_gone(pid) for pid in outcome.pids)
    assert _processes_with(token) == []


def test_cli_exits_1_naming_the_failed_rank(token):
    env = dict(os.environ, ZEROPLAN_BENCH_FAULT="1:exit:3")
    done = subprocess.run([sys.executable, "-m", "zeroplan.bench", "--nproc", "2", *SWEEP], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "zeroplan: error: rank 1 exited with code 17" in done.stderr
    assert done.stdout == ""
    assert _processes_with(token) == []


def test_ctrl_c_leaves_no_process_behind(token):
    env = dict(os.environ, ZEROPLAN_BENCH_FAULT="1:hang:4")  # keeps the run alive until we interrupt it
    parent = subprocess.Popen([sys.executable, "-m", "zeroplan.bench", "--nproc", "2", "--timeout", "120",
                               *SWEEP], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + STARTUP_ALLOWANCE_S
        while len(_processes_with(token)) < 3 and time.monotonic() < deadline:  # launcher + 2 ranks
            time.sleep(0.1)
        ranks = [pid for pid in _processes_with(token) if pid != parent.pid]
        assert len(ranks) == 2
        time.sleep(1.0)
        parent.send_signal(signal.SIGINT)
        _, err = parent.communicate(timeout=15)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert parent.returncode == 130
    assert "interrupted" in err
    assert all(_gone(pid) for pid in ranks)
    assert _processes_with(token) == []


def test_a_taken_port_is_retried(token):
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    ports = iter([busy.getsockname()[1]])
    log = []

    class Log:
        def write(self, text):
            log.append(text)

    try:
        outcome = launch_local(_config(timeout=30), 2, port_picker=lambda: next(ports, None) or free_port(),
                               log=Log())
    finally:
        busy.close()
    assert outcome.exit_code == 0, outcome.message
    assert any("errno 98" in line and "retrying" in line for line in log)
    assert len(outcome.pids) == 4 and all(_gone(pid) for pid in outcome.pids)
    assert outcome.result is not None and len(outcome.result.measurements) == 2


class _FakeProc:
    def poll(self):
        return None


class _FakeRanks:
    """Two running ranks whose progress counters follow a script, one reading per poll."""

    def __init__(self, script):
        self.procs = [_FakeProc(), _FakeProc()]
        self.script = iter(script)
        self.current = [0, 0]
        self.stderr_paths = []

    def progress(self):
        self.current = next(self.script, self.current)
        return list(self.current)


def test_the_no_progress_clock_starts_when_every_rank_is_ready():
    """Slow start-up (both ranks at 0 for longer than --timeout) is not a hang; once both are ready,
    the rank that stops advancing is the one named."""
    from zeroplan.distributed.launcher import _watch

    start = time.monotonic()
    script = [[0, 0]] * 8 + [[1, 0]] * 4 + [[1, 1], [2, 1], [3, 1]]  # ~1.5 s of start-up, then rank 1 stalls
    state, rank, message = _watch(_FakeRanks(script), 0.5, 60)
    assert time.monotonic() - start >= 1.3 + 0.5  # readings >= 0.1 s apart: the last change is >= 1.3 s in
    assert (state, rank) == ("failed", 1)
    assert message.startswith("rank 1 made no progress for 0.5 s (stuck at step 1 while the others reached step 3)")


def test_a_rank_that_never_gets_ready_is_named_as_not_started():
    from zeroplan.distributed.launcher import _watch

    state, rank, message = _watch(_FakeRanks([[1, 0]]), 0.2, 0.5)
    assert (state, rank) == ("failed", 1)
    assert message.startswith("rank 1 did not start within 0.5 s")
