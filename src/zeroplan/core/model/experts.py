"""How a mixture-of-experts model's parameters split into routed-expert and dense ones (docs/formulas.md §20.2).

Expert parallelism shards the two groups differently (Megatron-Core's folding, DeepSpeed-MoE's expert groups):
routed experts are split over ep × etp ranks and their ZeRO states over the expert-data-parallel group; the
router (its h × E weight), shared experts, attention, norms and embeddings are dense: split over tp and sharded
over dp. Megatron-LM's megatron/training/theoretical_memory_usage.py draws the same line (routed_expert_params
are "expert sharded", router_params and shared_expert_params are not).

The split is read from the architecture description (core.model.architecture, through ModelShape.moe: which
layers are MoE layers, routed-expert and active totals, expert and shared-expert widths) where the model has one;
a shape given by fields is Mixtral-style (every layer a MoE layer, no shared expert): routed experts hold
E × (3 if gated else 2) × hidden × ffn per layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.model.spec import ModelShape, ModelSpec


@dataclass(frozen=True)
class ExpertParams:
    """The routed-expert side of a MoE model: per MoE layer, and which layers are MoE layers."""

    experts: int  # routed experts per MoE layer
    experts_per_token: int  # top-k
    expert_params: int  # parameters of ONE routed expert (its MLP)
    expert_ffn: int  # one expert's MLP width (what expert tensor parallelism splits)
    router_params: int  # per MoE layer: dense, replicated by Megatron across tp
    moe_layers: tuple[bool, ...]  # per transformer layer, first to last: True where its MLP is routed
    shared_params: int = 0  # per MoE layer: shared experts, dense

    @property
    def routed_per_layer(self) -> int:
        """Routed expert parameters of one MoE layer (all E experts)."""
        return self.experts * self.expert_params

    @property
    def active_per_layer(self) -> int:
        """Routed expert parameters one token meets in a MoE layer (top-k)."""
        return self.experts_per_token * self.expert_params

    @property
    def routed_total(self) -> int:
        return self.routed_per_layer * sum(self.moe_layers)

    def routed_in_layers(self, first: int, count: int) -> int:
        """Routed expert parameters in layers [first, first + count) (a pipeline stage's)."""
        return self.routed_per_layer * sum(self.moe_layers[first:first + count])


def expert_params(shape: ModelShape | None) -> ExpertParams | None:
    """The routed-expert split of a model's shape, or None for a dense model (or a count without a shape).

    A shape with an architecture description's MoE fields (`shape.moe`: MoE layer count, routed-expert total,
    expert width, shared experts) is read from them, its dense layers taken first (DeepSeek's first_k_dense);
    otherwise the shape is Mixtral-style: every layer routed, experts ffn wide, no shared expert."""
    if shape is None or not shape.experts or not shape.experts_per_token:
        return None
    described = getattr(shape, "moe", None)
    if described is not None and described.moe_layers:
        gated = 3 if shape.gated_mlp else 2
        dense = shape.layers - described.moe_layers
        shared = gated * shape.hidden * (described.shared_expert_ffn or 0)
        # the description's own per-layer pattern (Llama 4 Maverick and Qwen3's decoder_sparse_step interleave)
        pattern = getattr(described, "pattern", None) or (False,) * dense + (True,) * described.moe_layers
        return ExpertParams(experts=shape.experts, experts_per_token=shape.experts_per_token,
                            expert_params=described.expert_params // (described.moe_layers * shape.experts),
                            expert_ffn=described.expert_ffn, router_params=shape.hidden * shape.experts,
                            moe_layers=tuple(pattern), shared_params=shared)
    per_expert = (3 if shape.gated_mlp else 2) * shape.hidden * shape.ffn
    return ExpertParams(experts=shape.experts, experts_per_token=shape.experts_per_token, expert_params=per_expert,
                        expert_ffn=shape.ffn, router_params=shape.hidden * shape.experts,
                        moe_layers=(True,) * shape.layers)


def model_expert_params(model: ModelSpec) -> ExpertParams | None:
    return expert_params(model.shape)


def active_params(model: ModelSpec) -> int:
    """Parameters one token meets: all of a dense model; a MoE model less its idle routed experts (E − k of
    each MoE layer). What MFU and model FLOPs per token count for MoE (6 × active parameters)."""
    described = getattr(model.shape, "moe", None)
    if described is not None and described.active_params:
        return int(described.active_params)
    split = model_expert_params(model)
    if split is None:
        return model.params
    return model.params - (split.experts - split.experts_per_token) * split.expert_params * sum(split.moe_layers)
