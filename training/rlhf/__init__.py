"""The instruction model's training side: corpus, SFT, preferences, reward model, RL with vLLM, evaluation.

    from training.rlhf import RLConfig, RLTrainer, SFTConfig, load_config, train_sft

    train_sft(load_config(SFTConfig, "config/rlhf/sft.yaml"))  # writes runs/rlhf/sft
    trainer = RLTrainer(load_config(RLConfig, "config/rlhf/rl.yaml"))  # after prefs and the reward model
    summary = trainer.train()  # each iteration: generate, reward, advantages, update, sync

One module per stage (config, corpus, sft, prefs, reward_model, rl, evaluate, export_onnx) and per tool they share
(model, generation, engine, execution, operator, ...). The names below are imported on first use (PEP 562
`__getattr__`), so `import training.rlhf` or reading a config does not load torch, transformers or vLLM.
The function `evaluate` stays in its module: `training.rlhf.evaluate` names the module (sim2real.rlhf.report
imports it so), and a package attribute cannot be both.
"""

from __future__ import annotations

import importlib

# module: the names it gives the package face, stage by stage
_MODULES = {
    "config": (
        "ENGINES",
        "RLHF_CONFIG_DIR",
        "LoRAConfig",
        "PrefsConfig",
        "RLConfig",
        "RewardConfig",
        "SFTConfig",
        "load_config",
    ),
    "model": ("ModelConfig", "chat_prompt_of", "load_model"),
    "base_model": ("resolve_base",),
    "corpus": ("CorpusGenerator",),
    "sft": ("train_sft",),
    "prefs": ("PairSampler", "collect_pairs"),
    "prefs_store": ("PreferenceStore",),
    "reward_model": ("RewardScorer", "train_reward"),
    "rl": ("RLTrainer", "VALIDATION_FILE"),
    "advantages": ("group_advantages", "loss_normaliser"),
    "evaluate": ("EvalItem", "load_eval_set", "operator_win_rate", "reward_model_win_rate", "summarize"),
    "export_onnx": ("export_instruction_model",),
    "generation": ("HFGenerator", "load_generator"),
    "engine": ("VLLMEngine", "shared_engine"),
    "execution": ("TwinExecutor",),
    "operator": ("SimulatedOperator",),
    "limits": ("limits_for",),
}
_MODULE_OF = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
