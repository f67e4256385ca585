"""One declarative description of a decoder-only model, and everything derived from it (pure stdlib).

A Decoder is embeddings, a per-layer pattern (each Layer: its attention, its MLP or mixture of experts, its norms),
a final norm and a head. Readers (core.model.families) build one from a config.json; from it come:

- the modules that own parameters directly, with their tensors' shapes as transformers builds them (Module): the
  exact count (tied head counted once), DeepSpeed's largest layer (the most parameters one module owns directly,
  runtime/zero/partition_parameters' model_to_params convention), the framework convention's tensors;
- the layout for pipeline stages: per-layer parameters (layers may differ: first-k dense then MoE), input and
  output sides;
- expert parameters (routed experts in total) and active parameters (what one token meets: top-k of the routed
  experts), per docs/formulas.md §2.1.1;
- FLOPs per token (2 per multiply-add of every GEMM a token meets, plus attention's QKᵀ and AV over the keys it
  sees, a sliding window capping them) and the GEMM shapes a layer runs.

Tensor shapes follow torch: nn.Linear's weight is (out, in), GPT-2's Conv1D is (in, out), transformers >= 5 keeps a
layer's routed experts as one module with stacked gate_up_proj (E, 2·f, h) and down_proj (E, h, f).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

Shape = tuple[int, ...]
NORM_KINDS = ("rms", "layer", "layer_no_bias", "none")


@dataclass(frozen=True)
class Module:
    """One module's directly owned parameters, present `copies` times (once per layer, or once).
    shapes: its tensors as torch holds them (empty: only the count is known)."""

    name: str
    params: int
    copies: int = 1
    shapes: tuple[Shape, ...] = ()
    in_layer: bool = False  # a decoder layer's module (even where only one layer holds it)


def _linear(name: str, inputs: int, outputs: int, bias: bool, conv1d: bool = False) -> tuple[str, tuple[Shape, ...]]:
    weight = (inputs, outputs) if conv1d else (outputs, inputs)
    return name, (weight, (outputs,)) if bias else (weight,)


@dataclass(frozen=True)
class Norm:
    """A normalisation over `width` features: RMSNorm (a weight), LayerNorm (weight and bias), LayerNorm without
    bias (Cohere, OLMo-2's), or without parameters (OLMo's non-parametric LayerNorm)."""

    width: int
    kind: str = "rms"
    rows: int = 1  # Cohere's per-head qk-norm is (heads, head_dim)

    def shapes(self) -> tuple[Shape, ...]:
        weight: Shape = (self.rows, self.width) if self.rows > 1 else (self.width,)
        return {"rms": (weight,), "layer_no_bias": (weight,), "layer": (weight, weight), "none": ()}[self.kind]


@dataclass(frozen=True)
class Latent:
    """Multi-head latent attention (DeepSeek-V2/V3): queries through a q_lora_rank bottleneck (or a plain q_proj
    when None), keys and values through a kv_lora_rank latent plus a shared rope key of rope_dim."""

    kv_lora_rank: int
    q_lora_rank: int | None
    rope_dim: int
    nope_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class LinearAttention:
    """Qwen3.5 / Qwen3-Next's gated DeltaNet mixer: a causal conv over q, k, v, per-head decay (A_log, dt_bias)."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int


