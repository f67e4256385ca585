"""The benchmark scripts still run against today's library (they import it directly, so a refactor can break
them without any other test noticing): each one's cheapest real path, not its timing."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_published_runs_predicts_a_calibration_and_a_held_out_run():
    runs = _load("published_runs")
    for name in ("calibration", "heldout"):
        outcome = runs.predict(runs.load(name)[0])
        assert outcome is not None


def test_plan_search_builds_the_llama_405b_request_and_measures_one_size():
    search = _load("plan_search")
    assert search.llama_request() is not None
    seconds, total, layouts, plans, fitting = search.measure(64, 1536, 1)
    assert plans > 0 and 0 < fitting <= plans


def test_plan_search_dumps_what_plan_prints_without_its_timing(tmp_path):
    search = _load("plan_search")
    search.dump(tmp_path, {"small": dict(model="llama-2-7b", gpus=8, global_batch=16, seq_len=2048)})
    document = json.loads((tmp_path / "small.json").read_text())
    assert document["search"]["seconds"] is None and document["search"]["plans_evaluated"] > 0
    rows = (tmp_path / "small.csv").read_text().splitlines()
    assert len(rows) == 1 + document["search"]["plans_evaluated"]  # a header, then every plan


def test_the_other_scripts_import():
    for name in ("startup", "fit_step_time", "trace_accuracy", "trace_budget", "bench_overhead", "api_per_call",
                 "cluster_scaling"):
        _load(name)


def test_held_out_runs_carry_their_framework_overlap_rule():
    """A row's comm_overlap and attention kernel (its framework, with the source in its audit notes) reach the plan
    request; the Megatron-LM/DeepSpeed-era calibration rows keep the baseline rule DP_OVERLAP is fitted on."""
    from zeroplan.core.timing.step_time import COMM_OVERLAPS, DP_OVERLAP, flash_efficiency

    runs = _load("published_runs")
    held_out = {run["id"]: run for run in runs.load("heldout")}
    for run_id in ("A/DGXC GPT3-175B BF16 128 H100", "A/MPT-7B 8xH100 seq2048 FSDP noAC"):
        run = held_out[run_id]
        rule = COMM_OVERLAPS[run["comm_overlap"]]
        assert any("comm_overlap" in note for note in run["audit"])
        _, request, refused = runs.resolve_run(run)
        assert refused is None
        assert request.machine.dp_overlap == rule.dp_overlap
        assert (request.machine.tp_hidden, request.machine.pp_hidden) == (rule.tp_hidden, rule.pp_hidden)
    for run in runs.load("calibration"):
        # suite F: MosaicML's Composer FSDP; suite G: NVIDIA's DGXC NeMo recipes (Megatron-Core), FP8
        assert ("comm_overlap" in run) == run["id"].startswith(("F/", "G/"))
        if "attention_kernel" in run:
            assert any(note.startswith("attention_kernel") for note in run["audit"])
    mpt = next(run for run in runs.load("calibration") if run["id"] == "F/MPT-1B 8xH100 seq2048 FSDP noAC")
    assert runs.resolve_run(mpt)[1].machine.flash_efficiency == flash_efficiency("h100-80g", "fa1")
    _, request, _ = runs.resolve_run(runs.load("calibration")[0])
    assert request.machine.dp_overlap == DP_OVERLAP and not request.machine.tp_hidden


def test_step_time_holds_issue_13s_bar_on_both_sets():
    """Issue #13: calibration mean |ln(predicted/published)| <= 0.10 and worst <= ln 1.25; the held-out tier-A rows,
    never fitted on, within the same mean (docs/plan.md has the per-run tables)."""
    import math

    runs = _load("published_runs")
    calibration = runs.summary([runs.predict(run) for run in runs.load("calibration")])
    assert calibration["refused"] == 0
    assert calibration["mean_abs_ln"] <= 0.10 and calibration["worst_abs_ln"] <= math.log(1.25)
    headline = runs.summary([runs.predict(run) for run in runs.load("heldout") if run["headline"]])
    assert headline["refused"] == 0 and headline["mean_abs_ln"] <= 0.10


def test_free_search_of_a_calibration_run_breaks_no_rule():
    # `published_runs.py --free`: the search with every layout choice open, against the published layout pinned.
    runs = _load("published_runs")
    run = next(r for r in runs.load("calibration") if r["id"] == "D/kor-22b-seqsel")
    row = runs.free_search(run)
    assert row["broken"] == [] and row["free_s"] > 0 and "ERROR" not in row["verdict"]
    assert row["free_s"] <= row["pinned_s"]  # the search is exhaustive: the published layout is one of its plans


def test_bias_is_reported_beside_spread_by_band(capsys):
    """Issue 21 item 5: mean ln(predicted/published) beside mean |ln| for each set and by size, sequence and
    framework band; the 'all' band is the set's own summary."""
    import math

    runs = _load("published_runs")
    held_out = {run["id"]: run for run in runs.load("heldout")}
    picked = [runs.predict(held_out[name]) for name in ("A/MPT-7B 8xH100 seq2048 FSDP noAC",
                                                       "A/DGXC Llama3.1-405B BF16 576 H100")]
    assert runs.bands_of(picked[0]) == ["size 3-30B", "seq <=4k", "framework PyTorch FSDP"]
    assert runs.bands_of(picked[1]) == ["size >200B", "seq 8-16k", "framework Megatron-Core/NeMo"]
    table = runs.print_bands({"held-out": runs.scored(picked)})
    summary = runs.summary(picked)
    assert math.isclose(table["all"]["held-out"]["mean_ln"], summary["mean_ln"])
    assert math.isclose(table["all"]["held-out"]["mean_abs_ln"], summary["mean_abs_ln"])
    assert table["size >200B"]["held-out"]["n"] == 1 and "size <3B" not in table
    assert "mean ln(pred/pub)" in capsys.readouterr().out


