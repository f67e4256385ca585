"""What the planner needs to know about a model. Shape fields are optional: --params alone works."""

from __future__ import annotations

from dataclasses import dataclass, field

from zeroplan.core.errors import InputError
from zeroplan.core.units import MAX_COUNT, format_count


@dataclass(frozen=True)
class ModelSpec:
    params: int
    name: str = "custom"
    # Parameters owned directly by the largest single module (DeepSpeed's definition).
    largest_layer_params: int | None = None
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    ffn: int | None = None
    vocab: int | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    max_seq_len: int | None = None
    family: str | None = None
    tied_embeddings: bool | None = None
    head_dim: int | None = None  # when it differs from hidden/heads (Gemma)
    gated_mlp: bool | None = None  # SwiGLU/GeGLU: three ffn-wide matrices instead of two
    # Where the parameters sit, for pipeline stages: per transformer layer, on the input side
    # (embeddings, positions: first stage) and on the output side (final norm, LM head: last stage).
    layer_params: int | None = None
    input_params: int | None = None
    output_params: int | None = None
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.params, bool) or not isinstance(self.params, int) or self.params <= 0:
            raise InputError("--params", f"must be a positive whole count, got {self.params}",
                             "write a count such as 13e9 or 13B")
        if self.params > MAX_COUNT:
            raise InputError("--model" if self.hidden else "--params",
                             f"{self.name} has {format_count(self.params)} parameters, beyond any real model "
                             "(more than 1e18)", "check the model's shape fields")
        if self.heads is not None and self.hidden is not None:
            if self.head_dim is None and self.hidden % self.heads:
                raise InputError("--heads", f"{self.heads} heads do not divide hidden size {self.hidden}",
                                 "give the model's real head count (or its head_dim in config.json)")
            if self.kv_heads is not None and (self.kv_heads > self.heads or self.heads % self.kv_heads):
                raise InputError("--kv-heads", f"{self.kv_heads} key/value heads do not divide {self.heads} heads",
                                 "grouped-query attention needs heads to be a multiple of kv_heads")
        if self.largest_layer_params is not None and not 0 < self.largest_layer_params <= self.params:
            raise InputError("--largest-layer-params",
                             f"must be between 1 and the model's {self.params} parameters, got {self.largest_layer_params}")

    @property
    def has_layout(self) -> bool:
        return None not in (self.layers, self.layer_params, self.input_params, self.output_params)

    @property
    def has_shape(self) -> bool:
        return all(v is not None for v in (self.layers, self.hidden, self.heads, self.vocab))


def check_count_against_shape(params: int, layers: int, hidden: int) -> None:
    """A count given beside a shape (--params with --layers/--hidden) must be one that shape can hold:
    every layer has at least its query and output projections, 2·hidden² weights."""
    least = layers * 2 * hidden**2
    if params < least:
        raise InputError("--params", f"{format_count(params)} is fewer parameters than {layers} layers of hidden "
                         f"size {hidden} hold (at least 2·hidden² each: {format_count(least)})",
                         "check --params against --layers and --hidden")
