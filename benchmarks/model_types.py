"""Every causal-LM model_type of the installed transformers: does zeroplan count it exactly?

For each type in transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES: a config close to a released model where the
tests hold one (tests/configs/models/*.json, tests/configs/*.json), the config class's defaults otherwise. The
reference is transformers' own model built on the meta device (every parameter once, tied weights once); for a
vision-language type the architecture description counts the text model, so its reference is the text model
built alone (and the vision tower's count is printed beside it). Two columns per type:
- description: zeroplan without torch (core.model.families): exact / wrong / refused;
- with meta: zeroplan with the trace extra (the description, else zeroplan.inputs.meta_count): exact / wrong /
  refused.
A type transformers cannot build from its own defaults is listed as such (nothing to compare).
Usage: python benchmarks/model_types.py [--markdown] [--only TYPE ...]. Needs torch and transformers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402

from zeroplan.core.errors import InputError  # noqa: E402
from zeroplan.core.model.families import is_described, model_spec_from_hf_config  # noqa: E402
from zeroplan.inputs.meta_count import model_spec_from_meta  # noqa: E402

CONFIGS = ROOT / "tests" / "configs"


def released_configs() -> dict[str, tuple[str, dict]]:
    """model_type -> (file, config) of the tests' released-size configs (the first file per type)."""
    found: dict[str, tuple[str, dict]] = {}
    for path in sorted((CONFIGS / "models").glob("*.json")) + sorted(CONFIGS.glob("*.json")):
        config = json.loads(path.read_text())
        found.setdefault(config["model_type"], (path.relative_to(ROOT).as_posix(), config))
    return found


def _clean(config: dict) -> dict:
    return {key: value for key, value in config.items() if not key.startswith("_zeroplan")}


def meta_params(config: dict) -> int | None:
    """transformers' count of `config`'s causal LM on the meta device (None: it cannot build it)."""
    raw = _clean(config)
    model_type = raw.pop("model_type")
    try:
        hf_config = transformers.AutoConfig.for_model(model_type, **raw)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(hf_config)
    except Exception:  # noqa: BLE001 - a type whose defaults do not build
        return None
    return sum(parameter.numel() for parameter in model.parameters())


def default_config(model_type: str) -> dict | None:
    try:
        return transformers.AutoConfig.for_model(model_type).to_dict()
    except Exception:  # noqa: BLE001
        return None


def verdict(count: int | None, reference: int) -> str:
    return "refused" if count is None else ("exact" if count == reference else f"wrong ({count - reference:+d})")


def check(model_type: str, released: dict[str, tuple[str, dict]]) -> dict:
    source, config = released.get(model_type, ("class defaults", None))
    if config is None:
        config = default_config(model_type)
    row = {"model_type": model_type, "config": source}
    if config is None:
        return dict(row, reference=None, description="-", with_meta="-", note="config class does not build")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    reference = meta_params(text if text and is_described(config) and text.get("model_type") else config)
    whole = meta_params(config) if text else None
    if reference is None:
        return dict(row, reference=None, description="-", with_meta="-",
                    note="transformers cannot build it from this config")
    described = None
    if is_described(config):
        try:
            described = model_spec_from_hf_config(config, model_type).params
        except InputError as error:
            row["note"] = f"description refused: {error.problem}"
    try:
        with_meta = described if described is not None else model_spec_from_meta(config, model_type, source).params
        # the meta count of a composite is the whole model: compare it with the whole
        meta_reference = reference if described is not None else (whole or reference)
    except InputError as error:
        with_meta, meta_reference = None, reference
        row.setdefault("note", f"meta count refused: {error.problem}")
    if text and described is not None and whole is not None and whole != reference:
        row.setdefault("note", f"the description counts the text model; transformers' {model_type} adds "
                               f"{whole - reference:,} (vision tower, projector), counted with meta")
    return dict(row, reference=reference, description=verdict(described, reference),
                with_meta=verdict(with_meta, meta_reference))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/accuracy.md)")
    parser.add_argument("--only", nargs="*", help="these model_types only")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    transformers.logging.set_verbosity_error()
    released = released_configs()
    types = sorted(args.only or MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    started = time.perf_counter()
    rows = [check(model_type, released) for model_type in types]
    if args.markdown:
        print("| model_type | config | transformers (meta) | description | with meta | note |")
        print("|---|---|---:|---|---|---|")
        for row in rows:
            reference = "-" if row["reference"] is None else f"{row['reference']:,}"
            print(f"| {row['model_type']} | {row['config']} | {reference} | {row['description']} | "
                  f"{row['with_meta']} | {row.get('note', '')} |")
    else:
        for row in rows:
            print(f"{row['model_type']:28s} {row['description']:9s} {row['with_meta']:9s} "
                  f"{row['reference'] if row['reference'] is not None else '-':>16} {row['config']} "
                  f"{row.get('note', '')}")
    counted = [row for row in rows if row["reference"] is not None]
    for column in ("description", "with_meta"):
        tally = {kind: sum(1 for row in counted if row[column].startswith(kind)) for kind in ("exact", "wrong",
                                                                                               "refused")}
        print(f"\n{column}: {tally['exact']} exact, {tally['wrong']} wrong, {tally['refused']} refused of "
              f"{len(counted)} types transformers builds ({len(rows) - len(counted)} it cannot build from the "
              "config given)", end="")
    print(f"\n\ntransformers {transformers.__version__}, torch {torch.__version__}; "
          f"{time.perf_counter() - started:.0f} s")
    return 1 if any(row[column].startswith("wrong") for row in rows for column in ("description", "with_meta")) else 0


if __name__ == "__main__":
    sys.exit(main())