def test_api_per_call_measures_the_call_and_the_evaluation():
    found = _load("api_per_call").measure(1, params=13e9, gpus=8)
    assert set(found) == {"api", "evaluation", "to_dict"} and all(value > 0 for value in found.values())


def test_cluster_scaling_times_an_estimate_in_a_convention():
    assert _load("cluster_scaling").estimate_seconds("llama-2-7b", 8, "framework", {"framework": "torch"}, 1) > 0


def test_published_moe_runs_count_their_models_and_run():
    """The MoE section: each model's total and active parameters against its model card (gpt-oss-120b: 116.8B
    total, 5.1B active, the card counting the unembedding but not the input embedding, a lookup; Qwen3-235B-A22B:
    235B total, 22B active), and every expressible row priced."""
    from zeroplan.core.model.experts import active_params

    runs = _load("published_runs")
    rows = {run["id"]: run for run in json.loads((BENCHMARKS / "data" / "moe_runs.json").read_text())["runs"]}
    gpt_oss = runs.moe_model(rows["mbridge_2511_gb200_gptoss120b_bf16"])
    qwen3 = runs.moe_model(rows["mbridge_2511_gb200_qwen3_235b_bf16"])
    lookup = gpt_oss.shape.vocab * gpt_oss.shape.hidden
    assert abs(gpt_oss.params / 116.8e9 - 1) < 0.01 and abs((active_params(gpt_oss) - lookup) / 5.1e9 - 1) < 0.01
    assert abs(qwen3.params / 235e9 - 1) < 0.01 and abs(active_params(qwen3) / 22e9 - 1) < 0.03
    outcome = runs.moe_predict(rows["mbridge_2511_b200_gptoss120b_bf16"])
    assert outcome.refused is None and outcome.plan.ep == 8 and outcome.predicted > 0
    assert outcome.published == 512 * 4096 / (8213 * 64)
    assert runs.moe_predict(rows["mbridge_2511_b200_dsv3_mtp_fp8mx"]).refused.startswith("not expressible")
    deepseek = runs.moe_predict(rows["deepseek_v3_techreport_pretrain"])  # held out: the report's own run
    assert deepseek.plan.ep == 64 and deepseek.plan.pp == 16 and rows["deepseek_v3_techreport_pretrain"]["heldout"]
    assert deepseek.published == 15360 * 4096 / (1543.2 * 2048)


