"""`zeroplan plan` end to end through the real error handling of zeroplan.cli.app.main, on a local typer
app (the lead registers the command in cli/app.py)."""

from __future__ import annotations

import csv
import io
import json

import pytest


SMALL = ["plan", "--model", "llama-2-7b", "--gpus", "16", "--global-batch", "64", "--seq-len", "2048"]


def test_table_shows_top_plans_reasons_and_infeasible_summary(cli):
    code, out, err = cli(*SMALL, "--tokens", "1T")
    assert code == 0 and err == ""
    assert "Why each ranks where it does" in out and "#1:" in out and "#5:" in out
    assert "plans/s" in out and "GPU memory" in out and "Assumptions" in out
    assert "MFU" in out and "GPU-h" in out


def test_json_contract(cli):
    code, out, _ = cli(*SMALL, "--tokens", "1T", "--format", "json", "--top", "3")
    assert code == 0
    data = json.loads(out)
    assert data["command"] == "plan" and data["schema_version"] == 1
    assert {"inputs", "model", "cluster", "search", "top", "infeasible", "assumptions"} <= data.keys()
    assert len(data["top"]) == 3
    search = data["search"]
    assert search["plans_evaluated"] > search["plans_fitting"] > 0
    for rank, entry in enumerate(data["top"], start=1):
        assert entry["rank"] == rank and entry["fits"] is True
        assert entry["dp"] * entry["tp"] * entry["pp"] == 16
        assert entry["micro_batch"] * entry["grad_accum"] * entry["dp"] == 64
        assert isinstance(entry["gpu_bytes_total"], int) and entry["gpu_bytes_total"] <= entry["usable_gpu_bytes"]
        assert entry["tokens_per_step"] == 64 * 2048
        assert entry["tokens_per_second"] == pytest.approx(64 * 2048 / entry["step_seconds"])
        assert 0 < entry["mfu"] < 1 and entry["gpu_hours"] > 0 and entry["reason"]
        assert entry["train_seconds"] == pytest.approx(-(-10**12 // (64 * 2048)) * entry["step_seconds"])
    assert data["infeasible"]["plans_by_limit"]["gpu"] > 0


def test_csv_has_every_evaluated_plan_with_exact_bytes(cli):
    code, out, _ = cli(*SMALL, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    _, json_out, _ = cli(*SMALL, "--format", "json")
    search = json.loads(json_out)["search"]
    assert len(rows) == search["plans_evaluated"]
    fitting = [r for r in rows if r["fits"] == "True"]
    assert len(fitting) == search["plans_fitting"]
    assert [int(r["time_rank"]) for r in fitting] == list(range(1, len(fitting) + 1))
    for row in rows:
        parts = sum(int(row[f"gpu_bytes_{k}"]) for k in ("params", "gradients", "optimizer_states", "activations",
                                                          "buffers"))
        assert parts == int(row["gpu_bytes_total"])
        assert (row["fits"] == "True") == (row["limits"] == "")


def test_params_with_a_shape(cli):
    code, out, _ = cli("plan", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32",
                       "--vocab", "32000", "--gpus", "8", "--global-batch", "32", "--seq-len", "2048", "-f", "json")
    assert code == 0
    assert json.loads(out)["model"]["params"] == 7 * 10**9


def test_nothing_fits_is_reported_not_an_error(cli):
    code, out, _ = cli("plan", "--model", "gpt3-175b", "--gpus", "8", "--global-batch", "16", "--no-offload")
    assert code == 0 and "no plan fits" in out
    code, out, _ = cli("plan", "--model", "gpt3-175b", "--gpus", "8", "--global-batch", "16", "--no-offload",
                       "-f", "json")
    assert json.loads(out)["top"] == []


def test_write_deepspeed_config_for_the_top_plan(cli, tmp_path):
    target = tmp_path / "ds_config.json"
    code, out, _ = cli(*SMALL, "--write-deepspeed", str(target), "-f", "json")
    assert code == 0
    best = json.loads(out)["top"][0]
    config = json.loads(target.read_text())
    assert config["zero_optimization"]["stage"] == best["stage"]
    assert config["train_micro_batch_size_per_gpu"] == best["micro_batch"]
    assert config["gradient_accumulation_steps"] == best["grad_accum"]
    assert config["train_batch_size"] == 64
    code, _, err = cli("plan", "--model", "gpt3-175b", "--gpus", "8", "--global-batch", "16", "--no-offload",
                       "--write-deepspeed", str(tmp_path / "none.json"))
    assert code == 1 and "no plan fits" in err
    code, _, err = cli(*SMALL, "--write-deepspeed", "/nonexistent/dir/ds.json")
    assert code == 2 and "--write-deepspeed" in err


def test_calibration_links_are_used(cli, tmp_path):
    from zeroplan.inputs.calibration import Calibration, FitRecord, save_calibration

    record = FitRecord(ranks=8, latency_s=5e-6, bandwidth_bytes_per_s=50_000_000_000, r_squared=1.0,
                       max_relative_residual=0.0, points=5)
    profile = Calibration(created="2025-01-01T00:00:00Z", backend="nccl", dtype="bfloat16", world_size=8, nodes=1,
                          gpus_per_node=8, hostnames=["node0"], device="A100", torch_version="2.13.0",
                          fits={"all_reduce": {"intra_node": record}})
    path = tmp_path / "calibration.yaml"
    save_calibration(profile, path)
    args = ["plan", "--model", "llama-2-13b", "--gpus", "8", "--global-batch", "32", "--seq-len", "2048",
            "--tp", "8", "-f", "json"]
    _, preset_out, _ = cli(*args)
    code, calibrated_out, _ = cli(*args, "--calibration", str(path))
    assert code == 0
    calibrated = json.loads(calibrated_out)
    assert calibrated["cluster"]["measured_links"] == {"all_reduce/intra_node": 50_000_000_000}
    # A slower measured NVLink makes tensor parallelism slower than the preset says.
    assert calibrated["top"][0]["seconds_tp_comm"] > json.loads(preset_out)["top"][0]["seconds_tp_comm"]


BAD_INPUTS = [
    (["--model", "llama-2-7b", "--gpus", "8"], "--global-batch"),
    (["--params", "7e9", "--gpus", "8", "--global-batch", "8"], "--layers"),
    (["--model", "gpt2", "--layers", "12", "--gpus", "8", "--global-batch", "8"], "--layers"),
    (["--model", "llama-2-7", "--gpus", "8", "--global-batch", "8"], "did you mean"),
    (["--model", "gpt2", "--gpus", "0", "--global-batch", "8"], "--gpus"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "0"], "--global-batch"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--efficiency", "0"], "--efficiency"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--stages", "5"], "--stages"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--recompute", "some"], "--recompute"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--top", "0"], "--top"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--sequence-parallel", "maybe"], "--sequence-parallel"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--micro-batches", "a"], "--micro-batches"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--virtual-stages", "0"], "--virtual-stages"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--tokens", "lots"], "--tokens"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--tie-tolerance", "150%"], "--tie-tolerance"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--cpu-adam-rate", "0"], "--cpu-adam-rate"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--calibration", "/nonexistent.yaml"], "nonexistent"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--format", "xml"], "--format"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--units", "bits"], "--units"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--gpu-memory", "0"], "--gpu-memory"),
    (["--model", "gpt2", "--gpus", "abc", "--global-batch", "8"], "--gpus"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--comm-overlap", "nccl"], "--comm-overlap"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--attention-kernel", "fa9"], "--attention-kernel"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--precision", "fp8"], "no FP8 tensor cores"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--gpu", "h100-80g", "--precision", "fp8",
      "--fp8-recipe", "mxfp8"], "MXFP8"),
    (["--model", "gpt2", "--gpus", "8", "--global-batch", "8", "--fp8-recipe", "rowwise"], "--fp8-recipe"),
]


