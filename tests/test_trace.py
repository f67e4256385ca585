"""zeroplan trace on tiny configs: extrapolation exact against a full trace, categories sum to the peak, the
per-layer activations equal the transformers formula, estimate within 3% of the trace (seconds each)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch", reason="zeroplan trace needs the `trace` extra (torch)")
pytest.importorskip("transformers", reason="zeroplan trace needs the `trace` extra (transformers)")

from zeroplan.core.memory.activations import ActivationConfig, _shape, _transformers_layer_bytes  # noqa: E402
from zeroplan.core.errors import InputError  # noqa: E402
from zeroplan.inputs.hf_config import load_hf_config  # noqa: E402
from zeroplan.trace import compare  # noqa: E402
from zeroplan.trace.engine import TraceSettings, trace_peak  # noqa: E402
from zeroplan.trace.hf_model import hf_config  # noqa: E402
from zeroplan.trace.tracker import CATEGORIES  # noqa: E402

pytestmark = pytest.mark.slow  # real runs / traces / pre-commit: `pytest -m "not slow"` skips them

CONFIG = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
          "num_key_value_heads": 2, "num_hidden_layers": 6, "vocab_size": 128, "tie_word_embeddings": False,
          "max_position_embeddings": 512}
SEQ = 32
_results: dict = {}


@pytest.fixture(scope="module")
def config_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "tiny-llama.json"
    path.write_text(json.dumps(CONFIG))
    return str(path)


def _compared(config_path: str, stage: int, precision: str, recompute: str = "none", gpus: int = 4) -> compare.TraceResult:
    key = (stage, precision, recompute, gpus)
    if key not in _results:  # the whole model traced (no extrapolation)
        _results[key] = compare.run(compare.TraceRequest(model=config_path, gpus=gpus, stage=stage, precision=precision,
                                                         recompute=recompute, seq_len=SEQ, layers_to_trace=0))
    return _results[key]


def test_extrapolated_trace_equals_the_full_trace(config_path):
    full = _compared(config_path, 3, "mixed").trace
    extrapolated = trace_peak(CONFIG, TraceSettings(world_size=4, stage=3, seq_len=SEQ), layers_to_trace=3)
    assert not full["extrapolated"] and extrapolated["extrapolated"] and extrapolated["layers_traced"] == [3, 4, 5]
    assert extrapolated["peak_bytes"] == full["peak_bytes"]
    assert {c: extrapolated["categories"][c] for c in CATEGORIES} == {c: full["categories"][c] for c in CATEGORIES}
    # the slope of the activations is one decoder layer of transformers' code, as core.memory.activations counts it
    layer = _transformers_layer_bytes(_shape(load_hf_config(config_path)),
                                      ActivationConfig(seq_len=SEQ, flash_attention=True, implementation="transformers"))
    assert extrapolated["per_layer"]["activations"] == layer


@pytest.mark.parametrize("stage,precision", [(3, "mixed"), (0, "fp32"), (1, "fp32")])
def test_categories_sum_to_the_peak(config_path, stage, precision):
    trace = _compared(config_path, stage, precision).trace
    assert sum(trace["categories"][c] for c in CATEGORIES) == trace["peak_bytes"]
    assert trace["where"]["phase"] in ("forward", "backward", "optimizer")


@pytest.mark.parametrize("stage,precision,recompute,gpus,phase", [
    (3, "mixed", "none", 4, "backward"),  # a 16-bit norm's backward in the second-last layer
    (3, "fp32", "full", 4, "backward"),  # full recompute: low in the backward, a layer recomputed whole
    (2, "fp32", "selective", 128, "forward"),  # 32x padding: the last layer's forward, two all-gather buffers
])
def test_estimate_equals_the_trace_at_its_peak_moment(config_path, stage, precision, recompute, gpus, phase):
    # FSDP2's peak moves between the loss, the last layer's forward and a layer's backward with the shape;
    # the estimate models each of these moments (core/memory/torch_buffers.py) and must land on the byte.
    result = _compared(config_path, stage, precision, recompute, gpus)
    assert result.activation_model == "transformers"
    assert result.trace["where"]["phase"] == phase
    assert result.estimate["total"] == result.trace["peak_bytes"], (result.estimate, result.trace["categories"])


# GPT-2 without dropout: LayerNorm, Conv1D, gelu_new, learned positions (a table larger than the layers here, so
# the root's gradients can hold the peak), tied head.
GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 4, "vocab_size": 300, "n_positions": 2048,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
# An untied llama with a large vocabulary: the root (embeddings, head) outweighs the layers.
LLAMA_WIDE_VOCAB = {**CONFIG, "num_hidden_layers": 4, "vocab_size": 4000}
# A tied llama whose eager attention's a·s² tensors outweigh the rest at sequence 256.
LLAMA_TIED = {**CONFIG, "intermediate_size": 176, "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 300,
              "tie_word_embeddings": True}


@pytest.mark.parametrize("config,stage,precision,recompute,gpus,seq,attention,phase,op", [
    # a block's MLP backward after gelu_new's two gradient products, the block recomputed
    (GPT2, 3, "mixed", "full", 8, 64, "sdpa", "backward", "aten.mul.Tensor"),
    (GPT2, 1, "fp32", "full", 8, 64, "sdpa", "backward", "aten.mul.Tensor"),
    (GPT2, 0, "mixed", "full", 8, 64, "sdpa", "optimizer", "aten._foreach_sqrt.default"),  # the ids and labels alive
    (GPT2, 1, "mixed", "full", 8, 64, "sdpa", "backward", "aten.empty.memory_format"),  # the root's all-reduce output
    ({**GPT2, "n_positions": 8192}, 2, "fp32", "full", 8, 64, "sdpa", "backward", "aten.add.Tensor"),  # tied, summed
    (GPT2, 2, "fp32", "selective", 128, 32, "sdpa", "forward", "aten.view.default"),  # the first block's forward
    (LLAMA_WIDE_VOCAB, 3, "mixed", "none", 8, 16, "sdpa", "backward", "aten.empty.memory_format"),  # root's copy-in
    (LLAMA_WIDE_VOCAB, 2, "fp32", "none", 8, 16, "sdpa", "forward", "aten.view.default"),
    # eager attention: the softmax's backward (was -2.2% and -18.2%), with selective recompute the core recomputed
    (LLAMA_TIED, 3, "mixed", "none", 8, 256, "eager", "backward", "aten._softmax_backward_data.default"),
    (LLAMA_TIED, 1, "mixed", "full", 8, 256, "eager", "backward", "aten._softmax_backward_data.default"),
    ({**LLAMA_WIDE_VOCAB, "vocab_size": 128}, 3, "mixed", "selective", 8, 256, "eager", "backward",
     "aten._softmax_backward_data.default"),
])
def test_estimate_equals_the_trace_at_the_moments_of_gpt2_the_root_and_eager(tmp_path, config, stage, precision,
                                                                            recompute, gpus, seq, attention, phase, op):
    # Where GPT-2's peak sits (inside a block's backward, the embeddings' backward, the root's gradient reduction,
    # the first block's forward, the optimizer step), the estimate lands on the byte; the root's moments hold for
    # llama too, and so does eager attention's softmax backward.
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = compare.run(compare.TraceRequest(model=str(path), gpus=gpus, stage=stage, precision=precision,
                                              recompute=recompute, seq_len=seq, attention=attention,
                                              layers_to_trace=0))
    assert result.activation_model == "transformers"
    assert (result.trace["where"]["phase"], result.trace["where"]["op"]) == (phase, op)
    assert result.estimate["total"] == result.trace["peak_bytes"], (result.estimate, result.trace["categories"])


def test_a_sliding_window_no_longer_than_the_sequence_is_derived_but_for_selective_recompute():
    from zeroplan.core.memory.activations import applied_implementation
    from zeroplan.core.model.spec import ModelShape, ModelSpec

    def mistral(window):
        config = {"model_type": "mistral", "sliding_window": window}
        shape = ModelShape.of(layers=2, hidden=64, heads=4, kv_heads=2, ffn=160, vocab=128, family="mistral")
        return ModelSpec(params=10**6, name="m", shape=shape, extra={"hf_config": config})

    short = ActivationConfig(seq_len=SEQ, flash_attention=True, implementation="transformers")
    assert applied_implementation(mistral(SEQ + 1), short) == ("transformers", "")
    assert applied_implementation(mistral(SEQ), short) == ("transformers", "")
    implementation, note = applied_implementation(mistral(SEQ), replace(short, recompute="selective"))
    assert implementation == "megatron"
    assert f"sliding attention window ({SEQ}) no longer than the sequence ({SEQ})" in note


@pytest.mark.parametrize("stage", [0, 1])
def test_estimate_is_within_3_percent_of_the_trace(config_path, stage):
    # Stages 0-1 (replicate) peak at the optimizer step or the backward start here.
    result = _compared(config_path, stage, "fp32")
    assert result.activation_model == "transformers"
    assert abs(result.error) <= 0.03, (result.estimate, result.trace["categories"])


def test_stage_3_shards_what_stage_0_replicates(config_path):
    assert _compared(config_path, 3, "mixed").trace["peak_bytes"] < _compared(config_path, 0, "fp32").trace["peak_bytes"]


def test_a_family_that_cannot_be_traced_is_an_input_error():
    with pytest.raises(InputError, match="cannot be traced"):
        hf_config({"model_type": "mamba", "n_layer": 2}, None, "sdpa")


def test_cli_tolerance_and_formats(cli, config_path):
    status, out, err = cli("trace", "--model", config_path, "--gpus", "2", "--stage", "2", "--seq-len", "16",
                           "--layers-to-trace", "0", "-f", "json", "--tolerance", "0")
    report = json.loads(out)
    assert report["activation_model"] == "transformers" and report["trace"]["phase"]
    assert status == (1 if report["error"] != 0 else 0)
    assert ("--tolerance" in err) == (status == 1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_real_refuses_without_cuda(cli, config_path):
    status, _out, err = cli("trace", "--model", config_path, "--gpus", "2", "--seq-len", "16", "--real")
    assert status == 2 and "--real" in err and "Traceback" not in err


# OPT (256 wide, 7 layers) at stage 1 with full recompute, seq 2048: over 3-5 layers the backward peak moves between
# layers (not linear), over 4-6 it is linear again.
OPT_SLIDES = {"model_type": "opt", "hidden_size": 256, "ffn_dim": 1024, "num_attention_heads": 8, "num_hidden_layers": 7,
              "vocab_size": 1000, "max_position_embeddings": 8192, "word_embed_proj_dim": 256, "dropout": 0.0}


def test_a_window_that_does_not_extrapolate_slides_up_and_still_equals_the_whole_trace(tmp_path, monkeypatch):
    from zeroplan.trace import engine

    path = tmp_path / "opt.json"
    path.write_text(json.dumps(OPT_SLIDES))

    def traced(layers_to_trace: int) -> compare.TraceResult:
        return compare.run(compare.TraceRequest(model=str(path), gpus=64, stage=1, precision="mixed", recompute="full",
                                                seq_len=2048, layers_to_trace=layers_to_trace))

    slid = traced(3)
    assert slid.trace["layers_traced"] == [4, 5, 6]
    assert slid.trace["peak_bytes"] == traced(0).trace["peak_bytes"]
    monkeypatch.setattr(engine, "MAX_WINDOW_SLIDES", 0)
    with pytest.raises(engine.TraceFailed, match=r"did not scale linearly over \[3, 4, 5\] layers"):
        traced(3)
