"""Estimates with a real model shape: activations counted, pipeline stages, micro-batch search."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from zeroplan.inputs import presets
from zeroplan.cli.app import app
from zeroplan.core.memory.activations import ActivationConfig, activation_memory
from zeroplan.core.errors import InputError
from zeroplan.core.model.pipeline_stages import layers_per_stage, stage_params
from zeroplan.inputs.hf_config import load_hf_config

runner = CliRunner()


def run_json(*args: str) -> dict:
    result = runner.invoke(app, ["estimate", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_config_json_and_preset_agree():
    from_file = run_json("--model", "tests/configs/llama-2-7b-hf.json", "--gpus", "8")
    from_preset = run_json("--model", "llama-2-7b", "--gpus", "8")
    assert from_file["model"]["params"] == from_preset["model"]["params"] == 6_738_415_616
    assert from_file["options"] == from_preset["options"]
    assert from_file["model"]["layers"] == 32 and from_file["model"]["gated_mlp"] is True


def test_activations_are_counted_not_reserved():
    data = run_json("--model", "llama-2-7b", "--gpus", "8", "--seq-len", "2048", "--micro-batch", "2",
                    "--recompute", "selective")
    expected = activation_memory(presets.model("llama-2-7b"), ActivationConfig(
        seq_len=2048, micro_batch=2, recompute="selective", flash_attention=True, implementation="transformers"))
    assert data["training"]["activations"] == "counted"
    assert data["training"]["activation_implementation"] == "transformers"
    assert all(o["gpu_bytes"]["activations"] == expected.total for o in data["options"])
    assert not any("reserve" in note for note in data["assumptions"] if note.startswith("activations"))


def test_llama2_70b_needs_recompute_on_8_a100():
    data = run_json("--model", "llama-2-70b", "--gpus", "8")
    assert data["recommendation"]["stage"] is None
    assert "--recompute full" in data["recommendation"]["reason"]
    fixed = run_json("--model", "llama-2-70b", "--gpus", "8", "--recompute", "full")
    assert fixed["recommendation"]["stage"] == 3


def test_max_micro_batch_is_the_edge_of_fitting():
    data = run_json("--model", "llama-2-7b", "--gpus", "8", "--recompute", "full", "--stage", "3",
                    "--offload-optimizer", "none", "--max-micro-batch", "--global-batch", "1024")
    (option,) = data["options"]
    largest = option["max_micro_batch"]
    micro, steps = option["accumulation_micro_batch"], option["grad_accum_steps"]
    assert 1 <= micro <= largest and micro * steps * 8 == 1024 and 128 % micro == 0
    assert not any(128 % m == 0 for m in range(micro + 1, largest + 1))  # the largest divisor that fits
    at = run_json("--model", "llama-2-7b", "--gpus", "8", "--recompute", "full", "--stage", "3",
                  "--offload-optimizer", "none", "--micro-batch", str(largest))
    above = run_json("--model", "llama-2-7b", "--gpus", "8", "--recompute", "full", "--stage", "3",
                     "--offload-optimizer", "none", "--micro-batch", str(largest + 1))
    assert at["options"][0]["fits"] and not above["options"][0]["fits"]


def test_gradient_accumulation_multiplies_stage_2_and_3_traffic_only():
    one = {o["key"]: o for o in run_json("--model", "llama-2-7b", "--gpus", "16")["options"]}
    four = {o["key"]: o for o in run_json("--model", "llama-2-7b", "--gpus", "16", "--grad-accum", "4")["options"]}
    assert four["zero1/opt_none/params_none"]["comm_bytes_per_gpu_per_step"] == \
        one["zero1/opt_none/params_none"]["comm_bytes_per_gpu_per_step"]
    # Stage 2: the gradient reduce-scatter repeats per micro-batch, the parameter gather does not.
    half = one["zero2/opt_none/params_none"]["comm_bytes_per_gpu_per_step"] // 2
    assert four["zero2/opt_none/params_none"]["comm_bytes_per_gpu_per_step"] == 4 * half + half
    assert four["zero3/opt_none/params_none"]["comm_bytes_per_gpu_per_step"] == \
        4 * one["zero3/opt_none/params_none"]["comm_bytes_per_gpu_per_step"]


def test_pipeline_stages_place_embeddings_and_head():
    model = presets.model("llama-2-7b")  # untied: embedding on the first stage, head on the last
    stages = stage_params(model, 4)
    layout = model.layout
    assert layout is not None
    assert stages[0] == 8 * layout.layer_params + layout.input_params
    assert stages[-1] == 8 * layout.layer_params + layout.output_params
    assert sum(stages) == model.params
    gpt2 = load_hf_config("tests/configs/gpt2.json")  # tied: the last stage keeps its own copy for the head
    assert gpt2.shape is not None
    assert sum(stage_params(gpt2, 2)) == gpt2.params + gpt2.shape.vocab * gpt2.shape.hidden
    assert layers_per_stage(10, 4) == [3, 3, 2, 2]
    with pytest.raises(InputError, match="layers"):
        layers_per_stage(4, 8)


def test_tp_with_sequence_parallel_never_increases_activations():
    base = run_json("--model", "llama-2-13b", "--gpus", "8", "--tp", "2")
    sp = run_json("--model", "llama-2-13b", "--gpus", "8", "--tp", "2", "--sequence-parallel")
    assert sp["options"][0]["gpu_bytes"]["activations"] < base["options"][0]["gpu_bytes"]["activations"]


def test_optimizer_step_temporary_overlaps_freed_activations():
    small = run_json("--model", "gpt2", "--gpus", "2", "--stage", "2", "--offload-optimizer", "none",
                     "--seq-len", "128")
    (option,) = small["options"]
    breakdown = option["breakdown"]
    temporary = breakdown["temporaries/fp32_gradient_partition"]
    assert temporary == 4 * -(-124_439_808 // 2)
    assert breakdown["gpu/buffers/optimizer_step_beyond_activations"] == max(
        0, temporary - option["gpu_bytes"]["activations"])


def test_framework_convention_partitions_real_tensors():
    """ZeroRedundancyOptimizer's greedy whole-parameter split loads one rank above Ψ/N; DeepSpeed's
    per-parameter padding adds at most N−1 elements per tensor over the even split."""
    paper = {o["stage"]: o for o in run_json("--model", "llama-2-7b", "--gpus", "8", "--stage", "3",
                                             "--offload-optimizer", "none")["options"]}
    deepspeed = {o["stage"]: o for o in run_json("--model", "llama-2-7b", "--gpus", "8",
                                                 "--convention", "framework")["options"]}
    torch = {o["stage"]: o for o in run_json("--model", "llama-2-7b", "--gpus", "8", "--convention", "framework",
                                             "--framework", "torch")["options"]}
    psi, tensors = 6_738_415_616, 2 + 9 * 32 + 1  # embedding, head, 9 tensors per layer, final norm
    assert 0 <= deepspeed[3]["gpu_bytes"]["params"] - paper[3]["gpu_bytes"]["params"] <= 2 * 7 * tensors
    assert deepspeed[3]["gpu_bytes"]["optimizer_states"] >= 12 * psi // 8
    assert torch[1]["gpu_bytes"]["optimizer_states"] > 8 * psi // 8  # fp32 m and v, most loaded rank
    assert torch[0]["gpu_bytes"]["params"] == 4 * psi  # torch keeps fp32 weights in mixed precision
    assert set(torch) == {0, 1, 2, 3}


def test_framework_convention_needs_tensors_and_pure_dp(capsys):
    from zeroplan.cli.app import main

    for args in (["--params", "7e9", "--convention", "framework"],
                 ["--model", "llama-2-7b", "--gpus", "16", "--tp", "2", "--convention", "framework"],
                 ["--model", "llama-2-7b", "--convention", "framework", "--framework", "jax"]):
        with pytest.raises(SystemExit) as info:
            main(["estimate", *args])
        assert info.value.code == 2 and capsys.readouterr().err.count("\n") == 1
