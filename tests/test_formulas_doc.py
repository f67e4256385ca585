"""docs/formulas.md's worked numbers are what the code computes: each is recomputed here from zeroplan.core and
looked up in the page, so a formula that changes without its reference (or a typo in the page) fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from zeroplan.core.evaluate.estimate import default_largest_layer_params
from zeroplan.core.memory import deepspeed_estimator
from zeroplan.core.memory.activations import ActivationConfig, activation_memory, layer_bytes
from zeroplan.core.memory.budget import MemoryBudget
from zeroplan.core.memory.framework_partition import framework_partition, params_from_architecture
from zeroplan.core.memory.model_states import paper_model_states
from zeroplan.core.model.families import architecture_from_hf_config
from zeroplan.core.model.pipeline_stages import shard_params, stage_params
from zeroplan.core.options import Option
from zeroplan.core.precision import bytes_per_param
from zeroplan.core.timing.collectives import ring_time
from zeroplan.core.timing.dp_offload import offload_traffic
from zeroplan.core.timing.step_time import narayanan_flops_per_iteration
from zeroplan.core.units import GIB
from zeroplan.inputs import presets

DOC = (Path(__file__).resolve().parents[1] / "docs" / "formulas.md").read_text(encoding="utf-8")
MIXED_ADAM = bytes_per_param()


def shown(value: int) -> str:
    return f"{value:,}"


def in_doc(*values: int) -> None:
    for value in values:
        assert shown(value) in DOC, f"{shown(value)} is not in docs/formulas.md"


def test_parameter_counts_and_the_pipeline_shard():
    llama = presets.model("llama-2-7b")
    in_doc(llama.params, presets.model("gpt2").params, llama.largest_layer_params, shard_params(llama, 2, 4),
           *stage_params(llama, 4), default_largest_layer_params(7_500_000_000))


def test_paper_convention_on_the_zero_papers_example():
    for stage in range(4):
        states = paper_model_states(Option(stage), 7_500_000_000, 64, MIXED_ADAM, 8)
        in_doc(states["gpu/params"] + states["gpu/gradients"] + states["gpu/optimizer_states"])
    offloaded = paper_model_states(Option(2, "cpu"), 7_500_000_000, 64, MIXED_ADAM, 8)
    in_doc(offloaded["cpu/optimizer_states"], offloaded["cpu/gradients"])


def test_deepspeed_estimator_on_its_documented_example():
    for offload, params_offload in ((True, True), (True, False), (False, False)):
        cpu, gpu = deepspeed_estimator.zero3(2_851_000_000, 32_000_000, 8, 1, offload, params_offload, True)
        in_doc(cpu, gpu)
        assert f"{cpu / GIB:.2f} GiB" in DOC and f"{gpu / GIB:.2f} GiB" in DOC


def test_framework_partition_of_gpt2():
    gpt2 = architecture_from_hf_config({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                                        "vocab_size": 50257, "n_positions": 1024})
    tensors = params_from_architecture(gpt2)
    for name in ("ddp", "torch-zero1", "deepspeed-zero12", "deepspeed-zero3", "fsdp2-zero3"):
        partition = framework_partition(tensors, 8, MIXED_ADAM, name, stage=2 if name == "deepspeed-zero12" else None)
        row = partition.rank(partition.most_loaded_rank)
        in_doc(row["gpu/params"], row["gpu/gradients"], row["gpu/optimizer_states"],
               partition.rank_total(partition.most_loaded_rank))


@pytest.mark.parametrize("tp, sequence_parallel, recompute", [
    (1, False, "none"), (8, False, "none"), (8, True, "none"), (8, False, "selective"), (8, True, "selective"),
    (8, False, "full"),
])
def test_korthikanti_rows_for_gpt3(tp, sequence_parallel, recompute):
    config = ActivationConfig(seq_len=2048, tp=tp, sequence_parallel=sequence_parallel, recompute=recompute,
                              implementation="megatron")
    in_doc(int(layer_bytes(presets.model("gpt3-175b"), config)))


def test_activations_of_llama_2_7b():
    llama = presets.model("llama-2-7b")
    for implementation in ("megatron", "transformers"):
        estimate = activation_memory(llama, ActivationConfig(seq_len=4096, flash_attention=True,
                                                             implementation=implementation))
        in_doc(estimate.total, estimate.breakdown["activations/layers"])


def test_usable_memory_of_an_a100():
    budget = MemoryBudget(presets.gpu("a100-80g").memory_bytes)
    in_doc(budget.gpu_capacity, budget.fragmentation_bytes, budget.usable_gpu_bytes, budget.activation_reserve_bytes)


def test_collectives_offload_and_flops():
    assert f"{ring_time('all_reduce', 1e9, 8, 3e-6, 300e9) * 1e3:.3f} ms" in DOC
    for option in (Option(1, "cpu"), Option(2, "cpu"), Option(3, "cpu", "cpu"), Option(3, "nvme", "nvme")):
        in_doc(offload_traffic(option, 7_500_000_000, 64, MIXED_ADAM, 8, 4).pcie_bytes_per_gpu)
    in_doc(narayanan_flops_per_iteration(1536, 2048, 96, 12288, 51200))
