"""`PPOConfig`: every knob of a training run in one dataclass, with defaults that work, loadable from YAML.

Per-robot defaults live in config/ppo/<robot>.yaml; a run directory's config.yaml is the same format, so a run
can be repeated or resumed from it. Unknown keys and out-of-range values fail with one line naming the key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from edge.fileio import read_yaml_mapping
from edge.resources import config_path
from sim.randomization import RandomizationConfig
from training.errors import ConfigError

PPO_CONFIG_DIR = config_path("ppo")
THRESHOLD_KEYS = ("vx", "vy", "wz", "falls")


@dataclass
class PPOConfig:
    robot: str = "rover"  # robot name (config/robots/<name>.yaml) or a robot YAML path
    num_envs: int = 1024  # in total, split evenly over the workers
    num_workers: int = 1  # >1 runs as a Ray Train job, one policy replica per worker
    iterations: int = 300  # total PPO iterations of the run (a resumed run continues up to this count)
    seed: int = 0
    randomization: bool = True  # domain randomisation from the robot YAML; False trains on the nominal twin
    # ranges that replace the robot YAML's, e.g. {latency_s: [0.07, 0.09]} to centre on identified parameters
    randomization_ranges: dict[str, list[float]] | None = None
    init_from: str | None = None  # a checkpoint (or run directory): its weights and normalisers start a new run

    # rollout
    num_steps_per_env: int = 24
    random_initial_episode_length: bool = True  # spread episode ends over time (rsl_rl's init_at_random_ep_len)

    # PPO (rsl_rl.algorithms.PPO)
    learning_rate: float = 1e-3
    schedule: str = "adaptive"  # "adaptive": KL-adaptive learning rate; "fixed"
    desired_kl: float = 0.01
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    gamma: float = 0.99
    lam: float = 0.95
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.01
    max_grad_norm: float = 1.0

    # actor-critic MLP
    actor_hidden_dims: list[int] = field(default_factory=lambda: [256, 128, 64])
    critic_hidden_dims: list[int] = field(default_factory=lambda: [256, 128, 64])
    activation: str = "elu"
    init_std: float = 1.0
    obs_normalization: bool = True

    # evaluation: deterministic policy on a separate twin (randomisation as in training, fixed seed)
    eval_every: int = 10  # iterations; 0 evaluates only at the end
    eval_envs: int = 32
    eval_seconds: float | None = None  # None: one episode
    eval_command: list[float] | None = None  # fixed (vx, vy, wz); None: randomised commands as in training
    threshold: dict[str, float] = field(default_factory=lambda: {"vx": 0.1, "wz": 0.2})  # mean |error| limits, falls
    stop_at_threshold: bool = False
    max_seconds: float | None = None  # stop after this much training time (collection + learning)

    # checkpoints, workers, infrastructure
    checkpoint_every: int = 50
    max_failures: int = 3  # Ray Train restarts of a failed worker group, each from the last checkpoint
    run_root: str = "runs"
    ray_address: str | None = None  # join this Ray cluster (also for one worker)
    device: str = "cpu"  # "cuda" puts the policy on the GPU (and nccl between workers)
    nthread: int | None = None  # physics threads per worker; None: the CPUs the worker owns
    torch_threads: int = 1  # more only pays for big networks: idle torch threads spin and slow the physics threads
    export: bool = True  # export the policy artifact at the end when training.export is available

    def __post_init__(self) -> None:
        # YAML reads 1e-3 as a string (YAML 1.1 wants 1.0e-3): coerce the float fields
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type in ("float", "float | None") and value is not None:
                try:
                    setattr(self, f.name, float(value))
                except (TypeError, ValueError):
                    raise ConfigError(f"{f.name} must be a number, got {value!r}") from None
        try:
            self.threshold = {str(k): float(v) for k, v in dict(self.threshold).items()}
            self.eval_command = None if self.eval_command is None else [float(v) for v in self.eval_command]
        except (TypeError, ValueError):
            raise ConfigError("threshold must map names to numbers and eval_command must be 3 numbers") from None
        self.validate()

    def validate(self) -> None:
        positive = (
            "num_envs",
            "num_workers",
            "iterations",
            "num_steps_per_env",
            "num_learning_epochs",
            "num_mini_batches",
            "eval_envs",
            "checkpoint_every",
            "torch_threads",
        )
        for key in positive:
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{key} must be a positive integer, got {value!r}")
        if self.num_envs < self.num_workers:
            raise ConfigError(f"num_envs {self.num_envs} is fewer than the {self.num_workers} workers: each needs one")
        if self.num_envs % self.num_workers:
            raise ConfigError(f"num_envs {self.num_envs} cannot be split evenly over {self.num_workers} workers")
        if (self.num_envs // self.num_workers) * self.num_steps_per_env < self.num_mini_batches:
            raise ConfigError("num_envs per worker x num_steps_per_env must be at least num_mini_batches")
        for key in ("learning_rate", "init_std", "max_grad_norm"):
            if not float(getattr(self, key)) > 0:
                raise ConfigError(f"{key} must be positive, got {getattr(self, key)!r}")
        for key in ("gamma", "lam", "clip_param"):
            if not 0 < float(getattr(self, key)) <= 1:
                raise ConfigError(f"{key} must be in (0, 1], got {getattr(self, key)!r}")
        if self.schedule not in ("adaptive", "fixed"):
            raise ConfigError(f"schedule must be 'adaptive' or 'fixed', got {self.schedule!r}")
        for key in ("actor_hidden_dims", "critic_hidden_dims"):
            dims = getattr(self, key)
            if not dims or not all(isinstance(d, int) and d > 0 for d in dims):
                raise ConfigError(f"{key} must be a list of positive integers, got {dims!r}")
        if self.eval_every < 0:
            raise ConfigError(f"eval_every must be >= 0, got {self.eval_every}")
        if self.eval_command is not None and len(self.eval_command) != 3:
            raise ConfigError(f"eval_command must be [vx, vy, wz], got {self.eval_command!r}")
        if not isinstance(self.threshold, dict) or set(self.threshold) - set(THRESHOLD_KEYS):
            raise ConfigError(f"threshold keys must be among {', '.join(THRESHOLD_KEYS)}, got {self.threshold!r}")
        self.randomization_config(RandomizationConfig())  # names a bad key or range now, not in a worker
        if self.device not in ("cpu", "cuda"):
            raise ConfigError(f"device must be 'cpu' or 'cuda', got {self.device!r}")

    def randomization_config(self, base: RandomizationConfig) -> RandomizationConfig:
        """`base` (the task's randomisation) with randomization_ranges on top; nominal when disabled."""
        if not self.randomization:
            return base.nominal()
        if not self.randomization_ranges:
            return base
        try:
            overrides = RandomizationConfig.from_dict(self.randomization_ranges, "randomization_ranges")
        except (TypeError, ValueError) as e:
            raise ConfigError(str(e)) from None
        return dataclasses.replace(base, **{k: getattr(overrides, k) for k in self.randomization_ranges})

    # ------------------------------------------------------------------ YAML
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def replace(self, **changes) -> PPOConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, raw: dict, source: str = "PPO config") -> PPOConfig:
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: expected a mapping of PPOConfig fields")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - set(fields))
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}")
        try:
            return cls(**raw)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{source}: {e}") from None

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides) -> PPOConfig:
        raw = read_yaml_mapping(path, ConfigError, "PPO config", "expected a mapping of PPOConfig fields")
        return cls.from_dict({**raw, **overrides}, str(path))

    @classmethod
    def for_robot(cls, robot: str, **overrides) -> PPOConfig:
        """config/ppo/<robot>.yaml (by robot name, or a robot YAML's file stem) with `overrides` on top."""
        defaults = PPO_CONFIG_DIR / f"{Path(robot).stem}.yaml"
        if defaults.is_file():
            return cls.from_yaml(defaults, robot=robot, **overrides)
        return cls.from_dict({"robot": robot, **overrides})

    def save_yaml(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))
