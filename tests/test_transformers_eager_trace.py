"""Hugging Face transformers' eager Llama block (--comm-overlap fsdp without --torch-compile), checked against the
library's own code: transformers' LlamaDecoderLayer (models/llama/modeling_llama.py; sdpa attention, no padding
mask) runs forward and backward on meta tensors in bf16, with a stand-in for torch's SDPA kernel, and every aten op
outside its GEMMs is counted by the bytes it reads and writes. Those counts are the step time's
TRANSFORMERS_EAGER_BYTES (core.timing.step_time.eager_block_bytes, docs/formulas.md §26)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from zeroplan.core.timing.machine import EAGER_BLOCK_BYTES, TRANSFORMERS_EAGER_BYTES
from zeroplan.core.timing.step_time import (
    COMM_OVERLAPS, ELEMENTWISE_BLOCKS, FlopModel, Layout, eager_block_bytes, elementwise_seconds,
)


def _layer_bytes(monkeypatch, hidden: int, heads: int, kv_heads: int, ffn: int, tokens: int = 256,
                 padding_mask: bool = False) -> tuple[float, float]:
    """(forward, backward) bytes per token transformers' LlamaDecoderLayer moves outside its GEMMs and SDPA."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    head_dim = hidden // heads

    class Kernel(torch.autograd.Function):  # SDPA's flash kernel, priced as attention, not counted here
        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            return torch.empty_like(q)  # FlashAttention writes (b, s, heads, d): the layout q's view came from

        @staticmethod
        def backward(ctx, grad):
            q, k, v = ctx.saved_tensors
            return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        return Kernel.apply(query, key, value)

    # sdpa_attention_forward looks the function up on torch.nn.functional at each call
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", sdpa)
    config = LlamaConfig(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         intermediate_size=ffn, num_hidden_layers=1, vocab_size=128)
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        layer = LlamaDecoderLayer(config, 0).to(torch.bfloat16)  # FSDP's MixedPrecision param_dtype

    gemms = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}
    views = {torch.ops.aten._unsafe_view.default, torch.ops.aten.empty_like.default}
    small = tokens * head_dim  # per-token scalars (the norms' variance) and the norms' weights are left out

    def touched(t) -> int:  # an expanded tensor is read once, not once per repeat
        n = 1
        for size, stride in zip(t.shape, t.stride()):
            n *= size if stride else 1
        return n * t.element_size()

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func in gemms or func in views or all(r.alias_info is not None and not r.alias_info.is_write
                                                     for r in func._schema.returns):
                return out
            self.bytes += sum(touched(t) for t in tree_leaves((args, kwargs, out))
                              if isinstance(t, torch.Tensor) and t.numel() >= small and not table(t))
            return out

    def table(t) -> bool:  # the rotary cos/sin (one head's width per token, shared by the heads: cached) are left out
        return any(t is s or t._base is s for s in (cos, sin))

    x = torch.empty(1, tokens, hidden, device="meta", dtype=torch.bfloat16, requires_grad=True)
    cos = torch.empty(1, tokens, head_dim, device="meta", dtype=torch.bfloat16)  # LlamaRotaryEmbedding's, per model
    sin = torch.empty(1, tokens, head_dim, device="meta", dtype=torch.bfloat16)
    mask = torch.empty(1, 1, tokens, tokens, device="meta", dtype=torch.bool) if padding_mask else None
    with Count() as forward:
        y = layer(x, attention_mask=mask, position_embeddings=(cos, sin))
    with Count() as backward:
        y.backward(torch.empty_like(y))
    return forward.bytes / tokens, backward.bytes / tokens


def _flops(hidden: int, heads: int, kv_heads: int, ffn: int) -> FlopModel:
    head_dim = hidden // heads
    return FlopModel(params=0, layer_params=0, layers=1, hidden=hidden, attention_width=heads * head_dim,
                     kv_width=kv_heads * head_dim, ffn=ffn, gated=True)


def _layout(tp: int = 1, sequence_parallel: bool = False) -> Layout:
    return Layout(dp=1, tp=tp, pp=1, virtual_stages=1, seq_len=4096, micro_batch=1, grad_accum=1, recompute="none",
                  sequence_parallel=sequence_parallel, tp_intra_node=True, dp_intra_node=True, pp_intra_node=True)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(4096, 32, 32, 11008), (4096, 32, 8, 14336), (8192, 64, 8, 28672),
                                   (1024, 8, 2, 2816)],
                         ids=["llama2-7b", "llama3-8b", "llama3-70b", "gqa-small"])
