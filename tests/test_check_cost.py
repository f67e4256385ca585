"""`zeroplan check` costs what the file's work asks, bounded (issue 23, item 6), not only its bytes: unknown keys
are listed up to a bound and counted past it, a megabyte-long key is shown cut and never fuzzy-matched, line
numbers are counted once through the file (not once per key from its start), and a config or YAML file holding
more values than any real one is refused before it is built."""

from __future__ import annotations

import difflib
import json
import random
import time

import pytest

from zeroplan.check import config_rules
from zeroplan.inputs import hjson


def _write(tmp_path, name, data) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_thousands_of_unknown_keys_cost_a_bounded_number_of_matches(cli, tmp_path, monkeypatch):
    calls = []
    original = difflib.get_close_matches
    monkeypatch.setattr(difflib, "get_close_matches", lambda *a, **k: calls.append(1) or original(*a, **k))
    config = {**{f"stray_{i}": 1 for i in range(15000)}, "train_micro_batch_size_per_gpu": 1,
              "zero_optimization": {"stage": 2, **{f"zz_{i}": 1 for i in range(3000)}}}
    started = time.process_time()
    code, out, err = cli("check", _write(tmp_path, "ds_config.json", config), "-f", "json")
    spent = time.process_time() - started
    findings = json.loads(out)["files"][0]["findings"]
    listed = [f for f in findings if f["rule"] == "ZP008"]
    assert code == 1 and len(calls) <= 2 * config_rules.MAX_UNKNOWN_KEYS_LISTED + 5  # (a few other rules match too)
    assert len(listed) == 2 * (config_rules.MAX_UNKNOWN_KEYS_LISTED + 1)
    assert any(f["message"].startswith("14,950 more unknown keys in the top level") for f in listed)
    assert any(f["message"].startswith("2,950 more unknown keys in zero_optimization") for f in listed)
    assert not [f for f in findings if f["rule"] == "ZP016"]  # DeepSpeed's refusal of each is ZP008's count
    assert spent < 20, f"{spent:.1f} s of CPU for 18,000 keys"  # was minutes (quadratic); about 2 s now


def test_a_megabyte_key_is_shown_cut_and_not_matched(cli, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(difflib, "get_close_matches", lambda word, *a, **k: calls.append(len(word)) or [])
    code, out, _ = cli("check", _write(tmp_path, "ds_config.json", {"k" * 1_000_000: 1}), "-f", "json")
    (finding,) = [f for f in json.loads(out)["files"][0]["findings"] if f["rule"] == "ZP008"]
    assert max(calls, default=0) < 1000 and len(finding["message"]) < 300 and "1,000,000 characters" in finding["message"]


@pytest.mark.parametrize("name,text", [
    ("ds_config.json", json.dumps({"train_micro_batch_size_per_gpu": 1, "a": list(range(25_000))})),
    ("accelerate_config.yaml", "distributed_type: DEEPSPEED\nextra: [" + ",".join(["1"] * 150_000) + "]\n"),
])
def test_a_file_holding_more_values_than_any_config_is_refused_before_it_is_built(cli, tmp_path, name, text):
    code, out, err = cli("check", _write(tmp_path, name, text))
    assert code == 2 and not out and "far beyond any" in err and len(err.splitlines()) == 1


def test_a_config_under_the_bound_is_checked(cli, tmp_path):
    config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}
    text = json.dumps(config)[:-1] + ', "comment_list": ' + json.dumps(list(range(15_000))) + "}"
    code, out, _ = cli("check", _write(tmp_path, "ds_config.json", text), "-f", "json")
    assert code in (0, 1) and json.loads(out)["files"][0]["checked_file"].endswith("ds_config.json")


def test_line_and_column_counted_on_are_those_counted_from_the_start():
    rng = random.Random(23)
    for _ in range(200):
        text = "".join(rng.choice("ab\n\n {") for _ in range(rng.randint(0, 60)))
        parser = hjson._Parser(text)
        positions = sorted(rng.randint(0, len(text)) for _ in range(rng.randint(1, 8)))
        positions += [rng.randint(0, len(text))]  # one behind the last: counted from the start again
        for position in positions:
            assert parser.linecol(position) == hjson._linecol(text, position), (text, position)
