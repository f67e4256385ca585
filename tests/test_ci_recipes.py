"""The CI recipes in docs/check.md, run as written on a sample repository layout: the GitHub Actions
step's command (its `--format github` annotations) and the pre-commit snippet."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = Path(__file__).parent / "configs"
DOC = ROOT / "docs" / "check.md"


def _workflow_command() -> list[str]:
    """The `run: >` step named "zeroplan check" of the documented workflow, folded as YAML folds it."""
    yaml = pytest.importorskip("yaml")
    block = re.search(r"```yaml\n(# \.github/workflows/.*?)```", DOC.read_text(), re.S)
    assert block, "docs/check.md has no GitHub Actions workflow"
    workflow = yaml.safe_load(block.group(1))
    (step,) = [s for job in workflow["jobs"].values() for s in job["steps"] if s.get("name") == "zeroplan check"]
    return shlex.split(step["run"])


def _sample_repository(root: Path) -> None:
    configs = root / "configs"
    configs.mkdir(parents=True)
    ds = json.loads((CONFIGS / "deepspeed" / "good_zero3_offload.json").read_text())
    ds["zero_optimization"]["reduce_bucket_sise"] = 5e8  # a typo DeepSpeed refuses (ZP008)
    (configs / "ds_zero3.json").write_text(json.dumps(ds, indent=2) + "\n")
    shutil.copy(CONFIGS / "accelerate" / "inline_zero3_offload.yaml", configs / "accelerate.yaml")
    shutil.copy(CONFIGS / "plans" / "good_llama7b.yaml", configs / "plan.yaml")


def test_the_documented_workflow_step_annotates_the_offending_line(tmp_path):
    command = _workflow_command()
    assert command[:2] == ["zeroplan", "check"] and "--format" in command and "github" in command
    _sample_repository(tmp_path)
    done = subprocess.run([sys.executable, "-m", "zeroplan", *command[1:]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr  # the job fails
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    typo = [a for a in annotations if "title=ZP008" in a]
    assert typo, done.stdout
    match = re.match(r"::error file=configs/ds_zero3\.json,line=(\d+),col=(\d+),title=ZP008::", typo[0])
    assert match, typo[0]
    line = int(match.group(1))
    assert "reduce_bucket_sise" in (tmp_path / "configs" / "ds_zero3.json").read_text().splitlines()[line - 1]
    assert all(re.match(r"::(error|warning|notice) file=[^,]+(,line=\d+,col=\d+)?,title=ZP\d{3}::", a)
               for a in annotations), annotations


def test_the_documented_pre_commit_snippet_names_the_hook():
    yaml = pytest.importorskip("yaml")
    block = re.search(r"```yaml\n(# \.pre-commit-config\.yaml.*?)```", DOC.read_text(), re.S)
    assert block, "docs/check.md has no pre-commit snippet"
    config = yaml.safe_load(block.group(1))
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    ids = {hook["id"] for hook in hooks}
    used = [hook["id"] for repo in config["repos"] for hook in repo["hooks"]]
    assert used and set(used) <= ids
