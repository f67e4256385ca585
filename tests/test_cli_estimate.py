"""`zeroplan estimate` end to end: the JSON contract, formats, scenarios from the papers and seeds."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from zeroplan.cli.app import app, main
from zeroplan.core.memory import deepspeed_estimator as ds

runner = CliRunner()


def run_json(*args: str) -> dict:
    result = runner.invoke(app, ["estimate", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_default_table_runs():
    result = runner.invoke(app, ["estimate", "--params", "13e9", "--gpus", "8"])
    assert result.exit_code == 0, result.output
    assert "ZeRO-2" in result.stdout and "Recommendation" in result.stdout and "GiB" in result.stdout
    assert "a100-80g (the default" in result.stdout  # the default GPU is printed as an assumption


def test_json_contract():
    data = run_json("--params", "13e9", "--gpus", "8")
    assert {"inputs", "model", "cluster", "parallel", "options", "recommendation"} <= data.keys()
    assert data["model"]["params"] == 13_000_000_000
    assert data["parallel"] == {"world": 8, "dp": 8, "tp": 1, "pp": 1, "dp_span": "intra_node"}
    assert len(data["options"]) == 11
    for option in data["options"]:
        assert option["stage"] in (0, 1, 2, 3)
        assert option["offload_optimizer"] in ("none", "cpu", "nvme")
        assert option["offload_params"] in ("none", "cpu", "nvme")
        assert option["convention"] == "paper"
        parts = option["gpu_bytes"]
        assert set(parts) == {"params", "gradients", "optimizer_states", "activations", "buffers", "total"}
        assert all(isinstance(v, int) and v >= 0 for v in parts.values())
        assert parts["total"] == sum(v for k, v in parts.items() if k != "total")
        for key in ("cpu_bytes_per_node", "nvme_bytes_per_node", "comm_bytes_per_gpu_per_step"):
            assert isinstance(option[key], int)
        assert isinstance(option["comm_seconds_per_step"], float) and isinstance(option["fits"], bool)
    recommendation = data["recommendation"]
    assert set(recommendation) >= {"stage", "offload_optimizer", "offload_params", "reason"}
    assert recommendation["stage"] == 2 and recommendation["offload_optimizer"] == "none"
    # The reason names the deciding numbers.
    assert "ZeRO-1 needs" in recommendation["reason"] and "GiB" in recommendation["reason"]


def test_zero_offload_headline_13b_on_one_a100():
    """ZeRO-Offload (arXiv 2101.06840): 13B trains on one GPU once optimizer states go to the CPU."""
    data = run_json("--params", "13e9", "--gpus", "1", "--gpu", "a100-80g")
    rec = data["recommendation"]
    assert rec["offload_optimizer"] == "cpu" and rec["offload_params"] == "none"
    assert not any(o["fits"] for o in data["options"] if o["offload_optimizer"] == "none")


def test_zero_infinity_70b_on_four_3090s():
    """Seed 003's ZeRO-Infinity case: 70B on a 4×3090 workstation needs stage 3 with NVMe in the tier."""
    data = run_json("--params", "70e9", "--gpus", "4", "--cluster", "workstation-4x3090")
    rec = data["recommendation"]
    assert rec["stage"] == 3 and "nvme" in (rec["offload_optimizer"], rec["offload_params"])
    cpu_only = [o for o in data["options"] if o["offload_optimizer"] == "cpu"]
    assert cpu_only and not any(o["fits"] for o in cpu_only)


def test_nothing_fits_names_the_fewest_gpus():
    data = run_json("--params", "1T", "--gpus", "8", "--stage", "3", "--offload-optimizer", "none")
    rec = data["recommendation"]
    assert rec["stage"] is None and rec["fewest_gpus"] > 8
    more = run_json("--params", "1T", "--gpus", str(rec["fewest_gpus"]), "--stage", "3", "--offload-optimizer", "none")
    assert rec["fewest_gpus"] % 8 == 0  # whole nodes of 8 beyond one node
    fewer = run_json("--params", "1T", "--gpus", str(rec["fewest_gpus"] - 8), "--stage", "3",
                     "--offload-optimizer", "none")
    assert more["recommendation"]["stage"] == 3 and fewer["recommendation"]["stage"] is None


def test_deepspeed_convention_t5_3b_to_the_byte():
    data = run_json("--params", "2851e6", "--largest-layer-params", "32e6", "--gpus", "8", "--convention", "deepspeed")
    rows = {(o["stage"], o["offload_optimizer"], o["offload_params"]): o for o in data["options"]}
    assert len(rows) == 5
    for (opt, par), (cpu_gib, gpu_gib) in {("cpu", "cpu"): (71.69, 0.12), ("cpu", "none"): (63.72, 0.78),
                                           ("none", "none"): (1.43, 6.09)}.items():
        row = rows[(3, opt, par)]
        gpu = row["gpu_bytes"]["total"] - row["gpu_bytes"]["activations"]
        assert (round(row["cpu_bytes_per_node"] / 2**30, 2), round(gpu / 2**30, 2)) == (cpu_gib, gpu_gib)
    cpu, gpu = ds.zero2(2_851_000_000, 8, 1, cpu_offload=False)
    assert rows[(2, "none", "none")]["cpu_bytes_per_node"] == cpu


