"""Every zeroplan command README.md and docs/*.md show runs as written (issue 23, item 11: a newcomer found one
that did not). The commands are read from the pages' code blocks (`zeroplan ...`, `$ zeroplan ...`,
`python -m zeroplan ...`, continuation lines joined, shell comments dropped) and run through zeroplan's entry
point in a working directory that holds the files the pages assume the reader has (a config.json, the
presets file docs/presets.md writes, the ds_config.json and plan.yaml the pages' own export commands write).

Commands that train, trace or measure (bench, validate, trace), need the network (a Hub id) or install
software are marked slow or skipped, each with its reason: SLOW and SKIPPED below."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

# Every command the docs show, each in a subprocess: CI and `python -m pytest` run them, the quick loop does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = Path(__file__).parent / "configs"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCKS = ("", "sh", "bash", "console", "shell", "text")

# Real runs: minutes, or a GPU; `pytest -m slow` runs them where torch (and a GPU for nccl) is there.
SLOW = {
    "zeroplan bench": "starts torch.distributed ranks and measures collectives",
    "zeroplan validate": "trains a model on real ranks",
    "zeroplan trace": "runs the Hugging Face model on fake tensors (a minute or more)",
    "--gpus 16384": "a 16,384-GPU search over cp and virtual stages",
}
# Not runnable here as written, for a reason the page gives itself.
SKIPPED = {
    "pip install": "installs zeroplan into a new virtual environment (network)",
    " ... ": "a placeholder for the reader's own flags",
    "meta-llama/": "a Hugging Face Hub id: needs the network",
    "--backend nccl": "needs CUDA GPUs",
    "--max-bytes 4GiB": "8 ranks with 4 GiB buffers each: a GPU node's run, not a test machine's",
}


def _commands() -> list[tuple[str, str]]:
    """(page:line, command) for every zeroplan command in a shell or console block of the pages."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in re.finditer(r"^```([a-z]*)\n(.*?)^```", text, flags=re.S | re.M):
            if block.group(1) not in SHELL_BLOCKS:
                continue
            first_line = text[:block.start(2)].count("\n") + 1
            lines = block.group(2).split("\n")
            index = 0
            while index < len(lines):
                line, number = lines[index].strip(), first_line + index
                while line.endswith("\\") and index + 1 < len(lines):
                    index += 1
                    line = line[:-1] + " " + lines[index].strip()
                index += 1
                line = line.removeprefix("$ ")
                words = line.split()
                if len(words) < 2 or words[1].endswith(":"):  # prose, or output ("zeroplan trace: llama ...")
                    continue
                if words[0] == "zeroplan" or words[:3] == ["python", "-m", "zeroplan"] or "&& zeroplan" in line:
                    found.append((f"{page.relative_to(ROOT)}:{number}", line))
    return found


def _marks(command: str) -> list:
    for needle, reason in SKIPPED.items():
        if needle in command:
            return [pytest.mark.skip(reason=reason)]
    return [pytest.mark.slow] if any(needle in command for needle in SLOW) else []


COMMANDS = _commands()


def _lab_presets() -> str:
    """The presets file docs/presets.md writes (its `# lab.yaml` block)."""
    text = (ROOT / "docs" / "presets.md").read_text(encoding="utf-8")
    return next(block for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if "# lab.yaml" in block)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """The files a reader of the pages has: a config.json (here and at path/to/), lab.yaml, and the ds_config.json,
    plan.yaml and accelerate config the pages' own commands make."""
    from zeroplan.cli.app import main

    here = tmp_path_factory.mktemp("reader")
    config = (CONFIGS / "llama-2-7b-hf.json").read_text()
    (here / "config.json").write_text(config)
    (here / "path" / "to").mkdir(parents=True)
    (here / "path" / "to" / "config.json").write_text(config)
    (here / "lab.yaml").write_text(_lab_presets())
    for argv in (["export", "deepspeed", "--model", "llama-2-7b", "--gpus", "16", "--cluster", "dgx-a100",
                  "--recompute", "full", "-o", str(here / "ds_config.json")],
                 ["export", "plan", "--model", "llama-2-7b", "--gpus", "16", "--cluster", "dgx-a100", "-o",
                  str(here / "plan.yaml")]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0, argv
    (here / "accelerate_config.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_machines: 1\n"
        "num_processes: 16\ndeepspeed_config:\n  deepspeed_config_file: ds_config.json\n")
    return here


def test_the_pages_show_commands_and_each_is_run_or_has_a_reason():
    assert len(COMMANDS) >= 30
    kinds = {command.split()[1] if command.startswith("zeroplan") else "python" for _, command in COMMANDS}
    assert {"estimate", "plan", "sweep", "check", "export", "presets"} <= kinds


@pytest.mark.parametrize("where,command", [pytest.param(w, c, id=w, marks=_marks(c)) for w, c in COMMANDS])
def test_a_documented_command_runs_as_written(cli, workspace, monkeypatch, tmp_path, where, command):
    for item in workspace.iterdir():  # each command in a fresh copy: one never sees another's outputs
        (shutil.copytree if item.is_dir() else shutil.copy)(item, tmp_path / item.name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    for part in command.split("&&"):
        words = shlex.split(part, comments=True)
        if words[:3] == ["python", "-m", "zeroplan"]:
            words = ["zeroplan", *words[3:]]
        target = None
        if ">" in words:
            target = words[words.index(">") + 1]
            words = words[:words.index(">")]
        assert words[0] == "zeroplan", (where, command)
        code, out, err = cli(*words[1:])
        assert code == 0, f"{where}: `{command}` exited {code}: {err.strip()}"
        if target is not None:
            (tmp_path / target).write_text(out)
            assert out