def test_token_drop_moe_rows_are_priced_without_the_host_sync_and_kept_out_of_the_summaries():
    """The 25.09 token-drop rows (benchmarks/data/moe_runs.json, token_drop: true): a capacity factor (1.0, padded:
    Megatron-Bridge's apply_moe_token_drop) takes the dropless host sync away (search.inputs.moe_traits), so each is
    priced faster than the same row dropless by the sync of every MoE layer and micro-batch; they are scored in a
    section of their own, and the calibration and held-out summaries count only the other rows."""
    import copy

    from zeroplan.core.timing.machine import MOE_DROPLESS_SYNC_S

    runs = _load("published_runs")
    rows = json.loads((BENCHMARKS / "data" / "moe_runs.json").read_text())["runs"]
    dropping = [run for run in rows if run.get("token_drop")]
    assert len(dropping) == 6 and all(run["moe_capacity_factor"] == 1.0 and "25.09" in run["source"]
                                      and run["moe_dispatcher"] == "alltoall" for run in dropping)
    run = next(run for run in dropping if run["id"] == "mbridge_2509_b200_qwen3_30b_tokendrop")
    dropless = copy.deepcopy(run)
    del dropless["moe_capacity_factor"]
    dropped, synced = runs.moe_predict(run), runs.moe_predict(dropless)
    layer_micro_batches = 48 * 512 // 8  # 48 MoE layers, 64 micro-batches of 1 on each of the 8 DP ranks (pp 1)
    assert math.isclose(synced.predicted - dropped.predicted, layer_micro_batches * MOE_DROPLESS_SYNC_S, rel_tol=1e-6)
    report = runs.moe_section(False)
    assert report["token_drop_raw"]["scored"] == 6
    counted = sum(report[key]["scored"] + report[key]["refused"] for key in ("raw", "heldout_raw"))
    assert counted == sum(1 for run in rows if not run.get("token_drop")) == len(rows) - 6


def test_token_drop_rows_per_layer_times_rule_out_a_host_bound_moe_layer():
    """moe_layer_times: a row's step per layer and micro-batch (the 25.09 table's tokens/s/GPU → step, over 64
    micro-batches of 1 × 48 layers for Qwen3-30B-A3B on 8 DGX-B200, 128 × 94/8 for Qwen3-235B-A22B on 64). The two
    B200 token-drop rows launch the same kernels per layer and micro-batch (FP8 per-tensor, EP 8: 16 local experts,
    tp 1, micro-batch 1, no CUDA graphs, no host sync), so a host-bound layer, max(priced, host time), would need one
    host time above the 235B row's priced 7.8-8.0 ms and below the 30B row's published 4.7 ms: none exists, and the
    235B row still misses 2.6 ms (docs/plan.md, MoE section: the host-launch test)."""
    runs = _load("published_runs")
    rows = {run["id"]: run for run in runs.load("moe")}
    small = runs.moe_layer_times(runs.moe_predict(rows["mbridge_2509_b200_qwen3_30b_tokendrop"]))
    large = runs.moe_layer_times(runs.moe_predict(rows["mbridge_2509_b200_qwen3_235b_tokendrop"]))
    assert math.isclose(small["published"], 512 * 4096 / (18066 * 8) / (64 * 48), rel_tol=1e-9)
    assert math.isclose(large["published"], 1024 * 4096 / (rows["mbridge_2509_b200_qwen3_235b_tokendrop"]
                                                          ["tokens_per_s_per_gpu"] * 64) / (128 * 94 / 8), rel_tol=1e-9)
    assert small["priced"] <= small["predicted"] and math.isclose(small["gap"], small["published"] - small["predicted"])
    assert large["predicted"] > small["published"]  # the 235B layer is priced above any host time the 30B row allows
    assert large["gap"] > 0.002  # yet it is 2.6 ms short: not a host-bound layer