@dataclass(frozen=True)
class Attention:
    """Softmax attention (MHA: kv_heads == heads; GQA; MQA: kv_heads 1), latent attention, or a linear mixer."""

    heads: int
    kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    out_bias: bool = False
    fused: str | None = None  # one fused q/k/v module (its name), else separate q, k, v
    qk_norm: Norm | None = None  # one norm each on queries and keys
    sinks: bool = False  # gpt-oss: one learned logit per head
    window: int | None = None  # sliding window (None: global): a query sees itself and window - 1 earlier keys
    chunk: int | None = None  # chunked attention (Llama 4): a query sees the keys of its own chunk up to itself
    latent: Latent | None = None
    linear: LinearAttention | None = None
    conv1d: bool = False  # GPT-2's Conv1D (in, out) weights
    names: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "o_proj")
    v_head_dim: int | None = None  # values narrower or wider than keys
    qk_norm_names: tuple[str, str] = ("q_norm", "k_norm")
    gated_query: bool = False  # Qwen3.5: q_proj also yields an output gate, 2·heads·head_dim wide
    kv_shared: bool = False  # Gemma 4: a layer reusing an earlier layer's keys and values has no k/v projections
    k_is_v: bool = False  # Gemma 4's attention_k_eq_v on global layers: the keys serve as values (no v_proj)

    @property
    def span(self) -> tuple[str, int] | None:
        """The keys a query sees when not the whole causal prefix: ("sliding", window) or ("chunked", chunk); None for
        global (and linear) attention."""
        if self.linear is not None:
            return None
        if self.window is not None:
            return "sliding", self.window
        return ("chunked", self.chunk) if self.chunk is not None else None

    @property
    def width(self) -> int:
        """heads × the value head width: what o_proj reads (a linear mixer: its value heads)."""
        if self.linear is not None:
            return self.linear.value_heads * self.linear.value_dim
        if self.latent is not None:
            return self.heads * self.latent.v_head_dim
        return self.heads * (self.v_head_dim or self.head_dim)

    def modules(self, hidden: int) -> list[tuple[str, tuple[Shape, ...]]]:
        q_name, k_name, v_name, o_name = self.names
        if self.linear is not None:
            lin = self.linear
            keys, values = lin.key_heads * lin.key_dim, lin.value_heads * lin.value_dim
            conv = 2 * keys + values
            return [("linear_attn", ((lin.value_heads,), (lin.value_heads,))),
                    ("conv1d", ((conv, 1, lin.conv_kernel),)), ("linear_norm", ((lin.value_dim,),)),
                    ("out_proj", ((hidden, values),)), ("in_proj_qkv", ((conv, hidden),)),
                    ("in_proj_z", ((values, hidden),)), ("in_proj_b", ((lin.value_heads, hidden),)),
                    ("in_proj_a", ((lin.value_heads, hidden),))]
        found: list[tuple[str, tuple[Shape, ...]]] = []
        if self.sinks:
            found.append(("self_attn", ((self.heads,),)))
        if self.latent is not None:
            lat = self.latent
            qk = lat.nope_dim + lat.rope_dim
            if lat.q_lora_rank is None:
                found.append(_linear("q_proj", hidden, self.heads * qk, False))
            else:
                found += [_linear("q_a_proj", hidden, lat.q_lora_rank, self.qkv_bias),
                          ("q_a_layernorm", ((lat.q_lora_rank,),)),
                          _linear("q_b_proj", lat.q_lora_rank, self.heads * qk, False)]
            found += [_linear("kv_a_proj_with_mqa", hidden, lat.kv_lora_rank + lat.rope_dim, self.qkv_bias),
                      ("kv_a_layernorm", ((lat.kv_lora_rank,),)),
                      _linear("kv_b_proj", lat.kv_lora_rank, self.heads * (lat.nope_dim + lat.v_head_dim), False),
                      _linear(o_name, self.width, hidden, self.out_bias)]
            return found
        query, key, value = ((2 if self.gated_query else 1) * self.heads * self.head_dim, self.kv_heads * self.head_dim,
                             self.kv_heads * (self.v_head_dim or self.head_dim))
        if self.fused:
            found.append(_linear(self.fused, hidden, query + key + value, self.qkv_bias, self.conv1d))
        elif self.kv_shared or self.k_is_v:
            found.append(_linear(q_name, hidden, query, self.qkv_bias))
            if not self.kv_shared:
                found.append(_linear(k_name, hidden, key, self.qkv_bias))
        else:
            found += [_linear(q_name, hidden, query, self.qkv_bias), _linear(k_name, hidden, key, self.qkv_bias),
                      _linear(v_name, hidden, value, self.qkv_bias)]
        found.append(_linear(o_name, self.width, hidden, self.out_bias, self.conv1d))
        if self.qk_norm is not None and self.qk_norm.shapes():
            found.append((self.qk_norm_names[0], self.qk_norm.shapes()))
            if not self.kv_shared:
                found.append((self.qk_norm_names[1], _key_norm(self.qk_norm, self)))
        return found


def _key_norm(norm: Norm, attention: Attention) -> tuple[Shape, ...]:
    """The key norm: as the query's, over the key heads where it spans heads (OLMo-2's full-width, Cohere's)."""
    if norm.rows > 1:
        return Norm(norm.width, norm.kind, attention.kv_heads).shapes()
    if norm.width == attention.heads * attention.head_dim != attention.head_dim:
        return Norm(attention.kv_heads * attention.head_dim, norm.kind).shapes()
    return norm.shapes()