@pytest.mark.parametrize("args,needle", BAD_INPUTS, ids=[needle for _, needle in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(cli, args, needle):
    code, out, err = cli("plan", *args)
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and err.startswith("zeroplan: error:") and needle in err


def test_progress_bar_appears_only_after_a_moment(monkeypatch):
    import sys

    from zeroplan.render.terminal import LateProgress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    bar = LateProgress("searching layouts", enabled=True, after_s=0.0)
    bar(1, 3)
    assert bar.bar is not None
    bar(3, 3)
    bar.close()
    quiet = LateProgress("searching layouts", enabled=False, after_s=0.0)
    quiet(1, 3)
    assert quiet.bar is None
    late = LateProgress("searching layouts", enabled=True, after_s=3600)
    late(1, 3)
    assert late.bar is None  # a quick run never draws one


def test_comm_overlap_framework_rule_changes_exposed_communication_only(cli):
    """ZeRO-3 over two nodes: FSDP's prefetch hides more of the gathers than the fitted baseline; compiled, the
    compute is the same and the assumptions name the rule. Eager, fsdp's gated layers run Hugging Face's block
    (docs/formulas.md §26): slower than compiled, and the assumptions say so."""
    args = ["--model", "llama-2-7b", "--gpus", "16", "--global-batch", "32", "--seq-len", "2048", "--stages", "3",
            "--tp", "1", "--pp", "1", "--no-offload", "--micro-batches", "2", "--recompute", "none", "--format", "json"]
    found = {}
    for rule in ("baseline", "fsdp", "megatron"):
        code, out, err = cli("plan", *args, "--comm-overlap", rule, "--torch-compile")
        assert code == 0, err
        data = json.loads(out)
        found[rule] = data["top"][0]
        assert any(f"{rule} framework rule" in line for line in data["assumptions"])
        assert not any("Hugging Face transformers' LlamaDecoderLayer" in line for line in data["assumptions"])
    assert found["fsdp"]["step_seconds"] < found["baseline"]["step_seconds"]
    assert found["megatron"]["step_seconds"] == pytest.approx(found["fsdp"]["step_seconds"])  # tp1, pp1: DP only
    code, out, err = cli("plan", *args, "--comm-overlap", "fsdp")
    assert code == 0, err
    data = json.loads(out)
    assert data["top"][0]["step_seconds"] > found["fsdp"]["step_seconds"]
    assert any("Hugging Face transformers' LlamaDecoderLayer" in line for line in data["assumptions"])
    assert not any("experimental ring" in line for line in data["assumptions"])  # no cp > 1 searched


def test_eager_block_notes_say_only_what_prices_the_model(cli):
    """An eager block's assumption appears where its count prices the layers: torchtitan's under its rule, none for an
    ungated model (GPT-2 keeps Korthikanti's count under fsdp); PyTorch's CP ring is named only when cp > 1 is tried."""
    base = ["--gpus", "8", "--global-batch", "8", "--seq-len", "2048", "--tp", "1", "--pp", "1", "--format", "json"]
    notes = {}
    for model, rule, extra in (("llama-3-8b", "torchtitan", ["--cp", "1,2"]), ("gpt2", "fsdp", [])):
        code, out, err = cli("plan", "--model", model, *base, "--comm-overlap", rule, *extra)
        assert code == 0, err
        notes[model] = " ".join(json.loads(out)["assumptions"])
    assert "torchtitan's Llama block" in notes["llama-3-8b"] and "experimental ring" in notes["llama-3-8b"]
    assert "LlamaDecoderLayer" not in notes["gpt2"] and "torchtitan's Llama block" not in notes["gpt2"]


def test_fp8_runs_the_linear_layers_on_the_fp8_peak_and_fsdp_gathers_in_fp8(cli):
    """Issue 21 item 1: --precision fp8 prices the linear layers' GEMMs at the FP8 peak (H100: 1979 TFLOP/s dense,
    twice bf16's) plus their casts, the rest in bf16, so the step is faster than bf16 but less than twice; memory is
    mixed precision's; under FSDP the tensorwise recipe gathers the weights in FP8 (less DP traffic), rowwise does not
    (and casts along both axes: slower)."""
    args = ["--model", "llama-3-8b", "--gpu", "h100-80g", "--gpus", "16", "--global-batch", "32", "--seq-len", "4096",
            "--stages", "3", "--tp", "1", "--pp", "1", "--no-offload", "--micro-batches", "2", "--recompute", "none",
            "--comm-overlap", "fsdp", "--format", "json"]
    found = {}
    for name, extra in (("bf16", ["--precision", "bf16"]), ("tensorwise", ["--precision", "fp8"]),
                        ("rowwise", ["--precision", "fp8", "--fp8-recipe", "rowwise"])):
        code, out, err = cli("plan", *args, *extra)
        assert code == 0, err
        data = json.loads(out)
        found[name] = data
    step = {name: data["top"][0]["step_seconds"] for name, data in found.items()}
    assert step["bf16"] / 2 < step["tensorwise"] < step["rowwise"] < step["bf16"]
    assert found["tensorwise"]["top"][0]["gpu_bytes_total"] == found["bf16"]["top"][0]["gpu_bytes_total"]
    dp = {name: data["top"][0]["seconds_dp_total"] for name, data in found.items()}
    assert dp["tensorwise"] < dp["rowwise"] == pytest.approx(dp["bf16"])
    assert any("fp8 (tensorwise)" in line and "in FP8" in line for line in found["tensorwise"]["assumptions"])


def test_async_tp_hides_tensor_parallel_collectives_inside_a_node_only(cli):
    """Issue 21 item 4: --async-tp (torchtitan's async TP) is a framework trait, not a fitted knob: inside a node the
    collectives its compiler pass fuses hide behind their GEMMs (all of the forward's and the recompute's, the
    backward's output-gradient all-gathers), the backward's input-gradient reduce-scatters (one AllReduce's worth
    in the six a layer runs under full recompute) stay exposed; the compute is unchanged; without sequence
    parallelism (AllReduces, which the pass does not fuse) or across nodes TP stays exposed."""
    base = ["--gpu", "h100-80g", "--seq-len", "4096", "--pp", "1", "--stages", "3", "--comm-overlap", "fsdp",
            "--no-offload", "--recompute", "full", "--micro-batches", "1", "--format", "json"]
    found = {}
    for label, extra in (("inside", ["--model", "llama-3-70b", "--gpus", "64", "--global-batch", "64", "--tp", "8",
                                     "--sequence-parallel", "on"]),
                         ("no sp", ["--model", "llama-3-70b", "--gpus", "64", "--global-batch", "64", "--tp", "8",
                                    "--sequence-parallel", "off"]),
                         ("across", ["--model", "llama-2-7b", "--gpus", "32", "--global-batch", "16", "--tp", "16",
                                     "--allow-cross-node-tp"])):
        for flag in ([], ["--async-tp"]):
            code, out, err = cli("plan", *base, *extra, *flag)
            assert code == 0, err
            found[label, bool(flag)] = json.loads(out)["top"][0]
    plain, hidden = found["inside", False], found["inside", True]
    assert plain["seconds_tp_comm"] / 6 <= hidden["seconds_tp_comm"] < plain["seconds_tp_comm"] / 2
    assert hidden["seconds_compute"] == plain["seconds_compute"]
    assert found["across", True]["seconds_tp_comm"] == found["across", False]["seconds_tp_comm"] > 0
    # without sequence parallelism TP runs AllReduces, which the pass does not fuse
    assert found["no sp", True]["seconds_tp_comm"] == found["no sp", False]["seconds_tp_comm"] > 0


def test_torch_compile_changes_the_element_wise_work_only(cli):
    """Issue 21 item 4: --torch-compile is a framework trait (docs/formulas.md §22.2): the compiled layer's element-wise
    traffic is smaller, so compute drops; communication is untouched, and the assumptions say so."""
    base = ["--model", "llama-2-7b", "--gpus", "8", "--global-batch", "16", "--seq-len", "4096", "--tp", "1", "--pp",
            "1", "--stages", "3", "--comm-overlap", "fsdp", "--no-offload", "--recompute", "none", "--micro-batches",
            "2", "--format", "json"]
    found = {}
    for flag in ([], ["--torch-compile"]):
        code, out, err = cli("plan", *base, *flag)
        assert code == 0, err
        found[bool(flag)] = json.loads(out)
    eager, compiled = found[False]["top"][0], found[True]["top"][0]
    assert compiled["seconds_compute"] < eager["seconds_compute"]
    assert compiled["seconds_dp_total"] == eager["seconds_dp_total"]
    assert any("torch.compile" in line for line in found[True]["assumptions"])
    assert not any("torch.compile" in line for line in found[False]["assumptions"])


def test_hybrid_sharding_partitions_over_the_shard_group_and_allreduces_across_replicas(cli):
    """Issue 21 item 2 (--dp-shard N: FSDP2 HSDP, ZeRO++ hpZ/MiCS): a hybrid plan's model states are those of full
    sharding over N ranks (the same layout on N·tp·pp GPUs), and its gradient reduction adds an AllReduce of the
    reduced partition across the replicas, on the links that group crosses."""
    from zeroplan.core.memory.deepspeed_buffers import BufferConfig
    from zeroplan.core.options import Option
    from zeroplan.core.precision import bytes_per_param
    from zeroplan.core.timing.collectives import collective_seconds
    from zeroplan.core.timing.dp_offload import dp_seconds, hybrid_dp_seconds, zero_dp_seconds
    from zeroplan.core.timing.dp_traffic import replica_allreduce
    from zeroplan.core.timing.step_time import LinkTable
    from zeroplan.inputs import presets

    args = ["--model", "llama-3-8b", "--gpu", "h100-80g", "--seq-len", "8192", "--tp", "1", "--pp", "1",
            "--stages", "3", "--comm-overlap", "fsdp", "--no-offload", "--recompute", "none", "--micro-batches", "1",
            "--format", "json"]
    import csv
    import io

    code, out, err = cli("plan", *args[:-2], "--format", "csv", "--gpus", "64", "--global-batch", "128",
                         "--dp-shard", "8,16,48")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {row["dp_shard"] for row in rows} == {"0", "8", "16"}  # 48 does not divide 64
    hybrid = next(row for row in rows if row["dp_shard"] == "8")
    code, out, err = cli("plan", *args, "--gpus", "8", "--global-batch", "16")
    assert code == 0, err
    node = json.loads(out)["top"][0]
    for part in ("params", "gradients", "optimizer_states"):
        assert int(hybrid[f"gpu_bytes_{part}"]) == node[f"gpu_bytes_{part}"]
    # The time: ZeRO-3 inside the 8-rank group (NVLink) plus the AllReduce of its 1/8 gradient partition over the
    # 8 replicas, one per node.
    cluster = presets.cluster("dgx-h100")
    links = LinkTable(cluster.gpu.intra_node_link, cluster.inter_node_link)
    per_param, shard = bytes_per_param(), 8_030_261_248
    found = hybrid_dp_seconds(Option(3), shard, 64, 8, 1, 8, per_param, 2, BufferConfig(), links)
    inside = zero_dp_seconds(Option(3), shard, 8, per_param, True, 2, BufferConfig(), links, 8)
    across = dp_seconds(replica_allreduce(shard, 8, 8, 2, 2), links, 1).reduce
    assert across == pytest.approx(2 * collective_seconds("all_reduce", -(-shard // 8) * 2, 8, links, 1), rel=0.01)
    assert found.reduce == pytest.approx(inside.reduce + across)
    assert found.gather_forward == inside.gather_forward and found.gather_backward == inside.gather_backward
    code, out, err = cli("plan", *args, "--gpus", "64", "--global-batch", "128", "--dp-shard", "1")
    assert code == 2 and "--dp-shard" in err
