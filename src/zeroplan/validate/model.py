"""The tiny GPT that validate trains (imports torch). Its parameters are exactly TinyShape.param_specs().

Attention is written out (matmul, softmax, dropout, matmul) rather than fused, so what it saves for
backward is what the activation formula assumes without flash attention; dropout (p = 0.1, 1-byte masks) is on after
the embedding, on the attention probabilities and after each residual branch, as in Korthikanti et al.
The logits are cast to fp32 before the loss, as the formula's 4·s·b·V term assumes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from zeroplan.validate.shape import TinyShape

DROPOUT = 0.1


def _dropout(x: torch.Tensor, training: bool) -> torch.Tensor:
    """torch.native_dropout keeps a 1-byte bool mask on CPU and GPU alike; F.dropout on CPU keeps the
    mask in the input's dtype (4 bytes an element in fp32), which the formula does not assume."""
    return torch.native_dropout(x, DROPOUT, True)[0] if training else x


def _norm(shape: TinyShape) -> nn.Module:
    return nn.LayerNorm(shape.hidden) if shape.style == "gpt2" else nn.RMSNorm(shape.hidden)


class Attention(nn.Module):
    causal: torch.Tensor  # a registered buffer: True above the diagonal

    def __init__(self, shape: TinyShape) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, shape.head_dim
        self.fused = shape.style == "gpt2"
        bias = self.fused
        kv = shape.kv_heads * shape.head_dim
        if self.fused:
            self.qkv = nn.Linear(shape.hidden, 3 * shape.hidden, bias=bias)
        else:
            self.q = nn.Linear(shape.hidden, shape.hidden, bias=False)
            self.k = nn.Linear(shape.hidden, kv, bias=False)
            self.v = nn.Linear(shape.hidden, kv, bias=False)
        self.proj = nn.Linear(shape.hidden, shape.hidden, bias=bias)
        self.register_buffer("causal", torch.ones(shape.seq_len, shape.seq_len, dtype=torch.bool).triu(1),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        if self.fused:
            q, k, v = self.qkv(x).split(width, dim=-1)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.kv_heads != self.heads:  # grouped-query attention
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        scores = scores.masked_fill(self.causal[:seq, :seq], float("-inf"))
        probs = _dropout(scores.softmax(dim=-1), self.training)
        context = (probs @ v).transpose(1, 2).reshape(batch, seq, width)
        return self.proj(context)


class Mlp(nn.Module):
    def __init__(self, shape: TinyShape) -> None:
        super().__init__()
        self.gated = shape.style == "llama"
        if self.gated:
            self.gate = nn.Linear(shape.hidden, shape.ffn, bias=False)
            self.up = nn.Linear(shape.hidden, shape.ffn, bias=False)
            self.down = nn.Linear(shape.ffn, shape.hidden, bias=False)
        else:
            self.fc = nn.Linear(shape.hidden, shape.ffn)
            self.proj = nn.Linear(shape.ffn, shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, shape: TinyShape) -> None:
        super().__init__()
        self.norm1, self.attn = _norm(shape), Attention(shape)
        self.norm2, self.mlp = _norm(shape), Mlp(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + _dropout(self.attn(self.norm1(x)), self.training)
        return x + _dropout(self.mlp(self.norm2(x)), self.training)


class TinyGpt(nn.Module):
    def __init__(self, shape: TinyShape) -> None:
        super().__init__()
        self.wte = nn.Embedding(shape.vocab, shape.hidden)
        self.wpe = nn.Embedding(shape.seq_len, shape.hidden) if shape.style == "gpt2" else None
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm_f = _norm(shape)
        self.lm_head = nn.Linear(shape.hidden, shape.vocab, bias=False)
        if shape.tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        x = _dropout(x, self.training)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.norm_f(x)).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
