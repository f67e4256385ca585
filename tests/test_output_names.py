"""Output names and what reaches a terminal (issue 23, item 9): two outputs of one command never share a file,
a name ending in / is a directory, and control characters from a presets file or an input never reach the
terminal raw."""

from __future__ import annotations

import pytest

PLAN = ("plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "8", "--no-progress")


def test_plot_and_write_deepspeed_on_one_file_are_refused_before_any_work(cli, tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "both.png"
    code, out, err = cli(*PLAN, "--plot", str(target), "--write-deepspeed", str(target))
    assert code == 2 and not out and "--write-deepspeed" in err and "--plot" in err
    assert not target.exists()


@pytest.mark.parametrize("command,option", [(PLAN, "--write-deepspeed"),
                                            (("estimate", "--params", "7e9", "--gpus", "8"), "-o")])
def test_a_name_ending_in_a_slash_is_a_directory_not_a_file(cli, tmp_path, monkeypatch, command, option):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(*command, option, "d/")
    assert code == 2 and "directory" in err and "d/" in err
    assert not (tmp_path / "d").exists()


ESCAPES = """gpus:
  evil:
    description: "x\\e]0;pwned\\a\\e[2J\\e[31mred\\rover"
    memory: 46068MiB
    hbm_bandwidth: 864GB/s
    bf16_tflops: 181
    intra_node_link: {bandwidth: 31.5GB/s, latency_us: 10}
    sources: [test]
"""


def test_control_characters_from_a_presets_file_are_shown_as_escapes(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")  # even with colour on, only zeroplan's own sequences pass
    presets_file = tmp_path / "evil.yaml"
    presets_file.write_text(ESCAPES)
    code, out, err = cli("presets", "list", "--presets", str(presets_file))
    assert code == 0, err
    line = next(line for line in out.splitlines() if "evil" in line)
    assert "\x07" not in out and "\r" not in out and "\x1b]" not in out and "\x1b[2" not in out
    assert "\\x1b]0;pwned\\x07" in line and "\\x1b[31mred" in line
    # a name with control characters is refused by the presets validation; its error line shows them escaped
    named = tmp_path / "evil-name.yaml"
    named.write_text(ESCAPES.replace("  evil:", '  "evil\\e[2J":'))
    code, out, err = cli("presets", "list", "--presets", str(named))
    assert code == 2 and "control characters" in err and "\x1b" not in err and "\\x1b[2J" in err


def test_an_error_line_shows_control_characters_as_escapes(cli):
    code, _, err = cli("estimate", "--params", "7e9", "--gpus", "8", "--gpu", "a100\x1b[2J\x1b]0;x\x07")
    assert code == 2 and "\x1b" not in err and "\x07" not in err and "\\x1b[2j" in err.lower()
