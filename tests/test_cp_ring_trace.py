"""Context parallelism under PyTorch's experimental ring (--comm-overlap torchtitan, cp_ring "torch"), checked against
PyTorch's own code: torch.distributed.tensor.experimental's _templated_ring_attention and its backward run on a fake
process group of cp ranks (as the last CP rank, the busiest: every later step takes the whole-query branch), with a
stand-in for the SDPA kernel, and every aten op they run outside it is counted by the bytes it reads and writes. Those
counts are the step time's CP_TORCH_FORWARD_BYTES / CP_TORCH_BACKWARD_BYTES (docs/formulas.md §24)."""

from __future__ import annotations

import dataclasses

import pytest

from zeroplan.core.timing.collectives import ALL_TO_ALL, LinkTable, collective_seconds
from zeroplan.core.hardware import Link
from zeroplan.core.timing.machine import Machine
from zeroplan.core.timing.step_time import (
    ACTIVATION_ELEMENT_BYTES, COMM_OVERLAPS, CP_TORCH_BACKWARD_BYTES, CP_TORCH_FORWARD_BYTES, CP_TORCH_GRAD_BYTES,
    FLASH_BACKWARD_RATIO, FlopModel, Layout, cp_exposed_seconds, cp_merge_seconds, layer_seconds, microbatch_seconds,
)

# the views and allocations the counter must not take for traffic: a view moves nothing, a fresh zero tensor is
# written, not read
_ALLOCATING = {"aten.zeros_like.default", "aten.empty_like.default", "aten.new_zeros.default"}
_VIEWS = {"aten._unsafe_view.default"}


def _ring_bytes(cp: int, heads: int = 2, seq: int = 16, head_dim: int = 128) -> tuple[float, float]:
    """(forward, backward) bytes per local query-side element PyTorch's ring moves on rank cp-1 of cp."""
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    ring = pytest.importorskip("torch.distributed.tensor.experimental._context_parallel._attention")
    fake_pg = pytest.importorskip("torch.testing._internal.distributed.fake_pg")
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    elements = heads * seq * head_dim
    threshold = elements // 4  # the per-row log-sum-exp (1/head_dim of the elements) is not the traffic counted

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes, self.paused = 0, False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = str(func)
            returns = func._schema.returns
            if (self.paused or func.namespace in ("_c10d_functional", "c10d") or name in _VIEWS
                    or all(r.alias_info is not None and not r.alias_info.is_write for r in returns)):
                return out  # the stand-in kernel, the collectives (priced as communication), views
            size = [t.numel() * t.element_size() for t in tree_leaves((args, kwargs))
                    if isinstance(t, torch.Tensor) and t.numel() >= threshold]
            outs = out if isinstance(out, (tuple, list)) else [out]
            written = [t.numel() * t.element_size() for t in outs
                       if isinstance(t, torch.Tensor) and t.numel() >= threshold]
            self.bytes += (0 if name in _ALLOCATING else sum(size)) + sum(written)
            return out

    dist.init_process_group("fake", rank=cp - 1, world_size=cp, store=fake_pg.FakeStore())
    try:
        count = Count()

        def forward_kernel(q, k, v, is_causal=None, **_):
            count.paused = True
            out = torch.zeros(q.shape, dtype=q.dtype), torch.zeros(q.shape[:3], dtype=torch.float32)
            count.paused = False
            return out

        def backward_kernel(query, key, value, out, logsumexp, is_causal=None, **_):
            count.paused = True
            grads = tuple(torch.zeros(t.shape, dtype=t.dtype) for t in (query, key, value))
            count.paused = False
            return grads

        # torchtitan's attention hands SDPA (batch, heads, seq, head_dim) views of (batch, seq, heads, head_dim)
        q, k, v, grad = (torch.randn(1, seq, heads, head_dim, dtype=torch.bfloat16).transpose(1, 2) for _ in range(4))
        with count:
            out, lse = ring._templated_ring_attention(dist.group.WORLD, 2, forward_kernel, q, k, v, is_causal=True)
        forward, count.bytes = count.bytes, 0
        with count:
            ring._templated_ring_attention_backward(dist.group.WORLD, 2, backward_kernel, grad, "grad_out", q, k, v,
                                                    out, lse, is_causal=True)
        return forward / elements, count.bytes / elements
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("cp", [2, 4, 8])
def test_merge_bytes_are_pytorchs(cp):
    forward, backward = _ring_bytes(cp)
    assert forward == CP_TORCH_FORWARD_BYTES[0] * (cp - 1) + CP_TORCH_FORWARD_BYTES[1]
    assert backward == CP_TORCH_BACKWARD_BYTES[0] * (cp - 1) + CP_TORCH_BACKWARD_BYTES[1]


def _machine(**kw) -> Machine:
    nvlink = Link(450_000_000_000, 3e-6)
    nic = Link(50_000_000_000, 5e-6)
    values = {"peak_flops": 989e12, "hbm_bytes_per_s": 3.35e12, "pcie_bytes_per_s": 64e9, "nvme_bytes_per_s": None,
              "links": LinkTable(nvlink, nic), **kw}
    return Machine(**values)


