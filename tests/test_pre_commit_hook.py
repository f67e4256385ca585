"""The zeroplan-check hook, run by pre-commit itself against a clone of this repository (as a user's
.pre-commit-config.yaml would use it): a clean DeepSpeed config passes, a refused one fails the commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real runs / traces / pre-commit: `pytest -m "not slow"` skips them

ROOT = Path(__file__).resolve().parents[1]
DEEPSPEED = Path(__file__).parent / "configs" / "deepspeed"


def _pre_commit() -> list[str] | None:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "pre_commit"]


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def test_hook_definition_names_the_real_command():
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "zeroplan-check"]
    assert hook["entry"] == "zeroplan check" and hook["language"] == "python"
    import re

    pattern = re.compile(hook["files"])
    for path in ("ds_config.json", "configs/ds_config_zero3.json", "train/deepspeed_zero2.json",
                 "runs/llama.plan.yaml", "accelerate_config.yaml"):
        assert pattern.search(path), path
    for path in ("package.json", "config.json", "mkdocs.yaml"):
        assert not pattern.search(path), path


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_pre_commit_runs_the_hook_from_a_clone(tmp_path):
    command = _pre_commit()
    if command is None:
        pytest.skip("pre-commit is not installed (it is in the dev extra)")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "zeroplan"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    if not (clone / ".pre-commit-hooks.yaml").exists():
        pytest.skip("the hook definition is not committed yet")
    rev = _git(clone, "rev-parse", "HEAD")
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "--quiet")
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {clone}\n    rev: {rev}\n    hooks:\n      - id: zeroplan-check\n")
    shutil.copy(DEEPSPEED / "good_zero2.json", project / "ds_config.json")
    (project / "package.json").write_text("{not json at all")  # not a DeepSpeed config: never checked
    _git(project, "add", ".")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    passed = subprocess.run([*command, "run", "--all-files"], cwd=project, capture_output=True, text=True,
                            env=env, timeout=900)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "zeroplan check" in passed.stdout and "Passed" in passed.stdout
    shutil.copy(DEEPSPEED / "bad_fp16_bf16.json", project / "ds_config_bad.json")
    _git(project, "add", ".")
    failed = subprocess.run([*command, "run", "--all-files"], cwd=project, capture_output=True, text=True,
                            env=env, timeout=900)
    assert failed.returncode == 1 and "Failed" in failed.stdout
    assert "ds_config_bad.json" in failed.stdout and "ZP002" in failed.stdout
