"""Exact parameter counts from real config.json files, checked against published totals.

tests/configs/ holds the models' public config.json contents. Where transformers is installed, the
same configs (plus small variants for every branch) are built on the meta device and compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeroplan.core.model.families import (
    SUPPORTED_FAMILIES,
    architecture_from_hf_config,
    model_spec_from_hf_config,
)
from zeroplan.core.errors import InputError
from zeroplan.inputs.flag_names import cli_message
from zeroplan.inputs.hf_config import load_hf_config

CONFIGS = Path(__file__).parent / "configs"


def config(file_name: str) -> dict:
    return json.loads((CONFIGS / file_name).read_text())


# file -> (total parameters, tied weights once; largest module's own parameters; where the total is published)
PUBLISHED = {
    # docs/formulas.md §2.1, §19.2 (Hugging Face count, tied weights once); the Llama 2 paper rounds it to 7B.
    "llama-2-7b-hf.json": (6_738_415_616, 32000 * 4096, "docs/formulas.md §19.2"),
    # GGUF general.parameter_count of Mistral 7B (Ollama's show API); "7.24B params" on the HF page.
    "mistral-7b-v0.1.json": (7_241_732_096, 32000 * 4096, "GGUF metadata, HF model page"),
    # HF hub API safetensors.total of Mixtral-8x7B(-Instruct)-v0.1; KerasHub preset metadata "params".
    # Largest module: one layer's fused experts (transformers >= 5), 8 x 3 x 4096 x 14336.
    "mixtral-8x7b-v0.1.json": (46_702_792_704, 8 * 3 * 4096 * 14336, "HF safetensors metadata"),
    # GGUF general.parameter_count of Qwen2 7B; Qwen2.5-7B(-Instruct) has the same shape and total.
    "qwen2-7b.json": (7_615_616_512, 152064 * 3584, "GGUF metadata"),
    # Qwen2.5-0.5B-Instruct's published total (same shape as Qwen2-0.5B): tied head, q/k/v biases.
    "qwen2-0.5b.json": (494_032_768, 151936 * 896, "published Qwen2.5-0.5B total"),
    # docs/formulas.md §19.2; GPT-2 small, tied head.
    "gpt2.json": (124_439_808, 50257 * 768, "docs/formulas.md §19.2"),
    # Pythia suite table (Biderman et al. 2023): 1,011,781,632 total, 805,736,448 non-embedding.
    "pythia-1b.json": (1_011_781_632, 50304 * 2048, "Pythia paper / model card"),
    # DeepSpeedExamples DeepSpeed-Chat (OPT-1.3b actor): "[pre-LoRA] num params: 1,315,758,080".
    "opt-1.3b.json": (1_315_758_080, 50272 * 2048, "DeepSpeed-Chat log"),
    # No exact published figure found ("7B" on the card); derived, and checked against transformers below.
    "falcon-7b.json": (6_921_720_704, 65024 * 4544, "derived; transformers meta-device count"),
    # HF safetensors metadata of microsoft/Phi-3-mini-4k-instruct; KerasHub preset metadata "params".
    "phi-3-mini-4k-instruct.json": (3_821_079_552, 32064 * 3072, "HF safetensors metadata"),
    # KerasHub preset gemma_2b_en "params"; PEFT's "all params: 2506172416" for google/gemma-2b.
    "gemma-2b.json": (2_506_172_416, 256000 * 2048, "KerasHub preset metadata"),
}


@pytest.mark.parametrize("file_name", sorted(PUBLISHED))
def test_total_and_largest_layer_match_published(file_name: str) -> None:
    total, largest, _source = PUBLISHED[file_name]
    spec = model_spec_from_hf_config(config(file_name), file_name)
    assert spec.params == total
    assert spec.largest_layer_params == largest


def test_every_family_has_a_real_config() -> None:
    families = {config(name)["model_type"] for name in PUBLISHED}
    assert families == set(SUPPORTED_FAMILIES)


def test_llama_2_7b_by_hand() -> None:
    """docs/formulas.md §2.1 term by term: embedding + untied head + 32 × (attention + SwiGLU + 2 norms) + norm."""
    hidden, ffn, vocab, layers = 4096, 11008, 32000, 32
    per_layer = 4 * hidden * hidden + 3 * hidden * ffn + 2 * hidden
    assert model_spec_from_hf_config(config("llama-2-7b-hf.json"), "llama").params == \
        2 * vocab * hidden + layers * per_layer + hidden


def test_normalised_shape() -> None:
    mixtral = model_spec_from_hf_config(config("mixtral-8x7b-v0.1.json"), "mixtral").shape
    assert mixtral is not None
    assert (mixtral.layers, mixtral.hidden, mixtral.heads, mixtral.kv_heads, mixtral.ffn, mixtral.vocab) == \
        (32, 4096, 32, 8, 14336, 32000)
    assert (mixtral.experts, mixtral.experts_per_token, mixtral.max_seq_len) == (8, 2, 32768)
    assert mixtral.tied_embeddings is False and mixtral.gated_mlp is True and not mixtral.defaulted
    assert model_spec_from_hf_config(config("mixtral-8x7b-v0.1.json"), "mixtral").extra["largest_layer_module"] == \
        "experts"

    gemma = model_spec_from_hf_config(config("gemma-2b.json"), "gemma")
    assert gemma.shape is not None
    assert (gemma.extra["head_dim"], gemma.shape.kv_heads, gemma.shape.tied_embeddings) == (256, 1, True)

    falcon_spec = model_spec_from_hf_config(config("falcon-7b.json"), "falcon")
    falcon = falcon_spec.shape
    assert falcon is not None
    assert (falcon.heads, falcon.kv_heads, falcon.ffn, falcon.max_seq_len) == (71, 1, 4 * 4544, 2048)
    assert falcon_spec.extra["parallel_attention"] is True and falcon_spec.extra["gated_mlp"] is False

    gpt2_spec = model_spec_from_hf_config(config("gpt2.json"), "gpt2")
    gpt2 = gpt2_spec.shape
    assert gpt2 is not None
    assert (gpt2.ffn, gpt2.max_seq_len, gpt2.tied_embeddings) == (3072, 1024, True)
    assert gpt2_spec.extra["position_embeddings"] == "learned"
    assert gpt2.family == "gpt2" and gpt2.experts is None


def test_gemma_7b_head_dim_differs_from_hidden_over_heads() -> None:
    """gemma-7b: 16 heads of 256 on a 3072-wide model. KerasHub preset gemma_7b_en: 8,537,680,896."""
    variant = dict(config("gemma-2b.json"), hidden_size=3072, num_hidden_layers=28, num_attention_heads=16,
                   num_key_value_heads=16, intermediate_size=24576)
    spec = model_spec_from_hf_config(variant, "gemma-7b")
    assert spec.params == 8_537_680_896
    assert spec.shape is not None
    assert spec.extra["head_dim"] == spec.shape.head_dim == 256 != spec.shape.hidden // spec.shape.heads


def test_opt_350m_projections_and_missing_final_norm() -> None:
    """opt-350m: 512-wide embeddings projected to 1024 and back; post-norm, so no final LayerNorm."""
    variant = dict(config("opt-1.3b.json"), hidden_size=1024, num_attention_heads=16, ffn_dim=4096,
                   word_embed_proj_dim=512, do_layer_norm_before=False)
    hidden, vocab, ffn, layers = 1024, 50272, 4096, 24
    per_layer = 4 * (hidden * hidden + hidden) + 2 * (2 * hidden) + 2 * hidden * ffn + ffn + hidden
    expected = vocab * 512 + 2050 * hidden + 2 * 512 * hidden + layers * per_layer
    assert model_spec_from_hf_config(variant, "opt-350m").params == expected


def test_extra_and_odd_fields_are_ignored() -> None:
    odd = dict(config("llama-2-7b-hf.json"), quantization_config={"bits": 4}, some_future_field=[1, 2],
               rope_scaling={"type": "linear", "factor": 2.0})
    assert model_spec_from_hf_config(odd, "llama").params == 6_738_415_616


def test_unknown_model_type_names_supported_list_and_params() -> None:
    with pytest.raises(InputError) as caught:
        model_spec_from_hf_config({"model_type": "bert", "hidden_size": 768}, "bert", source="bert/config.json")
    message = str(caught.value)
    assert caught.value.input_name == "bert/config.json"
    assert "bert" in message and "with params (and largest_layer_params)" in message  # the API's keywords
    assert "with --params (and --largest-layer-params)" in cli_message(caught.value)  # the CLI's flags
    assert all(family in message for family in SUPPORTED_FAMILIES)


def test_missing_model_type() -> None:
    with pytest.raises(InputError, match="no 'model_type'"):
        architecture_from_hf_config({"hidden_size": 1})


@pytest.mark.parametrize("file_name, field", [
    ("llama-2-7b-hf.json", "intermediate_size"), ("gpt2.json", "n_embd"),
    ("mixtral-8x7b-v0.1.json", "num_local_experts"), ("falcon-7b.json", "vocab_size")])
def test_missing_field_names_field_and_model_type(file_name: str, field: str) -> None:
    broken = config(file_name)
    del broken[field]
    with pytest.raises(InputError) as caught:
        model_spec_from_hf_config(broken, "x", source=file_name)
    assert f"'{field}'" in caught.value.problem
    assert f"'{broken['model_type']}'" in caught.value.problem
    assert caught.value.input_name == file_name


@pytest.mark.parametrize("value", [0, -4, 4096.0, "4096", True])
def test_malformed_field_value(value: object) -> None:
    broken = dict(config("llama-2-7b-hf.json"), hidden_size=value)
    with pytest.raises(InputError, match="hidden_size"):
        model_spec_from_hf_config(broken, "x")


def test_config_must_be_an_object() -> None:
    with pytest.raises(InputError, match="JSON object"):
        architecture_from_hf_config([1, 2], "list.json")  # type: ignore[arg-type]


# --- hf_config: reading local files --------------------------------------------------------------

def test_load_hf_config_reads_file_and_names_model() -> None:
    spec = load_hf_config(CONFIGS / "llama-2-7b-hf.json")
    assert spec.params == 6_738_415_616 and spec.name == "meta-llama/Llama-2-7b-hf"
    assert load_hf_config(CONFIGS / "gpt2.json").name == "gpt2"


def test_load_hf_config_names_a_config_json_by_its_path(tmp_path: Path) -> None:
    """A file called config.json says nothing of its model: it is named by the path given (one folder of it
    could be anything: path/to/config.json is not a model called "to"; issue 23)."""
    folder = tmp_path / "pythia-1b"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "pythia-1b.json").read_text())
    assert load_hf_config(folder / "config.json").name == str(folder / "config.json")
    with pytest.raises(InputError, match="is a directory") as caught:
        load_hf_config(folder)
    assert "config.json inside it" in str(caught.value)


def test_malformed_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "model_type": "llama",\n  "hidden_size": 4096,,\n}\n')
    with pytest.raises(InputError) as caught:
        load_hf_config(path)
    assert caught.value.input_name == str(path)
    assert "line 3" in caught.value.problem and "column 23" in caught.value.problem  # the second comma


@pytest.mark.parametrize("content, problem", [("[1, 2]", "JSON object"), (b"\xff\xfe{", "UTF-8")])
def test_non_object_and_non_text_files(tmp_path: Path, content: str | bytes, problem: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputError, match=problem):
        load_hf_config(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_hf_config(tmp_path / "nope.json")


# --- optional cross-check against transformers on the meta device ---------------------------------

def _variants() -> dict[str, dict]:
    """Small configs that reach every branch the published ones do not."""
    tiny = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=100,
                intermediate_size=96, max_position_embeddings=64,
                pad_token_id=0, bos_token_id=0, eos_token_id=0)  # class defaults may exceed the tiny vocab
    return {
        "llama-biases": dict(tiny, model_type="llama", num_key_value_heads=2, attention_bias=True,
                             mlp_bias=True, head_dim=32, tie_word_embeddings=True),
        "mistral-head-dim": dict(tiny, model_type="mistral", num_key_value_heads=1, head_dim=8),
        "gemma-default-head-dim": dict(tiny, model_type="gemma", num_key_value_heads=1),
        "phi3-gqa": dict(tiny, model_type="phi3", num_key_value_heads=2),
        "neox-no-bias-tied": dict(tiny, model_type="gpt_neox", attention_bias=False, tie_word_embeddings=True),
        "gpt2-untied": dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=100,
                            n_positions=32, n_inner=80, tie_word_embeddings=False),
        "opt-350m-like": dict(tiny, model_type="opt", ffn_dim=96, word_embed_proj_dim=32,
                              do_layer_norm_before=False),
        "opt-no-affine-no-bias": dict(tiny, model_type="opt", ffn_dim=96, enable_bias=False,
                                      layer_norm_elementwise_affine=False, tie_word_embeddings=False),
        "falcon-40b-like": dict(tiny, model_type="falcon", new_decoder_architecture=True, num_kv_heads=2,
                                bias=True, ffn_hidden_size=80),
        "falcon-rw-like": dict(tiny, model_type="falcon", multi_query=False, parallel_attn=False, bias=True),
        "falcon-one-norm-new": dict(tiny, model_type="falcon", new_decoder_architecture=True,
                                    num_ln_in_parallel_attn=1, tie_word_embeddings=False),
        "mixtral-tiny": dict(tiny, model_type="mixtral", num_key_value_heads=2, num_local_experts=4,
                             num_experts_per_tok=2),
    }


def _import_transformers():  # noqa: ANN202 - optional dependency
    try:
        import torch
        import transformers
    except ImportError as error:  # absent, or present but broken: this cross-check is optional
        pytest.skip(f"transformers not importable: {error}")
    return torch, transformers


def _transformers_counts(raw: dict) -> tuple[int, int]:
    """(unique parameters, largest count owned directly by one module), as DeepSpeed defines it."""
    torch, transformers = _import_transformers()
    hf_config = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    unique = {id(parameter): parameter.numel() for parameter in model.parameters()}
    largest = max(sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules())
    return sum(unique.values()), largest


@pytest.mark.slow  # builds the model in transformers on the meta device
@pytest.mark.parametrize("label", sorted(PUBLISHED) + sorted(_variants()))
def test_matches_transformers_on_meta_device(label: str) -> None:
    raw = config(label) if label in PUBLISHED else _variants()[label]
    spec = model_spec_from_hf_config(raw, label)
    assert (spec.params, spec.largest_layer_params) == _transformers_counts(raw)