@dataclass(frozen=True)
class MLP:
    """A dense MLP: gated (SwiGLU/GeGLU: gate, up, down) or plain (up, down), with or without biases."""

    ffn: int
    gated: bool = True
    bias: bool = False
    fused: str | None = None  # gate and up fused into one module (its name): Phi-3, GLM-4
    conv1d: bool = False
    names: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")

    def modules(self, hidden: int) -> list[tuple[str, tuple[Shape, ...]]]:
        if not self.gated:
            up, down = self.names[-2:]
            return [_linear(up, hidden, self.ffn, self.bias, self.conv1d),
                    _linear(down, self.ffn, hidden, self.bias, self.conv1d)]
        gate, up, down = self.names
        if self.fused:
            return [_linear(self.fused, hidden, 2 * self.ffn, self.bias), _linear(down, self.ffn, hidden, self.bias)]
        return [_linear(gate, hidden, self.ffn, self.bias), _linear(up, hidden, self.ffn, self.bias),
                _linear(down, self.ffn, hidden, self.bias)]

    @property
    def matrices(self) -> int:
        return 3 if self.gated else 2


@dataclass(frozen=True)
class Experts:
    """A mixture of experts: `count` routed experts of width `ffn`, `top_k` of them per token, a router, and
    optionally shared experts every token meets (one MLP of the shared experts' summed width) with a gate."""

    count: int
    top_k: int
    ffn: int
    gated: bool = True
    bias: bool = False  # gpt-oss: biases on the experts' projections
    router_bias: bool = False
    correction_bias: bool = False  # ERNIE 4.5's e_score_correction_bias is a parameter (DeepSeek's a buffer)
    shared: MLP | None = None
    shared_gate: bool = False  # Qwen2-MoE: a sigmoid gate Linear(h, 1) on the shared expert
    names: tuple[str, str, str] = ("router", "experts", "shared_experts")
    stacked: str = "out_in"  # "out_in": (E, 2f, h)/(E, h, f); "in_out": gpt-oss, Llama 4 (E, h, 2f)/(E, f, h)
    router_first: bool = True
    router_params: tuple[Shape, ...] = ()  # tensors the router module owns beside its projection (Gemma 4's scales)
    # group-limited routing (DeepSeek-V3's n_group, topk_group): the experts fall in n groups and a token picks its
    # top-k experts from its best topk_group groups only; None: from all the experts
    route_groups: tuple[int, int] | None = None

    def modules(self, hidden: int) -> list[tuple[str, tuple[Shape, ...]]]:
        router_name, experts_name, shared_name = self.names
        router = (router_name, ((self.count, hidden), (self.count,)) if self.router_bias else ((self.count, hidden),))
        experts = (experts_name, self.stacked_shapes(hidden))
        found = [router, experts] if self.router_first else [experts, router]
        if self.router_params:
            found.append((router_name.rpartition(".")[0] or "router_scales", self.router_params))
        if self.correction_bias:
            found.append(("moe_statics", ((1, self.count),)))
        if self.shared is not None:
            found += [(f"{shared_name}.{name}", shapes) for name, shapes in self.shared.modules(hidden)]
            if self.shared_gate:
                found.append(("shared_expert_gate", ((1, hidden),)))
        return found

    def stacked_shapes(self, hidden: int) -> tuple[Shape, ...]:
        e, f = self.count, self.ffn
        up = (2 if self.gated else 1) * f
        if self.stacked == "flat":  # DBRX: w1, v1, w2 each (E·f, h)
            return ((e * f, hidden),) * (3 if self.gated else 2)
        if self.stacked == "in_out":
            shapes: tuple[Shape, ...] = ((e, hidden, up), (e, up), (e, f, hidden), (e, hidden)) if self.bias else \
                ((e, hidden, up), (e, f, hidden))
            return shapes
        if self.bias:
            return (e, up, hidden), (e, up), (e, hidden, f), (e, hidden)
        return (e, up, hidden), (e, hidden, f)


