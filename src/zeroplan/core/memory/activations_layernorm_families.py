"""What transformers' LayerNorm families keep for backward: GPT-NeoX, OPT and Falcon (pure stdlib, integer bytes).
Reference: docs/formulas.md §8.5.

Derived from traces of the real code (`zeroplan trace`: torch's FSDPMemTracker, every storage alive at the
peak named by the module, phase and op that made it; docs/trace.md), in the transformers version the trace
extra installs. core.memory.activations dispatches here for these families (its _transformers_* functions) and keeps
the generic step structure (the backward start, the loss, the last layer's forward, a layer's MLP backward).

Notation: T = s·b tokens, e = bytes of the compute dtype, h hidden, a heads, k KV heads, d head_dim, f ffn.
A LayerNorm keeps its input, its output (e·h each) and its mean and rstd: e bytes per token each on CPU
kernels (what the trace runs; CUDA keeps them in fp32), as GPT-2's block. The layer's input is saved by the
first LayerNorm, so each layer counts its input; the last layer's output is the final norm's input.

Covered: sdpa attention (fused kernels on CPU and GPU keep the output and an fp32 logsumexp, 4 B per head and
token), no dropout for GPT-NeoX and Falcon (OPT's residual dropout masks are counted by core.memory.activations'
dropout_masks, one byte per element as a GPU keeps them), the GELU (exact, "gelu") or ReLU MLP. Everything else falls back to Megatron's formula and
says why (gap()).
"""

from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("gpt_neox", "opt", "falcon")
OPT_POSITIONS = 2048  # OPT's max_position_embeddings when a config leaves it out
OPT_POSITION_OFFSET = 2  # OPT's learned position table has two extra rows (positions are offset by 2)
_FP32_BYTES = 4
_LOGSUMEXP_BYTES = 4  # the fused attention kernels' fp32 softmax statistics, per head and token
_MLP_ACTIVATIONS = {"gelu": 2, "relu": 1}  # f-wide tensors the MLP keeps: gelu keeps its input and output
_MATH_SCALAR_BYTES = 16  # torch's math attention kernel keeps two 8-byte scalar tensors (its scale factors)


@dataclass(frozen=True)
class Layout:
    """The parts of a config.json that change what one of these families keeps."""

    family: str
    hidden: int
    activation: str  # the MLP's activation function
    dropout: bool  # the config trains with dropout
    parallel_residual: bool = False  # attention and MLP read the same layer input (GPT-NeoX, Falcon parallel_attn)
    rotary_dims: int = 0  # rotary dimensions per head (0: learned positions or alibi)
    embed_width: int = 0  # the embedding's (and tied head's) width: OPT's word_embed_proj_dim, else the hidden size
    final_norm: bool = True  # a final LayerNorm before the head (OPT's post-norm layers have none)
    mlp_bias: bool = True
    attention_bias: bool = True  # the attention output projection's bias
    alibi: bool = False
    multi_query_parallel: bool = False  # Falcon: one KV head, attention and MLP in parallel from one norm
    grouped_two_norms: bool = False  # Falcon's new_decoder_architecture: KV heads broadcast to all, two norms


def layout(config: dict, hidden: int, head_dim: int) -> Layout:
    """The Layout of a config.json of one of FAMILIES (transformers' defaults where a key is absent)."""
    family = config.get("model_type", "")
    if family == "gpt_neox":
        rotary = config.get("rotary_pct", (config.get("rope_parameters") or {}).get("partial_rotary_factor", 0.25))
        return Layout(family, hidden, str(config.get("hidden_act", "gelu")),
                      _positive(config, "attention_dropout", "hidden_dropout"),
                      parallel_residual=bool(config.get("use_parallel_residual", True)),
                      rotary_dims=int(head_dim * float(rotary)), embed_width=hidden,
                      attention_bias=bool(config.get("attention_bias", True)))
    if family == "opt":
        bias = bool(config.get("enable_bias", True))
        return Layout(family, hidden, str(config.get("activation_function", "relu")),
                      False,  # its dropout keeps masks counted in core.memory.activations (dropout_masks)
                      embed_width=int(config.get("word_embed_proj_dim") or hidden),
                      final_norm=bool(config.get("do_layer_norm_before", True))
                      and not config.get("_remove_final_layer_norm", False),
                      mlp_bias=bias, attention_bias=bias)
    new_architecture = bool(config.get("new_decoder_architecture", False))
    parallel = new_architecture or bool(config.get("parallel_attn", True))
    one_norm = parallel and (config.get("num_ln_in_parallel_attn") or (2 if new_architecture else 1)) == 1
    alibi, bias = bool(config.get("alibi", False)), bool(config.get("bias", False))
    return Layout(family, hidden, str(config.get("activation", "gelu")),
                  _positive(config, "attention_dropout", "hidden_dropout"), parallel_residual=parallel,
                  rotary_dims=0 if alibi else head_dim, embed_width=hidden, mlp_bias=bias, attention_bias=bias,
                  alibi=alibi,
                  multi_query_parallel=not new_architecture and bool(config.get("multi_query", True)) and one_norm,
                  grouped_two_norms=new_architecture and not one_norm)


