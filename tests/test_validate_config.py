"""zeroplan validate without torch: options, the tiny model's shape, and what is predicted."""

import pytest

from zeroplan.inputs import presets
from zeroplan.core.errors import InputError
from zeroplan.validate.config import build_config, check_world, parse_stages
from zeroplan.validate.predict import param_copy_bytes, predict_states, torch_bytes_per_param
from zeroplan.validate.shape import TinyShape, scaled_from_preset

UNEVEN = TinyShape(layers=2, hidden=24, heads=3, kv_heads=3, ffn=52, vocab=101, seq_len=5)


def _config(**overrides):
    options = dict(stage="all", shape=UNEVEN, precision="fp32", optimizer="adam", micro_batch=2, steps=2,
                   backend="gloo", nproc=2, cpu_offload=False, timeout=60.0, output_format="json")
    options.update(overrides)
    return build_config(**options)


def test_stages_take_numbers_framework_names_or_all():
    assert parse_stages("all") == (0, 1, 2, 3)
    assert parse_stages("3, fsdp2-zero2,0") == (0, 2, 3)
    assert parse_stages("torch-zero1") == (1,)
    with pytest.raises(InputError, match="unknown stage or framework '7'"):
        parse_stages("0,7")
    with pytest.raises(InputError, match="cannot be run by validate"):
        parse_stages("deepspeed-zero3")


@pytest.mark.parametrize("overrides, flag", [
    ({"nproc": 1}, "--nproc"), ({"stage": "4"}, "--stage"), ({"precision": "fp16"}, "--precision"),
    ({"optimizer": "lion"}, "--optimizer"), ({"steps": 0}, "--steps"), ({"micro_batch": 0}, "--micro-batch"),
    ({"backend": "mpi"}, "--backend"), ({"output_format": "csv"}, "--format"), ({"timeout": 0.0}, "--timeout"),
    ({"cpu_offload": True, "stage": "1,2"}, "--cpu-offload"),
])
def test_bad_options_are_input_errors_naming_the_flag(overrides, flag):
    with pytest.raises(InputError) as caught:
        _config(**overrides)
    assert caught.value.input_name == flag


def test_world_checks_refuse_offload_without_a_gpu_and_a_model_too_small_to_shard():
    with pytest.raises(InputError, match="no GPU"):
        check_world(_config(stage="2,3", cpu_offload=True), 2, "gloo")
    tiny = TinyShape(layers=1, hidden=8, heads=1, kv_heads=1, ffn=8, vocab=8, seq_len=2)
    with pytest.raises(InputError, match="too small to shard over 64 ranks"):
        check_world(_config(shape=tiny, nproc=64), 64, "gloo")
    check_world(_config(), 4, "gloo")


def test_shape_errors_name_the_flag():
    with pytest.raises(InputError, match="--heads"):
        TinyShape(hidden=10, heads=3, kv_heads=3)
    with pytest.raises(InputError, match="--kv-heads"):
        TinyShape(style="llama", heads=4, kv_heads=3)
    with pytest.raises(InputError, match="--style"):
        TinyShape(style="t5")


def test_the_uneven_model_has_odd_sizes_a_tied_head_and_a_padding_only_rank_at_4():
    specs = UNEVEN.param_specs()
    assert specs[-1].name == "lm_head.weight" and specs[-1].tied_to == "wte.weight"
    assert ("wpe.weight", (5, 24)) in [(p.name, p.shape) for p in specs]  # 4 ranks: 2, 2, 1, 0 rows
    held = predict_states(_config(), 4, 3).breakdown
    assert held["rank3/gpu/params"] == held["rank0/gpu/params"]  # padded alike
    assert held["rank3/gpu/optimizer_states"] < held["rank0/gpu/optimizer_states"]


