"""`zeroplan validate` refuses a shape no machine trains before any rank starts (issue 23, item 7): a total
parameter bound on the tiny model, and the host memory every local rank needs for it."""

from __future__ import annotations

import pytest

from zeroplan.core.errors import InputError
from zeroplan.validate import config as validate_config
from zeroplan.validate.config import build_config, check_world
from zeroplan.validate.shape import MAX_PARAMS, TinyShape


def test_an_absurd_shape_is_refused_at_once(cli):
    code, out, err = cli("validate", "--hidden", "1000000", "--layers", "1000")
    assert code == 2 and not out and "too many for a validation run" in err and "--hidden" in err


def test_the_parameter_bound_counts_the_whole_model():
    shape = TinyShape()
    assert shape.params == sum(s.numel for s in shape.param_specs() if s.tied_to is None) < MAX_PARAMS
    with pytest.raises(InputError, match="too many"):
        TinyShape(hidden=100_000, heads=8, kv_heads=8, layers=200, ffn=400_000)


def _config(**shape):
    return build_config(stage="all", shape=TinyShape(**shape), precision="fp32", optimizer="adam", micro_batch=1,
                        steps=1, backend="gloo", nproc=2, cpu_offload=False, timeout=60, output_format="table")


def test_the_host_memory_every_local_rank_needs_is_checked_before_ranks_start(monkeypatch):
    monkeypatch.setattr(validate_config, "host_memory_bytes", lambda: 4 * 2**30)
    small = _config()
    check_world(small, 2, "gloo", local_ranks=2)
    big = _config(hidden=8192, heads=8, kv_heads=8, layers=2, ffn=8192)  # 0.54B parameters: 8 GiB a rank at DDP
    with pytest.raises(InputError) as info:
        check_world(big, 2, "gloo", local_ranks=2)
    assert "more than this machine's 4.0 GiB" in info.value.problem
    check_world(big, 2, "gloo", local_ranks=None)  # unknown local ranks: not guessed