def _positive(config: dict, *keys: str, default: float = 0.0) -> bool:
    return any(float(config.get(key, default) or 0.0) > 0.0 for key in keys)


def gap(lay: Layout, flash_attention: bool) -> str:
    """Why these families' derivation does not cover a case ("" when it does)."""
    name = {"gpt_neox": "GPT-NeoX", "opt": "OPT", "falcon": "Falcon"}[lay.family]
    if not flash_attention:
        return f"{name} is derived for sdpa attention only (eager attention was asked): Megatron's formula is used"
    if lay.dropout:
        return (f"{name} is derived without dropout only (its config trains with dropout, whose masks are not "
                "derived): Megatron's formula is used")
    if lay.activation not in _MLP_ACTIVATIONS:
        return f"{name}'s '{lay.activation}' MLP activation is not derived (gelu, relu are): Megatron's formula is used"
    if lay.alibi:
        return "Falcon with alibi adds a (b, a, s, s) bias to every attention (not derived): Megatron's formula is used"
    if lay.family == "falcon" and not (lay.multi_query_parallel or lay.grouped_two_norms):
        return ("Falcon is derived for falcon-7b's layout (multi-query, parallel attention, one norm) and "
                "new_decoder_architecture's (two norms), not parallel_attn=false or multi_query=false: "
                "Megatron's formula is used")
    if lay.family == "opt" and (not lay.final_norm or lay.embed_width != lay.hidden):
        return ("OPT is derived for pre-norm layers without project_in/out only (not opt-350m's post-norm layers or "
                "word_embed_proj_dim != hidden_size): Megatron's formula is used")
    return ""


def _norm(e: int, h: int) -> int:
    """A LayerNorm's output and its mean and rstd, per token (its input is counted where it is made)."""
    return e * h + 2 * e


