"""The tracking threshold: a deterministic policy on a separate twin with a fixed seed, scored against limits.

Every framework in the benchmark is scored by this same function, so "reached the threshold" means one thing.
Errors are means of |command - measured| over all envs and all steps (transients after command changes and
pushes included); a fall is an early termination.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from sim.robot import RobotSpec
from sim.tasks import load_task
from sim.twin import BatchedTwin
from training.ppo.config import PPOConfig

EVAL_SEED = 1_000_003  # distinct from training seeds, the same for every run and framework


@dataclass
class EvalResult:
    vx: float
    vy: float
    wz: float
    falls: int
    mean_return: float
    score: float  # max over the thresholded errors of error / limit, plus the fraction of envs that fell
    passed: bool

    def as_dict(self) -> dict:
        return asdict(self)


class TrackingEvaluator:
    def __init__(self, cfg: PPOConfig, spec: RobotSpec, nthread: int | None = None):
        task = load_task(spec, cfg.task)
        randomization = cfg.randomization_config(task.randomization)
        self.command = cfg.eval_command
        self.threshold = cfg.threshold
        self.twin = BatchedTwin(
            spec,
            cfg.eval_envs,
            seed=EVAL_SEED,
            task=task,
            randomization=randomization,
            nthread=nthread,
            resample_commands=self.command is None,
        )
        self.steps = max(1, int(round((cfg.eval_seconds or task.episode_length_s) / spec.control_dt)))

    def __call__(self, policy: Callable[[np.ndarray], np.ndarray]) -> EvalResult:
        twin = self.twin
        twin.reset(seed=EVAL_SEED)
        if self.command is not None:
            twin.set_commands(np.asarray(self.command))
        obs = twin.observations  # reset's observation, with the fixed command in it
        errors = {k: 0.0 for k in ("vx", "vy", "wz")}
        falls, rewards = 0, 0.0
        for _ in range(self.steps):
            obs, rew, terminated, _, info = twin.step(policy(obs))
            for k in errors:
                errors[k] += float(info["tracking_error"][k].mean())
            falls += int(terminated.sum())
            rewards += float(rew.mean())
        errors = {k: v / self.steps for k, v in errors.items()}
        return self.score(errors, falls, rewards)

    def score(self, errors: dict[str, float], falls: int, mean_return: float) -> EvalResult:
        ratios = [errors[k] / limit for k, limit in self.threshold.items() if k != "falls"]
        score = max(ratios, default=0.0) + falls / self.twin.num_envs
        passed = all(errors[k] < limit for k, limit in self.threshold.items() if k != "falls")
        passed = passed and falls <= self.threshold.get("falls", float("inf"))
        return EvalResult(errors["vx"], errors["vy"], errors["wz"], falls, mean_return, score, passed)

    def close(self) -> None:
        self.twin.close()