def test_transformers_layer_bytes_match_the_ops_torch_runs(monkeypatch, shape):
    forward, backward = _layer_bytes(monkeypatch, *shape)
    flops = _flops(*shape)
    # within 1e-4: a few bytes per token of per-token scalars (the norms' backward) are left out of the constants
    assert eager_block_bytes(_layout(), flops, "transformers") == pytest.approx(forward, rel=1e-4)
    assert eager_block_bytes(_layout(), flops, "transformers", backward=True) == pytest.approx(backward, rel=1e-4)


@pytest.mark.slow
def test_a_padding_mask_brings_back_repeat_kv(monkeypatch):
    """With a padding mask transformers copies K and V to the query heads (repeat_kv) instead of passing
    enable_gqa: 4·(w + kv) more forward, 4·(w + kv) + 4·kv backward (v's gradient copied back to its view), which
    TRANSFORMERS_EAGER_BYTES leaves out (pretraining on packed sequences passes no mask)."""
    shape = (4096, 32, 8, 14336)
    plain, masked = _layer_bytes(monkeypatch, *shape), _layer_bytes(monkeypatch, *shape, padding_mask=True)
    w, kv = 4096, 1024
    assert masked[0] - plain[0] == pytest.approx(4 * (w + kv), abs=1)
    assert masked[1] - plain[1] == pytest.approx(4 * (w + kv) + 4 * kv, abs=1)


def test_transformers_block_against_torchtitans_and_korthikantis():
    """Llama 2 7B: 150.9·h forward, 326.4·h backward per token (torchtitan's block 158.9·h and 326.4·h; the fitted
    frameworks' 68·h and 136·h); Llama 3 8B: 144·h and 317·h (torchtitan 157·h and 331·h)."""
    llama2, llama3 = _flops(4096, 32, 32, 11008), _flops(4096, 32, 8, 14336)
    assert eager_block_bytes(_layout(), llama2, "transformers") / 4096 == pytest.approx(150.875)
    assert eager_block_bytes(_layout(), llama2, "transformers", backward=True) / 4096 == pytest.approx(326.375)
    assert eager_block_bytes(_layout(), llama3, "transformers") / 4096 == pytest.approx(144)
    assert eager_block_bytes(_layout(), llama3, "transformers", backward=True) / 4096 == pytest.approx(317)
    assert eager_block_bytes(_layout(), llama3, "torchtitan") > eager_block_bytes(_layout(), llama3, "transformers")
    assert set(TRANSFORMERS_EAGER_BYTES) == set(EAGER_BLOCK_BYTES["torchtitan"])
    assert set(EAGER_BLOCK_BYTES) == set(ELEMENTWISE_BLOCKS) - {"korthikanti"}


def test_only_eager_gated_dense_layers_under_fsdp_price_it():
    from zeroplan.core.hardware import Link
    from zeroplan.core.timing.collectives import LinkTable
    from zeroplan.core.timing.machine import Machine
    link = Link(100_000_000_000, 1e-6)
    base = Machine(1e15, 3.35e12, 50e9, None, LinkTable(link, link))
    assert COMM_OVERLAPS["fsdp"].eager_block == "transformers"
    assert {rule.eager_block for name, rule in COMM_OVERLAPS.items() if name not in ("fsdp", "torchtitan")} == {
        "korthikanti"}
    fsdp = replace(base, eager_block=COMM_OVERLAPS["fsdp"].eager_block)
    flops, layout = _flops(4096, 32, 32, 11008), _layout()
    assert elementwise_seconds(layout, flops, fsdp) == pytest.approx(
        eager_block_bytes(layout, flops, "transformers") * 4096 / 3.35e12)
    assert elementwise_seconds(layout, flops, fsdp, backward=True) > 2 * elementwise_seconds(layout, flops, base)
    compiled = replace(fsdp, elementwise_fused=True)  # --torch-compile: the fused count, whatever the block
    assert elementwise_seconds(layout, flops, compiled) == elementwise_seconds(
        layout, flops, replace(base, elementwise_fused=True))
    ungated = replace(flops, gated=False)  # MosaicML's MPT (GELU): Korthikanti's count, as fitted
    assert elementwise_seconds(layout, ungated, fsdp) == elementwise_seconds(layout, ungated, base)
    moe = replace(flops, moe_layers=1)
    assert elementwise_seconds(layout, moe, fsdp) == elementwise_seconds(layout, moe, base)