def layer_bytes(lay: Layout, seq: int, micro_batch: int, e: int, h: int, a: int, k: int, d: int, f: int,
                recompute: str) -> int:
    """Bytes one decoder layer keeps for one micro-batch.

    GPT-NeoX: the layer input (both norms read it with the parallel residual; without it the attention residual
    sum is a second norm input), two norms, the fused qkv output (q, k, v are views), the rotary q and k (cat
    outputs, e·h each), sdpa's output and logsumexp and the dense input (a contiguous copy of the output), the
    MLP's fc1 output and gelu output.
    OPT: the layer input, the scaled q and the k, v projections, sdpa's output (the out_proj input: no copy) and
    logsumexp, the attention residual sum, two norms, the ReLU output (the fc2 input; fc1's output is not kept).
    Falcon: below. Selective recompute drops the attention kernel's saved output and logsumexp where the output
    is copied (GPT-NeoX), the logsumexp only where it is not (OPT), everything but the kernel's inputs (Falcon's
    math kernel); full recompute keeps the layer input.
    """
    tokens = seq * micro_batch
    if recompute == "full":
        return tokens * e * h
    lse = _LOGSUMEXP_BYTES * a
    mlp = _MLP_ACTIVATIONS[lay.activation] * e * f
    if lay.family == "gpt_neox":
        residual = 0 if lay.parallel_residual else e * h
        core = 3 * e * h + 2 * e * h + (e * h + lse if recompute == "none" else 0) + e * h
        return tokens * (e * h + residual + 2 * _norm(e, h) + core + mlp)
    if lay.family == "opt":
        core = 4 * e * h + (lse if recompute == "none" else 0)
        return tokens * (e * h + core + e * h + 2 * _norm(e, h) + mlp)
    if lay.grouped_two_norms:
        # Falcon's new_decoder_architecture: the KV heads broadcast to all a heads, so sdpa runs a fused kernel
        # with the materialised causal mask, converted to the compute dtype inside it (b·s²·e per layer, kept);
        # the layer input, two norms, three a-head tensors (the rotary q and k, and the kernel's output; its
        # inputs q, k, v under selective recompute), the logsumexp, the dense input (a copy), gelu's input and
        # output
        core = 3 * e * a * d + (lse if recompute == "none" else 0) + e * h
        mask = micro_batch * seq * seq * e if recompute == "none" else 0
        return tokens * (e * h + 2 * _norm(e, h) + core + mlp) + mask + _MATH_SCALAR_BYTES
    # Falcon (multi-query, parallel attention, one norm): the layer input, one norm; sdpa gets the materialised
    # causal mask and a single KV head, so torch's math kernel runs (CPU and CUDA alike), in fp32: it keeps q and
    # k scaled (4·a·d, 4·k·d), v upcast (4·k·d), the fp32 probabilities (4·b·a·s² per layer) and two 8-byte
    # scalars; the dense input is a copy of the output; gelu's input and output. With more than one sequence per
    # micro-batch its matmuls cannot fold the broadcast KV head into one matrix, so they keep k and v expanded
    # over all a heads (_falcon_expanded_kv).
    if recompute == "selective":  # the kernel's inputs: the rotary q and k, and v (a copy of the fused output)
        return tokens * (e * h + _norm(e, h) + e * (a * d + 2 * k * d) + e * h + mlp) + _MATH_SCALAR_BYTES
    return (tokens * (e * h + _norm(e, h) + _FP32_BYTES * (a * d + 2 * k * d) + e * h + mlp)
            + 2 * _falcon_expanded_kv(micro_batch, tokens, a, k, d)
            + _FP32_BYTES * a * tokens * seq + _MATH_SCALAR_BYTES)


def _falcon_expanded_kv(micro_batch: int, tokens: int, a: int, k: int, d: int) -> int:
    """What Falcon's math attention keeps beyond k or v over its k heads when the micro-batch holds more than one
    sequence: torch's matmul folds a (1, k, s, d) operand broadcast over the heads into one matrix, but not a
    (b, k, s, d) one with b > 1, which it expands to (b, a, s, d) and copies; the copy is what the matmul keeps
    (fp32, 4·T·(a - k)·d more each, read off the trace at micro-batch 2: Falcon-7B was 4.45% under before)."""
    return _FP32_BYTES * tokens * (a - k) * d if micro_batch > 1 else 0


def embedding_bytes(lay: Layout, tokens: int, seq: int, e: int) -> int:
    """Beyond the int64 ids and labels: rotary cos and sin (s × rotary dims each, shared by all layers); OPT's
    learned positions keep their int64 indices (positions + 2) for the embedding's backward."""
    if lay.family == "opt":
        return 8 * tokens
    return 2 * seq * lay.rotary_dims * e


def final_norm_bytes(lay: Layout, e: int, h: int) -> int:
    """Per token: the final LayerNorm's input (the last layer's output), output and statistics."""
    return e * h + _norm(e, h)