def test_the_235b_sync_pair_adds_back_the_all_to_all_its_dropless_side_hid(monkeypatch):
    """core.timing.machine MOE_DROPLESS_SYNC_HIDDEN_A2A: the Qwen3-235B-A22B B200 pair's dropless row overlaps its
    all-to-all (moe_a2a_overlap) and its token-drop row does not, so the measured difference is the sync less that
    all-to-all; the constant is the row's exposed all-to-all per MoE layer and micro-batch as
    core.timing.step_time.ep_alltoall_layer_seconds prices it on the row's own layout and machine."""
    import zeroplan.core.timing.step_time as step_time
    from zeroplan.core.timing.machine import MOE_DROPLESS_SYNC_HIDDEN_A2A, MOE_DROPLESS_SYNC_PAIRS

    runs = _load("published_runs")
    rows = {run["id"]: run for run in json.loads((BENCHMARKS / "data" / "moe_runs.json").read_text())["runs"]}
    dropless = rows["mbridge_2511_b200_qwen3_235b_fp8mx"]
    assert dropless["moe_a2a_overlap"] and not rows["mbridge_2509_b200_qwen3_235b_tokendrop"]["moe_a2a_overlap"]
    seen = []
    layer_seconds = step_time.layer_seconds
    monkeypatch.setattr(step_time, "layer_seconds", lambda *a: seen.append(a) or layer_seconds(*a))
    outcome = runs.moe_predict(dropless)
    layout, flops, machine = seen[-1]
    assert machine.moe_a2a_hidden and outcome.plan.time.tp_comm == 0  # the overlap hides it in this row
    hidden = step_time.ep_alltoall_layer_seconds(layout, flops, machine)
    assert math.isclose(MOE_DROPLESS_SYNC_HIDDEN_A2A[dropless["sync_pair"]], hidden, rel_tol=1e-3)
    pairs = list(MOE_DROPLESS_SYNC_PAIRS.values())  # corrected, the two pairs' prices agree within 5%
    assert max(pairs) / min(pairs) < 1.05


def test_judge_moe_rows_carry_their_26_02_recipe_traits():
    """Every MoE row of the judge set names the Megatron-Bridge recipe its traits come from (v0.3.0, the 26.02
    container's release) and carries the CUDA-graph scope that recipe sets."""
    runs = _load("published_runs")
    moe = [run for run in runs.load("judge") if "ep" in run.get("layout", {})]
    assert len(moe) == 9
    for run in moe:
        assert "v0.3.0" in run["traits_source"] and run["moe_dispatcher"] in ("alltoall", "deepep", "hybridep")
        assert "cuda_graph_scope" in run and not any(x.startswith("MoE traits") for x in run["assumed"]), run["id"]


@pytest.mark.slow  # builds the model in transformers on the meta device
def test_model_types_checks_a_described_a_meta_only_and_a_composite_type():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    types = _load("model_types")
    released = types.released_configs()
    rows = {name: types.check(name, released) for name in ("qwen3_moe", "mamba", "gemma3")}
    assert (rows["qwen3_moe"]["description"], rows["qwen3_moe"]["with_meta"]) == ("exact", "exact")
    assert (rows["mamba"]["description"], rows["mamba"]["with_meta"]) == ("refused", "exact")
    assert rows["gemma3"]["description"] == "exact" and "vision tower" in rows["gemma3"]["note"]


def test_torchtitans_grand_teton_rows_run_on_their_own_preset():
    """torchtitan's H100 rows (judge and held-out) ran on Grand Teton's 96GB HBM2e H100s at 500 W: they plan on the
    grand-teton-h100 node (its h100-96g-500w GPU), not on a DGX H100 with the memory overridden, and none is priced
    as a neighbour."""
    runs = _load("published_runs")
    rows = [run for name in ("judge", "heldout") for run in runs.load(name) if run.get("gpu") == "h100-96g-500w"]
    assert len(rows) == 18
    for run in rows:
        assert run["cluster"] == "grand-teton-h100" and "gpu_memory" not in run.get("overrides", {}), run["id"]
        assert not run.get("hardware_as")
        layout, request, refused = runs.resolve_run(run)
        assert refused is None and request.cluster.gpu.name == "h100-96g-500w", run["id"]


