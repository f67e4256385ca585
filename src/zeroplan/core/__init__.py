"""Pure planning math: standard library only, integer bytes throughout.

Glossary (the words every module uses):

- params (Ψ): parameter count of the whole model, or of one model-parallel shard where stated.
- dp (N_d): data-parallel degree, the ranks that share ZeRO partitions.
- tp, pp: tensor- and pipeline-parallel degrees. world = dp × tp × pp.
- gpus_per_node (n): GPUs in one node; a group is intra-node when all its ranks share a node.
- stage: ZeRO stage 0 (plain data parallel), 1 (optimizer states sharded), 2 (+ gradients),
  3 (+ parameters).
- offload tier: where optimizer states / parameters live when not on the GPU: "none", "cpu", "nvme".
- option: one (stage, offload_optimizer, offload_params) choice, evaluated into an OptionEstimate.
- convention: "paper" (ZeRO paper, Rajbhandari et al. 2020) or "deepspeed" (DeepSpeed's own
  estimate_zero2/zero3_model_states_mem_needs functions, reproduced to the byte).
- model states: parameters + gradients + optimizer states. Activations and buffers are separate.
- breakdown: a flat dict with path keys ("gpu/params", "cpu/optimizer_states") that feeds the
  table, JSON and CSV alike.
- GiB = 2**30 bytes (memory, default display); GB = 1e9 bytes (bandwidth, and memory with --units si).
"""
