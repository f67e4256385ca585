"""Parameters per pipeline stage: layers split evenly (earlier stages take the remainder), the
embeddings on the first stage, the final norm and LM head on the last (docs/formulas.md §2.3). Where layers
differ (DeepSeek-V3's first three dense layers, Llama 4 Maverick's alternating MoE layers) each stage sums its
own layers.

With tied embeddings the last stage keeps its own copy of the embedding matrix for the head (as
Megatron-LM and DeepSpeed's TiedLayerSpec do), so stage totals can add up to more than the model.
With only a parameter count known, the stages split it evenly.
"""

from __future__ import annotations

from zeroplan.core.errors import InputError, ref
from zeroplan.core.model.experts import expert_params
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.units import ceil_div


def layers_per_stage(layers: int, pp: int) -> list[int]:
    if pp > layers:
        raise InputError("pp", f"pp({pp}) is more than the model's {layers} layers",
                         f"use {ref('pp', layers)} or fewer")
    base, extra = divmod(layers, pp)
    return [base + (1 if stage < extra else 0) for stage in range(pp)]


def stage_params(model: ModelSpec, pp: int) -> list[int]:
    """Parameters held by each pipeline stage, first to last."""
    if pp == 1:
        return [model.params]
    shape = model.shape
    if shape is None or shape.layout is None:
        return [ceil_div(model.params, pp)] * pp
    layout = shape.layout
    counts = layers_per_stage(shape.layers, pp)
    if layout.per_layer is None:
        stages = [count * layout.layer_params for count in counts]
    else:  # layers differ (dense then MoE layers): each stage holds its own layers' parameters
        starts = [sum(counts[:stage]) for stage in range(pp)]
        stages = [sum(layout.per_layer[start:start + count]) for start, count in zip(starts, counts)]
    stages[0] += layout.input_params
    stages[-1] += layout.output_params
    if shape.tied_embeddings:
        stages[-1] += shape.vocab * shape.hidden  # the head's copy of the tied embedding
    return stages


def most_loaded_stage_params(model: ModelSpec, pp: int) -> int:
    return max(stage_params(model, pp))


def shard_params(model: ModelSpec, tp: int, pp: int) -> int:
    """Parameters on the most loaded model-parallel shard: the busiest pipeline stage, split over tp."""
    return ceil_div(most_loaded_stage_params(model, pp), tp)


def stage_routed_params(model: ModelSpec, pp: int) -> list[int]:
    """Routed-expert parameters held by each pipeline stage (0 for a dense model): core.model.experts' split."""
    split = expert_params(model.shape)
    if split is None or model.shape is None:
        return [0] * pp
    counts = layers_per_stage(model.shape.layers, pp)
    starts = [sum(counts[:stage]) for stage in range(pp)]
    return [split.routed_in_layers(start, count) for start, count in zip(starts, counts)]


def expert_shard_params(model: ModelSpec, tp: int, pp: int, ep: int, etp: int) -> tuple[int, int]:
    """(dense, routed-expert) parameters on the most loaded rank when experts fold as etp × ep × edp: the dense
    part of a stage split over tp, its routed experts over ep × etp (E/ep whole experts, each cut etp ways).
    The busiest stage is the one whose rank holds the most of both together (ties: the earlier stage)."""
    stages = stage_params(model, pp)
    routed = stage_routed_params(model, pp)
    per_rank = [(ceil_div(total - experts, tp), ceil_div(experts, ep * etp)) for total, experts in zip(stages, routed)]
    return max(per_rank, key=lambda pair: pair[0] + pair[1])
