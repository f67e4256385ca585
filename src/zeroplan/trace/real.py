"""`zeroplan trace --real`: the same step with real tensors on a CUDA GPU, measured by
torch.cuda.max_memory_allocated (rank 0 of the same fake world: collectives do nothing, shard sizes are real)."""

from __future__ import annotations

from zeroplan.core.errors import InputError


def real_peak_bytes(config: dict, settings) -> int:
    import torch

    if not torch.cuda.is_available():
        raise InputError("--real", "needs a CUDA GPU and torch sees none",
                         "run without --real to trace with fake tensors, or on a machine with a GPU")
    from zeroplan.trace.engine import _most_loaded_part, _shard, fake_world
    from zeroplan.trace.hf_model import build_model, real_masking

    device = torch.device("cuda", torch.cuda.current_device())
    with fake_world(settings.world_size), real_masking():
        model = build_model(config, None, settings.attention, torch.float32, settings.recompute)
        _shard(model, settings, device_type="cuda")
        model.to_empty(device=device)
        params = [p for p in model.parameters() if p.requires_grad]
        if settings.stage == 1:
            params = [params[i] for i in _most_loaded_part([p.numel() for p in params], settings.world_size)]
        optimizer = torch.optim.AdamW(params or [torch.nn.Parameter(torch.empty(0, device=device))], lr=1e-4,
                                      foreach=True)
        vocab = model.config.vocab_size
        ids = torch.randint(0, vocab, (settings.micro_batch, settings.seq_len), device=device)
        for step in range(settings.steps):
            if step == settings.steps - 1:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats(device)
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated(device))
