"""Calibration profiles: build from measurements, save, load, turn into Links; bad files fail cleanly."""

import pytest

from zeroplan.inputs.calibration import (
    Calibration, Measurement, build_fits, load_calibration, save_calibration,
)
from zeroplan.core.timing.collectives import ring_time
from zeroplan.core.errors import InputError
from zeroplan.core.hardware import Link

SIZES = [1 << k for k in range(16, 28, 2)]
LINKS = {  # (collective, span): (latency per step, bandwidth)
    ("all_gather", "intra_node"): (4e-6, 200e9),
    ("reduce_scatter", "intra_node"): (5e-6, 180e9),
    ("all_reduce", "intra_node"): (6e-6, 190e9),
    ("all_gather", "inter_node"): (15e-6, 45e9),
}


def _measurements(world=16, per_node=8):
    rows = []
    for (collective, span), (alpha, bandwidth) in LINKS.items():
        ranks = per_node if span == "intra_node" else world
        for size in SIZES:
            t = ring_time(collective, size, ranks, alpha, bandwidth)
            rows.append(Measurement(collective=collective, span=span, ranks=ranks, size_bytes=size,
                                    time_s_median=t, time_s_min=t * 0.98, time_s_max=t * 1.05))
    return rows


def _calibration(backend="nccl"):
    rows = _measurements()
    return Calibration(created="2025-01-01T00:00:00+00:00", backend=backend, dtype="bfloat16", world_size=16,
                       nodes=2, gpus_per_node=8, hostnames=["node-a", "node-b"], device="NVIDIA H200",
                       torch_version="2.13.0", fits=build_fits(rows, backend), measurements=rows)


def test_save_load_round_trip_returns_links(tmp_path):
    path = tmp_path / "calib.yaml"
    original = _calibration()
    save_calibration(original, path)
    loaded = load_calibration(path)
    assert loaded.model_dump() == original.model_dump()
    for (collective, span), (alpha, bandwidth) in LINKS.items():
        link = loaded.link(collective, intra_node=span == "intra_node")
        assert isinstance(link, Link)
        assert link.bandwidth_bytes_per_s == pytest.approx(bandwidth, rel=1e-6)
        assert isinstance(link.bandwidth_bytes_per_s, int)
        assert link.latency_s == pytest.approx(alpha, rel=1e-6)
        assert link.source == f"calibration {path}"
    # torch names work too; spans that were not measured give None so presets are used instead.
    assert loaded.link("all_gather_into_tensor", intra_node=True) == loaded.link("all_gather", True)
    assert loaded.link("reduce_scatter_tensor", intra_node=False) is None
    assert loaded.link("all_reduce", intra_node=False) is None


def test_profile_records_where_it_was_measured(tmp_path):
    path = tmp_path / "calib.yaml"
    save_calibration(_calibration(), path)
    text = path.read_text()
    for key in ("backend: nccl", "world_size: 16", "nodes: 2", "gpus_per_node: 8", "node-a",
                "device: NVIDIA H200", "torch_version:", "created:", "fits:", "measurements:", "model:"):
        assert key in text


def test_fit_quality_is_recorded():
    fit = _calibration().fits["all_gather"]["inter_node"]
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.max_relative_residual < 1e-9
    assert fit.points == len(SIZES)
    assert fit.ranks == 16


def test_gloo_reduce_scatter_is_marked():
    fits = _calibration(backend="gloo").fits
    assert fits["reduce_scatter"]["intra_node"].implementation == "allreduce+chunk"
    assert fits["all_gather"]["intra_node"].implementation == "ring"


def test_unsaved_calibration_links_say_so():
    assert _calibration().link("all_gather", True).source == "calibration (unsaved)"


def _write(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def test_malformed_yaml_names_file_line_and_column(tmp_path):
    path = _write(tmp_path, "backend: gloo\nfits: {all_gather: [1, 2\n")
    with pytest.raises(InputError) as info:
        load_calibration(path)
    message = str(info.value)
    assert str(path) in message and "line 3, column 1" in message and "malformed YAML" in message
    assert "\n" not in message


def test_unknown_key_is_rejected_with_its_line(tmp_path):
    path = tmp_path / "calib.yaml"
    save_calibration(_calibration(), path)
    text = path.read_text().replace("nodes: 2\n", "nodes: 2\nbandwith: 5\n")
    path.write_text(text)
    line = text.splitlines().index("bandwith: 5") + 1
    with pytest.raises(InputError, match=rf"line {line}, column 1: unknown key 'bandwith'"):
        load_calibration(path)


def test_unknown_collective_and_bad_values_are_rejected(tmp_path):
    path = tmp_path / "calib.yaml"
    save_calibration(_calibration(), path)
    good = path.read_text()
    path.write_text(good.replace("  all_gather:\n", "  broadcast:\n", 1))
    with pytest.raises(InputError, match="fits.broadcast"):
        load_calibration(path)
    path.write_text(good.replace("world_size: 16", "world_size: lots"))
    with pytest.raises(InputError, match="world_size"):
        load_calibration(path)


def test_missing_and_non_mapping_files(tmp_path):
    with pytest.raises(InputError, match="nope.yaml: no such file"):
        load_calibration(tmp_path / "nope.yaml")
    with pytest.raises(InputError, match="expected a mapping"):
        load_calibration(_write(tmp_path, "- 1\n- 2\n"))


def test_save_to_missing_folder_is_input_error(tmp_path):
    with pytest.raises(InputError, match="--save-calibration"):
        save_calibration(_calibration(), tmp_path / "no" / "such" / "calib.yaml")


def test_estimate_uses_the_calibration(tmp_path):
    """Round trip: a saved profile changes estimate's communication time, and the output says so."""
    import json

    from typer.testing import CliRunner

    from zeroplan.cli.app import app

    path = tmp_path / "calib.yaml"
    save_calibration(_calibration(), path)
    args = ["estimate", "--params", "13e9", "--gpus", "16", "--stage", "3", "--offload-optimizer", "none",
            "--format", "json"]
    preset = json.loads(CliRunner().invoke(app, args).stdout)
    calibrated = json.loads(CliRunner().invoke(app, [*args, "--calibration", str(path)]).stdout)
    (before,), (after,) = preset["options"], calibrated["options"]
    assert before["comm_bytes_per_gpu_per_step"] == after["comm_bytes_per_gpu_per_step"]
    # 16 GPUs on 8-GPU nodes: the DP group crosses nodes. Measured inter-node all_gather is 45 GB/s
    # against the preset's 25 GB/s per GPU; reduce_scatter was not measured across nodes: preset link.
    from zeroplan.inputs import presets

    preset_link = presets.cluster("dgx-a100").inter_node_link
    measured = load_calibration(path).link("all_gather", intra_node=False)
    volume = -(-2 * 13 * 10**9 * 15 // 16)
    expected = (2 * (15 * measured.latency_s * 260 + volume / measured.bandwidth_bytes_per_s)  # 260 prefetch buckets
                + 15 * preset_link.latency_s * 26 + volume / preset_link.bandwidth_bytes_per_s)  # 26 reduce buckets
    assert after["comm_seconds_per_step"] == pytest.approx(expected, rel=1e-9)
    assert after["comm_seconds_per_step"] < before["comm_seconds_per_step"]
    assert any("calibration" in note and "45.0 GB/s" in note for note in calibrated["assumptions"])
