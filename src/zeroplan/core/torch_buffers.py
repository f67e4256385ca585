"""What torch's wrappers hold on a GPU besides the model states, at the step's peak (framework convention, torch).

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
"""

from __future__ import annotations


_REDUCE_BYTES = 4  # FSDP2's reduce-scatter runs in fp32 (MixedPrecisionPolicy(reduce_dtype=fp32) and fp32)


def torch_gpu_buffers(stage: int, params: int, layer_params: int, root_params: int, compute_bytes: int,
                      optimizer_state_bytes: int, gradient_bytes: int, activation_bytes: int,
                      optimizer: str, world: int = 1, moments: dict[str, int] | None = None) -> dict[str, int]:
    """gpu/buffers entries (bytes) for torch's DDP/ZeroRedundancyOptimizer/FSDP2 at the peak moment.

    moments (core.activations.transformers_peak_moments, where derived) adds the other moments the traces
    show holding the peak, each as its excess over the model states and the backward start's activations:
    - stage 2, the loss at the end of the forward pass: every compute copy, one all-gather buffer still alive
      (a layer, c bytes an element), the logits and fp32 log-softmax instead of the backward's temporaries;
    - stage 3, the MLP backward of the last decoder layer (j = L-1) or of the one before it (j = L-2): the
      root's and layer j's compute copies, the next layer prefetched into its all-gather buffer, the previous
      layer's fp32 reduce-scatter input (j < L-1), the sharded gradients of the layers after j only, the head's
      unsharded gradients, and layer j's gradient temporaries; layers after j and the loss freed."""
    c = compute_bytes
    if stage == 3:
        copies = (root_params + layer_params) * c
    else:
        copies = params * c
    step = optimizer_state_bytes // 2 if optimizer in ("adam", "adamw") else 0
    # the backward start (with moments: also the loss and its gradient's seed, two fp32 scalars) or the step
    start_scalars = moments["scalars"] if moments is not None else 0
    beyond = max(copies - gradient_bytes + start_scalars, step - activation_bytes)
    if moments is not None and stage == 2:
        copies -= moments["working_set"]  # every moment below replaces the backward start's recompute working set
        beyond = max(beyond, copies - gradient_bytes + layer_params * c + moments["loss_forward_beyond_backward_start"])
        # the last layer's forward: its all-gather buffer and the previous layer's both alive
        beyond = max(beyond, copies - gradient_bytes + 2 * layer_params * c - moments["layer"]
                     + moments["hidden_state"] + moments["position_ids"] - moments["kept_position_ids"] - moments["output_and_loss"])
    if moments is not None and stage in (2, 3):
        layers, layer = moments["layers"], moments["layer"]
        layer_gradient_shard = -(-_REDUCE_BYTES * layer_params // world)
        in_layer = (moments["recomputed_layer"] - moments["working_set"] + moments["head_gradients"] + moments["mlp_weight_gradient"] + moments["mlp_backward_temporaries"]
                    - moments["mlp_backward_freed"] + moments["scalars"] - moments["output_and_loss"])
        in_norm = None
        if moments["norm_backward_temporaries"] is not None:
            in_norm = (moments["recomputed_layer"] - moments["working_set"] + moments["head_gradients"] + 3 * moments["mlp_weight_gradient"]
                       + moments["norm_backward_temporaries"] - moments["norm_backward_freed"] + moments["scalars"]
                       - moments["output_and_loss"])
        for j in range(layers):  # layers after j: backward done (sharded gradients kept, activations freed)
            after = layers - 1 - j
            if stage == 3:  # layer j gathered, the next one prefetched (issued in j's backward)
                gathered = (root_params + layer_params) * c + (layer_params * c if j else 0)
            else:  # stage 2 frees a layer's compute copy after its backward (post-backward reshard)
                gathered = (params - after * layer_params) * c
            held = (gathered + after * layer_gradient_shard - gradient_bytes
                    + (_REDUCE_BYTES * layer_params if after else 0) - after * layer)
            beyond = max(beyond, held + in_layer, held + in_norm if in_norm is not None else held + in_layer)
    if moments is not None:
        beyond += moments["module_buffers"] + moments["kept_position_ids"]
    return {"peak_beyond_states_and_activations": beyond}
