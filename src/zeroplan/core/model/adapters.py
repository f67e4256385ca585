"""Fine-tuning modes: what trains, what is frozen, which linears carry LoRA adapters and their shapes.

Modes (docs/formulas.md §21):
- full: every parameter trains, except what `freeze` names (the embeddings and LM head, the first k layers).
- lora: the whole base model is frozen; each adapted linear W (out × in) gets A (r × in) and B (out × r),
  r·(in + out) trainable parameters (Hu et al. 2021, arXiv 2106.09685; PEFT's peft/tuners/lora/layer.py).
- qlora: lora on a base whose decoder linears are quantised (Dettmers et al. 2023, arXiv 2305.14314):
  bitsandbytes' Linear4bit (nf4) or Linear8bitLt (int8) replaces every nn.Linear but the LM head
  (transformers' get_keys_to_not_convert); embeddings, norms and the head stay in 16 bits.

The per-projection shapes come from ModelShape (hidden h, heads a, kv heads k, head_dim d, ffn f), named as
PEFT's target_modules names them for Llama-style models: q_proj (h → a·d), k_proj and v_proj (h → k·d),
o_proj (a·d → h), gate_proj and up_proj (h → f), down_proj (f → h). "all-linear" is PEFT's shorthand for
every linear of the decoder layers (never the LM head). Models without a gated MLP have no gate_proj. On a mixture
of experts whose every layer is routed (no shared experts), gate_proj/up_proj and down_proj name the fused expert
tensors PEFT adapts with target_parameters (ExpertAdapter: r·E·(in + out) each, docs/formulas.md §23.4).
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError, ref
from zeroplan.core.model.spec import ModelSpec, ModelShape
from zeroplan.core.units import ceil_div

FINETUNE_MODES = ("full", "lora", "qlora")
FINETUNE_CHOICES = FINETUNE_MODES + ("auto",)
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ALL_LINEAR = "all-linear"
QUANTS = ("nf4", "int8")
DEFAULT_LORA_RANK = 16
ADAPTER_BYTES = 4  # PEFT's default autocast_adapter_dtype=True keeps LoRA weights in fp32 on a 16-bit base
# Whose recipe trains the adapters: PEFT (transformers + PEFT, as TRL, axolotl and accelerate run it) or torchtune
# (its own LoRALinear in the model dtype, bf16 AdamW states, CEWithChunkedOutputLoss): core.memory.finetune.
RECIPES = ("peft", "torchtune")
RECIPE_ADAPTER_BYTES = {"peft": ADAPTER_BYTES, "torchtune": 2}  # torchtune builds the whole model in dtype=bf16

# bitsandbytes blockwise quantisation (bitsandbytes/functional.py quantize_4bit, quantize_blockwise):
NF4_BLOCK = 64  # one absmax per 64 weights (blocksize=64, the Linear4bit default)
NESTED_BLOCK = 256  # double quantisation: the absmax values themselves quantised in blocks of 256
FP32 = 4
NF4_CODE = 16  # the 16 NF4 levels, an fp32 table each QuantState holds (functional.get_4bit_type, made per call)
DYNAMIC_CODE = 256  # the 8-bit dynamic map of the nested absmax, copied into each QuantState.state2 (code.to(copy=True))


@dataclass(frozen=True)
class Linear:
    """One projection of a decoder layer: its PEFT name and (in_features, out_features)."""

    name: str
    in_features: int
    out_features: int

    @property
    def numel(self) -> int:
        return self.in_features * self.out_features


@dataclass(frozen=True)
class Finetune:
    """What a fine-tuning run trains and how its frozen base is stored.

    freeze_embeddings / freeze_layers: `--freeze embeddings,layers:K` (the embeddings and LM head; the
    first K decoder layers). Under lora/qlora the base is frozen anyway: freeze_layers then means no
    adapters on the first K layers (PEFT's layers_to_transform)."""

    mode: str = "full"
    rank: int = DEFAULT_LORA_RANK
    targets: tuple[str, ...] = LORA_TARGETS
    quant: str | None = None  # qlora's base storage: nf4 (default) or int8
    double_quant: bool = True  # nf4 only: bnb_4bit_use_double_quant
    freeze_embeddings: bool = False
    freeze_layers: int = 0
    recipe: str = "peft"  # RECIPES: whose code trains the adapters

    def __post_init__(self) -> None:
        if self.recipe not in RECIPES:
            raise InputError("finetune_recipe", f"unknown recipe '{self.recipe}'", "use peft or torchtune")
        if self.mode not in FINETUNE_MODES:
            raise InputError("finetune", f"unknown fine-tuning mode '{self.mode}'", "use full, lora, qlora or auto")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise InputError("lora_rank", f"must be a positive whole number, got {self.rank!r}")
        unknown = [t for t in self.targets if t not in LORA_TARGETS]
        if unknown or not self.targets:
            raise InputError("lora_targets", f"unknown target module '{unknown[0] if unknown else ''}'",
                             f"use PEFT names: {', '.join(LORA_TARGETS)} or {ALL_LINEAR}")
        if self.quant is not None and self.quant not in QUANTS:
            raise InputError("quant", f"unknown quantisation '{self.quant}'", "use nf4 or int8")
        if self.quant is not None and self.mode != "qlora":
            raise InputError("quant", f"quantises the frozen base of {ref('finetune', 'qlora')}, asked with "
                             f"{self.mode}", f"add {ref('finetune', 'qlora')}, or drop {ref('quant')}")
        if isinstance(self.freeze_layers, bool) or not isinstance(self.freeze_layers, int) or self.freeze_layers < 0:
            raise InputError("freeze", f"layers:K needs a whole number of layers, got {self.freeze_layers!r}")

    @property
    def adapters(self) -> bool:
        return self.mode in ("lora", "qlora")

    @property
    def adapter_bytes(self) -> int:
        """Bytes of one adapter weight (and of its gradient): PEFT's fp32, torchtune's bf16."""
        return RECIPE_ADAPTER_BYTES[self.recipe]

    @property
    def storage(self) -> str | None:
        """How the frozen decoder linears are stored: nf4, int8, or None (the precision's weight dtype)."""
        return (self.quant or "nf4") if self.mode == "qlora" else None

    @property
    def trains_everything(self) -> bool:
        return self.mode == "full" and not self.freeze_embeddings and not self.freeze_layers

    def describe(self) -> str:
        """'LoRA r16 on q_proj,…,down_proj of layers 0-31, base frozen (bf16)' style, for reasons and notes."""
        frozen = []
        if self.freeze_embeddings:
            frozen.append("embeddings and LM head")
        if self.freeze_layers:
            frozen.append(f"the first {self.freeze_layers} layers")
        if self.mode == "full":
            return "full fine-tuning" + (f", {' and '.join(frozen)} frozen" if frozen else "")
        storage = {"nf4": "4-bit NF4" + (" with double quantisation" if self.double_quant else ""),
                   "int8": "8-bit (LLM.int8)"}.get(self.storage or "", "16-bit")
        where = f" (none on the first {self.freeze_layers} layers)" if self.freeze_layers else ""
        targets = "all linear layers" if self.targets == LORA_TARGETS else ",".join(self.targets)
        recipe = "; torchtune's recipe" if self.recipe == "torchtune" else ""
        return (f"{'QLoRA' if self.mode == 'qlora' else 'LoRA'} rank {self.rank} on {targets}{where}; "
                f"the base model frozen in {storage} storage{recipe}")


FULL = Finetune()


def parse_targets(text: str) -> tuple[str, ...]:
    """'q_proj,v_proj' or 'all-linear' -> the target names, in LORA_TARGETS order."""
    names = [name.strip().lower() for name in str(text).split(",") if name.strip()]
    if names == [ALL_LINEAR]:
        return LORA_TARGETS
    unknown = [name for name in names if name not in LORA_TARGETS]
    if unknown or not names:
        raise InputError("lora_targets", f"unknown target module '{unknown[0] if unknown else text}'",
                         f"use PEFT names separated by commas ({', '.join(LORA_TARGETS)}) or {ALL_LINEAR}")
    return tuple(name for name in LORA_TARGETS if name in names)


def parse_freeze(text: str) -> tuple[bool, int]:
    """'embeddings', 'layers:8' or 'embeddings,layers:8' -> (freeze_embeddings, freeze_layers)."""
    embeddings, layers = False, 0
    for part in (p.strip().lower() for p in str(text).split(",") if p.strip()):
        if part in ("embeddings", "embedding", "embed"):
            embeddings = True
        elif part.startswith("layers:") and part[len("layers:"):].isdigit():
            layers = int(part[len("layers:"):])
        else:
            raise InputError("freeze", f"cannot read '{part}'",
                             "use embeddings, layers:K (the first K layers) or both: embeddings,layers:8")
    return embeddings, layers


def layer_linears(shape: ModelShape) -> tuple[Linear, ...]:
    """Every linear of one decoder layer, by PEFT name (a model without a gated MLP has no gate_proj)."""
    h, attention, kv = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    linears = [Linear("q_proj", h, attention), Linear("k_proj", h, kv), Linear("v_proj", h, kv),
               Linear("o_proj", attention, h)]
    if shape.gated_mlp:
        linears.append(Linear("gate_proj", h, shape.ffn))
    linears += [Linear("up_proj", h, shape.ffn), Linear("down_proj", shape.ffn, h)]
    return tuple(linears)


def quantised_linears(shape: ModelShape) -> tuple[tuple[Linear, int], ...]:
    """Every nn.Linear of the decoder layers QLoRA quantises, with how many of it the model holds: transformers'
    replace_with_bnb_linear converts nn.Linear modules only. A dense model: each layer's seven. A mixture of
    experts: the attention projections of every layer, the MLP of its dense layers and its shared experts; the
    routed experts, which transformers (5+) stores as fused 3-D parameters (experts.gate_up_proj, .down_proj),
    stay 16-bit (checked against bitsandbytes on the meta device, tests/test_finetune_qlora_trace.py)."""
    if not shape.experts:
        return tuple((linear, shape.layers) for linear in layer_linears(shape))
    moe = shape.moe
    h = shape.hidden
    if moe is not None and moe.attention_linears is not None:
        attention = [Linear(f"attention{i}", inner, outer) for i, (inner, outer) in enumerate(moe.attention_linears)]
    else:
        attention = [linear for linear in layer_linears(shape) if linear.name.endswith(("q_proj", "k_proj", "v_proj",
                                                                                        "o_proj"))]
    found = [(linear, shape.layers) for linear in attention]

    def mlp(width: int) -> list[Linear]:
        gated = [Linear("gate_proj", h, width)] if shape.gated_mlp else []
        return gated + [Linear("up_proj", h, width), Linear("down_proj", width, h)]

    moe_layers = shape.moe_layers or shape.layers
    if moe is not None and moe.dense_ffn and shape.layers > moe_layers:
        found += [(linear, shape.layers - moe_layers) for linear in mlp(moe.dense_ffn)]
    if moe is not None and moe.shared_expert_ffn:
        found += [(linear, moe_layers) for linear in mlp(moe.shared_expert_ffn)]
    return tuple(found)


MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ExpertAdapter:
    """LoRA on one fused expert tensor (PEFT >= 0.17 target_parameters, its ParamWrapper): E experts of
    in_features → out_features; lora_A is (r·E × in), lora_B (out × r·E)."""

    name: str  # the parameter: gate_up_proj or down_proj of transformers' fused experts
    in_features: int
    out_features: int
    experts: int

    @property
    def params(self) -> int:
        return self.in_features * self.out_features * self.experts


def adapted_experts(shape: ModelShape, finetune: Finetune) -> tuple[ExpertAdapter, ...]:
    """The fused expert tensors of one MoE layer that carry LoRA (none for a dense model or attention targets).
    gate_proj and up_proj name the one fused gate_up_proj (h → 2·f), down_proj the down_proj (f → h)."""
    mlp = [t for t in finetune.targets if t in MLP_TARGETS]
    if not shape.experts or not finetune.adapters or not mlp:
        return ()
    moe = shape.moe
    if moe is None or moe.dense_ffn or moe.shared_expert_ffn or (shape.moe_layers or 0) != shape.layers:
        raise InputError("lora_targets", f"LoRA on the MLP ({', '.join(mlp)}) of a mixture of experts with dense "
                         "layers or shared experts is not modelled (routed experts only, every layer)",
                         f"use {ref('lora_targets', 'q_proj,k_proj,v_proj,o_proj')} for this model")
    if ("gate_proj" in mlp) != ("up_proj" in mlp):
        raise InputError("lora_targets", "the experts keep gate and up projections in one fused tensor "
                         "(gate_up_proj), which PEFT adapts as one", "give gate_proj and up_proj together")
    f, h, experts = moe.expert_ffn, shape.hidden, shape.experts
    found = []
    if "gate_proj" in mlp:
        found.append(ExpertAdapter("gate_up_proj", h, 2 * f if shape.gated_mlp else f, experts))
    if "down_proj" in mlp:
        found.append(ExpertAdapter("down_proj", f, h, experts))
    return tuple(found)


def expert_lora_params(adapter: ExpertAdapter, rank: int) -> int:
    """lora_A (r·E × in) and lora_B (out × r·E): r·E·(in + out)."""
    return rank * adapter.experts * (adapter.in_features + adapter.out_features)


def adapted_linears(shape: ModelShape, finetune: Finetune) -> tuple[Linear, ...]:
    """The linears of one adapted layer that carry a LoRA adapter (a mixture of experts' MLP: adapted_experts)."""
    adapted_experts(shape, finetune)  # refuses what is not modelled
    names = [t for t in finetune.targets if not (shape.experts and t in MLP_TARGETS)]
    return tuple(linear for linear in layer_linears(shape) if linear.name in names)


def lora_params(linear: Linear, rank: int) -> int:
    """A (r × in) and B (out × r): r·(in + out)."""
    return rank * (linear.in_features + linear.out_features)


@dataclass(frozen=True)
class FinetuneCounts:
    """Parameter counts of one fine-tuning setup (whole model, one model-parallel shard: tp = pp = 1).

    trainable: what gets gradients and optimizer states (adapters, or the unfrozen base).
    frozen_plain: frozen parameters kept in the precision's weight dtype.
    quantised: frozen decoder linears stored quantised (qlora), in `quantised_tensors` tensors.
    adapted_layers: decoder layers carrying adapters (lora) or training (full); frozen_layers: layers with no
    trainable parameter; inert_layers: frozen layers before anything trainable (they keep no activations).
    """

    trainable: int
    frozen_plain: int
    quantised: int
    quantised_tensors: int
    adapted_layers: int
    frozen_layers: int
    inert_layers: int
    largest_quantised: int  # elements of the largest quantised linear (its dequantised copy is a transient)

    @property
    def frozen(self) -> int:
        return self.frozen_plain + self.quantised


def _embedding_params(model: ModelSpec, shape: ModelShape) -> int:
    """The embeddings and the LM head (and the final norm) as the model's layout gives them."""
    if shape.layout is not None:
        return shape.layout.input_params + shape.layout.output_params
    return model.params - shape.layers * layer_params(model, shape)


def layer_params(model: ModelSpec, shape: ModelShape) -> int:
    """Parameters of one decoder layer: the layout's figure, else the linears and two norm weights."""
    if shape.layout is not None:
        return shape.layout.layer_params
    return sum(linear.numel for linear in layer_linears(shape)) + 2 * shape.hidden


def finetune_counts(model: ModelSpec, finetune: Finetune) -> FinetuneCounts:
    """What trains and what is frozen, from the model's shape (a parameter count alone does not say)."""
    shape = model.require_shape("finetune", f"fine-tuning needs the shape of '{model.name}' to know which "
                                "parameters train", f"use {ref('model')} with a preset or a config.json")
    if finetune.freeze_layers > shape.layers:
        raise InputError("freeze", f"layers:{finetune.freeze_layers} is more than the model's {shape.layers} layers",
                         f"use layers:{shape.layers} or fewer")
    trained_layers = shape.layers - finetune.freeze_layers
    per_layer = layer_params(model, shape)
    quantised = tensors = largest = 0
    if finetune.storage is not None:
        linears = quantised_linears(shape)
        quantised = sum(linear.numel * copies for linear, copies in linears)
        tensors = sum(copies for _, copies in linears)
        largest = max(linear.numel for linear, _ in linears)
    if finetune.adapters:
        trainable = trained_layers * (sum(lora_params(l, finetune.rank) for l in adapted_linears(shape, finetune))
                                      + sum(expert_lora_params(e, finetune.rank) for e in adapted_experts(shape, finetune)))
        frozen_base = model.params
        inert = finetune.freeze_layers
    else:
        embeddings = _embedding_params(model, shape) if finetune.freeze_embeddings else 0
        frozen_base = embeddings + finetune.freeze_layers * per_layer
        trainable = model.params - frozen_base
        if trainable <= 0:
            raise InputError("freeze", "freezes every parameter: nothing would train",
                             f"freeze fewer layers, or use {ref('finetune', 'lora')}")
        inert = finetune.freeze_layers if finetune.freeze_embeddings else 0
    return FinetuneCounts(trainable=trainable, frozen_plain=frozen_base - quantised, quantised=quantised,
                          quantised_tensors=tensors, adapted_layers=trained_layers,
                          frozen_layers=finetune.freeze_layers, inert_layers=inert, largest_quantised=largest)


def quantised_storage(shape: ModelShape, quant: str, double_quant: bool) -> tuple[int, int]:
    """(packed weight bytes, quantisation-constant bytes) of every decoder linear, each quantised on its own.

    nf4 (bitsandbytes functional.quantize_4bit, blocksize 64): two weights per byte and one fp32 absmax per
    block of 64; with double quantisation (bnb_4bit_use_double_quant: quantize_blockwise of the absmax,
    blocksize 256) each absmax becomes one byte, plus one fp32 absmax per 256 blocks and one fp32 offset per
    tensor. Each QuantState also holds its own fp32 code tables: the 16 NF4 levels, and with double quantisation a
    copy of the 256-entry dynamic map. int8 (LLM.int8, bitsandbytes Int8Params): one byte per weight and one fp32
    scale (SCB) per output row."""
    packed = constants = 0
    for linear, copies in quantised_linears(shape):
        if quant == "int8":
            packed += copies * linear.numel
            constants += copies * FP32 * linear.out_features
            continue
        blocks = ceil_div(linear.numel, NF4_BLOCK)
        packed += copies * ceil_div(linear.numel, 2)
        if double_quant:
            constants += copies * (blocks + FP32 * ceil_div(blocks, NESTED_BLOCK) + FP32 + FP32 * DYNAMIC_CODE)
        else:
            constants += copies * FP32 * blocks
        constants += copies * FP32 * NF4_CODE
    return packed, constants
