"""QLoRA in a trace: bitsandbytes' real Linear4bit modules (NF4, blockwise, double quantisation) under PEFT's LoRA,
on fake tensors (imports torch and bitsandbytes).

What runs is bitsandbytes' own code: transformers' replace_with_bnb_linear swaps every decoder nn.Linear (not the LM
head, as transformers' get_keys_to_not_convert) for bnb.nn.Linear4bit; Params4bit._quantize runs
bitsandbytes.functional.quantize_4bit on the meta device (its torch.library ops bitsandbytes::quantize_4bit and
::quantize_blockwise have fake/meta kernels), so each weight becomes the packed storage FSDP-QLoRA shards
(bnb_4bit_quant_storage=bfloat16: ((n + 1) // 4, 1) bf16 elements for n weights) and its QuantState: the absmax per
block of 64 (uint8 with double quantisation), the second-level absmax (fp32 per 256 blocks), the offset, and the two
code tables each QuantState copies (16 and 256 fp32). PEFT's lora.bnb.Linear4bit wraps them; forward and backward
run bitsandbytes' MatMul4Bit.

Three things differ from a GPU run, each because fake tensors cannot do otherwise; none changes a byte:
- the QuantState tensors are not parameters, so Module.to_empty does not move them: quant_states_to_empty makes
  each one again on the trace's device (torch.empty_like, as to_empty does for parameters), and
  track_quant_states tells torch's FSDPMemTracker about them (it sees only parameters, buffers and what is made
  while it runs) as parameter memory, whole on every rank as FSDP leaves them.
- bitsandbytes' fix_4bit_weight_quant_state_from_module re-wraps the all-gathered FSDP parameter in a Params4bit
  (torch.Tensor._make_subclass, which refuses a FakeTensor); here the QuantState is set on the parameter itself.
  The wrapper shares the parameter's storage: no bytes.
- bitsandbytes::gemm_4bit has a fake kernel that returns only the output, while its CUDA kernel, for more than
  GEMM_4BIT_CUSTOM_MAX_M rows (every training micro-batch of 1,536 tokens or more), dequantises the weight into a
  16-bit temporary and calls F.linear (bitsandbytes/backends/cuda/ops.py: _dequant_linear_fallback, with the
  nested absmax dequantised first into two fp32 arrays). cuda_gemm_4bit runs those same ops, one by one, so the
  tracker sees the temporaries. Backward already dequantises in Python (MatMul4Bit.backward: F.dequantize_4bit).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

GEMM_4BIT_CUSTOM_MAX_M = 1536  # bitsandbytes/backends/cuda/ops.py _gemm_4bit_custom_max_m (CUDA)
NESTED_BLOCK = 256  # quantize_4bit's second level: quantize_blockwise(absmax - offset, blocksize=256)


def bnb_config(double_quant: bool):
    """transformers' BitsAndBytesConfig of FSDP-QLoRA (Answer.AI fsdp_qlora, HF's FSDP+QLoRA guide): NF4, bf16
    compute and bf16 quant storage (so FSDP can flatten and shard the packed weights)."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=double_quant,
                              bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_storage=torch.bfloat16)


def quantise_linears(model: torch.nn.Module, double_quant: bool) -> list:
    """Swap the decoder linears for bnb Linear4bit and quantise each 16-bit weight on the meta device with
    bitsandbytes' quantize_4bit. Returns the Linear4bit modules."""
    import bitsandbytes as bnb
    from bitsandbytes import functional
    from bitsandbytes.nn import Params4bit
    from transformers.integrations.bitsandbytes import replace_with_bnb_linear

    config = bnb_config(double_quant)
    replace_with_bnb_linear(model, modules_to_not_convert=["lm_head"], quantization_config=config)
    cached = dict(functional.name2qmap)  # quantize_blockwise caches its code table on the input's device: keep meta out
    modules = []
    try:
        for module in model.modules():
            if not isinstance(module, bnb.nn.Linear4bit):
                continue
            weight: Any = module.weight  # a Params4bit, with bitsandbytes' attributes
            quantised = Params4bit(weight.data.to(torch.bfloat16), requires_grad=False,
                                   compress_statistics=weight.compress_statistics, quant_type=weight.quant_type,
                                   quant_storage=weight.quant_storage, module=module)
            module.weight = quantised._quantize("meta")
            modules.append(module)
    finally:
        functional.name2qmap.clear()
        functional.name2qmap.update(cached)
    setattr(model, "is_loaded_in_4bit", True)  # what transformers sets on a 4-bit model; PEFT dispatches to lora.bnb on it
    return modules


