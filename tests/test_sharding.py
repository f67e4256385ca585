"""zeroplan.distributed.sharding is the one place that shards a torch model for trace and validate: both
commands' wrappers are applied by its functions (seen by spying on them while each command wraps a model),
no other module calls torch's wrappers, its ZeRO-1 rule is torch's, and trace --real runs the fake trace's
sharding and step on real tensors (run here on CPU tensors)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", reason="the trace side needs the `trace` extra (transformers)")

import torch.distributed as dist  # noqa: E402

from zeroplan.core.memory.framework_partition import params_from_shapes, zero1_owners  # noqa: E402
from zeroplan.distributed import sharding  # noqa: E402
from zeroplan.trace import engine  # noqa: E402
from zeroplan.trace.engine import TraceSettings, fake_world, trace_once  # noqa: E402
from zeroplan.trace.real import run_real_steps  # noqa: E402
from zeroplan.validate import wrappers  # noqa: E402
from zeroplan.validate.config import build_config  # noqa: E402
from zeroplan.validate.model import TinyGpt  # noqa: E402
from zeroplan.validate.shape import TinyShape  # noqa: E402

pytestmark = pytest.mark.slow  # real runs / traces / pre-commit: `pytest -m "not slow"` skips them

SRC = Path(__file__).resolve().parents[1] / "src" / "zeroplan"
LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 128, "tie_word_embeddings": False,
         "max_position_embeddings": 512}


@pytest.fixture
def spied(monkeypatch):
    """Every call of sharding's wrapper functions, as (function name, class of the model wrapped, stage)."""
    calls: list[tuple[str, str, int]] = []
    for name in ("apply_fsdp2", "apply_replicate", "apply_ddp", "apply_recompute"):
        original = getattr(sharding, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            stage = next((a.stage for a in args if isinstance(a, sharding.Sharding)), -1)
            calls.append((_name, type(args[0]).__name__, stage))
            return _original(*args, **kwargs)

        monkeypatch.setattr(sharding, name, spy)
    return calls


def _validate_wrap(stage: int, tmp_path) -> str:
    """validate's wrap() on a 1-rank gloo group: the class of the optimizer it made."""
    shape = TinyShape(layers=2, hidden=16, heads=2, kv_heads=2, ffn=32, vocab=50, seq_len=4)
    config = build_config(stage=str(stage), shape=shape, precision="mixed", optimizer="adamw", micro_batch=1,
                          steps=1, backend="gloo", nproc=None, cpu_offload=False, timeout=60, output_format="json")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store-{stage}", rank=0, world_size=1)
    try:
        return type(wrappers.wrap(TinyGpt(shape), stage, config, torch.device("cpu")).optimizer).__name__
    finally:
        dist.destroy_process_group()


def test_trace_and_validate_get_their_wrappers_from_the_one_module(spied, tmp_path):
    assert engine.shard_model is wrappers.shard_model is sharding.shard_model
    assert engine.make_optimizer is wrappers.make_optimizer is sharding.make_optimizer
    for stage in (0, 1, 2, 3):
        assert _validate_wrap(stage, tmp_path) == ("ZeroRedundancyOptimizer" if stage == 1 else "AdamW")
        trace_once(LLAMA, TraceSettings(world_size=2, stage=stage, seq_len=8, recompute="full"))
    # validate (TinyGpt, every rank runs): DDP for stages 0-1; trace (rank 0 of a fake world): replicate()
    assert [c for c in spied if c[1] == "TinyGpt"] == [
        ("apply_ddp", "TinyGpt", -1), ("apply_ddp", "TinyGpt", -1),
        ("apply_fsdp2", "TinyGpt", 2), ("apply_fsdp2", "TinyGpt", 3)]
    assert [c for c in spied if c[1] == "LlamaForCausalLM"] == [
        ("apply_replicate", "LlamaForCausalLM", 0), ("apply_replicate", "LlamaForCausalLM", 1),
        ("apply_fsdp2", "LlamaForCausalLM", 2), ("apply_fsdp2", "LlamaForCausalLM", 3)]
    assert [c[0] for c in spied if c[1] == "ModuleList"] == ["apply_recompute"] * 8  # 4 validate, 4 trace


def test_no_other_module_calls_torch_wrappers():
    torch_wrappers = {"fully_shard", "replicate", "DistributedDataParallel", "ZeroRedundancyOptimizer",
                      "checkpoint_wrapper", "MixedPrecisionPolicy", "CPUOffloadPolicy"}
    callers = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in torch_wrappers:
                    callers.add(str(path.relative_to(SRC)))
    assert callers == {"distributed/sharding.py"}


@pytest.mark.parametrize("world_size", [2, 3, 5])
def test_zero1_partition_is_torchs(world_size):
    """core.memory.framework_partition's ZeroRedundancyOptimizer rule, which trace's stage 1 uses, against torch's own
    partition (rank 0 of a fake world: torch partitions for every rank)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    shapes = [(7, 3), (21,), (5, 4), (20,), (3,), (2, 2, 2), (9,), (1,), (6, 2)]
    params = [torch.nn.Parameter(torch.zeros(shape)) for shape in shapes]
    with fake_world(world_size):
        optimizer = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-3)
        by_torch = optimizer._partition_parameters()
    owners = zero1_owners(params_from_shapes((f"p{i}", s) for i, s in enumerate(shapes)), world_size)
    for rank in range(world_size):
        torch_owned = sorted(id(p) for group in by_torch[rank] for p in group["params"])
        assert torch_owned == sorted(id(params[i]) for i, owner in enumerate(owners) if owner == rank)


def _held(model, optimizer) -> dict:
    """What rank 0 holds after the steps: local parameter storage bytes, optimizer-state bytes and count."""
    def local(tensor):
        return getattr(tensor, "_local_tensor", tensor)

    states = [value for state in optimizer.state.values() for value in state.values() if torch.is_tensor(value)]
    return {"parameters": sum(local(p).untyped_storage().nbytes() for p in model.parameters()),
            "optimizer_states": sum(local(t).untyped_storage().nbytes() for t in states),
            "stepped": len(optimizer.state), "grads_cleared": all(p.grad is None for p in model.parameters())}


@pytest.mark.parametrize("stage,recompute", [(0, "none"), (1, "full"), (2, "selective"), (3, "none")])
def test_real_steps_run_the_trace_sharding_on_real_tensors(stage, recompute):
    """--real's step on CPU tensors: the same sharding and optimizer as the fake trace, so rank 0 ends holding
    exactly the optimizer states the fake trace counted after its last forward (stage 1: the most loaded
    rank's ZeRO-1 share), and every gradient cleared."""
    settings = TraceSettings(world_size=3, stage=stage, recompute=recompute, seq_len=16)
    held = run_real_steps(LLAMA, settings, torch.device("cpu"), _held)
    traced = trace_once(LLAMA, settings)
    assert held["optimizer_states"] == traced["forward_end"]["optimizer_states"] > 0
    if stage == 1:
        elements, tensors = traced["zero1_owned"]
        assert held["stepped"] == tensors
        assert held["optimizer_states"] == 8 * elements + 4 * tensors
    assert held["grads_cleared"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: --real runs")
def test_real_without_cuda_is_one_line_exit_2(cli, tmp_path):
    path = tmp_path / "tiny-llama.json"
    path.write_text(json.dumps(LLAMA))
    status, out, err = cli("trace", "--model", str(path), "--gpus", "2", "--seq-len", "16", "--real")
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("zeroplan: ") and "--real" in err and "CUDA" in err


def test_sharding_refuses_a_combination_it_does_not_have():
    with pytest.raises(ValueError, match="cpu_offload"):
        sharding.Sharding(stage=1, precision="mixed", world="ranks", reshard_root=True, cpu_offload=True)
    with pytest.raises(ValueError, match="world"):
        sharding.Sharding(stage=2, precision="mixed", world="fake", reshard_root=True)


GPT2 = {"model_type": "gpt2", "n_embd": 48, "n_head": 4, "n_layer": 3, "vocab_size": 101, "n_positions": 64,
        "bos_token_id": 0, "eos_token_id": 0}


@pytest.mark.parametrize("config,gpus", [(GPT2, 5), ({**LLAMA, "num_hidden_layers": 6}, 3)])
def test_stage_1_traces_the_rank_estimate_and_validate_call_most_loaded(tmp_path, config, gpus):
    """Stage 1's traced optimizer states are those of the rank core.memory.framework_partition calls most loaded
    (states and the 4-byte `step` per parameter), as estimate predicts: here two ranks own equal elements but
    not equal tensor counts, and the trace used to take the lower rank (4 bytes short)."""
    from zeroplan.trace import compare

    path = tmp_path / "model.json"
    path.write_text(json.dumps(config))
    result = compare.run(compare.TraceRequest(model=str(path), gpus=gpus, stage=1, seq_len=16, layers_to_trace=0))
    elements, tensors = result.trace["zero1_owned"]
    assert result.trace["forward_end"]["optimizer_states"] == 8 * elements + 4 * tensors
    assert result.trace["forward_end"]["optimizer_states"] == result.estimate["optimizer_states"]


def test_importing_the_sharding_module_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, zeroplan.distributed.sharding; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
