"""The zeroplan plan file for a chosen option (schema: zeroplan.deepspeed.plan_file), and a DeepSpeed config for a plan."""

from __future__ import annotations

from zeroplan.deepspeed.plan_file import SCHEMA_VERSION, PlanFile
from zeroplan.deepspeed.choose import Choice

HEADER = ("# zeroplan plan (schema version {version}). Check it with `zeroplan check {name}`;\n"
          "# write the DeepSpeed config with `zeroplan export deepspeed --plan {name}`.\n")


def document(choice: Choice, nvme_path: str | None = None) -> dict:
    context, option, batch = choice.context, choice.estimate.option, choice.batch
    if context.model is not None:
        is_path = context.model.endswith(".json") or "/" in context.model
        model: dict = {"config" if is_path else "preset": context.model}
    else:
        model = {"params": context.params_count}
        if choice.hidden is not None:
            model["hidden"] = choice.hidden
    if context.largest_layer_count is not None:
        model["largest_layer_params"] = context.largest_layer_count
    cluster: dict = {"gpus": choice.world}
    for key in ("preset", "gpu", "gpus_per_node", "cpu_memory", "nvme", "gpu_memory"):
        value = getattr(context, "cluster" if key == "preset" else key)
        if value is not None:
            cluster[key] = value
    training: dict = {"precision": choice.precision, "optimizer": context.optimizer or "adam",
                      "micro_batch": batch.micro_batch, "grad_accum": batch.accumulation,
                      "global_batch": batch.train_batch_size}
    for key in ("seq_len", "recompute", "flash_attention", "capacity_factor"):
        if getattr(context, key) is not None:
            training[key] = getattr(context, key)
    finetune = {key: getattr(context, key) for key in ("lora_rank", "lora_targets", "quant", "double_quant", "freeze")
                if getattr(context, key) is not None}
    if context.finetune_recipe is not None:
        finetune["recipe"] = context.finetune_recipe
    zero: dict = {"stage": option.stage, "offload_optimizer": option.offload_optimizer,
                  "offload_params": option.offload_params}
    if "nvme" in (option.offload_optimizer, option.offload_params):
        from zeroplan.deepspeed.config_writer import NVME_PATH_PLACEHOLDER

        zero["nvme_path"] = nvme_path or NVME_PATH_PLACEHOLDER
    data = {"zeroplan_plan": SCHEMA_VERSION, "model": model, "cluster": cluster,
            "parallel": {"tp": choice.tp, "pp": choice.pp, **({"ep": choice.ep} if choice.ep > 1 else {}),
                         **({"etp": choice.etp} if choice.etp is not None else {})},
            "training": training, "zero": zero}
    if context.finetune not in (None, "full") or finetune:
        data["finetune"] = {"mode": context.finetune or "full", **finetune}
    PlanFile.model_validate(data)  # what we write must read back
    return data


def render(data: dict, name: str = "plan.yaml") -> str:
    import yaml

    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    return HEADER.format(version=SCHEMA_VERSION, name=name) + body