@dataclass(frozen=True)
class Layer:
    """One decoder layer: its token mixer, its MLP (dense or experts), its norms (name, Norm) in module order."""

    attention: Attention
    mlp: MLP | Experts
    norms: tuple[tuple[str, Norm], ...]
    extras: tuple[tuple[str, tuple[Shape, ...]], ...] = ()  # other modules a layer owns (Gemma 4's per-layer inputs)

    def modules(self, hidden: int) -> list[tuple[str, tuple[Shape, ...]]]:
        norms = [(name, norm.shapes()) for name, norm in self.norms if norm.shapes()]
        return self.attention.modules(hidden) + self.mlp.modules(hidden) + norms + list(self.extras)

    @property
    def is_moe(self) -> bool:
        return isinstance(self.mlp, Experts)


@dataclass(frozen=True)
class Decoder:
    """A decoder-only language model, from its token embedding to its head."""

    family: str
    hidden: int
    vocab: int
    layers: tuple[Layer, ...]
    max_seq_len: int
    tied: bool
    final_norm: tuple[str, Norm] | None
    embed_name: str = "embed_tokens"
    embed_width: int | None = None  # OPT-350m: narrower embeddings, projected in and out
    positions: int = 0  # learned position rows (0: rotary, ALiBi or none)
    positions_name: str = "embed_positions"
    embed_norm: tuple[str, Norm] | None = None  # BLOOM's word_embeddings_layernorm
    input_extras: tuple[tuple[str, tuple[Shape, ...]], ...] = ()
    head_name: str = "lm_head"
    head_bias: bool = False
    mtp_layers: int = 0  # multi-token-prediction modules the config describes but transformers does not build
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def width(self) -> int:
        return self.embed_width or self.hidden

    def _input_modules(self) -> list[tuple[str, tuple[Shape, ...]]]:
        found: list[tuple[str, tuple[Shape, ...]]] = [(self.embed_name, ((self.vocab, self.width),))]
        if self.positions:
            found.append((self.positions_name, ((self.positions, self.hidden),)))
        if self.embed_norm is not None:
            found.append((self.embed_norm[0], self.embed_norm[1].shapes()))
        if self.width != self.hidden:
            found.append(("project_in", ((self.hidden, self.width),)))
        return found + list(self.input_extras)

    def _output_modules(self) -> list[tuple[str, tuple[Shape, ...]]]:
        found: list[tuple[str, tuple[Shape, ...]]] = []
        if self.width != self.hidden:
            found.append(("project_out", ((self.width, self.hidden),)))
        if self.final_norm is not None and self.final_norm[1].shapes():
            found.append((self.final_norm[0], self.final_norm[1].shapes()))
        if not self.tied:
            found.append((self.head_name, ((self.vocab, self.width), (self.vocab,)) if self.head_bias
                          else ((self.vocab, self.width),)))
        elif self.head_bias:  # a tied weight with a bias of its own (ERNIE 4.5)
            found.append((self.head_name, ((self.vocab,),)))
        return found

    def layer_kinds(self) -> list[tuple[Layer, int]]:
        """Each distinct layer with how many times it occurs, in order of first occurrence."""
        counts: dict[Layer, int] = {}
        for layer in self.layers:
            counts[layer] = counts.get(layer, 0) + 1
        return list(counts.items())

    @property
    def modules(self) -> tuple[Module, ...]:
        """Every module that owns parameters, identical modules of different layer kinds merged."""
        merged: dict[tuple[str, tuple[Shape, ...], bool], int] = {}
        for name, shapes in self._input_modules():
            merged[(name, shapes, False)] = merged.get((name, shapes, False), 0) + 1
        for layer, count in self.layer_kinds():
            for name, shapes in layer.modules(self.hidden):
                merged[(name, shapes, True)] = merged.get((name, shapes, True), 0) + count
        for name, shapes in self._output_modules():
            merged[(name, shapes, False)] = merged.get((name, shapes, False), 0) + 1
        return tuple(Module(name, sum(prod(s) for s in shapes), copies, shapes, in_layer)
                     for (name, shapes, in_layer), copies in merged.items() if shapes)

    @property
    def params(self) -> int:
        return sum(module.params * module.copies for module in self.modules)

    @property
    def largest_module(self) -> Module:
        return max(self.modules, key=lambda module: module.params)

    def layer_params(self, layer: Layer) -> int:
        return sum(prod(shape) for _name, shapes in layer.modules(self.hidden) for shape in shapes)

    @property
    def input_params(self) -> int:
        return sum(prod(shape) for _name, shapes in self._input_modules() for shape in shapes)

    @property
    def output_params(self) -> int:
        return sum(prod(shape) for _name, shapes in self._output_modules() for shape in shapes)

    @property
    def mtp_params(self) -> int:
        """Parameters of the multi-token-prediction modules, not in the count (transformers does not build them):
        each, as DeepSeek-V3's checkpoint stores it, one more decoder layer like the last, eh_proj (h × 2h), three
        norms (enorm, hnorm, the shared head's) and its own copies of the embedding and the head."""
        if not self.mtp_layers:
            return 0
        module = self.layer_params(self.layers[-1]) + 2 * self.hidden * self.hidden + 3 * self.hidden
        return self.mtp_layers * (module + 2 * self.vocab * self.width)

    def per_layer_params(self) -> tuple[int, ...]:
        cache = {layer: self.layer_params(layer) for layer, _count in self.layer_kinds()}
        return tuple(cache[layer] for layer in self.layers)

    # --- mixture of experts ------------------------------------------------------------------------------------

    @property
    def moe_layers(self) -> int:
        return sum(1 for layer in self.layers if layer.is_moe)

    def _routed(self, layer: Layer) -> tuple[int, int]:
        """(routed-expert parameters of a layer, of them the ones one token meets)."""
        if not isinstance(layer.mlp, Experts):
            return 0, 0
        experts = layer.mlp
        total = sum(prod(shape) for shape in experts.stacked_shapes(self.hidden))
        return total, total // experts.count * experts.top_k

    @property
    def expert_params(self) -> int:
        """Routed-expert parameters in total (shared experts and routers excluded)."""
        return sum(self._routed(layer)[0] for layer in self.layers)

    @property
    def active_params(self) -> int:
        """Parameters one token meets: all but the routed experts it is not sent to (docs/formulas.md §2.1.1);
        the whole model when dense."""
        return self.params - sum(total - active for total, active in map(self._routed, self.layers))

    # --- FLOPs and GEMMs -------------------------------------------------------------------------------------

    def gemms(self, layer: Layer, tokens: int) -> list[tuple[str, int, int, int, int]]:
        """The GEMMs one layer runs forward for `tokens` tokens: (name, m, n, k, how many), n the weight's outputs and
        k its inputs (GPT-2's Conv1D weights, stored (in, out), turned). Routed experts as if tokens spread evenly:
        top_k·tokens rows in all. The one list of a layer's GEMMs: FLOPs (flops_per_token) and the step time's
        shapes (tp_gemms) are read from it."""
        found = [(name, tokens, out, inp, 1) for name, out, inp in _attention_weights(layer.attention, self.hidden)]
        if isinstance(layer.mlp, MLP):
            found += [(name, tokens, out, inp, 1) for name, out, inp in _mlp_weights(layer.mlp, self.hidden)]
        if isinstance(layer.mlp, Experts):
            experts = layer.mlp
            if experts.shared is not None:
                found += [(name, tokens, out, inp, 1) for name, out, inp in _mlp_weights(experts.shared, self.hidden)]
            up = (2 if experts.gated else 1) * experts.ffn
            rows = tokens * experts.top_k
            found += [("router", tokens, experts.count, self.hidden, 1), ("experts.gate_up", rows, up, self.hidden, 1),
                      ("experts.down", rows, self.hidden, experts.ffn, 1)]
        return found

    def tp_gemms(self, layer: Layer) -> tuple[tuple[int, int, int, bool], ...]:
        """The layer's linear GEMMs as a tensor-parallel framework runs them, from gemms: (inner, outer, rows per
        token, row-parallel), by block: attention, then the MLP (routed experts), then shared experts. In a block
        the last weight is row-parallel (its inner width split over tp, Megatron's RowParallelLinear) and the rest
        column-parallel (outer split); consecutive column weights reading the same input run as one GEMM
        (Megatron-Core's linear_qkv and linear_fc1: q, k, v; gate, up). The router (E outputs, not split) is left out
        of the step time."""
        rows = {name: m for name, m, _n, _k, _c in self.gemms(layer, 1)}
        named = {name: (n, k) for name, _m, n, k, _c in self.gemms(layer, 1)}
        blocks = [[name for name, _out, _inp in _attention_weights(layer.attention, self.hidden)]]
        if isinstance(layer.mlp, MLP):
            blocks.append([name for name, _out, _inp in _mlp_weights(layer.mlp, self.hidden)])
        if isinstance(layer.mlp, Experts):
            blocks.append(["experts.gate_up", "experts.down"])
            if layer.mlp.shared is not None:
                blocks.append([name for name, _out, _inp in _mlp_weights(layer.mlp.shared, self.hidden)])
        found: list[tuple[int, int, int, bool]] = []
        for block in (b for b in blocks if b):
            columns: list[tuple[int, int, int, bool]] = []
            for name in block[:-1]:
                outer, inner = named[name]
                if columns and columns[-1][0] == inner and columns[-1][2] == rows[name]:
                    columns[-1] = (inner, columns[-1][1] + outer, rows[name], False)
                else:
                    columns.append((inner, outer, rows[name], False))
            outer, inner = named[block[-1]]
            found += columns + [(inner, outer, rows[block[-1]], True)]
        return tuple(found)

    def flops_per_token(self, seq_len: int, active: bool = True) -> int:
        """Forward FLOPs per token: 2 per weight of every GEMM met (top-k experts only when active), the head, and
        attention's QKᵀ and AV (2·2·heads·head_dim per key seen; causal: on average (s+1)/2 keys, capped by a
        sliding window). Per layer the attention term is rounded down to a whole FLOP."""
        total = 0
        for layer in self.layers:
            weights = sum(m * n * k * c for _name, m, n, k, c in self.gemms(layer, 1))
            if not active and isinstance(layer.mlp, Experts):
                experts = layer.mlp
                weights += (experts.count - experts.top_k) * (3 if experts.gated else 2) * self.hidden * experts.ffn
            total += 2 * weights + _attention_flops(layer.attention, seq_len)
        return total + 2 * self.vocab * self.width


