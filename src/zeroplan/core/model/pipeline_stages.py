"""Parameters per pipeline stage: layers split evenly (earlier stages take the remainder), the
embeddings on the first stage, the final norm and LM head on the last. Where layers differ (DeepSeek-V3's
first three dense layers, Llama 4 Maverick's alternating MoE layers) each stage sums its own layers (docs/formulas.md §2.3).

With tied embeddings the last stage keeps its own copy of the embedding matrix for the head (as
Megatron-LM and DeepSpeed's TiedLayerSpec do), so stage totals can add up to more than the model.
With only a parameter count known, the stages split it evenly.
"""

from __future__ import annotations

from zeroplan.core.errors import InputError
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.units import ceil_div


def layers_per_stage(layers: int, pp: int) -> list[int]:
    if pp > layers:
        raise InputError("--pp", f"pp({pp}) is more than the model's {layers} layers", f"use --pp {layers} or fewer")
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
