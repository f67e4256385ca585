"""The deepspeed convention against DeepSpeed's own estimator functions, where DeepSpeed is installed.

Skipped otherwise (DeepSpeed is not a dependency). Run it with DeepSpeed in the same environment, e.g.
`pip install torch==2.13.0 && DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed`.
"""

from __future__ import annotations

import itertools

import pytest

from zeroplan.core.memory import deepspeed_estimator as ours

pytestmark = pytest.mark.slow  # importing DeepSpeed (and torch) takes seconds

stage_1_and_2 = pytest.importorskip("deepspeed.runtime.zero.stage_1_and_2")
stage3 = pytest.importorskip("deepspeed.runtime.zero.stage3")

PARAMS = (60_506_624, 2_851_000_000, 6_738_415_616, 13_000_000_001, 70_553_706_496, 405_853_388_800)
LARGEST = (16_449_536, 32_000_000, 131_072_000, 1_050_673_152)
LAYOUTS = ((1, 1), (4, 1), (8, 1), (8, 3), (8, 7), (16, 5))
FACTORS = (1.0, 1.5, 1.37)


@pytest.mark.parametrize("params,layout,factor", list(itertools.product(PARAMS, LAYOUTS, FACTORS)))
def test_zero2_matches_deepspeed(params, layout, factor):
    per_node, nodes = layout
    for offload in (True, False):
        theirs = stage_1_and_2.estimate_zero2_model_states_mem_needs(params, per_node, nodes, offload, factor)
        assert ours.zero2(params, per_node, nodes, offload, factor) == theirs


@pytest.mark.parametrize("params,largest,layout", list(itertools.product(PARAMS, LARGEST, LAYOUTS)))
def test_zero3_matches_deepspeed(params, largest, layout):
    per_node, nodes = layout
    for offload, offload_params, zero_init, factor in itertools.product((True, False), (True, False), (True, False),
                                                                          FACTORS):
        if offload_params and not offload:
            continue
        cpu, gpu, _ = stage3.estimate_zero3_model_states_mem_needs(params, largest, per_node, nodes, offload,
                                                                   offload_params, zero_init, factor)
        assert ours.zero3(params, largest, per_node, nodes, offload, offload_params, zero_init, factor) == (cpu, gpu)
