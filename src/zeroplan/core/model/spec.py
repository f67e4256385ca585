"""What the planner needs to know about a model: a parameter count (ModelSpec), and, when known, its shape
(ModelShape, every field typed). --params alone gives a count without a shape."""

from __future__ import annotations

from dataclasses import dataclass, field

from zeroplan.core.errors import InputError, ref
from zeroplan.core.units import MAX_COUNT, format_count

# The shape fields a source may leave out, filled with the usual default (see ModelShape.of).
DEFAULTED_FIELDS = ("kv_heads", "ffn", "head_dim", "gated_mlp")


@dataclass(frozen=True)
class ParamLayout:
    """Where the parameters sit, for pipeline stages: per transformer layer, on the input side (embeddings,
    positions: first stage) and on the output side (final norm, LM head: last stage)."""

    layer_params: int  # the largest layer's (every layer's, where all hold the same)
    input_params: int
    output_params: int
    per_layer: tuple[int, ...] | None = None  # each layer's, first to last, where layers differ (dense then MoE)

    def layer(self, index: int) -> int:
        return self.layer_params if self.per_layer is None else self.per_layer[index]


@dataclass(frozen=True)
class MoEShape:
    """A mixture-of-experts model's expert layout, for expert parallelism and active-parameter FLOPs."""

    moe_layers: int  # layers holding routed experts (the rest are dense)
    expert_ffn: int  # one routed expert's intermediate width
    expert_params: int  # routed-expert parameters in total, over every MoE layer
    active_params: int  # parameters one token meets: all but the routed experts it is not sent to
    dense_ffn: int | None = None  # the dense layers' MLP width, where some layers are dense
    shared_expert_ffn: int | None = None  # the shared experts' summed width, where the model has them
    pattern: tuple[bool, ...] | None = None  # per layer, first to last: True where its MLP is routed
    # (inner, outer) of each attention projection weight of a MoE layer, in module order (latent attention's
    # low-rank factors are not the heads × head_dim widths); None: read the widths (heads, kv_heads, head_dim)
    attention_linears: tuple[tuple[int, int], ...] | None = None
    route_groups: tuple[int, int] | None = None  # (n_group, topk_group) of group-limited routing; None: unlimited


@dataclass(frozen=True)
class ModelShape:
    """A transformer's shape. kv_heads, ffn, head_dim and gated_mlp always hold a value: ModelShape.of fills
    the ones a source leaves out (heads, 4·hidden, hidden/heads, False) and names them in `defaulted`."""

    layers: int
    hidden: int
    heads: int
    vocab: int
    kv_heads: int
    ffn: int
    head_dim: int
    gated_mlp: bool = False  # SwiGLU/GeGLU: three ffn-wide matrices instead of two
    experts: int | None = None
    experts_per_token: int | None = None
    max_seq_len: int | None = None
    family: str | None = None
    tied_embeddings: bool | None = None
    layout: ParamLayout | None = None
    defaulted: frozenset[str] = frozenset()
    moe: MoEShape | None = None
    # the architecture description's linear GEMMs of a layer (core.model.architecture.Decoder.tp_gemms: inner, outer,
    # rows per token, row-parallel), the layer the step time prices (a MoE model's MoE layer); None: read the widths
    gemms: tuple[tuple[int, int, int, bool], ...] | None = None
    # each layer's attention span from the architecture description (core.model.architecture.Attention.span):
    # ("sliding", window) or ("chunked", chunk), None for a layer attending to its whole causal prefix; None: every
    # layer global (the step time prices the attention core by it: core.timing.flash_blocks)
    attention_spans: tuple[tuple[str, int] | None, ...] | None = None

    @property
    def expert_params(self) -> int | None:
        """Routed-expert parameters in total, from the architecture description (None: dense, or a shape given by
        fields; core.model.experts splits every MoE shape)."""
        return self.moe.expert_params if self.moe is not None else None

    @property
    def active_params(self) -> int | None:
        """Parameters one token meets, from the architecture description (None otherwise: core.model.experts
        active_params counts every model)."""
        return self.moe.active_params if self.moe is not None else None

    @property
    def moe_layers(self) -> int | None:
        return self.moe.moe_layers if self.moe is not None else (self.layers if self.experts else None)

    @property
    def dense_layers(self) -> int:
        return self.layers - (self.moe_layers or 0)

    @classmethod
    def of(cls, *, layers: int, hidden: int, heads: int, vocab: int, kv_heads: int | None = None,
           ffn: int | None = None, head_dim: int | None = None, gated_mlp: bool | None = None,
           experts: int | None = None, experts_per_token: int | None = None, max_seq_len: int | None = None,
           family: str | None = None, tied_embeddings: bool | None = None,
           layout: ParamLayout | None = None, moe: MoEShape | None = None,
           gemms: tuple[tuple[int, int, int, bool], ...] | None = None,
           attention_spans: tuple[tuple[str, int] | None, ...] | None = None) -> ModelShape:
        """The shape with the usual defaults for the fields a source leaves out (None)."""
        if head_dim is None and hidden % heads:
            raise InputError("heads", f"{heads} heads do not divide hidden size {hidden}",
                             "give the model's real head count (or its head_dim in config.json)")
        if kv_heads is not None and (kv_heads > heads or heads % kv_heads):
            raise InputError("kv_heads", f"{kv_heads} key/value heads do not divide {heads} heads",
                             "grouped-query attention needs heads to be a multiple of kv_heads")
        given = {"kv_heads": kv_heads, "ffn": ffn, "head_dim": head_dim, "gated_mlp": gated_mlp}
        return cls(layers=layers, hidden=hidden, heads=heads, vocab=vocab,
                   kv_heads=heads if kv_heads is None else kv_heads, ffn=4 * hidden if ffn is None else ffn,
                   head_dim=hidden // heads if head_dim is None else head_dim, gated_mlp=bool(gated_mlp),
                   experts=experts, experts_per_token=experts_per_token, max_seq_len=max_seq_len, family=family,
                   tied_embeddings=tied_embeddings, layout=layout, moe=moe, gemms=gemms,
                   attention_spans=attention_spans,
                   defaulted=frozenset(name for name, value in given.items() if value is None))

    def as_given(self, name: str) -> int | bool | None:
        """A defaultable field as its source gave it: None where ModelShape.of filled it in (reports)."""
        value: int | bool = getattr(self, name)
        return None if name in self.defaulted else value


