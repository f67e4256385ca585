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


def torch_gpu_buffers(stage: int, params: int, layer_params: int, root_params: int, compute_bytes: int,
                      optimizer_state_bytes: int, gradient_bytes: int, activation_bytes: int,
                      optimizer: str) -> dict[str, int]:
    """gpu/buffers entries (bytes) for torch's DDP/ZeroRedundancyOptimizer/FSDP2 at the peak moment."""
    if stage == 3:
        copies = (root_params + layer_params) * compute_bytes
    else:
        copies = params * compute_bytes
    step = optimizer_state_bytes // 2 if optimizer in ("adam", "adamw") else 0
    return {"peak_beyond_states_and_activations": max(copies - gradient_bytes, step - activation_bytes)}