def _layout(cp: int, tp: int = 1, seq: int = 131072) -> Layout:
    return Layout(dp=8 // cp, tp=tp, pp=1, virtual_stages=1, seq_len=seq, micro_batch=1, grad_accum=1,
                  recompute="full", sequence_parallel=tp > 1, tp_intra_node=True, dp_intra_node=True,
                  pp_intra_node=True, cp=cp)


LLAMA_8B = FlopModel(params=8_030_000_000, layer_params=218_000_000, layers=32, hidden=4096, attention_width=4096,
                     kv_width=1024, ffn=14336, gated=True, vocab=128256, heads=32)


def test_torchtitan_rule_is_fsdp_with_pytorchs_ring():
    fsdp, titan = COMM_OVERLAPS["fsdp"], COMM_OVERLAPS["torchtitan"]
    assert titan.cp_ring == "torch" and fsdp.cp_ring == COMM_OVERLAPS["megatron"].cp_ring == "p2p"
    # and torchtitan's eager block (docs/formulas.md §25), fsdp Hugging Face transformers' (docs/formulas.md §26)
    assert titan.eager_block == "torchtitan" and fsdp.eager_block == "transformers"
    assert dataclasses.replace(titan, name="fsdp", cp_ring="p2p", eager_block="transformers") == fsdp


def test_without_cp_the_torch_ring_prices_nothing():
    torch_ring, p2p = _machine(cp_ring="torch"), _machine()
    layout = _layout(1, seq=32768)
    assert cp_merge_seconds(layout, LLAMA_8B, torch_ring) == (0.0, 0.0)
    assert microbatch_seconds(layout, LLAMA_8B, 4096, torch_ring) == microbatch_seconds(layout, LLAMA_8B, 4096, p2p)


def test_merge_is_memory_bound_per_step_and_only_under_the_torch_ring():
    layout = _layout(4)
    assert cp_merge_seconds(layout, LLAMA_8B, _machine()) == (0.0, 0.0)  # p2p: fused into the kernels
    fast, slow = _machine(cp_ring="torch"), _machine(cp_ring="torch", hbm_bytes_per_s=1.675e12)
    forward, backward = cp_merge_seconds(layout, LLAMA_8B, fast)
    assert cp_merge_seconds(layout, LLAMA_8B, slow) == pytest.approx((2 * forward, 2 * backward))
    elements = 131072 / 4 * 4096
    assert forward * fast.hbm_bytes_per_s / elements == pytest.approx(46 * 3 + 20)
    # the forward (and a full recompute's) and the backward carry it
    base = layer_seconds(layout, LLAMA_8B, _machine())
    with_merge = layer_seconds(layout, LLAMA_8B, fast)
    assert with_merge[0] - base[0] == pytest.approx(forward) and with_merge[1] - base[1] == pytest.approx(backward)


def test_torch_ring_gathers_query_width_kv_behind_the_first_step_only():
    """The all-gather rotation waits for the whole buffer before the second step, so only the first (local) step's
    kernel hides it; the keys and values were repeated to the query heads (w, not the kv heads' width)."""
    layout = _layout(8, tp=8, seq=262144)  # tp fills the node: the CP ring crosses nodes
    machine = _machine(cp_ring="torch")
    core = layer_seconds(layout, LLAMA_8B, machine)[2]
    local = 262144 / 8 * 4096 / 8
    gather = collective_seconds("all_gather", 8 * 2 * local * ACTIVATION_ELEMENT_BYTES, 8, machine.links, 1)
    grads = 2 * local * CP_TORCH_GRAD_BYTES
    send = collective_seconds(ALL_TO_ALL, grads, 8, machine.links, 1, split=(0.0, grads))
    step = FLASH_BACKWARD_RATIO * core / 8
    forward, backward = cp_exposed_seconds(layout, LLAMA_8B, machine, core)
    assert gather > core / 8 and forward == pytest.approx(gather - core / 8)
    assert backward == pytest.approx(max(0.0, gather - step) + 7 * max(0.0, send - step) + send)
    # Megatron-Core's ring (p2p): the kv heads' width, hidden behind the whole core
    p2p = cp_exposed_seconds(layout, LLAMA_8B, _machine(), core)
    assert p2p[0] < forward and p2p[1] < backward


def test_torch_ring_inside_a_node_leaves_only_the_last_gradient_send():
    layout = _layout(4)  # tp 1: the four CP ranks share a node's NVLink
    machine = _machine(cp_ring="torch")
    core = layer_seconds(layout, LLAMA_8B, machine)[2]
    forward, backward = cp_exposed_seconds(layout, LLAMA_8B, machine, core)
    grads = 2 * 131072 / 4 * 4096 * CP_TORCH_GRAD_BYTES
    assert forward == 0.0
    assert backward == pytest.approx(collective_seconds(ALL_TO_ALL, grads, 4, machine.links, 8, split=(grads, 0.0)))
