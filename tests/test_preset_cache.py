"""The validated-preset cache: warm starts skip pydantic; damaged or stale caches are never trusted."""

from __future__ import annotations

import subprocess
import sys

from zeroplan.inputs import presets

PROBE = ("import sys; from zeroplan.inputs import presets; presets.cluster('dgx-a100'); presets.model('llama-2-7b'); "
         "print('pydantic' in sys.modules, 'yaml' in sys.modules)")


def _probe(cache_dir) -> str:
    env = {"ZEROPLAN_CACHE_DIR": str(cache_dir), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_warm_start_needs_neither_yaml_nor_pydantic(tmp_path):
    assert _probe(tmp_path) == "True True"    # cold: validated with pydantic
    assert _probe(tmp_path) == "False False"  # warm: the cached, validated entries


def test_cache_can_be_switched_off(tmp_path):
    assert _probe("") == "True True"


def test_damaged_cache_is_revalidated(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEROPLAN_CACHE_DIR", str(tmp_path))
    presets._load_category.cache_clear()
    first = presets.gpu("a100-80g")
    for cached in tmp_path.glob("presets-gpus-*.json"):
        cached.write_text("{not json")
    presets._load_category.cache_clear()
    assert presets.gpu("a100-80g") == first
    presets._load_category.cache_clear()


def test_edited_preset_file_is_revalidated(tmp_path, monkeypatch):
    source = presets.presets_dir()
    for category in presets.CATEGORIES:
        (tmp_path / f"{category}.yaml").write_text((source / f"{category}.yaml").read_text())
    monkeypatch.setattr(presets, "presets_dir", lambda: tmp_path)
    monkeypatch.setenv("ZEROPLAN_CACHE_DIR", str(tmp_path / "cache"))
    presets._load_category.cache_clear()
    assert presets.gpu("a100-80g").memory_bytes == 81920 * 2**20
    text = (tmp_path / "gpus.yaml").read_text().replace("memory: 81920MiB", "memory: 40960MiB", 1)
    (tmp_path / "gpus.yaml").write_text(text)
    presets._load_category.cache_clear()
    assert presets.gpu("a100-80g").memory_bytes == 40960 * 2**20
    presets._load_category.cache_clear()
