"""`PPOConfig`: every knob of a training run in one dataclass, with defaults that work, loadable from YAML.

Per-robot defaults live in config/ppo/<robot>.yaml; a run directory's config.yaml is the same format, so a run
can be repeated or resumed from it. Each field's type, help and limits are in its `setting`; edge.config loads
and checks them (unknown keys and out-of-range values fail with one line naming the file and the key).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml

from edge.config import load_dataclass, setting
from edge.resources import config_path
from sim.randomization import RandomizationConfig, Rehearsal
from sim.tasks.config import VelocityTaskConfig, duty_error
from training.errors import ConfigError

PPO_CONFIG_DIR = config_path("ppo")
THRESHOLD_KEYS = ("vx", "vy", "wz", "falls", "trot_index", "mean_air_time_s", "foot_slip_m_s")
# the gait keys a policy must reach at least (the others are upper limits); robots with feet only (sim.gait)
THRESHOLD_MINIMA = ("trot_index", "mean_air_time_s")
SCHEDULES = ("adaptive", "fixed")
DEVICES = ("cpu", "cuda")


@dataclass
class PPOConfig:
    robot: str = setting("rover", "robot name (config/robots/<name>.yaml) or a robot YAML path")
    task: str | None = setting(
        None, "task YAML (e.g. one with a terrain: section); none: the robot's own config/tasks/velocity_<robot>.yaml"
    )
    num_envs: int = setting(1024, "parallel envs in total, split evenly over the workers", ge=1)
    num_workers: int = setting(1, "policy replicas; >1 runs as a Ray Train job, one per worker", ge=1)
    iterations: int = setting(300, "total PPO iterations of the run; a resumed run continues up to it", ge=1)
    seed: int = setting(0, "random seed")
    randomization: bool = setting(True, "domain randomisation from the robot YAML; false: the nominal twin")
    randomization_ranges: dict[str, list[float] | float] | None = setting(
        None, "ranges that replace the robot YAML's, e.g. {latency_s: [0.07, 0.09]} (centred on identified values)"
    )
    rehearsal_share: float = setting(
        0.0,
        "share of the envs that draw their physics from rehearsal_ranges instead: a fine-tuning to new ranges that "
        "keeps rehearsing the twin the policy was trained on",
        ge=0,
        le=1,
    )
    rehearsal_ranges: dict[str, list[float] | float] | None = setting(
        None, "ranges over the robot YAML's for the rehearsing envs (the run's first randomization_ranges)"
    )
    duty: list[list[float]] | None = setting(
        None, "commands the robot was given in the field: rows of [vx, vy, wz, share of the logged time]"
    )
    duty_share: float = setting(
        0.0, "share of the command draws taken from `duty` instead of the task's ranges (a fine-tuning)", ge=0, le=1
    )
    reward_scales: dict[str, float] | None = setting(
        None,
        "task reward terms whose weights are multiplied, e.g. {tracking_ang_vel: 2.0}: a fine-tuning's emphasis on "
        "the term that trains the KPI that drifted in the field",
        ge=0,
    )
    init_from: str | None = setting(None, "a checkpoint (or run directory) whose weights and normalisers start a run")

    # rollout
    num_steps_per_env: int = setting(24, "steps each env collects per iteration", ge=1)
    random_initial_episode_length: bool = setting(
        True, "spread episode ends over time (rsl_rl's init_at_random_ep_len)"
    )

    # PPO (rsl_rl.algorithms.PPO)
    learning_rate: float = setting(1e-3, "optimiser learning rate", gt=0)
    schedule: str = setting("adaptive", "adaptive: KL-adaptive learning rate; fixed", choices=SCHEDULES)
    desired_kl: float = setting(0.01, "KL target of the adaptive schedule", ge=0)
    num_learning_epochs: int = setting(5, "passes over each batch", ge=1)
    num_mini_batches: int = setting(4, "mini-batches per pass", ge=1)
    clip_param: float = setting(0.2, "PPO ratio clip", gt=0, le=1)
    gamma: float = setting(0.99, "discount", gt=0, le=1)
    lam: float = setting(0.95, "GAE lambda", gt=0, le=1)
    value_loss_coef: float = setting(1.0, "weight of the value loss", ge=0)
    entropy_coef: float = setting(0.01, "weight of the entropy bonus", ge=0)
    max_grad_norm: float = setting(1.0, "gradient clip", gt=0)
    # the robot's left-right mirror (sim.symmetry), through rsl_rl's symmetry extension
    symmetry_augmentation: bool = setting(
        False, "add each mini-batch's mirror image (the robot's left-right mirror, read from its MJCF) to the update"
    )
    mirror_loss_coeff: float = setting(
        0.0, "weight of rsl_rl's mirror loss (the policy against its own mirror image); 0: off", ge=0
    )
    mirror_policy: bool = setting(
        False,
        "average the actor's mean action with the mirror image of its action on the mirrored observation, so the "
        "policy is left-right symmetric by construction (mjbatch's Go1 example); one more actor pass a step",
    )

    # actor-critic MLP
    actor_hidden_dims: list[int] = setting([256, 128, 64], "actor MLP layer sizes", ge=1, length=(1, None))
    critic_hidden_dims: list[int] = setting([256, 128, 64], "critic MLP layer sizes", ge=1, length=(1, None))
    activation: str = setting("elu", "MLP activation (rsl_rl name)")
    init_std: float = setting(1.0, "initial action noise", gt=0)
    obs_normalization: bool = setting(True, "running observation normaliser (baked into the exported ONNX)")

    # evaluation: deterministic policy on a separate twin (randomisation as in training, fixed seed)
    eval_every: int = setting(10, "iterations between evaluations; 0 evaluates only at the end", ge=0)
    eval_envs: int = setting(32, "envs of the evaluation twin", ge=1)
    eval_seconds: float | None = setting(None, "evaluation length; none: one episode", gt=0)
    eval_command: list[float] | None = setting(
        None, "fixed command [vx, vy, wz]; none: randomised commands as in training", length=3
    )
    threshold: dict[str, float] = setting(
        {"vx": 0.1, "wz": 0.2},
        "what the evaluation must meet: mean |error| limits (vx, vy, wz), falls, and for a robot with feet the gait "
        "(trot_index and mean_air_time_s at least, foot_slip_m_s at most)",
        choices=THRESHOLD_KEYS,
    )
    stop_at_threshold: bool = setting(False, "stop once the evaluation passes the threshold")
    max_seconds: float | None = setting(None, "stop after this much training time (collection + learning)", gt=0)

    # checkpoints, workers, infrastructure
    checkpoint_every: int = setting(50, "iterations between checkpoints", ge=1)
    max_failures: int = setting(3, "Ray Train restarts of a failed worker group, each from the last checkpoint", ge=0)
    run_root: str = setting("runs", "directory the run directories go under")
    ray_address: str | None = setting(None, "join this Ray cluster (also for one worker), e.g. auto, ray://head:10001")
    device: str = setting("cpu", "cuda: the policy on the GPU, nccl between workers", choices=DEVICES)
    nthread: int | None = setting(None, "physics threads per worker; none: the CPUs the worker owns", ge=0)
    # more only pays for big networks: idle torch threads spin and slow the physics threads
    torch_threads: int = setting(1, "torch threads per worker while it collects", ge=1)
    update_threads: int | None = setting(
        None, "torch threads for the PPO update, when the physics threads are idle; none: as many as those", ge=1
    )
    export: bool = setting(True, "export the policy artifact at the end when training.export is available")

    def __post_init__(self) -> None:
        """The checks that tie fields together; each field's own limits are in its setting (edge.config)."""
        if self.num_envs < self.num_workers:
            raise ConfigError(
                f"num_envs {self.num_envs} is fewer than the {self.num_workers} workers (num_workers): each needs one"
            )
        if self.num_envs % self.num_workers:
            raise ConfigError(
                f"num_envs {self.num_envs} cannot be split evenly over {self.num_workers} workers (num_workers)"
            )
        if (self.num_envs // self.num_workers) * self.num_steps_per_env < self.num_mini_batches:
            raise ConfigError("num_envs per worker x num_steps_per_env must be at least num_mini_batches")
        self.randomization_config(RandomizationConfig())  # names a bad key or range now, not in a worker
        self.twin_randomization(RandomizationConfig())
        if (why := duty_error(self.duty or [], self.duty_share)) is not None:
            raise ConfigError(why)

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

    def twin_randomization(self, base: RandomizationConfig) -> RandomizationConfig | Rehearsal:
        """What the training twin draws: randomization_config(base), with rehearsal_share of the envs drawing `base`
        with rehearsal_ranges on top instead."""
        own = self.randomization_config(base)
        if self.rehearsal_share == 0:
            return own
        rehearsed = dataclasses.replace(self, randomization_ranges=self.rehearsal_ranges, rehearsal_share=0.0)
        return Rehearsal(own, rehearsed.randomization_config(base), self.rehearsal_share)

    def twin_task(self, task: VelocityTaskConfig) -> VelocityTaskConfig:
        """The task the training twin runs: `task` with the weights of reward_scales' terms multiplied, and
        duty_share of its command draws taken from `duty`."""
        scales = self.reward_scales or {}
        if unknown := sorted(set(scales) - set(task.rewards)):
            raise ConfigError(
                f"reward_scales: the task has no reward term {unknown[0]!r}; its terms: {', '.join(task.rewards)}"
            )
        rewards = {k: dataclasses.replace(t, weight=t.weight * scales.get(k, 1.0)) for k, t in task.rewards.items()}
        task = dataclasses.replace(task, rewards=rewards)
        if not self.duty_share:
            return task
        duty = tuple(tuple(float(v) for v in row) for row in self.duty or [])
        return dataclasses.replace(
            task, commands=dataclasses.replace(task.commands, duty=duty, duty_share=self.duty_share)
        )

    # ------------------------------------------------------------------ YAML
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def replace(self, **changes) -> PPOConfig:
        """A copy with `changes`, checked as a loaded config is."""
        return load_dataclass(PPOConfig, self.to_dict(), changes, error=ConfigError)

    @classmethod
    def from_dict(cls, raw: dict, source: str = "PPO config") -> PPOConfig:
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: expected a mapping of PPOConfig fields")
        return load_dataclass(cls, raw, error=ConfigError, name=source)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides) -> PPOConfig:
        return load_dataclass(cls, path, overrides, error=ConfigError, what="PPO config")

    @classmethod
    def for_robot(cls, robot: str, **overrides) -> PPOConfig:
        """config/ppo/<robot>.yaml (by robot name, or a robot YAML's file stem) with `overrides` on top."""
        defaults = PPO_CONFIG_DIR / f"{Path(robot).stem}.yaml"
        if defaults.is_file():
            return cls.from_yaml(defaults, robot=robot, **overrides)
        return load_dataclass(cls, None, {"robot": robot, **overrides}, error=ConfigError)

    def save_yaml(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))
