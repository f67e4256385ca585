"""What a newcomer running the documented commands hit (issue 23, item 11): op-level selective recompute, which
plan recommends, is taken by every command; plan --write-deepspeed says what the file holds and how to check it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

import zeroplan

CONFIGS = Path(__file__).parent / "configs"


def test_plan_recommending_selective_op_writes_its_deepspeed_config_and_the_check_passes(cli, tmp_path,
                                                                                       monkeypatch):
    """The command of docs/plan.md with op-level selective recompute pinned (its top plan used it until the step
    time priced torchtitan's policy, which recomputes every second matmul too: no recompute at a smaller
    micro-batch now ranks first); the config is written, the table printed, and the check command it prints passes
    on the file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text((CONFIGS / "llama-2-7b-hf.json").read_text())
    code, out, err = cli("plan", "--model", "./config.json", "--cluster", "dgx-h100", "--gpus", "64",
                         "--global-batch", "512", "--recompute", "selective-op", "--write-deepspeed", "ds.json",
                         "--no-progress", "-f", "json")
    assert code == 0, err
    top = json.loads(out)["top"][0]
    assert top["recompute"] == "selective-op"  # the case the newcomer met
    written = json.loads((tmp_path / "ds.json").read_text())
    assert written["train_micro_batch_size_per_gpu"] == top["micro_batch"]
    lines = err.splitlines()
    assert lines[0].startswith("wrote ds.json: DeepSpeed config for plan #1 (dp 64 × tp 1 × pp 1, ZeRO-2")
    command = next(line for line in lines if line.startswith("check it with `"))[len("check it with `"):-1]
    words = shlex.split(command)
    assert words[:3] == ["zeroplan", "check", "ds.json"] and "--recompute" in words
    code, out, err = cli(*words[1:])
    assert code == 0, out + err


def test_plan_write_deepspeed_names_tp_and_pp_and_the_check_judges_that_layout(cli, tmp_path):
    target = tmp_path / "ds.json"
    code, _, err = cli("plan", "--model", "llama-2-13b", "--gpus", "16", "--global-batch", "64", "--tp", "2",
                       "--pp", "2", "--no-progress", "--write-deepspeed", str(target))
    assert code == 0, err
    assert "set them in your launcher and model code: tp 2, pp 2" in err
    command = err.split("check it with `", 1)[1].split("`", 1)[0]
    words = shlex.split(command)
    assert words[words.index("--tp") + 1] == "2" and words[words.index("--pp") + 1] == "2"
    code, out, err = cli(*words[1:], "-f", "json")
    assert code == 0, out + err
    # without tp and pp the same file breaks the batch identity: the flags printed are what makes it pass
    without = [w for i, w in enumerate(words[1:]) if w not in ("--tp", "--pp") and words[i] not in ("--tp", "--pp")]
    code, out, _ = cli(*without, "-f", "json")
    assert code == 1 and "ZP001" in out


@pytest.mark.parametrize("command", [
    ("estimate", "--model", "llama-2-7b", "--gpus", "8"),
    ("export", "deepspeed", "--model", "llama-2-7b", "--gpus", "8", "--force"),
])
def test_selective_op_is_a_recompute_mode_of_every_command(cli, command):
    code, out, err = cli(*command, "--recompute", "selective-op")
    assert code == 0, err


def test_selective_op_in_check_and_the_api(tmp_path):
    config = tmp_path / "ds_config.json"
    config.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                                  "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}))
    assert not zeroplan.check(config, model="llama-2-7b", gpus=8, recompute="selective-op").failed
    result = zeroplan.estimate(model="llama-2-7b", gpus=8, recompute="selective-op")
    none = zeroplan.estimate(model="llama-2-7b", gpus=8, recompute="none")
    # op-level checkpointing keeps less than no recompute: never the same figure silently
    assert result.option("ZeRO-3").gpu_bytes["activations"] < none.option("ZeRO-3").gpu_bytes["activations"]
    assert any("selective-op" in line for line in result.assumptions)


def test_estimate_with_selective_op_matches_the_plan_row(cli):
    """estimate of plan's own top row gives plan's activation bytes (one formula)."""
    code, out, _ = cli("plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--recompute",
                       "selective-op", "--tp", "1", "--pp", "1", "--stages", "3", "--no-offload", "--no-progress",
                       "-f", "json")
    assert code == 0
    row = json.loads(out)["top"][0]
    code, out, _ = cli("estimate", "--model", "llama-2-7b", "--gpus", "8", "--recompute", "selective-op",
                       "--micro-batch", str(row["micro_batch"]), "--grad-accum", str(row["grad_accum"]),
                       "--stage", "3", "--offload-optimizer", "none", "--offload-params", "none",
                       "--activations", "megatron", "-f", "json")
    assert code == 0
    option = json.loads(out)["options"][0]
    assert option["gpu_bytes"]["activations"] == row["gpu_bytes_activations"]


def test_a_config_checked_itself_and_through_its_accelerate_config_reports_each_finding_once(cli, monkeypatch):
    monkeypatch.chdir(CONFIGS / "accelerate")
    code, out, err = cli("check", "../deepspeed/hf_ds_config_zero2.json", "zero2_config_file.yaml", "-f", "json")
    assert code == 0, err
    direct, through = json.loads(out)["files"]
    assert through["checked_file"] == direct["checked_file"]
    assert direct["findings"] and through["repeated"] == len(direct["findings"])
    shown = [(f["rule"], f["line"], f["message"]) for entry in (direct, through) for f in entry["findings"]]
    assert len(shown) == len(set(shown))
    code, out, _ = cli("check", "../deepspeed/hf_ds_config_zero2.json", "zero2_config_file.yaml")
    assert f"{len(direct['findings'])} notes" in out.splitlines()[-1] and "as reported above" in " ".join(out.split())
    code, out, _ = cli("check", "../deepspeed/hf_ds_config_zero2.json", "zero2_config_file.yaml", "-f", "github")
    assert len(out.splitlines()) == len(set(out.splitlines())) == len(direct["findings"])


def test_a_config_json_without_a_recorded_name_is_labelled_by_the_path_given(cli, tmp_path, monkeypatch):
    config = json.loads((CONFIGS / "llama-2-7b-hf.json").read_text())
    config.pop("_name_or_path", None)
    (tmp_path / "path" / "to").mkdir(parents=True)
    (tmp_path / "path" / "to" / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("estimate", "--model", "path/to/config.json", "--gpus", "16", "-f", "json")
    assert code == 0 and json.loads(out)["model"]["name"] == "path/to/config.json"
    snapshot = tmp_path / "hub" / "models--meta-llama--Llama-2-7b-hf" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    code, out, _ = cli("estimate", "--model", str(snapshot / "config.json"), "--gpus", "16", "-f", "json")
    assert code == 0 and json.loads(out)["model"]["name"] == "meta-llama/Llama-2-7b-hf"