def _linear_weights(modules: list[tuple[str, tuple[Shape, ...]]], turned: frozenset[str] | None
                    ) -> list[tuple[str, int, int]]:
    """(name, outputs, inputs) of each 2-D weight among modules (norms and vectors left out); `turned`: the names
    stored (in, out) as GPT-2's Conv1D stores them (None: every weight)."""
    found = []
    for name, shapes in modules:
        weight = shapes[0]
        if len(weight) == 2 and min(weight) > 1 and not name.endswith("norm"):
            out, inp = (weight[1], weight[0]) if turned is None or name in turned else weight
            found.append((name, out, inp))
    return found


def _attention_weights(attention: Attention, hidden: int) -> list[tuple[str, int, int]]:
    turned = frozenset(n for n in attention.names + (attention.fused,) if n) if attention.conv1d else frozenset()
    return _linear_weights(attention.modules(hidden), turned)


def _mlp_weights(mlp: MLP, hidden: int) -> list[tuple[str, int, int]]:
    return _linear_weights(mlp.modules(hidden), None if mlp.conv1d else frozenset())


def causal_keys_seen(seq_len: int, span: tuple[str, int] | None) -> int:
    """Keys the queries of one causal sequence see, summed over the sequence (docs/formulas.md §14.1): s(s+1)/2 for
    global attention; a sliding window w caps each query at w keys (w(w+1)/2 + (s − w)·w); chunks of c restart at
    each chunk (whole chunks c(c+1)/2 each, the last partial one r(r+1)/2)."""
    if span is None or span[1] >= seq_len:
        return seq_len * (seq_len + 1) // 2
    kind, size = span
    if kind == "chunked":
        whole, rest = divmod(seq_len, size)
        return whole * size * (size + 1) // 2 + rest * (rest + 1) // 2
    return size * (size + 1) // 2 + (seq_len - size) * size


def _attention_flops(attention: Attention, seq_len: int) -> int:
    """Forward FLOPs per token of QKᵀ and AV: 2 per multiply-add over the keys a token sees, averaged over the
    sequence (causal: key i sees i keys; a sliding window caps them at the window; chunked attention restarts the
    count at each chunk's first token)."""
    if attention.linear is not None:  # a recurrent state per head: key_dim × value_dim, read and written per token
        lin = attention.linear
        return 2 * 2 * lin.value_heads * lin.key_dim * lin.value_dim
    seen = causal_keys_seen(seq_len, attention.span)
    if attention.latent is not None:
        width = attention.latent.nope_dim + attention.latent.rope_dim + attention.latent.v_head_dim
    else:
        width = attention.head_dim + (attention.v_head_dim or attention.head_dim)
    return 2 * attention.heads * width * seen // seq_len