def _states(module) -> list:
    state = module.quant_state
    return [state] + ([state.state2] if state.nested else [])


def quant_states_to_empty(modules: list, device: torch.device | str) -> None:
    """Each QuantState tensor made again on device (uninitialised, as Module.to_empty does for parameters)."""
    for module in modules:
        for state in _states(module):
            for name in ("absmax", "code", "offset"):
                value = getattr(state, name, None)
                if isinstance(value, torch.Tensor):
                    setattr(state, name, torch.empty_like(value, device=device))


def quant_state_tensors(modules: list) -> list[torch.Tensor]:
    found = []
    for module in modules:
        for state in _states(module):
            found += [t for t in (state.absmax, state.code, getattr(state, "offset", None)) if isinstance(t, torch.Tensor)]
    return found


def track_quant_states(tracker, modules: list) -> None:
    """Count the QuantState tensors as parameter memory of this rank (they are held whole on every rank)."""
    from torch.distributed._tools.fsdp2_mem_tracker import _FSDPRefType

    for tensor in quant_state_tensors(modules):
        tracker._update_and_maybe_create_winfos(tensor, _FSDPRefType.SHARDED_PARAM)


def _gemm_4bit_as_on_cuda(A, B, shapeB, absmax, blocksize, quant_type, bias=None, absmax_8bit=None, absmax_code=None,
                          absmax_offset=None):
    """bitsandbytes::gemm_4bit as CUDA runs it for training-sized inputs, op by op (see the module doc); up to
    GEMM_4BIT_CUSTOM_MAX_M rows its fused kernel, which makes no dequantised temporary (its fake kernel's output)."""
    ops = torch.ops.bitsandbytes
    with torch._C._AutoDispatchBelowAutograd():
        if A.numel() // A.shape[-1] <= GEMM_4BIT_CUSTOM_MAX_M:
            return ops.gemm_4bit.default(A, B, shapeB, absmax, blocksize, quant_type, bias, absmax_8bit, absmax_code,
                                         absmax_offset)
    if absmax_8bit is not None:
        absmax_dq = ops.dequantize_blockwise.default(absmax_8bit, absmax, absmax_code, NESTED_BLOCK, torch.float32)
        absmax = absmax_dq + absmax_offset
    weight = ops.dequantize_4bit.default(B, absmax, blocksize, quant_type, list(shapeB), A.dtype)
    return torch.nn.functional.linear(A, weight, bias)


@contextlib.contextmanager
def bitsandbytes_on_fake_tensors():
    """While a QLoRA trace runs: gemm_4bit as CUDA runs it (a kernel at the autograd key, ahead of the tracker and
    FakeTensorMode, so each op it runs is dispatched and counted), and the QuantState set on the all-gathered
    parameter."""
    import bitsandbytes.nn.modules as modules

    original_fix = modules.fix_4bit_weight_quant_state_from_module

    def set_quant_state(module) -> None:
        if getattr(module.weight, "quant_state", None) is None:
            module.weight.quant_state = module.quant_state

    library = torch.library.Library("bitsandbytes", "IMPL")
    library.impl("gemm_4bit", _gemm_4bit_as_on_cuda, "AutogradCPU")
    modules.fix_4bit_weight_quant_state_from_module = set_quant_state
    try:
        yield
    finally:
        modules.fix_4bit_weight_quant_state_from_module = original_fix
        library._destroy()
