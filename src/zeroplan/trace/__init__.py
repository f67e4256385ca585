"""`zeroplan trace`: run the real Hugging Face model with torch's real sharding wrappers at the real world size
on fake tensors (no GPU, no tensor data) and measure the per-GPU peak; see docs/trace.md.

Needs the `trace` extra (torch, transformers); nothing here imports them until a trace runs.
"""
