"""Bytes an eager block moves outside its GEMMs and its attention kernel, per token, counted op by op on meta
tensors: the counter torchtitan's and transformers' block tests share (the step time's EAGER_BLOCK_BYTES,
docs/formulas.md §25-26), and the gated dense layer shapes they compare with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zeroplan.core.timing.step_time import FlopModel, Layout


def flash_stand_in() -> Any:
    """An autograd function standing in for SDPA's flash kernel (priced as attention, not counted): it keeps q, k, v
    for backward and writes an output shaped as q, as FlashAttention writes (b, s, heads, d)."""
    import torch

    class Kernel(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            return torch.empty_like(q)

        @staticmethod
        def backward(ctx, grad):
            q, k, v = ctx.saved_tensors
            return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    return Kernel


def elementwise_bytes_per_token(run: Callable[[], Any], tokens: int, head_dim: int,
                                left_out: Callable[[Any], bool] = lambda tensor: False) -> tuple[float, float]:
    """(forward, backward) bytes per token of every aten op `run()` and its backward call, except the GEMMs, views
    and ops that only alias their inputs; a tensor is counted once per op (an expanded one once, not per repeat).
    Tensors under tokens × head_dim elements (per-token scalars such as the norms' variance, the norms' weights)
    and those `left_out` names are not counted."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    gemms = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}
    views = {torch.ops.aten._unsafe_view.default, torch.ops.aten.empty_like.default}
    small = tokens * head_dim

    def touched(tensor: Any) -> int:
        n = 1
        for size, stride in zip(tensor.shape, tensor.stride()):
            n *= size if stride else 1
        return n * tensor.element_size()

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func in gemms or func in views or all(r.alias_info is not None and not r.alias_info.is_write
                                                     for r in func._schema.returns):
                return out
            self.bytes += sum(touched(t) for t in tree_leaves((args, kwargs, out))
                              if isinstance(t, torch.Tensor) and t.numel() >= small and not left_out(t))
            return out

    with Count() as forward:
        y = run()
    with Count() as backward:
        y.backward(torch.empty_like(y))
    return forward.bytes / tokens, backward.bytes / tokens


def gated_flops(hidden: int, heads: int, kv_heads: int, ffn: int) -> FlopModel:
    """One gated (SwiGLU) dense layer's shape."""
    head_dim = hidden // heads
    return FlopModel(params=0, layer_params=0, layers=1, hidden=hidden, attention_width=heads * head_dim,
                     kv_width=kv_heads * head_dim, ffn=ffn, gated=True)


def one_rank_layout(tp: int = 1, sequence_parallel: bool = False) -> Layout:
    return Layout(dp=1, tp=tp, pp=1, virtual_stages=1, seq_len=4096, micro_batch=1, grad_accum=1, recompute="none",
                  sequence_parallel=sequence_parallel, tp_intra_node=True, dp_intra_node=True, pp_intra_node=True)
