"""The shipped preset data (src/zeroplan/inputs/presets_data.py) is presets/*.yaml validated through the
pydantic schema, byte for byte; the start-up path reads it without YAML or pydantic; defaults per GPU are
explicit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zeroplan.inputs import preset_schema, presets
from zeroplan.inputs.preset_schema import PresetFileError


@pytest.mark.slow  # the regenerator in a subprocess, every YAML source read
def test_committed_data_matches_the_yaml_sources():
    expected = preset_schema.render(preset_schema.build_data())
    committed = preset_schema.DATA_FILE.read_text(encoding="utf-8")
    assert committed == expected, (
        f"{preset_schema.DATA_FILE.name} is stale: presets/*.yaml changed. Regenerate it with "
        f"`{preset_schema.REGENERATE}` and commit the result")


def test_the_planner_reads_the_generated_data():
    from zeroplan.inputs import presets_data

    assert Path(presets_data.__file__).resolve() == preset_schema.DATA_FILE.resolve()
    data = preset_schema.build_data()
    for category in presets.CATEGORIES:
        assert presets.builtin()[category] == data[category]
        assert presets.names(category) == sorted(data[category])


def test_generator_rejects_a_bad_built_in_entry(tmp_path):
    for category in preset_schema.CATEGORIES:
        text = (preset_schema.source_dir() / f"{category}.yaml").read_text(encoding="utf-8")
        if category == "gpus":
            text = text.replace("memory: 81920MiB", "memory: 81920 MiBs", 1)
        (tmp_path / f"{category}.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(PresetFileError, match=r"gpus\.yaml:\d+:\d+: a100-80g: memory: '81920 MiBs' is not a byte size"):
        preset_schema.build_data(tmp_path)


# ---------------------------------------------------------------- default node per GPU

# The node each GPU planned on before default_cluster existed (alphabetically first cluster of that GPU,
# among the clusters of that time); none means the generic 8-GPU node.
DEFAULTS_BEFORE_ISSUE_14 = {
    "v100-32g": None, "a100-40g": None, "a100-80g": "dgx-a100", "h100-80g": "dgx-h100",
    "h200-141g": "hgx-h200", "b200": "dgx-b200", "l40s": None, "mi300x": None,
    "rtx3090": "workstation-4x3090", "rtx4090": None,
}


@pytest.mark.parametrize(("gpu", "node"), DEFAULTS_BEFORE_ISSUE_14.items())
def test_existing_gpus_keep_their_default_node(cli, gpu, node):
    assert presets.default_cluster(gpu) == node
    code, out, _ = cli("estimate", "--params", "1e9", "--gpus", "8", "--gpu", gpu, "--format", "json")
    assert code == 0
    cluster = json.loads(out)["cluster"]
    expected = f"{node} (default node for {gpu})" if node else f"generic {gpu} node"
    assert cluster["name"] == expected


def test_a_default_node_is_never_inferred_from_the_clusters_using_the_gpu():
    # The new cloud clusters use these GPUs and sort before the DGX ones; the defaults still hold.
    users = {gpu: sorted(n for n in presets.names("clusters") if presets.entry("clusters", n).gpu == gpu)
             for gpu in ("a100-80g", "a100-40g", "v100-32g")}
    assert users["a100-80g"][0] != "dgx-a100" and users["a100-40g"] and users["v100-32g"]
    assert presets.default_cluster("a100-80g") == "dgx-a100"
    assert presets.default_cluster("a100-40g") is None
    assert presets.default_cluster("v100-32g") is None


def test_every_default_cluster_uses_its_gpu():
    for gpu in presets.names("gpus"):
        node = presets.default_cluster(gpu)
        if node is not None:
            assert presets.cluster(node).gpu.name == gpu


def test_default_cluster_must_name_a_cluster_of_that_gpu():
    data = preset_schema.build_data()
    data["gpus"]["a100-80g"] = {**data["gpus"]["a100-80g"], "default_cluster": "dgx-h100"}
    with pytest.raises(PresetFileError, match="default_cluster 'dgx-h100' has h100-80g GPUs"):
        preset_schema.check_references(data)
    data["gpus"]["a100-80g"]["default_cluster"] = "no-such-node"
    with pytest.raises(PresetFileError, match="is not a cluster preset"):
        preset_schema.check_references(data)


# ---------------------------------------------------------------- start-up path

PROBE = """
import sys
from zeroplan.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    status = done.code
sys.stderr.write(f"\\nPROBE status={status} yaml={'yaml' in sys.modules} pydantic={'pydantic' in sys.modules}\\n")
"""


def _fresh_process(args: list[str], config_home: Path) -> str:
    src = str(Path(presets.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": src, "XDG_CONFIG_HOME": str(config_home), "HOME": str(config_home)}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env,
                          check=False)
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the probe sets the Linux config directory")
@pytest.mark.parametrize("extra", [[], ["--format", "json"], ["--gpu", "h100-80g"], ["--cluster", "dgx-b200"]])
def test_estimate_starts_without_yaml_or_pydantic(tmp_path, extra):
    line = _fresh_process(["estimate", "--params", "13e9", "--gpus", "8", *extra], tmp_path)
    assert line == "PROBE status=0 yaml=False pydantic=False"


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the probe sets the Linux config directory")
def test_a_user_presets_file_is_validated_with_yaml_and_pydantic(tmp_path):
    (tmp_path / "zeroplan").mkdir()
    (tmp_path / "zeroplan" / "presets.yaml").write_text(
        "gpus:\n  lab-gpu:\n    description: lab\n    memory: 24GiB\n    hbm_bandwidth: 900GB/s\n"
        "    bf16_tflops: 100\n    intra_node_link: {bandwidth: 31.5GB/s, latency_us: 10}\n"
        "    sources: [lab]\n", encoding="utf-8")
    line = _fresh_process(["estimate", "--params", "1e9", "--gpus", "8", "--gpu", "lab-gpu"], tmp_path)
    assert line == "PROBE status=0 yaml=True pydantic=True"


@pytest.mark.slow  # the regenerator in a subprocess, every YAML source read
def test_the_regenerator_after_a_plain_install_says_what_it_needs(tmp_path):
    """`python -m zeroplan.inputs.preset_schema` from an installed copy (the package without presets/ beside
    it) is one line naming what is missing and what to run instead, exit 2: never a traceback."""
    import shutil
    import subprocess
    import sys

    site = tmp_path / "site-packages"
    shutil.copytree(Path(preset_schema.__file__).resolve().parents[1], site / "zeroplan",
                    ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "zeroplan.inputs.preset_schema"], cwd=tmp_path, text=True,
                          capture_output=True, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "zeroplan presets validate" in done.stderr
    done = subprocess.run([sys.executable, "-m", "zeroplan.inputs.preset_schema", "--source",
                           str(preset_schema.source_dir())], cwd=tmp_path, text=True, capture_output=True,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
