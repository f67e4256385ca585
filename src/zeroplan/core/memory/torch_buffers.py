"""What torch's wrappers hold on a GPU besides the model states, at the step's peak (framework convention, torch).
Reference: docs/formulas.md §7.4.

Measured by `zeroplan trace` (torch's FSDPMemTracker on the real wrappers, docs/trace.md):
- compute copies: FSDP2 and replicate() gather the parameters into unsharded copies in the compute dtype
  (fp32 too: a separate buffer). Stages 0-2 keep every copy from forward to backward (Ψ·c bytes); stage 3
  keeps the root's (embeddings, final norm, head) plus the next decoder layer prefetched for backward.
- the optimizer step: AdamW(foreach=True), the CUDA default, makes one fp32 temporary per element it steps
  (half its 8-byte states).
The peak is one moment, not a sum of maxima: the start of backward (activations + copies; no gradient exists
yet with one micro-batch per step) or the optimizer step (gradients + its temporary; activations and copies
freed). With the model states counted in full, what the peak adds beyond them and the activations is
max(copies − gradients, temporary − activations): negative when the gradients counted among the model
states do not exist yet at the peak (stages 0-1 at the start of backward).
For the families whose transformers code is derived (core.memory.activations.transformers_peak_moments) the traces
show more moments that can hold the peak, modelled exactly: the loss at the end of the forward pass, the first
and last layers' forward, inside a decoder layer's backward (its gradient temporaries, the next layer
prefetched, the previous layer's reduce-scatter buffer) and at the end of backward (the embeddings' backward,
the root's gradient reduction). Their maximum is the peak.
"""

from __future__ import annotations

from typing import Any

_REDUCE_BYTES = 4  # FSDP2's reduce-scatter runs in fp32 (MixedPrecisionPolicy(reduce_dtype=fp32) and fp32)
_STEP_TEMPORARY_BYTES = 4  # foreach AdamW's fp32 temporary, per element it steps


