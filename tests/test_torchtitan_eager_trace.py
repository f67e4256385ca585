"""torchtitan's eager Llama block (--comm-overlap torchtitan without --torch-compile), checked against the model's own
code: its TransformerBlock (torchtitan/models/llama3/model.py at e7c0cae, June 2025, the commit of the Trainy H200 runs;
the 2024 runs' block is the same) runs forward and backward on meta tensors, with a stand-in for the SDPA kernel, and
every aten op outside its GEMMs is counted by the bytes it reads and writes. Those counts are the step time's
TORCHTITAN_EAGER_BYTES (core.timing.step_time.eager_block_bytes, docs/formulas.md §25)."""

from __future__ import annotations

import pytest

from eager_block_count import elementwise_bytes_per_token, flash_stand_in, gated_flops, one_rank_layout
from zeroplan.core.timing.machine import TORCHTITAN_EAGER_BYTES
from zeroplan.core.timing.step_time import (
    COMM_OVERLAPS, eager_block_bytes, elementwise_seconds,
)


def _block_bytes(hidden: int, heads: int, kv_heads: int, ffn: int, tokens: int = 256) -> tuple[float, float]:
    """(forward, backward) bytes per token torchtitan's block moves outside its GEMMs and its attention kernel."""
    torch = pytest.importorskip("torch")
    nn, F = torch.nn, torch.nn.functional

    head_dim = hidden // heads

    def apply_rotary_emb(xq, xk, freqs_cis):  # torchtitan's, verbatim but for reshape_for_broadcast inlined
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
        freqs_cis = freqs_cis[0:xq.shape[1]].view(*shape)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    def repeat_kv(x, n_rep):
        bs, slen, n_kv_heads, dim = x.shape
        if n_rep == 1:
            return x
        return torch.unsqueeze(x, dim=3).expand(bs, slen, n_kv_heads, n_rep, dim).reshape(
            bs, slen, n_kv_heads * n_rep, dim)

    Kernel = flash_stand_in()  # SDPA's flash kernel, priced as attention, not counted here

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(hidden, heads * head_dim, bias=False)
            self.wk = nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.wv = nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.wo = nn.Linear(heads * head_dim, hidden, bias=False)
            self.w1 = nn.Linear(hidden, ffn, bias=False)
            self.w2 = nn.Linear(ffn, hidden, bias=False)
            self.w3 = nn.Linear(hidden, ffn, bias=False)
            self.attention_norm = nn.RMSNorm(hidden, eps=1e-5)
            self.ffn_norm = nn.RMSNorm(hidden, eps=1e-5)

        def attention(self, x, freqs_cis):
            bs, seqlen, _ = x.shape
            xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
            xq = xq.view(bs, seqlen, -1, head_dim)
            xk = xk.view(bs, seqlen, -1, head_dim)
            xv = xv.view(bs, seqlen, -1, head_dim)
            xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
            keys, values = repeat_kv(xk, heads // kv_heads), repeat_kv(xv, heads // kv_heads)
            output = Kernel.apply(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2))
            output = output.transpose(1, 2).contiguous().view(bs, seqlen, -1)
            return self.wo(output)

        def forward(self, x, freqs_cis):
            h = x + self.attention(self.attention_norm(x), freqs_cis)
            return h + self.feed_forward(self.ffn_norm(h))

        def feed_forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    with torch.device("meta"):
        block = Block().to(dtype=torch.bfloat16)  # FSDP2's param_dtype: the block runs in bf16
    x = torch.empty(1, tokens, hidden, device="meta", dtype=torch.bfloat16, requires_grad=True)
    freqs = torch.empty(tokens, head_dim // 2, device="meta", dtype=torch.complex64)
    return elementwise_bytes_per_token(lambda: block(x, freqs), tokens, head_dim)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(4096, 32, 8, 14336), (5120, 40, 40, 13824), (8192, 64, 8, 28672),
                                   (1024, 8, 2, 2816)],
                         ids=["llama3-8b", "llama2-13b", "llama3-70b", "gqa-small"])
def test_torchtitan_block_bytes_match_the_ops_torch_runs(shape):
    forward, backward = _block_bytes(*shape)
    flops = gated_flops(*shape)
    # within 1e-4: a few bytes per token of per-token scalars (the norms' backward) are left out of the constants
    assert eager_block_bytes(one_rank_layout(), flops, "torchtitan") == pytest.approx(forward, rel=1e-4)
    assert eager_block_bytes(one_rank_layout(), flops, "torchtitan", backward=True) == pytest.approx(backward, rel=1e-4)


def test_torchtitan_block_moves_more_than_korthikanti_count():
    """Llama 3 8B: 157·h forward, 331·h backward per token against the fitted frameworks' 68·h and 136·h."""
    flops = gated_flops(4096, 32, 8, 14336)
    assert eager_block_bytes(one_rank_layout(), flops, "torchtitan") / 4096 == pytest.approx(157, abs=0.5)
    backward = eager_block_bytes(one_rank_layout(), flops, "torchtitan", backward=True)
    assert backward / 4096 == pytest.approx(331.25, abs=0.5)
    assert set(TORCHTITAN_EAGER_BYTES) == {"stream", "input_grads", "rope", "repeat_kv", "mlp"}


def test_only_the_torchtitan_rule_and_only_eager_prices_it():
    from dataclasses import replace
    from zeroplan.core.hardware import Link
    from zeroplan.core.timing.collectives import LinkTable
    from zeroplan.core.timing.machine import Machine
    link = Link(100_000_000_000, 1e-6)
    base = Machine(1e15, 3.35e12, 50e9, None, LinkTable(link, link))
    titan = replace(base, eager_block=COMM_OVERLAPS["torchtitan"].eager_block)
    assert COMM_OVERLAPS["baseline"].eager_block == "korthikanti"
    flops, layout = gated_flops(4096, 32, 8, 14336), one_rank_layout()
    tokens = 4096
    assert elementwise_seconds(layout, flops, titan) == pytest.approx(
        eager_block_bytes(layout, flops, "torchtitan") * tokens / 3.35e12)
    assert elementwise_seconds(layout, flops, titan, backward=True) > 2 * elementwise_seconds(layout, flops, base)
    compiled = replace(titan, elementwise_fused=True)
    assert elementwise_seconds(layout, flops, compiled) == elementwise_seconds(
        layout, flops, replace(base, elementwise_fused=True))
    ungated = replace(flops, gated=False)  # not torchtitan's SwiGLU block: Korthikanti's count
    assert elementwise_seconds(layout, ungated, titan) == elementwise_seconds(layout, ungated, base)