def test_torch_keeps_fp32_states_under_both_precisions_so_the_prediction_does_not_change():
    assert torch_bytes_per_param("adam").total == 16 and torch_bytes_per_param("adam").params == 4
    assert predict_states(_config(precision="mixed"), 2, 1).breakdown == predict_states(_config(), 2, 1).breakdown
    # what mixed does change: autocast's bf16 weight copies (stages 0-1), bf16 unsharded parameters (stage 2)
    matmul = 2 * (72 * 24 + 24 * 24 + 52 * 24 + 24 * 52) + 101 * 24  # two blocks + the tied head
    assert param_copy_bytes(_config(precision="mixed"), 2, 0) == 2 * matmul
    assert param_copy_bytes(_config(), 2, 0) == 0
    assert param_copy_bytes(_config(precision="mixed"), 2, 3) == 0


def test_perturbation_lands_on_the_most_loaded_rank():
    plain, moved = predict_states(_config(), 2, 1), predict_states(_config(perturb_bytes=1000), 2, 1)
    key = f"rank{plain.most_loaded_rank}/gpu/optimizer_states"
    assert moved.breakdown[key] == plain.breakdown[key] + 1000


def test_a_preset_scales_down_keeping_style_ratios_and_tied_head():
    gpt2 = scaled_from_preset(presets.model("gpt2"), hidden=64, layers=2, seq_len=31)
    assert (gpt2.style, gpt2.hidden, gpt2.heads, gpt2.ffn, gpt2.vocab, gpt2.tied) == ("gpt2", 64, 8, 256, 4189, True)
    llama = scaled_from_preset(presets.model("llama-3-8b"), hidden=128, layers=2, seq_len=31)
    assert llama.style == "llama" and not llama.tied and llama.heads % llama.kv_heads == 0
    assert llama.kv_heads < llama.heads  # grouped-query attention survives the scaling


def _fake_results(config, world, stage, cuda_scale=None):
    from zeroplan.validate.predict import predict_activations, predict_cuda

    partition = predict_states(config, world, stage)
    results = []
    for rank in range(world):
        cuda = None
        if cuda_scale is not None:
            cuda = {key: int(value * cuda_scale) for key, value in
                    predict_cuda(config, world, stage, partition, rank).items()}
            cuda.update(forward_growth=cuda["peak"] // 2, baseline=8 << 20)
        results.append({"stage": stage, "rank": rank, "held": partition.rank(rank), "loss": 7.0,
                        "activations": predict_activations(config), "param_copies": 0, "cuda": cuda})
    return results


def test_the_report_compares_every_rank_and_grades_the_cuda_peak():
    from zeroplan.render.terminal import Canvas
    from zeroplan.validate.report import render, stage_report, to_json

    config = _config(stage="3")
    report = stage_report(config, 4, 3, _fake_results(config, 4, 3, cuda_scale=1.02))
    rows = {row["component"]: row for row in report.rows}
    assert report.exact and rows["model states"]["status"] == "exact"
    assert rows["CUDA peak"]["status"] == "within 3%" and rows["CUDA peak"]["error_pct"] == pytest.approx(2.0, abs=0.01)
    assert report.extra["activation_share_of_peak_pct"] == pytest.approx(50.0, abs=0.01)
    off = stage_report(config, 4, 3, _fake_results(config, 4, 3, cuda_scale=1.05))
    assert {row["component"]: row for row in off.rows}["CUDA peak"]["status"] == "off by more than 3%"
    console = Canvas(100, color=False)
    meta = {"world_size": 4, "backend": "nccl", "device": "test GPU", "precision": "fp32", "optimizer": "adam",
            "model": "tiny"}
    render(meta, [report], console)
    text = console.text()
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "CUDA peak, fwd+bwd" in text and "exact on all 4 ranks" in text and "share of the peak" in text
    assert '"ok": true' in to_json(meta, [report])


def test_a_mismatch_on_any_rank_is_reported_with_its_key():
    from zeroplan.validate.report import stage_report

    config = _config(stage="1")
    results = _fake_results(config, 2, 1)
    results[1]["held"] = dict(results[1]["held"], **{"gpu/gradients": results[1]["held"]["gpu/gradients"] + 4})
    report = stage_report(config, 2, 1, results)
    assert not report.exact and report.mismatches[0]["key"] == "rank1/gpu/gradients"
