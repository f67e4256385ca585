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


def _documented_hook_configs() -> list[tuple[str, dict]]:
    """Every .pre-commit-config.yaml entry the docs show (README, docs/*.md, the hook file's own comment)."""
    import re

    yaml = pytest.importorskip("yaml")
    found = []
    for path in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for block in re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
            data = yaml.safe_load(block)
            if "zeroplan-check" in block and isinstance(data, dict) and "repos" in data:
                found += [(path.name, repo) for repo in data["repos"]]
    comment = [line[2:] for line in (ROOT / ".pre-commit-hooks.yaml").read_text().splitlines()
               if line.startswith("#  ") or line.startswith("#   ")]
    found += [(".pre-commit-hooks.yaml", repo) for repo in yaml.safe_load("\n".join(comment))["repos"]]
    return found


def test_documented_hook_snippets_name_a_rev_that_exists_and_the_dependencies_a_hub_id_needs():
    """The snippets' rev resolves in this repository (v0.1.0 was never tagged), and a hook whose --model is
    a Hub id (ORG/NAME) installs huggingface_hub into the hook's environment."""
    from zeroplan.inputs.hub import looks_like_hub_id

    snippets = _documented_hook_configs()
    assert len(snippets) >= 3
    for name, repo in snippets:
        if shutil.which("git") is not None and (ROOT / ".git").exists():
            resolved = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{repo['rev']}^{{commit}}"],
                                      cwd=ROOT, capture_output=True, text=True)
            assert resolved.returncode == 0, f"{name}: rev {repo['rev']} is not in this repository"
        for hook in repo["hooks"]:
            args = [str(a) for a in hook.get("args", [])]
            model = args[args.index("--model") + 1] if "--model" in args else None
            if model is not None and looks_like_hub_id(model):
                assert "huggingface_hub" in hook.get("additional_dependencies", []), name