@dataclass(frozen=True)
class ModelSpec:
    params: int
    name: str = "custom"
    # Parameters owned directly by the largest single module (DeepSpeed's definition).
    largest_layer_params: int | None = None
    shape: ModelShape | None = None
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.params, bool) or not isinstance(self.params, int) or self.params <= 0:
            raise InputError("params", f"must be a positive whole count, got {self.params}",
                             "write a count such as 13e9 or 13B")
        if self.params > MAX_COUNT:
            raise InputError("model" if self.shape else "params",
                             f"{self.name} has {format_count(self.params)} parameters, beyond any real model "
                             "(more than 1e18)", "check the model's shape fields")
        if self.largest_layer_params is not None and not 0 < self.largest_layer_params <= self.params:
            raise InputError("largest_layer_params",
                             f"must be between 1 and the model's {self.params} parameters, got {self.largest_layer_params}")

    def require_shape(self, name: str, problem: str, fix: str) -> ModelShape:
        """The model's shape, or the InputError (name, problem, fix) when only a count is known."""
        if self.shape is None:
            raise InputError(name, problem, fix)
        return self.shape

    @property
    def layout(self) -> ParamLayout | None:
        return self.shape.layout if self.shape is not None else None

    @property
    def has_shape(self) -> bool:
        return self.shape is not None

    def reported(self, name: str) -> int | bool | str | None:
        """A shape or layout field as the model's source gave it, for reports: None where no shape (or
        layout) is known, or where ModelShape.of filled the field with its default."""
        if self.shape is None:
            return None
        if name in ("layer_params", "input_params", "output_params"):
            return None if self.shape.layout is None else getattr(self.shape.layout, name)
        if name in DEFAULTED_FIELDS:
            return self.shape.as_given(name)
        value: int | bool | str | None = getattr(self.shape, name)
        return value


def check_count_against_shape(params: int, layers: int, hidden: int) -> None:
    """A count given beside a shape (--params with --layers/--hidden) must be one that shape can hold:
    every layer has at least its query and output projections, 2·hidden² weights."""
    least = layers * 2 * hidden**2
    if params < least:
        raise InputError("params", f"{format_count(params)} is fewer parameters than {layers} layers of hidden "
                         f"size {hidden} hold (at least 2·hidden² each: {format_count(least)})",
                         f"check {ref('params')} against {ref('layers')} and {ref('hidden')}")
