"""The rank grid: validation names every factor; placement of groups inside nodes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroplan.core.errors import InputError
from zeroplan.core.parallel.grid import ParallelDims


def test_error_names_every_factor():
    with pytest.raises(InputError) as info:
        ParallelDims(world=8, tp=3, pp=1)
    assert "tp(3) × pp(1) = 3 does not divide world(8)" in str(info.value)


@pytest.mark.parametrize("field", ["world", "tp", "pp", "gpus_per_node"])
def test_rejects_non_positive(field):
    with pytest.raises(InputError):
        ParallelDims(**{"world": 8, field: 0})


def test_megatron_order_tp_innermost():
    dims = ParallelDims(world=16, tp=2, pp=2, gpus_per_node=8)
    assert dims.dp == 4
    assert dims.tp_group(0, 0) == [0, 1]
    assert dims.dp_group(0, 0) == [0, 2, 4, 6]
    assert dims.dp_group(1, 1) == [9, 11, 13, 15]
    assert dims.tp_intra_node and dims.dp_intra_node


@given(world_exp=st.integers(0, 12), tp_exp=st.integers(0, 4), pp_exp=st.integers(0, 4),
       node_exp=st.integers(0, 4))
def test_intra_node_flags_match_brute_force(world_exp, tp_exp, pp_exp, node_exp):
    world, tp, pp, n = 2**world_exp, 2**tp_exp, 2**pp_exp, 2**node_exp
    if world % (tp * pp):
        return
    dims = ParallelDims(world, tp, pp, n)
    groups = [dims.dp_group(t, p) for p in range(pp) for t in range(tp)]
    assert dims.dp_intra_node == all(len({r // n for r in g}) == 1 for g in groups)
    tp_groups = [dims.tp_group(d, p) for p in range(pp) for d in range(dims.dp)]
    assert dims.tp_intra_node == all(len({r // n for r in g}) == 1 for g in tp_groups)
    assert dims.dp_nodes_spanned == len({r // n for r in dims.dp_group()})


@given(world=st.integers(1, 96), tp=st.integers(1, 6), pp=st.integers(1, 4), n=st.integers(1, 12))
def test_intra_node_brute_force_odd_sizes(world, tp, pp, n):
    if world % (tp * pp):
        return
    dims = ParallelDims(world, tp, pp, n)
    groups = [dims.dp_group(t, p) for p in range(pp) for t in range(tp)]
    assert dims.dp_intra_node == all(len({r // n for r in g}) == 1 for g in groups)
    assert dims.dp_nodes_spanned == len({r // n for r in dims.dp_group()})