def test_judge_runs_are_new_and_each_is_scored_or_refused_with_its_reason(capsys):
    """benchmarks/data/judge_runs.json (issue 21's outside judge, played early): no row repeats a run of the other
    three sets, every row names its source and the figure it quotes, and `--set judge` scores every row or refuses it
    with a reason (a row's own `not_expressible`, or the planner's refusal); the band table carries the judge's bands."""
    import math

    runs = _load("published_runs")
    judge = runs.load("judge")
    others = {run["id"] for name in ("calibration", "heldout", "moe") for run in runs.load(name)}
    ids = [run["id"] for run in judge]
    assert len(ids) == len(set(ids)) >= 25 and not set(ids) & others
    assert all(run["source"] and run["quote"] for run in judge)
    for run in judge:
        outcome = runs.judge_predict(run)
        if outcome.error is None:
            assert outcome.refused and len(outcome.refused) > len("refused: ") + 10, run["id"]
            assert run.get("not_expressible") is None or run["not_expressible"] in outcome.refused
        else:
            assert outcome.refused is None and math.isfinite(outcome.error) and outcome.published > 0
    report = runs.judge_section(False)
    assert report["judge all"]["scored"] + report["judge all"]["refused"] == len(judge)
    assert {"gpu b200", "gpu gb300", "precision fp8", "moe", "seq >=32k"} <= set(report["bands"])
    # the preset-hardware column only while some row is priced on a neighbour's hardware (it would repeat "judge all")
    neighbours = [run for run in judge if run.get("hardware_as")]
    out = capsys.readouterr().out
    assert ("judge, preset hardware" in out) == bool(neighbours)
    assert ("judge preset hardware" in report) == bool(neighbours)


def test_a_held_out_headline_row_assumes_no_figure_the_step_needs():
    """The headline is tier A: every figure the step needs published. A row that lists what it had to assume
    (`missing`: an unpublished peak, an unstated batch) is scored in "held-out rest", never in the headline."""
    runs = _load("published_runs")
    held_out = runs.load("heldout")
    headline = [run for run in held_out if run["headline"]]
    assert headline and all(run["tier"] == "A" for run in headline)
    assert [run["id"] for run in headline if run.get("missing")] == []
    grand_teton = [run for run in held_out if run["gpu"] == "h100-96g-500w"]
    assert grand_teton and not any(run["headline"] for run in grand_teton)  # their tensor peak is an estimate


def test_hybrid_sharded_held_out_rows_reach_the_plan_with_their_shard_group():
    """Suite H (issue 21): the published HSDP rows (FSDP HYBRID_SHARD, shard in the node) carry `dp_shard`, it
    reaches the plan request's search space, and the row is scored on a plan with that shard group, not on the
    fully sharded plan the search also evaluates; a row without `dp_shard` keeps full sharding."""
    runs = _load("published_runs")
    held_out = runs.load("heldout")
    hybrid = [run for run in held_out if run.get("dp_shard")]
    assert len(hybrid) >= 4 and all(run["id"].startswith("H/") and run["quote"] for run in hybrid)
    run = next(run for run in hybrid if run["gpus"] == 128 and not run["overrides"])
    layout, request, refused = runs.resolve_run(run)
    assert refused is None and layout["dp_shard"] == 8
    assert request.space.dp_shard == (8,)
    outcome = runs.predict(run, request, layout)
    assert outcome.plan.dp_shard == 8 and outcome.plan.dp == 128
    full = next(run for run in held_out if run["id"] == "A/MPT-7B 8xH100 seq2048 FSDP noAC")
    layout, request, _ = runs.resolve_run(full)
    assert layout["dp_shard"] is None and request.space.dp_shard == ()
