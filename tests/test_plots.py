"""estimate --plot and plan --plot: the pictures say what the tables say (SVG text is real text)."""

from __future__ import annotations

import json
import re
import sys

import pytest

pytest.importorskip("matplotlib")

from zeroplan.cli.app import main  # noqa: E402


def _run(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def test_estimate_picture_marks_the_recommendation_and_the_usable_line(tmp_path, capsys):
    svg = tmp_path / "memory.svg"
    code, out, _ = _run(["estimate", "--model", "llama-2-13b", "--gpus", "8", "-f", "json", "--plot", str(svg)], capsys)
    assert code == 0
    data, text = json.loads(out), svg.read_text()
    key = data["recommendation"]["key"]
    chosen = next(option["label"] for option in data["options"] if option["key"] == key)
    assert f"recommended: {chosen}" in text and f"→ {chosen}" in text
    usable = data["cluster"]["usable_gpu_bytes"] / 2**30
    assert f"usable ({usable:.1f} GiB)" in text
    for category in ("parameters", "gradients", "optimizer states", "activations", "buffers"):
        assert category in text
    for option in data["options"]:  # every option's total is printed beside its bar
        assert f"{option['gpu_bytes']['total'] / 2**30:.1f} GiB" in text


def test_plan_picture_draws_each_top_plan_with_its_step_time(tmp_path, capsys):
    svg = tmp_path / "plans.svg"
    code, out, _ = _run(["plan", "--model", "llama-2-7b", "--gpus", "16", "--global-batch", "64", "--no-progress",
                         "-f", "json", "--plot", str(svg)], capsys)
    assert code == 0
    data, text = json.loads(out), svg.read_text()
    assert len(re.findall(r"#\d+ dp\d+×tp\d+×pp\d+", text)) == len(data["top"])
    for plan in data["top"]:
        assert f"{plan['step_seconds']:.2f} s" in text
    assert "compute" in text and "seconds per optimizer step" in text


def test_png_is_a_png(tmp_path, capsys):
    png = tmp_path / "memory.png"
    assert _run(["estimate", "--params", "13e9", "--gpus", "8", "--plot", str(png)], capsys)[0] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv,said", [
    (["estimate", "--params", "13e9", "--plot", "memory.jpg"], "neither .png nor .svg"),
    (["estimate", "--params", "13e9", "--plot", "/nonexistent/dir/m.png"], "not a directory"),
    (["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "8", "--plot", "p.pdf"], "neither"),
])
def test_bad_plot_paths(argv, said, capsys):
    code, out, err = _run(argv, capsys)
    assert code == 2 and said in err and err.count("\n") == 1 and "--plot" in err


def test_plot_and_output_must_differ(tmp_path, capsys):
    same = str(tmp_path / "x.svg")
    code, _, err = _run(["estimate", "--params", "13e9", "-o", same, "--plot", same], capsys)
    assert code == 2 and "--plot" in err


def test_without_matplotlib_the_fix_is_named(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = _run(["estimate", "--params", "13e9", "--plot", str(tmp_path / "m.png")], capsys)
    assert code == 2 and "pip install 'zeroplan[plot]'" in err
