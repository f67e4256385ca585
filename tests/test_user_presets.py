"""User presets: --presets FILE and the config directory's presets.yaml add or override built-in entries with
the same schema; `zeroplan presets validate FILE` names the line and column of a bad field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeroplan.inputs import presets
from zeroplan.inputs.presets import user_config_dir  # the real one: the suite's fixture replaces it at test time

LAB = """\
gpus:
  lab-gpu:
    description: A lab GPU
    memory: 49140MiB
    hbm_bandwidth: 960GB/s
    bf16_tflops: 181
    intra_node_link: {bandwidth: 31.5GB/s, latency_us: 10}
    default_cluster: lab-node
    sources: [lab nvidia-smi]
clusters:
  lab-node:
    description: Four lab GPUs
    gpu: lab-gpu
    gpus_per_node: 4
    inter_node_bandwidth_per_gpu: 25Gb/s
    inter_node_latency_us: 10
    cpu_memory: 512GB
    nvme: 4TB
    nvme_bandwidth: 7GB/s
    pcie_generation: 4
    sources: [lab inventory]
"""


@pytest.fixture
def lab_file(tmp_path) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(LAB, encoding="utf-8")
    return path


def _json(cli, *args):
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_presets_file_adds_a_gpu_and_its_default_node(cli, lab_file):
    plan = _json(cli, "estimate", "--params", "1e9", "--gpus", "8", "--gpu", "lab-gpu", "--presets", str(lab_file))
    assert plan["cluster"]["name"] == "lab-node (default node for lab-gpu)"
    assert plan["cluster"]["gpus_per_node"] == 4
    assert plan["cluster"]["gpu_memory_bytes"] == 49140 * 2**20


def test_without_the_file_the_user_gpu_is_unknown(cli, lab_file):
    cli("estimate", "--params", "1e9", "--gpu", "lab-gpu", "--presets", str(lab_file))
    code, _, err = cli("estimate", "--params", "1e9", "--gpu", "lab-gpu")  # the next run has no --presets
    assert code == 2 and "unknown gpu preset 'lab-gpu'" in err


def test_presets_file_overrides_a_built_in_gpu(cli, tmp_path):
    a100 = dict(presets.show("gpus", "a100-80g"), memory="40960MiB")
    path = tmp_path / "override.yaml"
    path.write_text(json.dumps({"gpus": {"a100-80g": a100}}), encoding="utf-8")  # JSON is YAML too
    before = _json(cli, "estimate", "--params", "1e9", "--gpus", "8")
    after = _json(cli, "estimate", "--params", "1e9", "--gpus", "8", "--presets", str(path))
    assert before["cluster"]["gpu_memory_bytes"] == 81920 * 2**20
    assert after["cluster"]["gpu_memory_bytes"] == 40960 * 2**20
    assert after["cluster"]["name"] == before["cluster"]["name"]  # still its dgx-a100 default node


def test_config_directory_file_is_read(cli, lab_file, tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.mkdir()
    (config / "presets.yaml").write_text(LAB, encoding="utf-8")
    monkeypatch.setattr(presets, "user_config_dir", lambda: config)
    plan = _json(cli, "estimate", "--params", "1e9", "--gpus", "4", "--cluster", "lab-node")
    assert plan["cluster"]["gpu"] == "lab-gpu"
    code, out, _ = cli("presets", "list")
    assert code == 0 and "lab-node" in out and "dgx-a100" in out


def test_presets_file_layers_over_the_config_directory(cli, lab_file, tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.mkdir()
    (config / "presets.yaml").write_text(LAB, encoding="utf-8")
    monkeypatch.setattr(presets, "user_config_dir", lambda: config)
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(LAB.replace("gpus_per_node: 4", "gpus_per_node: 8"), encoding="utf-8")
    plan = _json(cli, "estimate", "--params", "1e9", "--gpus", "8", "--cluster", "lab-node",
                 "--presets", str(bigger))
    assert plan["cluster"]["gpus_per_node"] == 8


@pytest.mark.parametrize("command", [
    ("plan", "--model", "gpt2", "--gpus", "4", "--gpu", "lab-gpu", "--global-batch", "8", "--no-offload"),
    ("sweep", "--params", "1e9", "--gpus", "4", "--gpu", "lab-gpu"),
    ("presets", "show", "lab-node"),
    ("presets", "list"),
])
def test_other_commands_take_presets(cli, lab_file, command):
    code, out, err = cli(*command, "--presets", str(lab_file))
    assert code == 0, err
    assert "lab" in out


def test_missing_presets_file_is_one_line(cli, tmp_path):
    code, _, err = cli("estimate", "--params", "1e9", "--presets", str(tmp_path / "none.yaml"))
    assert code == 2
    assert err.strip() == f"zeroplan: error: --presets: no such file '{tmp_path / 'none.yaml'}' " \
                          "(give the path of a presets YAML file)"


# ---------------------------------------------------------------- zeroplan presets validate


def test_validate_accepts_a_good_file(cli, lab_file):
    code, out, _ = cli("presets", "validate", str(lab_file))
    assert code == 0
    assert "adds gpu 'lab-gpu'" in out and "adds cluster 'lab-node'" in out


def _line_col(text: str, needle: str) -> str:
    """1-based line:column of needle's first occurrence in text."""
    before = text[:text.index(needle)]
    return f"{before.count(chr(10)) + 1}:{len(before) - before.rfind(chr(10))}"


