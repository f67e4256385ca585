"""`presets validate` and every command that uses a presets file apply the same bounds (issue 23, item 4): what
validate accepts, plan and estimate run; what would crash them (an infinite peak, a zero memory, a model whose
count contradicts its shape) validate refuses, naming FILE:LINE:COLUMN, and a command refuses the same way."""

from __future__ import annotations

import pytest

GPU = """    description: L40
    memory: 46068MiB
    hbm_bandwidth: 864GB/s
    bf16_tflops: 181
    intra_node_link: {bandwidth: 31.5GB/s, latency_us: 10}
    sources: [test]
"""
CLUSTER = """    description: 4x lab GPU
    gpu: a100-80g
    gpus_per_node: 4
    inter_node_bandwidth_per_gpu: 25Gb/s
    inter_node_latency_us: 10
    cpu_memory: 512GB
    nvme: 4TB
    nvme_bandwidth: 7GB/s
    pcie_generation: 4
    sources: [test]
"""
MODEL = """    description: Llama 3 8B shape
    family: llama
    params: 8030261248
    largest_layer_params: 525336576
    layers: 32
    hidden: 4096
    heads: 32
    kv_heads: 8
    ffn: 14336
    vocab: 128256
    max_seq_len: 8192
    tied_embeddings: false
    sources: [test]
"""


def _gpu(old: str = "", new: str = "") -> str:
    return "gpus:\n  lab-gpu:\n" + GPU.replace(old, new)


def _cluster(old: str = "", new: str = "") -> str:
    return "clusters:\n  lab-node:\n" + CLUSTER.replace(old, new)


def _model(old: str = "", new: str = "") -> str:
    return "models:\n  lab-model:\n" + MODEL.replace(old, new)


BAD = {
    "infinite peak": (_gpu("181", ".inf"), "finite"),
    "infinite latency": (_gpu("latency_us: 10", "latency_us: .inf"), "finite"),
    "latency below a picosecond": (_gpu("latency_us: 10", "latency_us: 1e-300"), "picosecond"),
    "zero memory": (_gpu("46068MiB", "0MiB"), "more than zero"),
    "zero bandwidth": (_gpu("bandwidth: 31.5GB/s", "bandwidth: 0GB/s"), "positive"),
    "a boolean bf16": (_gpu("    sources", "    bf16: 1\n    sources"), "boolean"),
    "a name given twice": (_gpu() + "  LAB-GPU:\n" + GPU, "defined twice"),
    "a field given twice": (_gpu() + "    memory: 1GiB\n", "given twice"),
    "an empty name": ('gpus:\n  "":\n' + GPU, "must not be empty"),
    "a null name": ("gpus:\n  ~:\n" + GPU, "must be text"),
    "a comma in a name": ('gpus:\n  "a,b":\n' + GPU, "list separator"),
    "a list for a section": ("gpus: []\n", "must be a mapping"),
    "gpus_per_node true": (_cluster("gpus_per_node: 4", "gpus_per_node: true"), "integer"),
    "gpus_per_node 10^20": (_cluster("gpus_per_node: 4", "gpus_per_node: 100000000000000000000"), "less than"),
    "params contradicting the shape": (_model("params: 8030261248", "params: 8030261249"), "its shape gives"),
    "kv_heads above heads": (_model("kv_heads: 8", "kv_heads: 64"), "must divide heads"),
    "10^15 layers": (_model("layers: 32", "layers: 1000000000000000"), "less than"),
    "a float layer count": (_model("layers: 32", "layers: 32.0"), "integer"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_validate_refuses_what_a_command_cannot_use_and_the_command_refuses_it_too(cli, tmp_path, case):
    text, problem = BAD[case]
    presets_file = tmp_path / "lab.yaml"
    presets_file.write_text(text)
    code, out, err = cli("presets", "validate", str(presets_file))
    assert code == 2 and not out, out
    assert err.startswith(f"zeroplan: error: {presets_file}:") and problem in err, err
    place = err[len("zeroplan: error: "):].split(": ")[0]
    assert place.count(":") == 2  # FILE:LINE:COLUMN
    extra = {"clusters": ["--cluster", "lab-node"], "models": ["--model", "lab-model"]}.get(text.split(":")[0],
                                                                                          ["--gpu", "lab-gpu"])
    if "--model" not in extra:
        extra += ["--model", "llama-2-7b"]
    code, _, used = cli("plan", "--gpus", "8", "--global-batch", "8", "--no-progress", "--presets",
                        str(presets_file), *extra)
    assert code == 2 and "internal error" not in used
    assert used == err, "use and validate name the same problem at the same place"


def test_what_validate_accepts_every_command_uses(cli, tmp_path):
    presets_file = tmp_path / "lab.yaml"
    presets_file.write_text(_gpu() + _cluster("gpu: a100-80g", "gpu: lab-gpu") + _model())
    code, out, err = cli("presets", "validate", str(presets_file))
    assert code == 0, err
    for command in (("plan", "--gpus", "8", "--global-batch", "8", "--no-progress"), ("estimate", "--gpus", "8"),
                    ("sweep", "--gpus", "4,8"), ("export", "deepspeed", "--gpus", "8", "--force")):
        hardware = ("--gpu", "lab-gpu") if command[0] == "sweep" else ("--cluster", "lab-node")
        code, _, err = cli(*command, "--presets", str(presets_file), *hardware, "--model", "lab-model")
        assert code == 0, (command, err)
