"""Hugging Face transformers' eager Llama block (--comm-overlap fsdp without --torch-compile), checked against the
library's own code: transformers' LlamaDecoderLayer (models/llama/modeling_llama.py; sdpa attention, no padding
mask) runs forward and backward on meta tensors in bf16, with a stand-in for torch's SDPA kernel, and every aten op
outside its GEMMs is counted by the bytes it reads and writes. Those counts are the step time's
TRANSFORMERS_EAGER_BYTES (core.timing.step_time.eager_block_bytes, docs/formulas.md §26)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eager_block_count import elementwise_bytes_per_token, flash_stand_in, gated_flops, one_rank_layout
from zeroplan.core.timing.machine import EAGER_BLOCK_BYTES, TRANSFORMERS_EAGER_BYTES
from zeroplan.core.timing.step_time import (
    COMM_OVERLAPS, ELEMENTWISE_BLOCKS, eager_block_bytes, elementwise_seconds,
)


def _layer_bytes(monkeypatch, hidden: int, heads: int, kv_heads: int, ffn: int, tokens: int = 256,
                 padding_mask: bool = False) -> tuple[float, float]:
    """(forward, backward) bytes per token transformers' LlamaDecoderLayer moves outside its GEMMs and SDPA."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    head_dim = hidden // heads

    Kernel = flash_stand_in()  # SDPA's flash kernel, priced as attention, not counted here

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        return Kernel.apply(query, key, value)

    # sdpa_attention_forward looks the function up on torch.nn.functional at each call
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", sdpa)
    config = LlamaConfig(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         intermediate_size=ffn, num_hidden_layers=1, vocab_size=128)
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        layer = LlamaDecoderLayer(config, 0).to(torch.bfloat16)  # FSDP's MixedPrecision param_dtype

    def table(t) -> bool:  # the rotary cos/sin (one head's width per token, shared by the heads: cached) are left out
        return any(t is s or t._base is s for s in (cos, sin))

    x = torch.empty(1, tokens, hidden, device="meta", dtype=torch.bfloat16, requires_grad=True)
    cos = torch.empty(1, tokens, head_dim, device="meta", dtype=torch.bfloat16)  # LlamaRotaryEmbedding's, per model
    sin = torch.empty(1, tokens, head_dim, device="meta", dtype=torch.bfloat16)
    mask = torch.empty(1, 1, tokens, tokens, device="meta", dtype=torch.bool) if padding_mask else None
    return elementwise_bytes_per_token(lambda: layer(x, attention_mask=mask, position_embeddings=(cos, sin)),
                                       tokens, head_dim, left_out=table)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(4096, 32, 32, 11008), (4096, 32, 8, 14336), (8192, 64, 8, 28672),
                                   (1024, 8, 2, 2816)],
                         ids=["llama2-7b", "llama3-8b", "llama3-70b", "gqa-small"])
def test_transformers_layer_bytes_match_the_ops_torch_runs(monkeypatch, shape):
    forward, backward = _layer_bytes(monkeypatch, *shape)
    flops = gated_flops(*shape)
    # within 1e-4: a few bytes per token of per-token scalars (the norms' backward) are left out of the constants
    assert eager_block_bytes(one_rank_layout(), flops, "transformers") == pytest.approx(forward, rel=1e-4)
    assert eager_block_bytes(one_rank_layout(), flops, "transformers", backward=True) == pytest.approx(backward,
                                                                                         rel=1e-4)


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
    llama2, llama3 = gated_flops(4096, 32, 32, 11008), gated_flops(4096, 32, 8, 14336)
    assert eager_block_bytes(one_rank_layout(), llama2, "transformers") / 4096 == pytest.approx(150.875)
    assert eager_block_bytes(one_rank_layout(), llama2, "transformers", backward=True) / 4096 == pytest.approx(326.375)
    assert eager_block_bytes(one_rank_layout(), llama3, "transformers") / 4096 == pytest.approx(144)
    assert eager_block_bytes(one_rank_layout(), llama3, "transformers", backward=True) / 4096 == pytest.approx(317)
    layout = one_rank_layout()
    assert eager_block_bytes(layout, llama3, "torchtitan") > eager_block_bytes(layout, llama3, "transformers")
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
    flops, layout = gated_flops(4096, 32, 32, 11008), one_rank_layout()
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