@pytest.mark.parametrize(("change", "at", "message"), [
    (("memory: 49140MiB", "memory: 49140MiBs"), "49140MiBs", "lab-gpu: memory: '49140MiBs' is not a byte size"),
    (("gpus_per_node: 4", "gpus_per_nodes: 4"), "gpus_per_nodes", "lab-node: unknown key 'gpus_per_nodes'"),
    (("pcie_generation: 4", "pcie_generation: 6"), "6\n", "lab-node: pcie_generation:"),
    (("latency_us: 10}", "latency_us: -1}"), "-1}", "lab-gpu: intra_node_link.latency_us:"),
    (("    sources: [lab inventory]\n", ""), "lab-node:", "lab-node: sources: field required"),
    (("gpu: lab-gpu", "gpu: no-such-gpu"), "lab-node:", "cluster 'lab-node' names unknown GPU 'no-such-gpu'"),
    (("default_cluster: lab-node", "default_cluster: dgx-a100"), "lab-gpu:",
     "default_cluster 'dgx-a100' has a100-80g GPUs"),
    (("clusters:", "nodes:"), "nodes:", "unknown section 'nodes'"),
])
def test_validate_names_the_line_and_column(cli, tmp_path, change, at, message):
    text = LAB.replace(*change)
    assert text != LAB
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    code, out, err = cli("presets", "validate", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"zeroplan: error: {path}:{_line_col(text, at)}: "), err
    assert message in err and len(err.strip().splitlines()) == 1


def test_validate_reports_malformed_yaml_at_its_place(cli, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("gpus:\n  x: [1, 2\n", encoding="utf-8")
    code, _, err = cli("presets", "validate", str(path))
    assert code == 2
    assert err.startswith(f"zeroplan: error: {path}:3:1: malformed YAML")


def test_a_bad_user_file_stops_estimate_with_its_place(cli, tmp_path):
    path = tmp_path / "bad.yaml"
    text = LAB.replace("memory: 49140MiB", "memory: lots")
    path.write_text(text, encoding="utf-8")
    code, _, err = cli("estimate", "--params", "1e9", "--presets", str(path))
    assert code == 2 and f"{path}:{_line_col(text, 'lots')}: lab-gpu: memory" in err


# ---------------------------------------------------------------- the config directory per platform


def test_config_directory_per_platform(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(presets.sys, "platform", "linux")
    assert user_config_dir() == tmp_path / "xdg" / "zeroplan"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    assert user_config_dir() == Path(tmp_path) / ".config" / "zeroplan"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert user_config_dir() == Path(tmp_path) / ".config" / "zeroplan"
    monkeypatch.setattr(presets.sys, "platform", "darwin")
    assert user_config_dir() == tmp_path / "Library" / "Application Support" / "zeroplan"
    monkeypatch.setattr(presets.sys, "platform", "win32")
    monkeypatch.setenv("APPDATA", str(tmp_path / "Roaming"))
    assert user_config_dir() == tmp_path / "Roaming" / "zeroplan"
