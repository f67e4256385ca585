"""Accuracy of `zeroplan estimate` against `zeroplan trace` (rerunnable; needs the `trace` extra).

Samples families × precision × recompute × sequence × world × stage, traces each row (k = 3 layers
extrapolated, exact), and prints a Markdown table for docs/accuracy.md with the number of rows and the worst
|error|. Rows are dealt over family × stage × recompute first; --limit-seconds stops the run (default 900 s,
about 30 rows on a loaded 2-core machine); --quick runs a handful of rows.

    PYTHONPATH=src python benchmarks/trace_accuracy.py [--quick] [--limit-seconds 900] [--out rows.json]
        [--families gpt2,llama] [--rows-per-family 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time

# Small members of each family (shapes as in tests/configs), so a row traces in seconds.
FAMILIES = {
    "llama": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
              "num_key_value_heads": 2, "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192},
    # no sliding window, as Mistral-7B-v0.2/v0.3 (v0.1's 4096 window falls back to Megatron's formula)
    "mistral": {"model_type": "mistral", "hidden_size": 256, "intermediate_size": 704, "num_attention_heads": 8,
                "num_key_value_heads": 4, "num_hidden_layers": 8, "vocab_size": 1000,
                "max_position_embeddings": 8192, "sliding_window": None},
    "qwen2": {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
              "num_key_value_heads": 2, "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192},
    "gpt2": {"model_type": "gpt2", "n_embd": 256, "n_head": 8, "n_layer": 8, "vocab_size": 1000, "n_positions": 8192,
             "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
    # multi-query like gemma-2b, with a head_dim (96) that is not hidden / heads (64); tied head, GeGLU
    "gemma": {"model_type": "gemma", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 4,
              "num_key_value_heads": 1, "head_dim": 96, "num_hidden_layers": 8, "vocab_size": 1000,
              "max_position_embeddings": 8192},
    # multi-head like Phi-3-mini (fused qkv_proj and gate_up_proj), without its 2047 sliding window
    "phi3": {"model_type": "phi3", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
             "num_key_value_heads": 8, "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192,
             "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "sliding_window": None},
    # 4 experts, top-2 routing (transformers' default grouped_mm experts), GQA
    "mixtral": {"model_type": "mixtral", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
                "num_key_value_heads": 2, "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192,
                "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None},
    # Pythia-like: partial rotary (rotary_pct 0.25), parallel residual, untied head
    "gpt_neox": {"model_type": "gpt_neox", "hidden_size": 256, "intermediate_size": 1024, "num_attention_heads": 8,
                 "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192, "rotary_pct": 0.25},
    # OPT-125m-like without dropout (the configs' dropout 0.1 falls back to Megatron's formula)
    "opt": {"model_type": "opt", "hidden_size": 256, "ffn_dim": 1024, "num_attention_heads": 8, "num_hidden_layers": 8,
            "vocab_size": 1000, "max_position_embeddings": 8192, "word_embed_proj_dim": 256, "dropout": 0.0},
    # Falcon-7B-like: multi-query attention (one KV head), parallel attention and MLP from one LayerNorm
    "falcon": {"model_type": "falcon", "hidden_size": 256, "num_attention_heads": 8, "num_hidden_layers": 8,
               "vocab_size": 1000, "max_position_embeddings": 8192},
    # --- the families the architecture description added (issue 19); rows of the ones not derived yet compare
    # Megatron's formula with the trace, and say so in the activations column
    # Qwen3: per-head q/k RMSNorm, head_dim 128 at real sizes (here 48, not hidden / heads)
    "qwen3": {"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 48, "num_hidden_layers": 8, "vocab_size": 1000,
              "max_position_embeddings": 8192},
    # OLMo-2: post-norm layers, q/k RMSNorm over all heads
    "olmo2": {"model_type": "olmo2", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
              "num_key_value_heads": 8, "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192},
    # Qwen3-30B-A3B-like: 8 experts, top-2, qk-norm, every layer MoE
    "qwen3_moe": {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 688, "moe_intermediate_size": 128,
                  "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "num_experts": 8,
                  "num_experts_per_tok": 2, "num_hidden_layers": 8, "vocab_size": 1000,
                  "max_position_embeddings": 8192},
    # Gemma 3: five sliding layers (window 512) per global one, qk-norm, four norms per layer
    "gemma3_text": {"model_type": "gemma3_text", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 8, "vocab_size": 1000,
                    "max_position_embeddings": 8192, "sliding_window": 512},
    # DeepSeek-V3-like: multi-head latent attention, one dense layer, then 8 routed experts (top-2) and a shared one
    "deepseek_v3": {"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 688,
                    "moe_intermediate_size": 128, "num_attention_heads": 8, "num_key_value_heads": 8,
                    "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
                    "kv_lora_rank": 64, "q_lora_rank": 96, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
                    "v_head_dim": 32, "n_group": 4, "topk_group": 2, "num_hidden_layers": 8, "vocab_size": 1000,
                    "max_position_embeddings": 8192},
    # gpt-oss-like: attention sinks (transformers runs them eager only), alternating sliding (128) and global layers
    "gpt_oss": {"model_type": "gpt_oss", "hidden_size": 256, "intermediate_size": 256, "num_attention_heads": 8,
                "num_key_value_heads": 2, "head_dim": 32, "num_local_experts": 8, "num_experts_per_tok": 2,
                "sliding_window": 128, "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192},
    # Llama 4 Maverick-like: MoE every second layer (a shared expert, top-1 of 8)
    "llama4_text": {"model_type": "llama4_text", "hidden_size": 256, "intermediate_size": 256,
                    "intermediate_size_mlp": 688, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
                    "num_local_experts": 8, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
                    "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192},
    # DeepSeek-V2-like: the same latent attention, group-limited greedy routing (softmax), complex rotary
    "deepseek_v2": {"model_type": "deepseek_v2", "hidden_size": 256, "intermediate_size": 688,
                    "moe_intermediate_size": 128, "num_attention_heads": 8, "num_key_value_heads": 8,
                    "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 2, "first_k_dense_replace": 1,
                    "kv_lora_rank": 64, "q_lora_rank": 96, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
                    "v_head_dim": 32, "n_group": 4, "topk_group": 2, "topk_method": "group_limited_greedy",
                    "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 8192},
    # OLMoE-1B-7B-like: qk-norm over all heads, 8 experts top-2 in every layer
    "olmoe": {"model_type": "olmoe", "hidden_size": 256, "intermediate_size": 128, "num_attention_heads": 8,
              "num_key_value_heads": 8, "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 8,
              "vocab_size": 1000, "max_position_embeddings": 8192, "eos_token_id": 1, "pad_token_id": 0},
    # Qwen1.5-MoE-A2.7B-like: 8 experts top-2 and a shared expert behind a sigmoid gate
    "qwen2_moe": {"model_type": "qwen2_moe", "hidden_size": 256, "intermediate_size": 688, "moe_intermediate_size": 128,
                  "shared_expert_intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 8,
                  "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 8, "vocab_size": 1000,
                  "max_position_embeddings": 8192},
}
FIRST_FAMILIES = 10  # the families before issue 19: their rows are dealt as before the new ones came
ISSUE_19_FAMILIES = 17  # then the first families the architecture description added: their rows dealt as before too
# Families whose transformers code has no sdpa attention: their rows run eager attention.
EAGER_ONLY = ("gpt_oss",)
PRECISIONS = ("mixed", "fp32")
RECOMPUTES = ("none", "selective", "full")
SEQS = (512, 1024, 2048, 4096, 8192)
WORLDS = (8, 64, 1024)
STAGES = (0, 1, 2, 3)


def _dealt(names: tuple[str, ...], seed: int) -> list[tuple]:
    """The grid of these families shuffled, then dealt round-robin over (family, stage, recompute)."""
    grid = list(itertools.product(names, PRECISIONS, RECOMPUTES, SEQS, WORLDS, STAGES))
    random.Random(seed).shuffle(grid)
    groups: dict[tuple, list[tuple]] = {}
    for row in grid:
        groups.setdefault((row[0], row[5], row[2]), []).append(row)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    return [groups[key][i] for i in range(max(map(len, groups.values()))) for key in keys if i < len(groups[key])]


def rows(quick: bool, seed: int, families: tuple[str, ...] = (), per_family: int | None = None) -> list[tuple]:
    """The grid shuffled, then dealt round-robin over (family, stage, recompute), so that a run cut short by
    --limit-seconds still covers every family, stage and recompute mode before repeating one: the first ten
    families' rows as before the new families came (the same rows for the same seed), then the new families'.
    families keeps those families' rows only, in the same order (a family's rows are the ones a whole run would
    trace); per_family the first that many rows of each."""
    names = tuple(FAMILIES)
    dealt = (_dealt(names[:FIRST_FAMILIES], seed) + _dealt(names[FIRST_FAMILIES:ISSUE_19_FAMILIES], seed)
             + _dealt(names[ISSUE_19_FAMILIES:], seed))
    dealt = [row for row in dealt if not families or row[0] in families]
    if per_family is not None:
        kept, taken = [], dict.fromkeys(names, 0)
        for row in dealt:
            if taken[row[0]] < per_family:
                kept.append(row)
                taken[row[0]] += 1
        dealt = kept
    return dealt[:6] if quick else dealt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--limit-seconds", type=float, default=900.0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--rows-per-family", type=int, default=None,
                        help="trace at most this many rows of each family (the first ones a whole run would trace)")
    parser.add_argument("--families", default="", help=f"comma-separated, of {', '.join(FAMILIES)} (default: all)")
    args = parser.parse_args(argv)
    families = tuple(name.strip() for name in args.families.split(",") if name.strip())
    unknown = [name for name in families if name not in FAMILIES]
    if unknown:
        parser.error(f"--families: unknown {', '.join(unknown)} (known: {', '.join(FAMILIES)})")

    import tempfile
    from pathlib import Path

    from zeroplan.core.errors import ZeroplanError
    from zeroplan.trace import compare

    folder = Path(tempfile.mkdtemp(prefix="trace-accuracy-"))
    paths = {}
    for family, config in FAMILIES.items():
        paths[family] = folder / f"{family}.json"
        paths[family].write_text(json.dumps(config))
    started, results, failed = time.perf_counter(), [], []
    import os
    import platform
    print(f"command: python benchmarks/trace_accuracy.py {' '.join(argv if argv is not None else sys.argv[1:])}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.machine()} {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start\n")
    print("| family | precision | recompute | seq | world | stage | trace | estimate | error | peak phase | activations |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|---|")
    for family, precision, recompute, seq, world, stage in rows(args.quick, args.seed, families, args.rows_per_family):
        if time.perf_counter() - started > args.limit_seconds:
            break
        try:
            result = compare.run(compare.TraceRequest(model=str(paths[family]), gpus=world, stage=stage,
                                                      precision=precision, recompute=recompute, seq_len=seq,
                                                      attention="eager" if family in EAGER_ONLY else "sdpa"))
        except ZeroplanError as error:  # a row that cannot be traced is reported (and counted as a miss), not skipped
            failed.append((family, precision, recompute, seq, world, stage, str(error)))
            print(f"| {family} | {precision} | {recompute} | {seq} | {world} | {stage} | not traced: {error} | | | | |",
                  flush=True)
            continue
        row = {"family": family, "precision": precision, "recompute": recompute, "seq": seq, "world": world,
               "stage": stage, "trace": result.trace["peak_bytes"], "estimate": result.estimate["total"],
               "error": result.error, "phase": result.trace["where"].get("phase"),
               "activation_model": result.activation_model}
        results.append(row)
        print(f"| {family} | {precision} | {recompute} | {seq} | {world} | {stage} | {row['trace']:,} | "
              f"{row['estimate']:,} | {row['error']:+.1%} | {row['phase']} | {row['activation_model']} |", flush=True)
    worst = max(results, key=lambda r: abs(r["error"]))
    print(f"\n{len(results)} rows traced, {len(failed)} not traced; worst |error| {abs(worst['error']):.1%} ({worst['family']}, stage {worst['stage']}, "
          f"{worst['precision']}, recompute {worst['recompute']}, seq {worst['seq']}); "
          f"within 3%: {sum(abs(r['error']) <= 0.03 for r in results)} of {len(results) + len(failed)}; "
          f"{time.perf_counter() - started:.0f} s, load average {os.getloadavg()[0]:.1f} at the end")
    if args.out:
        from zeroplan.render.sink import write_file
        write_file(args.out, lambda temporary: Path(temporary).write_text(json.dumps(results, indent=1)), option="--out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