def test_csv_has_a_row_per_option_and_exact_bytes():
    result = runner.invoke(app, ["estimate", "--params", "7B", "--gpus", "8", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 11 and int(rows[0]["gpu_bytes_params"]) == 14_000_000_000
    assert sum(r["recommended"] == "True" for r in rows) == 1


def test_markdown_and_explain():
    result = runner.invoke(app, ["estimate", "--params", "13e9", "--gpus", "8", "--explain", "--units", "si"])
    assert result.exit_code == 0
    assert "PΨ + (G+K)Ψ/N_d = 2×13.0B + 14×13.0B/8 = 26.00 GB + 22.75 GB = 48.75 GB" in result.stdout
    md = runner.invoke(app, ["estimate", "--params", "13e9", "--gpus", "8", "-f", "markdown"])
    assert md.stdout.startswith("| option |") and "**Recommendation:**" in md.stdout


def test_output_file(tmp_path):
    target = tmp_path / "plan.json"
    result = runner.invoke(app, ["estimate", "--params", "13e9", "--gpus", "8", "-f", "json", "-o", str(target)])
    assert result.exit_code == 0 and result.stdout == ""
    assert json.loads(target.read_text())["model"]["params"] == 13_000_000_000


def test_tp_pp_and_zeropp_flags():
    data = run_json("--params", "175e9", "--gpus", "1024", "--stage", "3", "--zeropp", "qwz,hpz,qgz")
    assert data["parallel"]["dp"] == 1024 and data["parallel"]["dp_span"] == "inter_node"
    base = run_json("--params", "175e9", "--gpus", "1024", "--stage", "3")
    inter = lambda d: [o for o in d["options"] if o["offload_params"] == "none"][0]["comm_bytes_by_link"]["inter_node"]  # noqa: E731
    assert inter(data) * 4 == pytest.approx(inter(base), rel=1e-6)  # 3Ψ → 0.75Ψ across nodes
    # With tp = 8 filling each node, an hpZ group of 8 data-parallel ranks spans 8 nodes: priced there.
    wide = run_json("--params", "175e9", "--gpus", "1024", "--tp", "8", "--stage", "3", "--offload-optimizer", "none",
                    "--zeropp", "hpz")
    assert wide["options"][0]["comm_bytes_by_link"]["intra_node"] == 0


def test_units_si_changes_display_not_bytes():
    iec = run_json("--params", "13e9", "--gpus", "8")
    si = run_json("--params", "13e9", "--gpus", "8", "--units", "si")
    assert iec["options"] == si["options"]
    assert "GiB" in iec["recommendation"]["reason"] and " GB" in si["recommendation"]["reason"]


def test_main_exits_zero(capsys):
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--params", "13e9", "--gpus", "8", "-f", "json"])
    assert info.value.code == 0
    assert json.loads(capsys.readouterr().out)["parallel"]["world"] == 8


def test_pipeline_keeps_to_stages_deepspeed_supports():
    data = run_json("--params", "175e9", "--gpus", "1024", "--tp", "8", "--pp", "8")
    assert data["parallel"]["dp"] == 16
    assert {o["stage"] for o in data["options"]} == {0, 1}


def test_estimate_hybrid_sharding_partitions_over_the_shard_group(tmp_path):
    """Issue 21 item 2: `estimate --dp-shard 8` on 64 GPUs holds the model states of full sharding over 8 ranks and
    adds the AllReduce of the gradient partition across the 8 replicas to its traffic; bad groups are refused."""
    import json
    import subprocess
    import sys

    def run(*args):
        done = subprocess.run([sys.executable, "-m", "zeroplan", "estimate", "--model", "llama-3-8b", "--gpu",
                               "h100-80g", "--stage", "3", "--offload-optimizer", "none", "--offload-params", "none",
                               "--format", "json", *args], capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr

    code, hybrid, err = run("--gpus", "64", "--dp-shard", "8")
    assert code == 0, err
    code, node, err = run("--gpus", "8")
    assert code == 0, err
    code, full, err = run("--gpus", "64")
    assert code == 0, err
    rows = [json.loads(text)["options"][0] for text in (hybrid, node, full)]
    for part in ("params", "gradients", "optimizer_states"):
        assert rows[0]["gpu_bytes"][part] == rows[1]["gpu_bytes"][part] > rows[2]["gpu_bytes"][part]
    assert rows[0]["breakdown"]["comm/inter_node_bytes"] > 0 == rows[1]["breakdown"]["comm/inter_node_bytes"]
    code, _, err = run("--gpus", "64", "--dp-shard", "6")
    assert code == 2 and "--dp-shard" in err


def test_estimate_fp8_keeps_mixed_precision_states_and_says_so():
    """--precision fp8: the model states are mixed precision's (FP8 copies are per use), said in the assumptions;
    a GPU without FP8 tensor cores is refused, naming --precision."""
    import json
    import subprocess
    import sys

    def run(*args):
        done = subprocess.run([sys.executable, "-m", "zeroplan", "estimate", "--model", "llama-3-8b", "--gpus", "8",
                               "--stage", "3", "--format", "json", *args], capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr

    code, fp8, err = run("--gpu", "h100-80g", "--precision", "fp8")
    assert code == 0, err
    code, bf16, err = run("--gpu", "h100-80g", "--precision", "bf16")
    assert code == 0, err
    fp8, bf16 = json.loads(fp8), json.loads(bf16)
    assert fp8["options"][0]["gpu_bytes"] == bf16["options"][0]["gpu_bytes"]
    assert any(line.startswith("fp8 (tensorwise)") for line in fp8["assumptions"])
    code, _, err = run("--gpu", "a100-80g", "--precision", "fp8")
    assert code == 2 and "--precision" in err and "FP8" in err