def torch_gpu_buffers(stage: int, params: int, layer_params: int, root_params: int, compute_bytes: int,
                      optimizer_state_bytes: int, gradient_bytes: int, activation_bytes: int,
                      optimizer: str, world: int = 1, moments: dict[str, Any] | None = None) -> dict[str, int]:
    """gpu/buffers entries (bytes) for torch's DDP/ZeroRedundancyOptimizer/FSDP2 at the peak moment.

    params, layer_params, root_params: elements as FSDP2 gathers them (each tensor padded to a multiple of the
    world along dim 0) for stages 2-3. moments (core.memory.activations.transformers_peak_moments, where derived) adds
    the other moments the traces show holding the peak, each as its excess over the model states and the
    backward start's activations (the peak is the largest):
    - stage 2, the loss at the end of the forward pass: every compute copy, one all-gather buffer still alive,
      the logits and fp32 log-softmax instead of the backward's temporaries;
    - stage 2, the last layer's forward just gathered: its all-gather buffer and the previous layer's alive;
    - stages 2-3, the first layer's forward just gathered: the root's all-gather buffer and copy, the layer's;
    - inside the backward of layer j (each of the family's layer_backward_moments): the compute copies
      (stage 3: the root's, layer j's and the next layer prefetched, none for j = 0; stages 0-2: all but the
      layers done, freed after their backward), the previous layer's fp32 reduce-scatter (replicate: all-reduce)
      input, the gradients of the layers after j only (sharded by FSDP2, whole under replicate; not all of
      them, as the model states count), the head's unsharded gradients and layer j's gradient temporaries;
      the layers after j and the loss freed;
    - the end of backward, every layer done: the input embedding's backward (the root's compute copy, layer 0's
      reduce-scatter input), the root's reduction (its fp32 input beside the root's unsharded gradients, then
      beside its output); of the activations only the inputs and the loss scalars.
    Verified to the byte against `zeroplan trace` (tests/test_trace.py, docs/accuracy.md)."""
    c = compute_bytes
    copies = (root_params + layer_params) * c if stage == 3 else params * c
    step = optimizer_state_bytes // 2 if optimizer in ("adam", "adamw") else 0
    if moments is None:
        return {"peak_beyond_states_and_activations": max(copies - gradient_bytes, step - activation_bytes)}
    m = moments
    # the backward start (its two fp32 scalars: the loss and its gradient's seed) or the optimizer step
    # (eager attention's causal mask, counted among the activations, is freed when the decoder's forward ends)
    # (the optimizer step keeps only the int64 ids and labels of the activations: the checkpoints' positions are
    # freed with the graph; its foreach temporary is 4 B per element, stage 0's every element, without the
    # 4-byte step tensors the states count: the other stages count those at 2 B per tensor over)
    if stage == 0 and optimizer in ("adam", "adamw"):
        step = _STEP_TEMPORARY_BYTES * params
    candidates = [copies - gradient_bytes + m["scalars"] - m["eager_mask"],
                  step - activation_bytes + m["inputs"] - m["kept_position_ids"]]
    # every other moment replaces the backward start's recompute working set (and its loss terms)
    replaced = m["working_set"] + m["output_and_loss"]
    if stage == 2:
        candidates.append(copies - gradient_bytes - m["working_set"] - m["eager_mask"] + layer_params * c
                          + m["loss_forward_beyond_backward_start"])
        candidates.append(copies - gradient_bytes + 2 * layer_params * c - m["layer"] + m["hidden_state"]
                          + m["forward_locals"] + m["position_ids"] - m["kept_position_ids"] - replaced)
    if stage in (2, 3):
        # the first layer's forward just gathered: the root's all-gather buffer and copies, the layer's; of the
        # activations, the embedding side, its outputs and the positions
        candidates.append(2 * (root_params + layer_params) * c - gradient_bytes - activation_bytes + m["embedding"]
                          + m["hidden_state"] + m["forward_locals"] + m["position_ids"] - m["kept_position_ids"])
    replaced += m["eager_mask"]
    if stage in (0, 1, 2, 3):
        layers, layer = m["layers"], m["layer"]
        # replicate() keeps each finished layer's fp32 gradients whole; FSDP2 reduce-scatters them
        layer_gradient_shard = -(-_REDUCE_BYTES * layer_params // (world if stage >= 2 else 1))
        # each moment the family's code shows inside the layer's backward: its excess over the layer's activations
        in_layer = [m["recomputed_layer"] + m["head_gradients"] + m["scalars"] - replaced + excess
                    for excess in m["layer_backward_moments"]]
        per_layer = m.get("per_layer")  # where layers differ: each layer's activations, recomputed bytes, moments
        freed = 0  # the activations of the layers whose backward is done
        for j in reversed(range(layers)):
            done = layers - 1 - j  # layers whose backward is done: sharded gradients kept, activations freed
            if stage == 3:
                gathered = (root_params + layer_params) * c + (layer_params * c if j else 0)
            else:
                gathered = (params - done * layer_params) * c
            if per_layer is not None:
                in_layer = [per_layer[j][1] + m["head_gradients"] + m["scalars"] - replaced + excess
                            for excess in per_layer[j][2]]
            held = (gathered + done * layer_gradient_shard - gradient_bytes
                    + (_REDUCE_BYTES * layer_params if done else 0) - (freed if per_layer is not None else done * layer))
            candidates.extend(held + extra for extra in in_layer)
            if per_layer is not None:
                freed += per_layer[j][0]
        # the end of backward, every layer done: their gradients kept (sharded by FSDP2, whole under replicate) and
        # the activations freed but for the inputs and the loss scalars; the root's unsharded gradients alive
        end = (layers * layer_gradient_shard - gradient_bytes - activation_bytes + m["inputs"] + m["scalars"]
               - m["kept_position_ids"])
        root_gradient_shard = -(-_REDUCE_BYTES * root_params // (world if stage >= 2 else 1))
        # the input embedding's backward (a tied weight: its gradient and the head's summed): the root's compute
        # copy and layer 0's reduce-scatter (all-reduce) input still alive
        candidates.append(end + root_params * c + _REDUCE_BYTES * layer_params + m["embedding_backward_gradients"])
        # the root's reduction, copy-in: its compute copy freed, the fp32 reduce-scatter input beside the gradients
        candidates.append(end + _REDUCE_BYTES * root_params + m["root_gradients"])
        # then its output (the root's gradient): the gradients freed but the last parameter's
        candidates.append(end + _REDUCE_BYTES * root_params + root_gradient_shard + m["last_root_gradient"])
    # at every moment: the rotary module buffers; with recompute, the positions the checkpoints keep
    return {"peak_beyond_states_and_activations": max(candidates) + m["module_buffers"] + m["kept_position_ids"]}
