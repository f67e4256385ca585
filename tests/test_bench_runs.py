"""Real gloo runs at small sizes: 2 and 4 local ranks, and joining a launcher's environment."""

import csv
import io
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from zeroplan.bench.config import build_config  # noqa: E402
from zeroplan.distributed.launcher import launch_local  # noqa: E402
from zeroplan.bench.report import result_rows  # noqa: E402
from zeroplan.distributed.rendezvous import free_port  # noqa: E402
from zeroplan.inputs.calibration import load_calibration  # noqa: E402
from zeroplan.core.hardware import Link  # noqa: E402

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
                 "SLURM_PROCID", "SLURM_NTASKS", "ZEROPLAN_BENCH_FAULT")


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update(extra)
    return env


def _run_module(args, env, timeout=60):
    return subprocess.run([sys.executable, "-m", "zeroplan.bench", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_two_local_ranks_report_json_and_save_a_calibration(tmp_path):
    profile = tmp_path / "calib.yaml"
    done = _run_module(["--nproc", "2", "--backend", "gloo", "--min-bytes", "256KiB", "--max-bytes", "4MiB",
                        "--factor", "4", "--warmup", "1", "--iters", "3", "--format", "json",
                        "--save-calibration", str(profile)], _clean_env())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["meta"]["backend"] == "gloo" and report["meta"]["world_size"] == 2
    rows = report["results"]
    assert {r["collective"] for r in rows} == {"all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce"}
    assert sorted({r["size_bytes"] for r in rows}) == [262144, 1048576, 4194304]
    for row in rows:
        factor = 1.0 if row["collective"] == "all_reduce" else 0.5
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor)
        assert row["time_us_min"] <= row["time_us_median"] <= row["time_us_max"]
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
    link = calibration.link("all_reduce", intra_node=True)
    if calibration.fits["all_reduce"]["intra_node"].bandwidth_bytes_per_s is not None:
        assert isinstance(link, Link) and link.source == f"calibration {profile}"
    assert calibration.link("all_gather", intra_node=False) is None  # one node: no inter-node span


def test_four_local_ranks_use_the_four_rank_factors():
    config = build_config(collectives="all_gather_into_tensor,reduce_scatter_tensor,all_reduce",
                          min_bytes="64KiB", max_bytes="256KiB", factor=4, dtype="bfloat16", warmup=1, iters=2,
                          backend="gloo", nproc=4, timeout=60, output_format="json", save_calibration=None)
    outcome = launch_local(config, 4)
    assert outcome.exit_code == 0, outcome.message
    rows = result_rows(outcome.result)
    assert len(rows) == 6 and all(r["ranks"] == 4 and r["dtype"] == "bfloat16" for r in rows)
    for row in rows:
        factor = 1.5 if row["collective"] == "all_reduce" else 0.75
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor)
        wire = 1.5 if row["collective"] != "all_gather_into_tensor" else 0.75  # gloo RS moves AllReduce bytes
        assert row["wire_bytes_per_rank"] == wire * row["size_bytes"]
        assert row["count"] == row["size_bytes"] // 2


def _join(world, args, node_of=lambda rank: "0"):
    port = str(free_port())
    procs = [subprocess.Popen(
        [sys.executable, "-m", "zeroplan.bench", *args],
        env=_clean_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=port, GROUP_RANK=node_of(rank)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(world)]
    try:
        return [(p.wait(timeout=60), *p.communicate()) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_joining_a_launchers_environment_with_two_processes():
    """What torchrun does: set RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT and start each rank itself."""
    runs = _join(2, ["--backend", "gloo", "--collectives", "all_reduce,all_gather_into_tensor",
                     "--min-bytes", "64KiB", "--max-bytes", "256KiB", "--factor", "4", "--iters", "2",
                     "--format", "csv"])
    (code0, out0, err0), (code1, out1, err1) = runs
    assert code0 == 0 and code1 == 0, err0 + err1
    assert out1 == ""  # only rank 0 reports
    rows = list(csv.DictReader(io.StringIO(out0)))
    assert len(rows) == 4 and {r["span"] for r in rows} == {"intra_node"} and {r["ranks"] for r in rows} == {"2"}


def test_two_nodes_measure_both_spans():
    """Four ranks as 2 nodes x 2 (torchrun's GROUP_RANK): the world is inter-node, each node intra-node."""
    runs = _join(4, ["--backend", "gloo", "--collectives", "all_gather_into_tensor", "--min-bytes", "64KiB",
                     "--max-bytes", "256KiB", "--factor", "4", "--iters", "2", "--format", "json"],
                 node_of=lambda rank: str(rank // 2))
    assert all(code == 0 for code, _, _ in runs), [err for _, _, err in runs]
    report = json.loads(runs[0][1])
    assert report["meta"]["nodes"] == 2 and report["meta"]["gpus_per_node"] == 2
    spans = {(r["span"], r["ranks"]) for r in report["results"]}
    assert spans == {("inter_node", 4), ("intra_node", 2)}
    assert {(f["span"], f["ranks"]) for f in report["fits"]} == spans
