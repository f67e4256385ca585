"""--model ORG/NAME through the Hugging Face cache, without the network: a cache laid out as
huggingface_hub lays it out (models--ORG--NAME/refs/main -> snapshots/<commit>/config.json)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from huggingface_hub import errors as hub_errors  # noqa: E402

from zeroplan.core.errors import InputError  # noqa: E402
from zeroplan.inputs import hub  # noqa: E402
from zeroplan.inputs.training import load_model  # noqa: E402

CONFIGS = Path(__file__).parent / "configs"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _cache(home: Path, repo_id: str, config: Path) -> None:
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(config.read_text())


def _zeroplan(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    env.update(HF_HOME=str(home), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "zeroplan", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.slow  # every command in a subprocess
def test_a_cached_hub_id_is_read_offline_for_every_command(tmp_path):
    _cache(tmp_path, "meta-llama/Llama-2-7b-hf", CONFIGS / "llama-2-7b-hf.json")
    done = _zeroplan(tmp_path, "estimate", "--model", "meta-llama/Llama-2-7b-hf", "--gpus", "8", "-f", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["model"]["name"] == "meta-llama/Llama-2-7b-hf" and data["model"]["params"] == 6_738_415_616
    done = _zeroplan(tmp_path, "plan", "--model", "meta-llama/Llama-2-7b-hf", "--gpus", "8", "--global-batch", "8",
                     "-f", "json")
    assert done.returncode == 0, done.stderr
    done = _zeroplan(tmp_path, "export", "deepspeed", "--model", "meta-llama/Llama-2-7b-hf", "--gpus", "8")
    assert done.returncode == 0 and '"zero_optimization"' in done.stdout, done.stderr


def test_offline_and_not_cached_is_one_clear_line(tmp_path):
    done = _zeroplan(tmp_path, "estimate", "--model", "Qwen/Qwen2.5-72B", "--gpus", "8")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Qwen/Qwen2.5-72B" in lines[0] and "not in the local Hugging Face cache" in lines[0]
    assert "hf download Qwen/Qwen2.5-72B config.json" in lines[0]


@pytest.mark.parametrize("text,expected", [
    ("meta-llama/Llama-3.1-8B", True), ("Qwen/Qwen2.5-72B@main", True), ("missing/config.json", False),
    ("./llama/config", False), ("a/b/c", False), ("llama-2-7b", False), ("org--x/name", False),
    (str(CONFIGS), False),
])
def test_what_counts_as_a_hub_id(text, expected):
    assert hub.looks_like_hub_id(text) is expected


def test_only_config_json_is_ever_requested(monkeypatch, tmp_path):
    asked = []

    def fake_download(repo_id, filename, revision=None):
        asked.append((repo_id, filename, revision))
        return str(CONFIGS / "qwen2-7b.json")

    monkeypatch.setattr("huggingface_hub.hf_hub_download", fake_download)
    monkeypatch.setattr(hub, "hub_unreachable", lambda: None)  # the Hub answers (with fake_download)
    model = load_model("Qwen/Qwen2-7B@v1.0")
    assert asked == [("Qwen/Qwen2-7B", "config.json", "v1.0")]
    assert model.name == "Qwen/Qwen2-7B" and model.params > 7e9


def _hub_error(cls, status: int):
    """The Hub library's own error, built as it builds them (an HTTP response attached where it needs one)."""
    try:
        return cls("from the test")
    except TypeError:  # huggingface_hub >= 1 wants the HTTP response, from its own HTTP client
        http = pytest.importorskip("httpx2") if importlib.util.find_spec("httpx2") else pytest.importorskip("httpx")
        response = http.Response(status, request=http.Request("GET", "https://huggingface.co/x/y/config.json"))
        return cls("from the test", response=response)


@pytest.mark.parametrize("name,status,said", [
    ("GatedRepoError", 401, "gated"), ("RepositoryNotFoundError", 404, "no model"),
    ("EntryNotFoundError", 404, "has no config.json"),
    ("LocalEntryNotFoundError", 404, "not in the local Hugging Face cache"),
])
def test_hub_errors_become_input_errors(monkeypatch, name, status, said):
    error = _hub_error(getattr(hub_errors, name), status)

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr("huggingface_hub.hf_hub_download", fail)
    monkeypatch.setattr(hub, "hub_unreachable", lambda: None)  # the Hub answers (with these errors)
    with pytest.raises(InputError) as caught:
        load_model("someone/some-model")
    assert caught.value.input_name == "model" and said in str(caught.value)


def test_without_huggingface_hub_the_fix_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(InputError, match=r'pip install "zeroplan\[hub\]"'):
        load_model("meta-llama/Llama-3.1-8B")


def _offline_network(monkeypatch, tmp_path):
    """No route to the Hub (a socket twin that refuses at once), an empty cache here, no proxy, no
    HF_HUB_OFFLINE; huggingface_hub's download must not be reached (its retries took 25 s)."""
    import socket

    from huggingface_hub import constants

    def unreachable(*args, **kwargs):
        raise OSError(101, "Network is unreachable")

    def no_download(*args, **kwargs):
        raise AssertionError("hf_hub_download was called with the Hub unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.hf_hub_download", no_download)
    for name in ("HF_HUB_OFFLINE", *hub._PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)


def test_an_unreachable_hub_is_one_fast_line_naming_hf_hub_offline(monkeypatch, tmp_path):
    import time

    _offline_network(monkeypatch, tmp_path)
    started = time.perf_counter()
    with pytest.raises(InputError) as info:
        hub.fetch_config("Qwen/Qwen2.5-72B")
    assert time.perf_counter() - started < 5
    assert "Network is unreachable" in info.value.problem and "HF_HUB_OFFLINE=1" in info.value.fix


def test_an_unreachable_hub_still_reads_the_cache(monkeypatch, tmp_path):
    _offline_network(monkeypatch, tmp_path)
    _cache(tmp_path, "meta-llama/Llama-2-7b-hf", CONFIGS / "llama-2-7b-hf.json")
    assert load_model("meta-llama/Llama-2-7b-hf").params == 6_738_415_616


def test_behind_a_proxy_the_download_decides(monkeypatch):
    import socket

    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(OSError("no route")))
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert hub.hub_unreachable() is None
