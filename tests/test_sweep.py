"""`zeroplan sweep`: the grid's CSV (exact bytes), its agreement with `estimate`, and the plot."""

from __future__ import annotations

import builtins
import csv
import io
import json

import pytest

from zeroplan.planning.estimate_plan import build_plan
from zeroplan.inputs.estimate_inputs import EstimateInputs
from zeroplan.core.options import Option

GRID = ["sweep", "--model", "llama-2-7b", "--params", "13e9", "--gpus", "1,2,8", "--gpu", "a100-80g,h100-80g"]


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_has_one_row_per_combination_with_exact_bytes(cli):
    code, out, err = cli(*GRID)
    assert code == 0 and err == ""
    rows = rows_of(out)
    assert len(rows) == 2 * 2 * 3 * 4  # models × GPU types × counts × stages
    assert {r["model"] for r in rows} == {"llama-2-7b", "13e9"}
    for row in rows:
        total = int(row["gpu_bytes_total"])
        parts = sum(int(row[f"gpu_bytes_{k}"]) for k in ("params", "gradients", "optimizer_states", "activations",
                                                          "buffers"))
        assert parts == total
        assert (row["fits"] == "True") == (total <= int(row["usable_gpu_bytes"]))


def test_rows_agree_with_estimate():
    from zeroplan.estimate.sweep import SweepInputs, sweep_rows

    rows, _ = sweep_rows(SweepInputs.of(models="llama-2-13b", gpus="4,16", stages="1,3"))
    for row in rows:
        plan = build_plan(EstimateInputs.of(gpus=row["gpus"], model="llama-2-13b"))
        by_stage = {e.option.key: e for e in plan.estimates}
        estimate = by_stage[f"zero{row['stage']}/opt_none/params_none"]
        assert row["gpu_bytes_total"] == estimate.gpu_bytes["total"]
        chosen = plan.recommendation.option.option
        assert row["recommended_option"] == chosen.label
        assert row["recommended"] is (chosen == Option(row["stage"]))  # True/False, as estimate's column

        def fits(gpus: int) -> bool:
            only = EstimateInputs.of(gpus=gpus, model="llama-2-13b", stage=row["stage"], offload_optimizer="none",
                                  offload_params="none")
            return any(e.fits for e in build_plan(only).estimates)

        fewest = row["min_gpus_stage"]
        if fewest == "":  # never fits: activations alone do not shrink with more GPUs
            assert not fits(4096)
        else:
            assert fits(fewest) and (fewest == 1 or not fits(fewest - 1))


def test_pipeline_rows_for_stages_2_and_3_are_marked(cli):
    code, out, _ = cli("sweep", "--model", "llama-2-7b", "--gpus", "8", "--pp", "2")
    rows = rows_of(out)
    assert code == 0 and len(rows) == 4
    for row in rows:
        if int(row["stage"]) >= 2:
            assert row["gpu_bytes_total"] == "" and row["fits"] == "" and "stages 0-1" in row["note"]
        else:
            assert int(row["gpu_bytes_total"]) > 0


def test_json_and_table(cli):
    code, out, _ = cli("sweep", "--model", "gpt2", "--gpus", "1,2", "-f", "json")
    assert code == 0
    data = json.loads(out)
    assert data["command"] == "sweep" and len(data["rows"]) == 8 and data["assumptions"]
    code, out, _ = cli("sweep", "--model", "gpt2", "--gpus", "1,2", "-f", "table")
    assert code == 0 and "fewest" in out and "recommended" in out


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_is_written(cli, tmp_path, suffix):
    pytest.importorskip("matplotlib")
    target = tmp_path / f"memory{suffix}"
    code, _, err = cli("sweep", "--model", "gpt2,llama-2-7b", "--gpus", "1,2,4,8", "--plot", str(target))
    assert code == 0, err
    content = target.read_bytes()
    assert content.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in content[:2000]


def test_plot_errors(cli, tmp_path, monkeypatch):
    code, _, err = cli("sweep", "--model", "gpt2", "--gpus", "1", "--plot", str(tmp_path / "x.pdf"))
    assert code == 2 and "--plot" in err
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    code, _, err = cli("sweep", "--model", "gpt2", "--gpus", "1", "--plot", str(tmp_path / "x.png"))
    assert code == 2 and "zeroplan[plot]" in err and err.count("\n") == 1


@pytest.mark.parametrize("args,needle", [
    (["--gpus", "8"], "--model/--params"),
    (["--model", "gpt2", "--gpus", "0"], "--gpus"),
    (["--model", "gpt2", "--gpus", "8", "--stages", "7"], "--stages"),
    (["--model", "gpt2", "--gpus", "8", "-f", "xml"], "--format"),
    (["--model", "gpt2", "--gpus", "3", "--tp", "2"], "tp(2)"),
    (["--params", "abc", "--gpus", "8"], "--params"),
])
def test_bad_input(cli, args, needle):
    code, out, err = cli("sweep", *args)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1


def test_recommended_column_reads_as_estimates(cli):
    """The same column name holds the same kind of value in estimate's CSV and sweep's: True or False."""
    code, out, _ = cli("sweep", "--model", "llama-2-7b", "--gpus", "8,16", "-f", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {row["recommended"] for row in rows} <= {"True", "False"}
    code, estimate_out, _ = cli("estimate", "--model", "llama-2-7b", "--gpus", "8", "-f", "csv")
    chosen = [row for row in csv.DictReader(io.StringIO(estimate_out)) if row["recommended"] == "True"]
    (sweep_chosen,) = [row for row in rows if row["gpus"] == "8" and row["recommended"] == "True"]
    assert sweep_chosen["stage"] == chosen[0]["stage"] and chosen[0]["offload_optimizer"] == "none"


def test_a_long_sweep_shows_progress_on_a_terminal_only(cli, monkeypatch):
    """Progress on stderr, cell by cell, when stderr is a terminal and the sweep takes more than a moment;
    never on stdout, never with --no-progress, never into a pipe (issue 23, item 10)."""
    import functools
    import sys

    from zeroplan.cli import sweep_cmd
    from zeroplan.estimate.sweep import SweepInputs, sweep_rows
    from zeroplan.render.terminal import LateProgress

    seen = []
    sweep_rows(SweepInputs.of(models="llama-2-7b,llama-2-13b", gpus="8,16,32"), lambda done, total: seen.append(
        (done, total)))
    assert seen == [(done, 6) for done in range(1, 7)]
    monkeypatch.setattr(sweep_cmd, "LateProgress", functools.partial(LateProgress, after_s=0.0))
    args = ("sweep", "--model", "llama-2-7b,llama-2-13b", "--gpus", "8,16,32", "-f", "csv")
    code, out, err = cli(*args)
    assert code == 0 and err == ""  # not a terminal: nothing
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    code, out, err = cli(*args)
    assert code == 0 and "sweeping the grid" in err and "\r" in err and "sweeping" not in out
    code, out, err = cli(*args, "--no-progress")
    assert code == 0 and err == ""
