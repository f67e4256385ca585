"""Every file zeroplan writes goes through render.sink.write_file: an input is never replaced, and a write
that fails (here: `ulimit -f`) leaves the old file intact and no temporary behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFIGS = Path(__file__).parent / "configs"
GOOD_CONFIG = CONFIGS / "deepspeed" / "good_zero2.json"
PLAN = CONFIGS / "plans" / "good_llama7b.yaml"
SRC = Path(__file__).resolve().parents[1] / "src"


def _copy(source: Path, target: Path) -> Path:
    target.write_bytes(source.read_bytes())
    return target


def _refused(code: int, err: str, output: Path, given: Path, before: bytes) -> None:
    assert code == 2 and err.count("\n") == 1
    assert str(output) in err and str(given) in err and "input" in err
    assert given.read_bytes() == before  # untouched
    assert [p.name for p in given.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_check_refuses_to_write_over_the_checked_file(cli, tmp_path):
    config = _copy(GOOD_CONFIG, tmp_path / "c.json")
    before = config.read_bytes()
    code, out, err = cli("check", str(config), "--gpus", "8", "-o", str(config))
    _refused(code, err, config, config, before)


def test_check_refuses_a_symlink_and_a_hard_link_to_an_input(cli, tmp_path):
    config = _copy(GOOD_CONFIG, tmp_path / "c.json")
    before = config.read_bytes()
    (tmp_path / "link.json").symlink_to(config)
    code, _, err = cli("check", str(config), "--gpus", "8", "-f", "json", "-o", str(tmp_path / "link.json"))
    _refused(code, err, tmp_path / "link.json", config, before)
    os.link(config, tmp_path / "hard.json")
    code, _, err = cli("check", str(config), "--gpus", "8", "-o", str(tmp_path / "hard.json"))
    _refused(code, err, tmp_path / "hard.json", config, before)


def test_check_refuses_the_config_a_plan_file_names(cli, tmp_path):
    config = _copy(GOOD_CONFIG, tmp_path / "ds.json")
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.read_text() + f"deepspeed_config: {config}\n")
    before = config.read_bytes()
    code, _, err = cli("check", str(plan), "-o", str(config))
    _refused(code, err, config, config, before)


def test_estimate_refuses_its_model_config(cli, tmp_path):
    model = _copy(CONFIGS / "gpt2.json", tmp_path / "gpt2.json")
    before = model.read_bytes()
    code, _, err = cli("estimate", "--model", str(model), "--gpus", "8", "-f", "json", "-o", str(model))
    _refused(code, err, model, model, before)


def test_export_deepspeed_refuses_its_plan(cli, tmp_path):
    plan = _copy(PLAN, tmp_path / "plan.yaml")
    before = plan.read_bytes()
    code, _, err = cli("export", "deepspeed", "--plan", str(plan), "-o", str(plan))
    _refused(code, err, plan, plan, before)


def test_export_plan_refuses_its_model_config(cli, tmp_path):
    model = _copy(CONFIGS / "gpt2.json", tmp_path / "gpt2.json")
    before = model.read_bytes()
    code, _, err = cli("export", "plan", "--model", str(model), "--gpus", "8", "-o", str(model))
    _refused(code, err, model, model, before)


def test_sweep_refuses_a_model_config_in_its_list(cli, tmp_path):
    model = _copy(CONFIGS / "gpt2.json", tmp_path / "gpt2.json")
    before = model.read_bytes()
    code, _, err = cli("sweep", "--model", f"gpt2,{model}", "--gpus", "8", "--gpu", "a100-80g", "-o", str(model))
    _refused(code, err, model, model, before)


def test_plan_write_deepspeed_refuses_its_model_config(cli, tmp_path):
    model = _copy(CONFIGS / "gpt2.json", tmp_path / "gpt2.json")
    before = model.read_bytes()
    code, _, err = cli("plan", "--model", str(model), "--gpus", "8", "--global-batch", "64", "--seq-len", "1024",
                       "--no-progress", "--write-deepspeed", str(model))
    _refused(code, err, model, model, before)


def test_a_new_file_is_written_whole_with_normal_permissions(cli, tmp_path):
    target = tmp_path / "report.json"
    code, _, _ = cli("check", str(GOOD_CONFIG), "--gpus", "8", "-f", "json", "-o", str(target))
    assert code == 0 and json.loads(target.read_text())["failed"] is False
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_writing_through_a_symlink_replaces_its_target(cli, tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    (tmp_path / "link.json").symlink_to(target)
    code, _, _ = cli("check", str(GOOD_CONFIG), "--gpus", "8", "-f", "json", "-o", str(tmp_path / "link.json"))
    assert code == 0 and (tmp_path / "link.json").is_symlink()
    assert json.loads(target.read_text())["failed"] is False


@pytest.mark.skipif(sys.platform == "win32", reason="needs ulimit -f")
def test_a_write_over_the_file_size_limit_keeps_the_old_file(tmp_path):
    """`(ulimit -f 1; zeroplan estimate ... -o s.json)` used to leave 1 KB of broken JSON."""
    target = tmp_path / "s.json"
    command = [sys.executable, "-m", "zeroplan", "estimate", "--model", "llama-2-7b", "--gpus", "8", "-f", "json",
               "-o", str(target)]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    whole = target.read_bytes()
    assert len(whole) > 2048 and json.loads(whole)
    limited = subprocess.run(["bash", "-c", 'ulimit -f 1; exec "$@"', "bash", *command], env=env,
                             capture_output=True, text=True, timeout=120)
    assert limited.returncode == 2, limited.stderr
    assert limited.stderr.count("\n") == 1 and f"-o {target}" in limited.stderr and "ulimit" in limited.stderr
    assert target.read_bytes() == whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_a_failed_write_keeps_the_old_file_and_names_the_option(tmp_path, monkeypatch):
    from zeroplan.core.errors import InputError
    from zeroplan.render import sink

    target = tmp_path / "cal.yaml"
    target.write_text("old profile\n")

    def broken_write_text(self, *args, **kwargs):
        Path.write_bytes(self, b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", broken_write_text)
    with pytest.raises(InputError, match="--save-calibration .*No space left"):
        sink.write_text("new profile\n", str(target), option="--save-calibration")
    monkeypatch.undo()
    assert target.read_text() == "old profile\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cal.yaml"]


# Devices and FIFOs: written in place, never renamed over. The twins live in tmp_path (never the machine's /dev).

def _char_device_twin(tmp_path: Path) -> Path:
    """A character device node like /dev/null (major 1, minor 3), made in the test's own folder."""
    node = tmp_path / "null-twin"
    try:
        os.mknod(node, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"mknod of a character device needs root: {exc}")
    return node


