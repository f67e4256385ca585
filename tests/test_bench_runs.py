"""Real gloo runs at small sizes: 2 local ranks through the CLI, and joining a launcher's environment
(4 ranks as 2 nodes x 2 without numpy, a taken port). Each run pays the ranks' torch start-up,
so each checks as much as it can."""

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")

from zeroplan.bench.result import fits_on_mean  # noqa: E402
from zeroplan.core.hardware import Link  # noqa: E402
from zeroplan.distributed.rendezvous import free_port  # noqa: E402
from zeroplan.inputs.calibration import load_calibration  # noqa: E402

pytestmark = pytest.mark.slow  # real runs / traces / pre-commit: `pytest -m "not slow"` skips them

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
                 "SLURM_PROCID", "SLURM_NTASKS", "ZEROPLAN_BENCH_FAULT")
ALLOWANCE_S = 120  # torch start-up on a busy 2-core machine


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update(extra)
    return env


def _run_module(args, env, timeout=ALLOWANCE_S):
    return subprocess.run([sys.executable, "-m", "zeroplan.bench", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_two_local_ranks_report_json_and_save_a_calibration_fitted_on_mean_times(tmp_path):
    profile = tmp_path / "calib.yaml"
    done = _run_module(["--nproc", "2", "--backend", "gloo", "--min-bytes", "64KiB", "--max-bytes", "1MiB",
                        "--factor", "4", "--warmup", "1", "--iters", "3", "--format", "json",
                        "--save-calibration", str(profile)], _clean_env())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["meta"]["backend"] == "gloo" and report["meta"]["world_size"] == 2
    rows = report["results"]
    assert {r["collective"] for r in rows} == {"all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce"}
    assert sorted({r["size_bytes"] for r in rows}) == [65536, 262144, 1048576]
    for row in rows:
        factor = 1.0 if row["collective"] == "all_reduce" else 0.5
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / (row["time_us_mean"] * 1e-6) / 1e9)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor)
        assert row["time_us_min"] <= row["time_us_median"] <= row["time_us_max"]
        assert row["time_us_min"] <= row["time_us_mean"] <= row["time_us_max"]
        assert row["count"] == row["size_bytes"] // 4
        if row["collective"] == "reduce_scatter_tensor":  # gloo: an AllReduce underneath
            assert row["implementation"] == "allreduce+chunk"
            assert row["wire_bytes_per_rank"] == row["size_bytes"]  # 2(n-1)/n·S with n = 2
    assert any("#118911" in note for note in report["notes"])
    assert "calibration saved" in done.stderr

    calibration = load_calibration(profile)
    assert calibration.world_size == 2 and calibration.nodes == 1 and calibration.gpus_per_node == 2
    assert calibration.device.startswith("CPU") and calibration.torch_version
    assert len(calibration.measurements) == 9
    assert set(calibration.fits) == {"all_gather", "reduce_scatter", "all_reduce"}
    # the fits are on the mean times (what a loop of collectives sees), not the medians
    on_mean = fits_on_mean(calibration.measurements, [r["time_us_mean"] * 1e-6 for r in rows], "gloo")
    for collective, spans in calibration.fits.items():
        assert spans["intra_node"].latency_s == pytest.approx(on_mean[collective]["intra_node"].latency_s, rel=1e-6)
    link = calibration.link("all_reduce", intra_node=True)
    if calibration.fits["all_reduce"]["intra_node"].bandwidth_bytes_per_s is not None:
        assert isinstance(link, Link) and link.source == f"calibration {profile}"
    assert calibration.link("all_gather", intra_node=False) is None  # one node: no inter-node span


def _join(world, args, node_of=lambda rank: "0", port=None, **extra):
    port = str(port or free_port())
    procs = [subprocess.Popen(
        [sys.executable, "-m", "zeroplan.bench", *args],
        env=_clean_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=port, GROUP_RANK=node_of(rank), **extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(world)]
    try:
        return [(p.wait(timeout=ALLOWANCE_S), *p.communicate()) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_joining_four_ranks_as_two_nodes_without_numpy_measures_both_spans(tmp_path):
    """What torchrun does: set RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT and start each rank itself. Four
    ranks as 2 nodes x 2 (torchrun's GROUP_RANK): the world is inter-node (4 ranks), each node intra-node
    (2 ranks), each with its own nccl-tests factor. numpy is no dependency: here `import numpy` fails,
    as after `pip install zeroplan[bench]` (torch's *_object collectives died with "Numpy is not available")."""
    blocker = tmp_path / "numpy"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    runs = _join(4, ["--backend", "gloo", "--collectives", "all_gather_into_tensor,all_reduce", "--min-bytes",
                     "64KiB", "--max-bytes", "256KiB", "--factor", "4", "--iters", "2", "--warmup", "0",
                     "--dtype", "bfloat16", "--format", "json"],
                 node_of=lambda rank: str(rank // 2), PYTHONPATH=path)
    assert all(code == 0 for code, _, _ in runs), [err for _, _, err in runs]
    assert all(out == "" for _, out, _ in runs[1:])  # only rank 0 reports
    report = json.loads(runs[0][1])
    assert report["meta"]["nodes"] == 2 and report["meta"]["gpus_per_node"] == 2
    spans = {(r["span"], r["ranks"]) for r in report["results"]}
    assert spans == {("inter_node", 4), ("intra_node", 2)}
    assert {(f["span"], f["ranks"]) for f in report["fits"]} == spans
    assert len(report["results"]) == 2 * 2 * 2  # collectives x spans x sizes
    for row in report["results"]:
        n = row["ranks"]
        factor = 2 * (n - 1) / n if row["collective"] == "all_reduce" else (n - 1) / n
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor)
        assert row["wire_bytes_per_rank"] == round(factor * row["size_bytes"])  # ring collectives
        assert row["dtype"] == "bfloat16" and row["count"] == row["size_bytes"] // 2


def test_a_taken_master_port_is_one_line_and_every_rank_honours_the_timeout():
    """Rank 0 cannot listen (EADDRINUSE): one clear line, exit 1. Rank 1 reaches whatever holds the port
    and would wait far beyond --timeout inside torch; it stops at --timeout with one line too."""
    import socket

    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        start = time.monotonic()
        runs = _join(2, ["--backend", "gloo", "--collectives", "all_reduce", "--max-bytes", "64KiB", "--timeout",
                         "3"], port=port)
        elapsed = time.monotonic() - start
    finally:
        busy.close()
    (code0, out0, err0), (code1, out1, err1) = runs
    assert code0 == 1 and out0 == ""
    assert err0.strip().splitlines() == [
        f"zeroplan: error: rank 0: cannot listen on 127.0.0.1:{port}: "
        "the port is taken (errno 98, EADDRINUSE); set MASTER_PORT to a free port"]
    assert code1 == 1 and out1 == ""
    assert len(err1.strip().splitlines()) == 1 and "rank 1: no rendezvous with 127.0.0.1:" in err1
    assert "within 3 s (--timeout)" in err1
    assert elapsed < 3 + ALLOWANCE_S
