"""One config dataclass per RLHF stage (TRL style), with defaults that work on a 2-core CPU, loadable from YAML.

config/rlhf/<stage>.yaml holds the project's settings; any field may be set there or on the command line.
Unknown keys fail with one line naming them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from edge.fileio import read_yaml_mapping
from edge.resources import config_path
from training.errors import TrainingError
from training.rlhf.model import ModelConfig

RLHF_CONFIG_DIR = config_path("rlhf")


@dataclass
class SFTConfig:
    out: str = "runs/rlhf/sft"
    robot: str = "rover"  # command limits the target plans are clamped to
    examples: int = 20000  # demonstrations drawn from the `sft` phrasing pool
    steps: int = 1600  # the SFT budget
    batch_size: int = 32
    learning_rate: float = 2e-3
    warmup_steps: int = 50
    weight_decay: float = 0.01
    model: ModelConfig = field(default_factory=ModelConfig)
    eval_examples: int = 128  # fresh `sft`-pool examples scored (greedy) during and after training
    eval_every: int = 0  # steps between validation scores (constrained decoding); 0: only at the end
    seed: int = 0


@dataclass
class PrefsConfig:
    db: str = "runs/rlhf/prefs.sqlite"
    model: str = "runs/rlhf/sft"  # the model whose sampled plans are compared
    robot: str = "rover"
    pairs: int = 600  # candidate pairs to create
    candidates: int = 4  # plans sampled per instruction; every two distinct ones make a pair (InstructGPT's K)
    pool: str = "all"  # instructions come from this corpus pool (their intents drive the simulated operator)
    temperature: float = 1.0
    operator_noise: float = 0.0  # 0: the simulated operator always prefers the better trajectory
    operator_skip_below: float = 0.5  # two plans that both score below this are skipped, as a person would
    seed: int = 1


@dataclass
class RewardConfig:
    out: str = "runs/rlhf/reward"
    model: str = "runs/rlhf/sft"  # the reward's reference and the initial pi_r (reward_model.py)
    db: str = "runs/rlhf/prefs.sqlite"
    epochs: int = 3
    batch_size: int = 16
    learning_rate: float = 5e-4
    beta: float = 0.1  # r = beta * log(pi_r / pi_sft): the reward's scale
    holdout: float = 0.2  # random share of the preference pairs kept out of training to measure ranking accuracy
    seed: int = 0


@dataclass
class RLConfig:
    out: str = "runs/rlhf/rl"
    model: str = "runs/rlhf/sft"  # policy initialisation and KL reference
    reward_model: str = "runs/rlhf/reward"
    robot: str = "rover"
    engine: str = "vllm"  # vllm: vLLM generates samples (in process; Ray actors with ray_engines > 0); transformers
    ray_engines: int = 0  # > 0: that many vLLM engines as Ray actors (one GPU each)
    iterations: int = 40
    prompts_per_iteration: int = 32
    samples_per_prompt: int = 4  # GRPO group size
    temperature: float = 1.0
    learning_rate: float = 5e-4
    max_grad_norm: float = 1.0
    epochs: int = 2  # clipped policy updates per batch of samples
    clip: float = 0.2  # PPO ratio clip
    kl_coef: float = 0.05  # penalty on log pi/pi_sft of each sampled plan
    rm_weight: float = 0.1  # small: the reward model ranks plans of unseen instructions near chance (docs/rlhf.md)
    sim_weight: float = 1.0  # intent score of the plan executed in the twin
    json_weight: float = 1.0  # invalid JSON costs this much
    pool: str = "rl"  # prompt pool; its phrasings have intents but no target plans
    sync_dir: str = "/dev/shm"  # weights go to a directory here, then into the running engine
    seed: int = 0


C = TypeVar("C")


def load_config(cls: type[C], path: str | Path | None = None, **overrides) -> C:
    """`cls` defaults, then the YAML file's values, then non-None overrides (command-line flags)."""
    values: dict = {}
    if path is not None:
        values = read_yaml_mapping(path, TrainingError, "config file", "expected a mapping at the top level")
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise TrainingError(f"{cls.__name__}: unknown key(s) {', '.join(unknown)}")
    if "model" in values and isinstance(values["model"], dict):
        try:
            values["model"] = ModelConfig(**values["model"])
        except TypeError as e:
            raise TrainingError(f"{cls.__name__}.model: {e}") from None
    return cls(**values)
