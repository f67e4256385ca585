"""Every `zeroplan check` rule fires on a config that breaks it and stays quiet on one that does not.

The corpus lives in tests/configs/{deepspeed,plans,accelerate}; the Hugging Face ds_config_zero2.json and
ds_config_zero3.json examples (with "auto") are reproduced there as hf_ds_config_zero*.json.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zeroplan.deepspeed.context import from_flags
from zeroplan.deepspeed.findings import ERROR, NOTE, RULES, WARNING
from zeroplan.check.runner import check_file

CONFIGS = Path(__file__).parent / "configs"


def findings(name: str, **flags):
    folder = "deepspeed" if name.endswith(".json") else ""
    return check_file(CONFIGS / folder / name, from_flags(**flags)).findings


def rules(name: str, **flags) -> set[str]:
    return {f.rule for f in findings(name, **flags)}


BIG_NODE = dict(gpus=8, cluster="dgx-a100", recompute="full")
MIXTRAL_64 = dict(gpus=64, model="mixtral-8x7b", gpu="h100-80g")

FIRES = [
    ("bad_batch_identity.json", dict(gpus=8), "ZP001"),
    ("bad_batch_indivisible.json", {}, "ZP001"),
    ("bad_batch_missing.json", {}, "ZP001"),
    ("hf_ds_config_zero2.json", dict(gpus=8, micro_batch=4, grad_accum=2, global_batch=100), "ZP001"),
    ("plans/bad_batch.yaml", {}, "ZP001"),
    ("bad_fp16_bf16.json", {}, "ZP002"),
    ("bad_offload_param_stage2.json", {}, "ZP003"),
    ("bad_offload_stage0.json", {}, "ZP003"),
    ("bad_nvme_stage2.json", {}, "ZP004"),
    ("accelerate/inline_nvme_stage2.yaml", {}, "ZP004"),
    ("bad_nvme_no_path.json", {}, "ZP005"),
    ("accelerate/inline_nvme_stage2.yaml", {}, "ZP005"),
    ("bad_partial_offload_stage2.json", {}, "ZP006"),
    ("bad_deprecated.json", {}, "ZP007"),
    ("bad_deprecated_conflict.json", {}, "ZP007"),
    ("hf_ds_config_zero3.json", {}, "ZP007"),
    ("bad_unknown_keys.json", {}, "ZP008"),
    ("bad_autotp.json", dict(gpus=8), "ZP009"),
    ("good_zero2.json", dict(gpus=12, tp=8), "ZP009"),
    ("good_zero1.json", dict(gpus=16, tp=16, gpu="a100-80g"), "ZP010"),
    ("good_zero1.json", dict(gpus=8, model="llama-2-13b", gpu="a100-40g", seq_len=2048), "ZP011"),
    ("plans/bad_oom.yaml", {}, "ZP012"),  # nothing fits: even the closest option overflows CPU RAM
    ("good_zero3_offload.json", dict(BIG_NODE, model="llama-2-70b", cpu_memory="256GB"), "ZP012"),
    ("good_zero3_nvme.json", dict(BIG_NODE, model="llama-2-70b", nvme="100GB"), "ZP013"),
    ("bad_buckets.json", dict(gpu="rtx3090"), "ZP014"),
    ("bad_buckets_huge.json", dict(gpu="rtx3090"), "ZP014"),
    ("hf_ds_config_zero2.json", {}, "ZP015"),
    ("hf_ds_config_zero3.json", dict(gpu="a100-80g"), "ZP015"),
    ("bad_invalid_values.json", {}, "ZP016"),
    ("bad_duplicate_key.json", {}, "ZP017"),
    ("bad_pipeline_zero2.json", dict(gpus=8, pp=2), "ZP018"),
    ("moe_autoep16_etp2.json", MIXTRAL_64, "ZP021"),  # 16 does not divide 8 experts
    ("moe_autoep16_etp2.json", MIXTRAL_64, "ZP022"),  # AutoEP supports expert_tensor_parallel_size 1 only
    ("moe_autoep16_etp2.json", MIXTRAL_64, "ZP023"),  # 16 ranks 2 apart span 4 nodes
    ("plans/moe_capacity_10.yaml", {}, "ZP024"),
    ("bad_coerced_values.json", {}, "ZP019"),
    ("bad_removed_key.json", {}, "ZP020"),
]

QUIET = [
    ("good_zero2.json", dict(gpus=8), "ZP001"),
    ("good_zero2_offload.json", dict(gpus=8), "ZP001"),
    ("hf_ds_config_zero2.json", dict(gpus=8, micro_batch=4, grad_accum=2), "ZP001"),
    ("hf_ds_config_zero2.json", {}, "ZP002"),
    ("hf_ds_config_zero2.json", dict(precision="bf16"), "ZP002"),
    ("good_zero2_offload.json", {}, "ZP002"),
    ("good_zero3_offload.json", {}, "ZP003"),
    ("good_zero2_offload.json", {}, "ZP003"),
    ("good_zero3_nvme.json", {}, "ZP004"),
    ("good_zero3_nvme.json", {}, "ZP005"),
    ("good_zero3_partial_offload.json", {}, "ZP006"),
    ("good_zero2.json", {}, "ZP007"),
    ("hf_ds_config_zero2.json", {}, "ZP007"),
    ("good_zero3_nvme.json", {}, "ZP008"),
    ("hf_ds_config_zero3.json", {}, "ZP008"),
    ("good_zero2.json", dict(gpus=16, tp=8), "ZP009"),
    ("good_zero1.json", dict(gpus=16, tp=8, gpu="a100-80g"), "ZP010"),
    ("good_zero3_offload.json", dict(BIG_NODE, model="llama-2-13b"), "ZP011"),
    ("good_zero3_offload.json", dict(BIG_NODE, model="llama-2-70b", cpu_memory="2TB"), "ZP012"),
    ("good_zero3_nvme.json", dict(BIG_NODE, model="llama-2-70b", nvme="30TB"), "ZP013"),
    ("hf_ds_config_zero2.json", dict(gpu="rtx3090"), "ZP014"),  # 2e8 buckets: HF's advice for small GPUs
    ("good_zero3_offload.json", dict(gpu="rtx3090"), "ZP014"),
    ("hf_ds_config_zero3.json", dict(gpu="a100-80g", model="llama-2-7b", gpus=8, micro_batch=1, grad_accum=1), "ZP015"),
    ("good_zero2.json", {}, "ZP016"),
    ("good_zero2.json", {}, "ZP017"),
    ("bad_pipeline_zero2.json", dict(gpus=8, pp=1), "ZP018"),
    ("moe_autoep8.json", MIXTRAL_64, "ZP021"),
    ("moe_autoep8.json", MIXTRAL_64, "ZP022"),
    ("moe_autoep8.json", MIXTRAL_64, "ZP023"),
    ("plans/moe_capacity_125.yaml", {}, "ZP024"),
    ("good_zero2.json", {}, "ZP019"),
    ("good_zero2_hjson.json", {}, "ZP020"),
]


@pytest.mark.parametrize("name,flags,rule", FIRES, ids=lambda v: v if isinstance(v, str) else None)
def test_rule_fires(name, flags, rule):
    assert rule in rules(name, **flags)


@pytest.mark.parametrize("name,flags,rule", QUIET, ids=lambda v: v if isinstance(v, str) else None)
def test_rule_stays_quiet(name, flags, rule):
    assert rule not in rules(name, **flags)


def test_every_rule_is_covered_both_ways():
    assert {rule for _, _, rule in FIRES} == set(RULES) == {rule for _, _, rule in QUIET}


@pytest.mark.parametrize("name", sorted(p.name for p in (CONFIGS / "deepspeed").glob("good_*.json")))
def test_good_configs_are_clean_in_a_realistic_setup(name):
    found = findings(name, gpus=8, model="llama-2-7b", cluster="dgx-a100", recompute="full", seq_len=2048)
    assert [f for f in found if f.severity != NOTE] == []


@pytest.mark.parametrize("name", ["plans/good_llama7b.yaml", "plans/good_params_only.yaml",
                                  "plans/good_with_config.yaml", "accelerate/inline_zero3_offload.yaml"])
def test_good_plans_and_accelerate_configs_have_no_errors_or_warnings(name):
    assert [f for f in findings(name) if f.severity != NOTE] == []


def test_unknown_keys_severity_follows_deepspeed():
    by_key = {f.key: f for f in findings("bad_unknown_keys.json")}
    assert by_key["gradient_clippin"].severity == WARNING  # top level: ignored silently
    assert by_key["zero_optimization.reduce_bucket_sise"].severity == ERROR  # pydantic extra="forbid"
    assert "did you mean 'reduce_bucket_size'" in by_key["zero_optimization.reduce_bucket_sise"].fix
    assert "did you mean 'pin_memory'" in by_key["zero_optimization.offload_optimizer.pin_memroy"].fix


def test_deprecated_keys_name_their_replacement():
    by_key = {f.key: f for f in findings("bad_deprecated.json")}
    assert "offload_optimizer" in by_key["zero_optimization.cpu_offload"].fix
    assert "offload_param" in by_key["zero_optimization.cpu_offload_param"].fix
    assert "bf16" in by_key["bfloat16"].fix
    assert "stage3_gather_16bit_weights_on_model_save" in by_key[
        "zero_optimization.stage3_gather_fp16_weights_on_model_save"].fix
    assert "gradient_clipping" in by_key["optimizer.params.max_grad_norm"].fix
    conflict = findings("bad_deprecated_conflict.json")
    assert [f.severity for f in conflict if f.rule == "ZP007"] == [ERROR]


def test_batch_identity_message_has_the_numbers_and_a_fix():
    (finding,) = [f for f in findings("bad_batch_identity.json", gpus=8) if f.rule == "ZP001"]
    assert "512 ≠ 4 × 8 × 8 = 256" in finding.message
    assert "gradient_accumulation_steps to 16" in finding.fix
    assert "ZP001" not in rules("good_zero2.json", gpus=16, tp=2)  # dp = world / (tp · pp) = 8: 256 = 4 × 8 × 8
    (finding,) = [f for f in findings("good_zero2.json", gpus=32, tp=2) if f.rule == "ZP001"]
    assert "dp = world 32 / (tp 2 · pp 1)" in finding.message


def test_oom_names_the_numbers_and_the_cheapest_fix():
    (finding,) = [f for f in findings("good_zero1.json", gpus=8, model="llama-2-13b", gpu="a100-40g", recompute="full")
                  if f.rule == "ZP011"]
    assert "GiB per GPU >" in finding.message and "usable on a100-40g" in finding.message
    assert "fits with" in finding.fix and "set zero_optimization.stage to" in finding.fix


def test_bucket_rule_counts_overlap_comm():
    (finding,) = [f for f in findings("bad_buckets.json", gpu="rtx3090") if f.rule == "ZP014"]
    assert finding.severity == WARNING and "overlap_comm" in finding.message
    assert "8.4 GiB" in finding.message  # 2 × 5e8 elements × 2 bytes × 4.5
    assert "overlap_comm to false" in finding.fix
    # Stage 3: DeepSpeed keeps one reduce bucket (the 4.5× rule is for stages 1-2): 5e9 × 2 B, plus the
    # gathered parameters and gradients of an unknown layer taken at max_live_parameters (1e9 × 2 B each).
    (huge,) = [f for f in findings("bad_buckets_huge.json", gpu="rtx3090") if f.rule == "ZP014"]
    assert huge.severity == WARNING and "13.0 GiB" in huge.message and "overlap_comm" not in huge.message
    (over,) = [f for f in findings("bad_buckets_huge.json", gpu="rtx3090", gpu_memory="12GiB") if f.rule == "ZP014"]
    assert over.severity == ERROR


def test_hf_auto_buckets_resolve_from_the_model():
    noted = [f for f in findings("hf_ds_config_zero3.json", gpu="a100-80g") if f.rule == "ZP015"]
    assert any(f.key == "zero_optimization.reduce_bucket_size" for f in noted)
    for flags in (dict(hidden=4096), dict(model="llama-2-7b")):  # h from --hidden or the model preset
        resolved = [f for f in findings("hf_ds_config_zero3.json", gpu="a100-80g", **flags) if f.rule == "ZP015"]
        assert not any(f.key.startswith("zero_optimization") for f in resolved)


def test_findings_point_at_the_offending_line():
    by_rule = {f.rule: f for f in findings("bad_fp16_bf16.json")}
    assert by_rule["ZP002"].line == 4  # "bf16": {"enabled": true}
    (duplicate,) = findings("bad_duplicate_key.json")
    assert duplicate.rule == "ZP017" and duplicate.line == 7  # the second "stage"
    plan = [f for f in findings("plans/bad_batch.yaml") if f.rule == "ZP001"]
    assert plan[0].line == 10  # training.global_batch in the plan file


def test_accelerate_config_supplies_world_size_and_points_at_the_deepspeed_file():
    found = findings("accelerate/zero2_config_file.yaml", micro_batch=4, grad_accum=2)
    assert found == []  # 8 processes from the accelerate file, autos resolved from the flags
    report = check_file(CONFIGS / "accelerate/zero2_config_file.yaml", from_flags())
    assert report.kind == "accelerate" and report.checked_file.endswith("hf_ds_config_zero2.json")