def _is_char_device(path: Path) -> bool:
    import stat

    return stat.S_ISCHR(os.lstat(path).st_mode)


@pytest.mark.parametrize("command", [
    ("estimate", "--params", "7e9", "--gpus", "8", "--format", "json", "-o"),
    ("plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--top", "2", "--format", "csv", "-o"),
])
def test_output_onto_a_character_device_writes_into_it_and_keeps_the_node(cli, tmp_path, command):
    node = _char_device_twin(tmp_path)
    code, out, err = cli(*command, str(node))
    assert code == 0, err
    assert _is_char_device(node)  # still the device, not a regular file renamed over it
    assert [p.name for p in tmp_path.iterdir()] == ["null-twin"]  # no temporary left beside it


def test_write_deepspeed_onto_a_character_device_keeps_the_node(cli, tmp_path):
    node = _char_device_twin(tmp_path)
    code, out, err = cli("plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--top", "1", "--write-deepspeed", str(node))
    assert code == 0, err
    assert _is_char_device(node)


def test_output_onto_a_fifo_streams_into_it(tmp_path):
    """A FIFO is written like `> fifo`: a reader gets the bytes and the FIFO is still a FIFO afterwards."""
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    from zeroplan.render.sink import write_text

    write_text('{"a": 1}\n', str(fifo))
    reader.join(timeout=30)
    assert received == [b'{"a": 1}\n']
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_onto_a_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        from zeroplan.core.errors import InputError
        from zeroplan.render.sink import write_text

        with pytest.raises(InputError) as refused:
            write_text("x", str(path))
        assert "socket" in str(refused.value)
        assert os.path.exists(path)
    finally:
        server.close()


LAB_PRESETS = """gpus:
  lab-l40:
    description: L40 48GB
    memory: 46068MiB
    hbm_bandwidth: 864GB/s
    bf16_tflops: 181
    intra_node_link: {bandwidth: 31.5GB/s, latency_us: 10}
    sources: [test]
"""


@pytest.mark.parametrize("option", ["-o", "--plot", "--write-deepspeed"])
def test_no_output_replaces_the_presets_file_given(cli, tmp_path, option):
    presets_file = tmp_path / ("lab.svg" if option == "--plot" else "lab.yaml")  # --plot takes .png/.svg only
    presets_file.write_text(LAB_PRESETS)
    command = ("plan", "--model", "llama-2-7b", "--gpus", "4", "--global-batch", "8", "--no-progress") \
        if option == "--write-deepspeed" else ("estimate", "--params", "7e9", "--gpus", "4")
    code, _, err = cli(*command, "--gpu", "lab-l40", "--presets", str(presets_file), option, str(presets_file))
    assert code == 2 and "would replace the input" in err
    assert presets_file.read_text() == LAB_PRESETS


def test_no_output_replaces_the_users_own_presets_yaml(cli, tmp_path, monkeypatch):
    from zeroplan.inputs import presets

    config_dir = tmp_path / "config"
    config_dir.mkdir()
    own = config_dir / "presets.yaml"
    own.write_text(LAB_PRESETS)
    monkeypatch.setattr(presets, "user_config_dir", lambda: config_dir)
    code, _, err = cli("estimate", "--params", "7e9", "--gpus", "4", "-o", str(own))
    assert code == 2 and "would replace the input" in err and own.read_text() == LAB_PRESETS
    # read earlier in this process (its entries cached): still this run's input
    code, _, err = cli("export", "deepspeed", "--params", "7e9", "--gpus", "4", "--gpu", "lab-l40", "-o", str(own))
    assert code == 2 and own.read_text() == LAB_PRESETS
    code, _, _ = cli("estimate", "--params", "7e9", "--gpus", "4", "-o", str(tmp_path / "report.txt"))
    assert code == 0  # another file is written as ever
