"""`zeroplan export deepspeed|plan`: what it writes, and that it passes `zeroplan check` (the round trip)."""

from __future__ import annotations

import json

import pytest
import yaml


CHOICE_FLAGS = ("--stage", "--offload-optimizer", "--offload-params", "--nvme-path")


def context_flags(flags: list[str]) -> list[str]:
    """The flags check needs: everything but the option choice."""
    kept, skip = [], False
    for flag in flags:
        if skip:
            skip = False
        elif flag in CHOICE_FLAGS:
            skip = True
        elif flag != "--force":
            kept.append(flag)
    return kept


LLAMA7 = ["--model", "llama-2-7b", "--gpus", "8", "--cluster", "dgx-a100", "--recompute", "full",
          "--micro-batch", "4", "--grad-accum", "2"]
LLAMA70 = ["--model", "llama-2-70b", "--gpus", "8", "--cluster", "dgx-a100", "--recompute", "full"]
ROUND_TRIPS = {
    "recommended": LLAMA7,
    "stage1": [*LLAMA7, "--stage", "1"],
    "stage2": [*LLAMA7, "--stage", "2"],
    "stage3-fp16": ["--model", "llama-2-13b", "--gpus", "16", "--gpu", "v100-32g", "--precision", "fp16",
                    "--recompute", "full", "--stage", "3", "--global-batch", "64"],
    "stage2-cpu": [*LLAMA7, "--stage", "2", "--offload-optimizer", "cpu"],
    "stage3-cpu-cpu": [*LLAMA70, "--stage", "3", "--offload-optimizer", "cpu", "--offload-params", "cpu"],
    "stage3-nvme": [*LLAMA70, "--stage", "3", "--offload-optimizer", "nvme", "--offload-params", "nvme",
                    "--nvme-path", "/mnt/nvme0"],
    "params-only-small-gpu": ["--params", "1.3e9", "--gpus", "4", "--gpu", "rtx3090", "--precision", "fp32"],
    "params-with-hidden": ["--params", "2e9", "--hidden", "2048", "--gpus", "4", "--gpu", "rtx3090",
                           "--global-batch", "64"],
    "tp-pp": ["--model", "llama-2-13b", "--gpus", "16", "--tp", "2", "--pp", "2", "--cluster", "dgx-a100",
              "--recompute", "full", "--micro-batch", "1", "--grad-accum", "8"],
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_export_deepspeed_passes_check(run, tmp_path, name):
    flags = ROUND_TRIPS[name]
    code, out, err = run("export", "deepspeed", *flags)
    assert code == 0, err
    target = tmp_path / "ds_config.json"
    target.write_text(out)
    code, report, err = run("check", str(target), *context_flags(flags), "--strict", "-f", "json")
    data = json.loads(report)
    assert code == 0 and data["files"][0]["findings"] == [], data["files"][0]["findings"]


@pytest.mark.parametrize("name", ["recommended", "stage3-nvme", "params-with-hidden", "tp-pp"])
def test_export_plan_passes_check_and_drives_export_deepspeed(run, tmp_path, name):
    flags = ROUND_TRIPS[name]
    plan = tmp_path / "plan.yaml"
    code, out, err = run("export", "plan", *flags, "-o", str(plan))
    assert code == 0 and out == "" and err.startswith(f"wrote {plan}: plan for "), err  # status on stderr
    code, report, err = run("check", str(plan), "--strict", "-f", "json")
    assert code == 0 and json.loads(report)["files"][0]["findings"] == [], report
    ds = tmp_path / "ds.json"
    assert run("export", "deepspeed", "--plan", str(plan), "-o", str(ds))[0] == 0
    direct = run("export", "deepspeed", *flags)[1]
    assert json.loads(ds.read_text()) == json.loads(direct)  # the plan reproduces the same config
    code, report, _ = run("check", str(ds), "--plan", str(plan), "--strict", "-f", "json")
    assert code == 0 and json.loads(report)["files"][0]["findings"] == [], report


def config(run, *flags: str) -> dict:
    code, out, err = run("export", "deepspeed", *flags)
    assert code == 0, err
    return json.loads(out)


def test_buckets_follow_hugging_face_rule_when_hidden_is_known(run):
    zero = config(run, *LLAMA7, "--stage", "3")["zero_optimization"]
    h = 4096  # llama-2-7b
    assert zero["reduce_bucket_size"] == h * h
    assert zero["stage3_prefetch_bucket_size"] == 9 * h * h // 10
    assert zero["stage3_param_persistence_threshold"] == 10 * h
    assert zero["overlap_comm"] is True


def test_buckets_default_to_deepspeed_without_a_shape(run):
    zero = config(run, "--params", "7e9", "--gpus", "8", "--cluster", "dgx-a100", "--stage", "3")["zero_optimization"]
    assert zero["reduce_bucket_size"] == 5e8 and zero["stage3_prefetch_bucket_size"] == 5e7
    assert zero["stage3_param_persistence_threshold"] == 100_000


def test_small_gpu_gets_smaller_buckets_or_no_overlap(run):
    zero = config(run, "--params", "1.3e9", "--gpus", "4", "--gpu", "rtx3090", "--stage", "2")["zero_optimization"]
    assert zero["overlap_comm"] is False  # 4.5 × 2 × 5e8 × 2 bytes would take 9 GB of a 24 GB card


def test_batch_sizes_satisfy_the_identity(run):
    data = config(run, *LLAMA7)
    assert data["train_batch_size"] == data["train_micro_batch_size_per_gpu"] * data["gradient_accumulation_steps"] * 8
    data = config(run, "--params", "1e9", "--gpus", "16", "--tp", "2", "--global-batch", "64", "--cluster", "dgx-a100")
    assert (data["train_batch_size"], data["train_micro_batch_size_per_gpu"], data["gradient_accumulation_steps"]) == \
        (64, 1, 8)


def test_precision_blocks(run):
    assert config(run, *LLAMA7)["bf16"] == {"enabled": True}
    fp16 = config(run, *LLAMA7, "--precision", "fp16")
    assert fp16["fp16"]["enabled"] is True and fp16["fp16"]["loss_scale"] == 0 and "bf16" not in fp16
    fp32 = config(run, "--params", "1e8", "--precision", "fp32")
    assert "fp16" not in fp32 and "bf16" not in fp32


def test_nvme_path_placeholder(run):
    zero = config(run, *LLAMA70, "--stage", "3", "--offload-optimizer", "nvme")["zero_optimization"]
    assert zero["offload_optimizer"] == {"device": "nvme", "pin_memory": True, "nvme_path": "/local_nvme"}
    assert "offload_param" not in zero


def test_nothing_fits_exits_1_and_force_writes_anyway(run):
    flags = ["--model", "llama-2-70b", "--gpus", "1", "--gpu", "a100-80g", "--stage", "1"]
    code, out, err = run("export", "deepspeed", *flags)
    assert code == 1 and out == "" and "nothing to export" in err and "--force" in err
    code, out, _ = run("export", "deepspeed", *flags, "--force")
    assert code == 0 and json.loads(out)["zero_optimization"]["stage"] == 1


@pytest.mark.parametrize("flags,named", [
    (["--params", "7e9", "--gpus", "8", "--global-batch", "100", "--micro-batch", "4"], "--global-batch"),
    (["--params", "7e9", "--gpus", "8", "--tp", "3"], "tp(3)"),
    (["--params", "7e9", "--precision", "fp8"], "--precision"),
    (["--params", "7e9", "--stage", "2", "--offload-params", "cpu"], "--offload-params"),
    (["--plan", "no/such/plan.yaml"], "no such file"),
])
def test_bad_export_input_exits_2(run, flags, named):
    code, out, err = run("export", "deepspeed", *flags)
    assert code == 2 and out == "" and named in err and err.count("\n") == 1


def test_plan_file_content_follows_the_schema(run):
    code, out, _ = run("export", "plan", *ROUND_TRIPS["stage3-nvme"])
    data = yaml.safe_load(out)
    assert out.startswith("# zeroplan plan (schema version 1)")
    assert data["zeroplan_plan"] == 1 and data["model"] == {"preset": "llama-2-70b"}
    assert data["cluster"] == {"gpus": 8, "preset": "dgx-a100"}
    assert data["zero"] == {"stage": 3, "offload_optimizer": "nvme", "offload_params": "nvme", "nvme_path": "/mnt/nvme0"}
    assert data["training"]["global_batch"] == data["training"]["micro_batch"] * data["training"]["grad_accum"] * 8


def test_flags_override_the_plans_choice(run, tmp_path):
    plan = tmp_path / "plan.yaml"
    run("export", "plan", *LLAMA7, "--stage", "2", "-o", str(plan))
    assert config(run, "--plan", str(plan))["zero_optimization"]["stage"] == 2
    assert config(run, "--plan", str(plan), "--stage", "3")["zero_optimization"]["stage"] == 3


def test_export_uses_fp16_on_a_gpu_without_bf16():
    from zeroplan.inputs import presets
    from zeroplan.cli.app import main

    assert presets.gpu("v100-32g").supports_bf16 is False and presets.gpu("a100-80g").supports_bf16
    import io
    import contextlib
    import json as json_module

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), pytest.raises(SystemExit):
        main(["export", "deepspeed", "--params", "1e9", "--gpu", "v100-32g", "--gpus", "8"])
    config = json_module.loads(buffer.getvalue())
    assert config["fp16"]["enabled"] is True and "bf16" not in config