def peak_moments(lay: Layout, seq: int, micro_batch: int, e: int, h: int, a: int, k: int, d: int, f: int,
                 recompute: str) -> dict:
    """The family's terms of core.memory.activations.transformers_peak_moments (which fills the rest): what the traces
    show alive inside a decoder layer's backward ("layer_backward_moments", each the excess over the layer's
    kept activations and the gradients held, core.memory.torch_buffers), the decoder's forward locals, module buffers,
    the positions the layers are given, and with full recompute the layer recomputed (its input already kept).

    - the MLP's backward, in fc1's: the residual gradient (T·h·e), the activation's gradient (T·f·e), fc1's input
      gradient (T·h·e) and both MLP weight (and bias) gradients alive; the MLP's activations freed.
    - the activation's backward, before it: fc2's weight gradients, the residual gradient and the activation's
      output and input gradients (T·f·e each); gelu's output freed (ReLU's output is its saved tensor).
    - GPT-NeoX, the attention kernel's backward: the residual gradient, the dense input gradient, dq, dk, dv
      (3·T·h·e) and, under selective recompute, the kernel's recomputed output and logsumexp; the MLP, the
      second norm and the dense input freed; the MLP, dense and second norm weight gradients alive.
    - Falcon, the math attention's backward (·V's, then the softmax's): the residual gradient and the MLP input
      gradient, the output's gradient in fp32 and v's fp32 gradient over a heads (4·T·a·d each), the
      probabilities' fp32 gradient (then also the scores'), with selective recompute the kernel's recomputed
      tensors; the MLP and the dense input freed; the MLP and dense weight gradients alive.
    OPT's attention backward is not modelled: it holds the peak only at tiny sequences (32 tokens on 64 ranks:
    the trace 0.5% above these moments), never at the benchmark's (512 and more).
    """
    tokens = seq * micro_batch
    mlp_weights = 2 * h * f * e + (f + h) * e * lay.mlp_bias
    dense_weights = h * h * e + h * e * lay.attention_bias
    mlp_kept = _MLP_ACTIVATIONS[lay.activation] * tokens * f * e
    mlp_moment = mlp_weights + 2 * tokens * h * e + tokens * f * e - mlp_kept
    # in the activation's backward: fc2's weight gradients, the residual gradient, the activation output's and
    # input's gradients (T·f·e each); fc2's input freed where it is not the activation's saved tensor (gelu)
    activation_moment = (h * f * e + h * e * lay.mlp_bias + tokens * h * e + 2 * tokens * f * e
                         - (mlp_kept - tokens * f * e))
    moments = [mlp_moment, activation_moment]
    lse = _LOGSUMEXP_BYTES * a * tokens
    if lay.family == "gpt_neox":
        recomputed_core = tokens * h * e + lse if recompute == "selective" else 0
        attention = (mlp_weights + dense_weights + 2 * h * e + 5 * tokens * h * e + recomputed_core
                     - mlp_kept - tokens * _norm(e, h) - tokens * h * e)
        moments.append(attention)
    if lay.grouped_two_norms:
        # the fused kernel's backward: dq, dk, dv (a heads), the dense and MLP input gradients, the residual
        # gradient; the MLP and the dense input freed
        recomputed_core = tokens * (e * a * d) + lse + micro_batch * seq * seq * e if recompute == "selective" else 0
        moments.append(mlp_weights + dense_weights + 3 * tokens * e * a * d + 3 * tokens * h * e + recomputed_core
                       - mlp_kept - tokens * h * e)
    elif lay.family == "falcon":
        probabilities = _FP32_BYTES * a * tokens * seq
        expanded = _falcon_expanded_kv(micro_batch, tokens, a, k, d)
        recomputed_core = (_FP32_BYTES * tokens * (a * d + 2 * k * d) + 2 * expanded + probabilities
                           if recompute == "selective" else 0)
        attention = (mlp_weights + dense_weights + 2 * tokens * h * e + 2 * _FP32_BYTES * tokens * a * d
                     + probabilities + recomputed_core - mlp_kept - tokens * h * e)
        # then the softmax's backward: the scores' gradient (fp32, b·a·s²) beside the probabilities' gradient;
        # the output's fp32 gradient and v's fp32 gradient (4·T·a·d each) freed by then
        softmax = attention + probabilities - 2 * _FP32_BYTES * tokens * a * d - expanded  # and the expanded v
        moments.extend((attention, softmax))
    positions = 8 * seq if lay.family != "opt" else 8 * tokens
    # the checkpoints keep the positions the layers are given (Falcon's selective recompute checkpoints the
    # attention kernel alone, which is not given them) and Falcon's causal mask, which transformers always
    # materialises (bool, b·s²), for the whole step
    kept = recompute == "full" or (recompute == "selective" and lay.family != "falcon")
    kept_mask = micro_batch * seq * seq if lay.family == "falcon" and recompute != "none" else 0
    return {"layer_backward_moments": moments,
            # OPT's decoder keeps its token and position embeddings in locals through the forward (the first
            # layer reads their sum); the others' first norm reads the embedding output itself
            "forward_locals": 2 * tokens * h * e if lay.family == "opt" else 0,
            "module_buffers": 2 * _FP32_BYTES * (lay.rotary_dims // 2),
            "position_ids": positions, "kept_position_ids": (positions if kept else 0) + kept_mask,
            "recomputed_layer": (layer_bytes(lay, seq, micro_batch, e, h, a, k, d, f, "none") - tokens * h * e
                                 if recompute == "full" else 0)}
