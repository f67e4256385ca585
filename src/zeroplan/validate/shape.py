"""The tiny GPT's shape and its exact parameter list, without torch.

Two styles: "gpt2" (learned positions, LayerNorm, biases, fused qkv, GELU MLP) and "llama" (no position
parameters, RMSNorm, no biases, separate q/k/v with grouped-query heads, SwiGLU MLP). The list below is
what zeroplan.validate.model builds, in named_parameters(remove_duplicate=False) order; a test holds the
two together. The prediction starts from this list, never from the torch model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import ceil

from zeroplan.core.errors import InputError
from zeroplan.core.memory.framework_partition import ParamSpec
from zeroplan.core.model.spec import ModelShape, ModelSpec

STYLES = ("gpt2", "llama")
LLAMA_STYLE_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "gemma", "phi3")
MIN_HEAD_DIM = 8


MAX_DIMENSION = 1_000_000  # validate trains real tensors on this machine's memory
# The whole tiny model, checked before any rank starts: every rank builds it in fp32 on the host first, so
# 10^10 parameters is 40 GB per rank already (trace, not validate, measures large models).
MAX_PARAMS = 10**10


@dataclass(frozen=True)
class TinyShape:
    style: str = "gpt2"
    layers: int = 2
    hidden: int = 128
    heads: int = 4
    kv_heads: int = 4
    ffn: int = 500
    vocab: int = 2047
    seq_len: int = 127
    tied: bool = True

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise InputError("--style", f"unknown model style '{self.style}'", "use gpt2 or llama")
        for flag, value in (("--layers", self.layers), ("--hidden", self.hidden), ("--heads", self.heads),
                            ("--kv-heads", self.kv_heads), ("--ffn", self.ffn), ("--vocab", self.vocab),
                            ("--seq-len", self.seq_len)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(flag, f"must be a positive whole number, got {value!r}")
            if value > MAX_DIMENSION:
                raise InputError(flag, f"{value} is too large for a validation run (at most {MAX_DIMENSION})",
                                 "validate trains a small model: keep every dimension modest")
        if self.hidden % self.heads:
            raise InputError("--heads", f"{self.heads} heads do not divide --hidden {self.hidden}",
                             "pick a head count that divides the width")
        if self.heads % self.kv_heads or (self.style == "gpt2" and self.kv_heads != self.heads):
            raise InputError("--kv-heads", f"{self.kv_heads} key/value heads with {self.heads} heads",
                             "use a divisor of --heads (llama style; gpt2 style uses --heads)")
        params = self.params
        if params > MAX_PARAMS:
            raise InputError("--hidden", f"this shape has {params:,} parameters, too many for a validation run "
                             f"(at most {MAX_PARAMS:,}: every rank trains it for real)",
                             "lower --hidden, --layers, --ffn or --vocab; `zeroplan trace` measures large models")

    @property
    def params(self) -> int:
        """Every parameter of the tiny model (tied embeddings once), from its parameter list."""
        return sum(spec.numel for spec in self.param_specs() if spec.tied_to is None)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def to_dict(self) -> dict:
        return asdict(self)

    def model_spec(self) -> ModelSpec:
        """The same model as core sees it (for the activation formula)."""
        params = sum(p.numel for p in self.param_specs() if p.tied_to is None)
        shape = ModelShape.of(layers=self.layers, hidden=self.hidden, heads=self.heads, kv_heads=self.kv_heads,
                              ffn=self.ffn, vocab=self.vocab, max_seq_len=self.seq_len, family=self.style,
                              tied_embeddings=self.tied, head_dim=self.head_dim, gated_mlp=self.style == "llama")
        return ModelSpec(params=params, name="validate-tiny", shape=shape)

    def param_specs(self) -> list[ParamSpec]:
        h, ffn, gpt2 = self.hidden, self.ffn, self.style == "gpt2"
        specs = [ParamSpec("wte.weight", (self.vocab, h))]
        if gpt2:
            specs.append(ParamSpec("wpe.weight", (self.seq_len, h)))

        def norm(prefix: str) -> list[ParamSpec]:
            return [ParamSpec(f"{prefix}.weight", (h,))] + ([ParamSpec(f"{prefix}.bias", (h,))] if gpt2 else [])

        def linear(prefix: str, out: int, inp: int) -> list[ParamSpec]:
            return [ParamSpec(f"{prefix}.weight", (out, inp))] + ([ParamSpec(f"{prefix}.bias", (out,))] if gpt2 else [])

        kv = self.kv_heads * self.head_dim
        for layer in range(self.layers):
            block = f"blocks.{layer}"
            specs += norm(f"{block}.norm1")
            if gpt2:
                specs += linear(f"{block}.attn.qkv", 3 * h, h)
            else:
                specs += linear(f"{block}.attn.q", h, h) + linear(f"{block}.attn.k", kv, h) \
                    + linear(f"{block}.attn.v", kv, h)
            specs += linear(f"{block}.attn.proj", h, h)
            specs += norm(f"{block}.norm2")
            if gpt2:
                specs += linear(f"{block}.mlp.fc", ffn, h) + linear(f"{block}.mlp.proj", h, ffn)
            else:
                specs += linear(f"{block}.mlp.gate", ffn, h) + linear(f"{block}.mlp.up", ffn, h) \
                    + linear(f"{block}.mlp.down", h, ffn)
        specs += norm("norm_f")
        specs.append(ParamSpec("lm_head.weight", (self.vocab, h), "wte.weight" if self.tied else None))
        return specs


def _largest_divisor_at_most(number: int, limit: int) -> int:
    return max(d for d in range(1, max(1, limit) + 1) if number % d == 0)


def scaled_from_preset(model: ModelSpec, hidden: int, layers: int, seq_len: int) -> TinyShape:
    """A preset's shape at width `hidden`: same style, tied head and ffn/hidden ratio, vocabulary
    divided by the same factor (rounded up), heads kept while a head is at least 8 wide, the same
    share of key/value heads, and `layers` layers. Experts are not built: an MoE preset gives a dense
    model with its expert width."""
    for flag, value in (("--hidden", hidden), ("--layers", layers), ("--seq-len", seq_len)):
        if value < 1:
            raise InputError(flag, f"must be a positive whole number, got {value}")
    shape = model.require_shape("--model", f"preset '{model.name}' has no shape (layers, hidden, heads, vocab)",
                                "give the shape with --hidden, --heads, --ffn and --vocab instead")
    factor = shape.hidden / hidden
    heads = _largest_divisor_at_most(hidden, min(shape.heads, hidden // MIN_HEAD_DIM))
    kv_share = shape.kv_heads / shape.heads
    kv_heads = _largest_divisor_at_most(heads, max(1, round(heads * kv_share)))
    style = "llama" if (shape.family or "") in LLAMA_STYLE_FAMILIES else "gpt2"
    return TinyShape(style=style, layers=layers, hidden=hidden, heads=heads,
                     kv_heads=kv_heads if style == "llama" else heads,
                     ffn=max(1, round(shape.ffn / factor)),
                     vocab=max(2, ceil(shape.vocab / factor)), seq_len=seq_len, tied=bool(shape.tied_embeddings))
