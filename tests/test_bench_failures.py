"""A rank that dies or hangs, a Ctrl-C, a taken port: the run ends in time, names the rank, leaves
no process behind. The launcher is generic, so most of these run tests/ranks/fake_rank.py, a rank
without torch that starts in milliseconds; one run goes through the real bench worker and the CLI.
Faults: ZEROPLAN_TEST_FAULT / ZEROPLAN_BENCH_FAULT (RANK:exit|hang:STEP)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from zeroplan.distributed.launcher import Launch, _watch, launch_local
from zeroplan.distributed.rendezvous import free_port

pytestmark = pytest.mark.slow  # real runs / traces / pre-commit: `pytest -m "not slow"` skips them

SWEEP = ["--backend", "gloo", "--collectives", "all_reduce", "--min-bytes", "64KiB", "--max-bytes", "256KiB",
         "--factor", "4", "--warmup", "1", "--iters", "3"]
STARTUP_ALLOWANCE_S = 90  # ranks starting on a busy 2-core machine, plus the kill grace
RANKS_DIR = str(Path(__file__).parent / "ranks")


def _fake(nproc=2, steps=5, step_s=0.01, progress_timeout_s=30.0, deadline_s=None):
    path = os.pathsep.join(p for p in (RANKS_DIR, os.environ.get("PYTHONPATH")) if p)
    return Launch("fake_rank", json.dumps({"steps": steps, "step_s": step_s}), nproc, "zeroplan test",
                  progress_timeout_s=progress_timeout_s, deadline_s=deadline_s, env={"PYTHONPATH": path})


def _parsed(texts):
    return [json.loads(text) for text in texts]


@pytest.fixture
def token(monkeypatch):
    """A marker in the environment every spawned rank inherits, to find leftovers through /proc."""
    value = f"zeroplan-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("ZEROPLAN_TEST_TOKEN", value)
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "SLURM_PROCID", "ZEROPLAN_TEST_FAULT", "ZEROPLAN_BENCH_FAULT"):
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


def test_four_ranks_get_torchrun_environments_and_return_results_in_rank_order(token):
    outcome = launch_local(_fake(nproc=4), _parsed)
    assert outcome.exit_code == 0, outcome.message
    assert outcome.result == [{"rank": r, "world": 4, "local_rank": r, "omp": "1"} for r in range(4)]
    assert len(outcome.pids) == 4 and all(_gone(pid) for pid in outcome.pids)


def test_a_rank_that_exits_fails_the_run_naming_it_with_its_last_lines(token, monkeypatch):
    monkeypatch.setenv("ZEROPLAN_TEST_FAULT", "1:exit:3")
    outcome = launch_local(_fake(), _parsed)
    assert outcome.exit_code == 1 and outcome.failed_rank == 1 and outcome.result is None
    assert outcome.message.startswith("rank 1 exited with code 17; its last lines:\n")
    assert "fake rank 1 of 2 started" in outcome.message and "test fault" in outcome.message
    assert len(outcome.pids) == 2 and all(_gone(pid) for pid in outcome.pids)
    assert _processes_with(token) == []


def test_a_hung_rank_ends_the_run_within_the_timeout(token, monkeypatch):
    monkeypatch.setenv("ZEROPLAN_TEST_FAULT", "1:hang:3")
    start = time.monotonic()
    outcome = launch_local(_fake(steps=10, step_s=0.02, progress_timeout_s=1.0), _parsed)
    # The no-progress clock starts when both ranks are ready, and runs while no rank advances: rank 0
    # finishes its steps, rank 1 (stuck before its 3rd step) is the one named.
    assert 1.0 <= time.monotonic() - start < 1.0 + STARTUP_ALLOWANCE_S
    assert outcome.exit_code == 1 and outcome.failed_rank == 1
    assert outcome.message == ("rank 1 made no progress for 1 s (stuck at step 2 after the other ranks finished); "
                               "stopped the run")
    assert all(_gone(pid) for pid in outcome.pids)
    assert _processes_with(token) == []


def test_the_deadline_stops_a_run_that_still_makes_progress(token):
    start = time.monotonic()
    outcome = launch_local(_fake(steps=100000, step_s=0.01, progress_timeout_s=None, deadline_s=1.0), _parsed)
    assert 1.0 <= time.monotonic() - start < 1.0 + STARTUP_ALLOWANCE_S
    assert outcome.exit_code == 1
    assert outcome.message == "ranks 0, 1 still running after 1 s (--timeout); stopped the run"
    assert all(_gone(pid) for pid in outcome.pids)
    assert _processes_with(token) == []


def test_a_taken_port_is_retried_and_every_port_taken_is_one_message(token):
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    taken = busy.getsockname()[1]
    log = []

    class Log:
        def write(self, text):
            log.append(text)

    try:
        ports = iter([taken])
        retried = launch_local(_fake(), _parsed, port_picker=lambda: next(ports, None) or free_port(), log=Log())
        every = launch_local(_fake(), _parsed, port_picker=lambda: taken, port_tries=2, log=Log())
    finally:
        busy.close()
    assert retried.exit_code == 0, retried.message
    assert [item["rank"] for item in retried.result] == [0, 1]
    assert len(retried.pids) == 4 and all(_gone(pid) for pid in retried.pids)
    assert any(f"port {taken} was taken (errno 98)" in line and "retrying" in line for line in log)
    assert every.exit_code == 1 and every.result is None
    assert every.message == "every port tried was taken (errno 98, EADDRINUSE) in 2 tries"
    assert _processes_with(token) == []


def test_bench_cli_exits_1_naming_the_failed_rank(token):
    """The real worker through `zeroplan bench`: rank 1 dies after joining the group (step 3)."""
    env = dict(os.environ, ZEROPLAN_BENCH_FAULT="1:exit:3")
    done = subprocess.run([sys.executable, "-m", "zeroplan.bench", "--nproc", "2", *SWEEP], env=env,
                          capture_output=True, text=True, timeout=STARTUP_ALLOWANCE_S)
    assert done.returncode == 1
    assert "zeroplan: error: rank 1 exited with code 17; its last lines:" in done.stderr
    assert done.stdout == ""
    assert _processes_with(token) == []


def test_ctrl_c_leaves_no_process_behind(token):
    env = dict(os.environ, ZEROPLAN_BENCH_FAULT="1:hang:1")  # keeps the run alive until we interrupt it
    parent = subprocess.Popen([sys.executable, "-m", "zeroplan.bench", "--nproc", "2", "--timeout", "120",
                               *SWEEP], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + STARTUP_ALLOWANCE_S
        while len(_processes_with(token)) < 3 and time.monotonic() < deadline:  # launcher + 2 ranks
            time.sleep(0.05)
        ranks = [pid for pid in _processes_with(token) if pid != parent.pid]
        assert len(ranks) == 2
        parent.send_signal(signal.SIGINT)
        _, err = parent.communicate(timeout=STARTUP_ALLOWANCE_S)  # ranks still importing torch on a busy machine
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert parent.returncode == 130
    assert "interrupted" in err
    assert all(_gone(pid) for pid in ranks)
    assert _processes_with(token) == []


def test_a_ctrl_c_while_a_rank_is_being_spawned_leaves_none_behind(token, monkeypatch):
    """The interrupt lands inside Popen, after rank 0's process exists but before Popen returns it:
    the launcher must still know that rank, kill it and report the run as interrupted."""
    real_popen, sent = subprocess.Popen, []

    def popen_then_interrupt(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        if not sent:
            sent.append(proc.pid)
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs before this call returns
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen_then_interrupt)
    outcome = launch_local(_fake(steps=1000, step_s=0.01), _parsed)
    assert outcome.exit_code == 130 and outcome.message == "interrupted; stopped every rank"
    assert sent and sent[0] in outcome.pids and all(_gone(pid) for pid in outcome.pids)
    assert _processes_with(token) == []


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
    start = time.monotonic()
    script = [[0, 0]] * 8 + [[1, 0]] * 4 + [[1, 1], [2, 1], [3, 1]]  # ~1.5 s of start-up, then rank 1 stalls
    state, rank, message = _watch(_FakeRanks(script), 0.5, 60)
    assert time.monotonic() - start >= 1.3 + 0.5  # readings >= 0.1 s apart: the last change is >= 1.3 s in
    assert (state, rank) == ("failed", 1)
    assert message.startswith("rank 1 made no progress for 0.5 s (stuck at step 1 while the others reached step 3)")


def test_a_rank_that_never_gets_ready_is_named_as_not_started():
    state, rank, message = _watch(_FakeRanks([[1, 0]]), 0.2, 0.5)
    assert (state, rank) == ("failed", 1)
    assert message.startswith("rank 1 did not start within 0.5 s")


def test_a_stopped_rank_ends_the_run_within_the_timeout(token):
    """A rank stopped mid-run (SIGSTOP: it neither advances nor exits, and a SIGTERM waits for it) ends the run
    after the no-progress timeout and the kill grace (issue 23, item 7: the run once went on 48 s past
    --timeout 10); the stopped rank is killed too."""
    import signal
    import threading

    stopped: list[int] = []

    def stop_one() -> None:
        deadline = time.monotonic() + STARTUP_ALLOWANCE_S
        while time.monotonic() < deadline and not stopped:
            ranks = sorted(_processes_with(token))
            if len(ranks) >= 2:
                time.sleep(1.0)  # both ready and ticking
                os.kill(ranks[-1], signal.SIGSTOP)
                stopped.append(ranks[-1])
            time.sleep(0.05)

    watcher = threading.Thread(target=stop_one)
    watcher.start()
    start = time.monotonic()
    outcome = launch_local(_fake(steps=300, step_s=0.02, progress_timeout_s=2.0), _parsed)  # rank 0: 6 s
    watcher.join()
    assert stopped and outcome.exit_code == 1 and "made no progress for 2 s" in outcome.message
    assert time.monotonic() - start < 2.0 + STARTUP_ALLOWANCE_S
    assert all(_gone(pid) for pid in outcome.pids) and _processes_with(token) == []
