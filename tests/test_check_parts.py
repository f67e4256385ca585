"""The pieces under `zeroplan check`: key location, the batch identity, bucket footprints, annotation
escaping, the plan schema, and the DeepSpeed key lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from zeroplan.deepspeed import keys as ds_keys
from zeroplan.inputs import config_files as loaders
from zeroplan.check.annotations import annotation
from zeroplan.deepspeed.batch import Batch, BatchProblem, consistent, deepspeed_fill
from zeroplan.deepspeed.buckets import Buckets, largest_bucket_within, round_down, scientific
from zeroplan.deepspeed.findings import ERROR, Finding
from zeroplan.deepspeed.plan_file import validate_plan
from zeroplan.core.errors import InputError


def test_json_key_location_follows_the_path(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text('{\n  "fp16": {"enabled": false},\n  "bf16": {\n    "enabled": true\n  }\n}\n')
    source = loaders.load(path)
    assert source.locate(("bf16", "enabled")) == (4, 5)
    assert source.locate(("fp16", "enabled")) == (2, 12)
    assert source.locate(("zero_optimization", "stage")) is None


def test_yaml_key_location_uses_parser_marks(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("model:\n  preset: gpt2\ncluster:\n  gpus: 8\n")
    source = loaders.load(path)
    assert source.locate(("cluster", "gpus")) == (4, 3)
    assert loaders.detect_kind(source) == "plan"


def test_json_duplicates_are_recorded(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text('{"a": 1, "b": {"c": 1,\n "c": 2}}')
    source = loaders.load(path)
    assert source.duplicates == [("b", "c")]  # the whole key path, not only the last key
    assert source.locate(("b", "c")) == (1, 16)
    assert source.locate(("b", "c"), occurrence=2) == (2, 2)


def test_kind_detection_rejects_other_yaml(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text("name: something\n")
    with pytest.raises(InputError, match="neither a DeepSpeed config"):
        loaders.detect_kind(loaders.load(path))
    path.write_text("- a list\n")
    with pytest.raises(InputError, match="mapping"):
        loaders.detect_kind(loaders.load(path))


@pytest.mark.parametrize("given,dp,expected", [
    ((256, 4, 8), 8, Batch(256, 4, 8)),
    ((256, 4, None), 8, Batch(256, 4, 8)),     # accumulation inferred
    ((256, None, 8), 8, Batch(256, 4, 8)),     # micro batch inferred
    ((None, 4, 8), 8, Batch(256, 4, 8)),       # train batch inferred
    ((64, None, None), 8, Batch(64, 8, 1)),
    ((None, 4, None), 8, Batch(32, 4, 1)),
])
def test_deepspeed_fill_infers_like_deepspeed(given, dp, expected):
    assert deepspeed_fill(*given, dp) == expected


@pytest.mark.parametrize("given,dp,key", [
    ((512, 4, 8), 8, "train_batch_size"),
    ((100, 4, None), 8, "train_batch_size"),   # 100 // 4 // 8 = 3, and 4 × 3 × 8 ≠ 100
    ((16, 4, None), 8, "gradient_accumulation_steps"),  # 16 // 4 // 8 = 0
    ((None, None, 4), 8, "train_micro_batch_size_per_gpu"),
])
def test_deepspeed_fill_reports_what_deepspeed_rejects(given, dp, key):
    problem = deepspeed_fill(*given, dp)
    assert isinstance(problem, BatchProblem) and problem.key == key and problem.fix


def test_consistent_batch_for_export():
    assert consistent(8) == Batch(8, 1, 1)
    assert consistent(8, micro=4, accum=2) == Batch(64, 4, 2)
    assert consistent(8, micro=4, global_batch=128) == Batch(128, 4, 4)
    assert consistent(8, accum=4, global_batch=128) == Batch(128, 4, 4)
    assert consistent(8, global_batch=64) == Batch(64, 1, 8)
    with pytest.raises(InputError, match=r"^global_batch: .*\(use global_batch=96\)"):
        consistent(8, micro=3, global_batch=100)
    with pytest.raises(InputError, match="^global_batch: "):
        consistent(8, micro=4, accum=2, global_batch=100)
    with pytest.raises(InputError, match="^micro_batch: "):
        consistent(8, micro=0)


def test_bucket_footprint_follows_the_overlap_rule():
    # Hugging Face's example: 5e8 × 2 bytes × 2 buckets × 4.5 = 9e9 bytes with overlap_comm.
    stage2 = Buckets(2, 500_000_000, 500_000_000, 50_000_000, 1_000_000_000, overlap_comm=True)
    assert stage2.total(2) == 9_000_000_000
    assert Buckets(2, 500_000_000, 500_000_000, 0, 0, overlap_comm=False).total(2) == 2_000_000_000
    stage3 = Buckets(3, 100, 999, 10, 1_000, overlap_comm=True)
    # Stage 3 (core.memory.deepspeed_buffers): one reduce bucket (the 4.5× rule is DeepSpeed's for stages 1-2), the largest
    # layer gathered whole with the prefetch behind it (within max_live), and that layer's gradients.
    assert stage3.footprint(2, shard_params=500, largest_layer_params=50) == {
        "reduce_bucket": 200, "gathered_parameters": 120, "gathered_layer_gradients": 100}
    # Unknown layer: taken at max_live_parameters, capped at the shard.
    assert stage3.footprint(2, shard_params=500) == {"reduce_bucket": 200, "gathered_parameters": 1000,
                                                     "gathered_layer_gradients": 1000}
    assert Buckets(0, 1, 1, 1, 1, False).total(2) == 0


def test_largest_bucket_and_rounding():
    assert largest_bucket_within(9_000_000_000, 2, True, 2) == 500_000_000
    assert largest_bucket_within(100, 3, False, 2, fixed_bytes=200) == 0
    assert round_down(123_456_789) == 120_000_000 and round_down(1_234_567) == 1_200_000
    assert scientific(500_000_000) == "5e8" and scientific(190_000_000) == "1.9e8"
    assert scientific(16_777_216) == "16777216" and scientific(81920) == "81920"


def test_annotation_escapes_like_the_runner():
    finding = Finding("ZP001", ERROR, "50% off,\nnext line", "do: this", ("train_batch_size",),
                      "dir,with:odd/ds.json", 3, 7)
    text = annotation(finding)
    assert text.startswith("::error file=dir%2Cwith%3Aodd/ds.json,line=3,col=7,title=ZP001::")
    assert "50%25 off,%0Anext line" in text and "\n" not in text
    no_line = annotation(Finding("ZP015", "note", "m", path=(), file="f.json"))
    assert no_line == "::notice file=f.json,title=ZP015::unresolved-auto: m"


def test_plan_schema_rejects_what_it_does_not_know(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("zeroplan_plan: 1\nmodel:\n  preset: gpt2\n  params: 1e9\ncluster:\n  gpus: 8\n")
    with pytest.raises(InputError, match="exactly one of preset, config or params"):
        validate_plan(loaders.load(path))
    path.write_text("zeroplan_plan: 2\nmodel: {preset: gpt2}\ncluster: {gpus: 8}\n")
    with pytest.raises(InputError, match="schema version 2"):
        validate_plan(loaders.load(path))
    path.write_text("model: {preset: gpt2}\ncluster: {gpus: 0}\n")
    with pytest.raises(InputError, match=r"plan.yaml:2:11: cluster.gpus"):
        validate_plan(loaders.load(path))


def test_key_lists_hold_the_documented_keys():
    for key in ("train_batch_size", "zero_optimization", "bf16", "fp16", "gradient_clipping", "activation_checkpointing"):
        assert key in ds_keys.TOP_LEVEL_KEYS
    for key in ("stage", "reduce_bucket_size", "stage3_prefetch_bucket_size", "prefetch_bucket_size",
                "offload_optimizer", "sub_group_size", "zero_hpz_partition_size"):
        assert key in ds_keys.ZERO_KEYS
    assert "ratio" in ds_keys.OFFLOAD_OPTIMIZER_KEYS and "max_in_cpu" in ds_keys.OFFLOAD_PARAM_KEYS
    for old, (new, advice) in ds_keys.DEPRECATED.items():
        assert advice and old[-1] not in (new[-1:] or ("",))


def test_corpus_reproduces_the_hugging_face_examples():
    import json

    folder = Path(__file__).parent / "configs" / "deepspeed"
    zero2 = json.loads((folder / "hf_ds_config_zero2.json").read_text())
    zero3 = json.loads((folder / "hf_ds_config_zero3.json").read_text())
    assert zero2["zero_optimization"]["reduce_bucket_size"] == 2e8 and zero2["train_batch_size"] == "auto"
    assert zero3["zero_optimization"]["stage3_prefetch_bucket_size"] == "auto"
    assert zero3["zero_optimization"]["offload_param"] == {"device": "cpu", "pin_memory": True}


def test_flags_replace_the_plans_whole_model_or_hardware():
    from zeroplan.deepspeed.context import CheckContext, from_flags

    plan = CheckContext(model="llama-2-7b", hidden=4096, gpus=8, cluster="dgx-a100", cpu_memory="1TB", micro_batch=2,
                        origin={"model": "plan"})
    merged = from_flags(params="13e9", gpu="h100-80g").under(plan)
    assert (merged.model, merged.params, merged.hidden) == (None, "13e9", None)
    assert (merged.gpu, merged.cluster, merged.cpu_memory) == ("h100-80g", None, None)
    assert (merged.gpus, merged.micro_batch) == (8, 2)  # the rest still comes from the plan
    kept = from_flags(gpus=16).under(plan)
    assert (kept.model, kept.hidden, kept.cluster, kept.gpus) == ("llama-2-7b", 4096, "dgx-a100", 16)
    assert kept.origin["model"] == "plan" and kept.origin["gpus"] == "flag"
