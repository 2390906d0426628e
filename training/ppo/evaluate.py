"""The tracking threshold: a deterministic policy on a separate twin with a fixed seed, scored against limits.

Every framework in the benchmark is scored by this same function, so "reached the threshold" means one thing.
Errors are means of |command - measured| over all envs and all steps (transients after command changes and
pushes included); a fall is an early termination. For a robot with feet the evaluation scores its gait too
(sim.gait: trot index, mean air time, foot slip, over each env's steps before its first fall), so a threshold can
ask for a trot and not only for tracking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from sim import gait
from sim.robot import RobotSpec
from sim.tasks import load_task
from sim.twin import BatchedTwin
from training.errors import ConfigError
from training.ppo.config import THRESHOLD_MINIMA, PPOConfig

GAIT_KEYS = ("trot_index", "mean_air_time_s", "foot_slip_m_s")

EVAL_SEED = 1_000_003  # distinct from training seeds, the same for every run and framework


@dataclass
class EvalResult:
    vx: float
    vy: float
    wz: float
    falls: int
    mean_return: float
    score: float  # max over the thresholded figures of how far each is from its limit, plus the share that fell
    passed: bool
    trot_index: float | None = None  # the gait, for a robot with feet (sim.gait); None without
    mean_air_time_s: float | None = None
    foot_slip_m_s: float | None = None

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
        )
        if self.command is not None:  # the evaluation command (set on every reset) is held
            self.twin.hold_commands()
        self.steps = max(1, int(round((cfg.eval_seconds or task.episode_length_s) / spec.control_dt)))
        wanted = [k for k in GAIT_KEYS if k in self.threshold]
        if wanted and self.twin.feet is None:
            raise ConfigError(
                f"threshold {', '.join(wanted)}: a gait threshold needs a robot with feet (robot YAML feet:) on a "
                "backend that senses them"
            )

    def __call__(self, policy: Callable[[np.ndarray], np.ndarray]) -> EvalResult:
        twin = self.twin
        twin.reset(seed=EVAL_SEED)
        if self.command is not None:
            twin.set_commands(np.asarray(self.command))
        obs = twin.observations  # reset's observation, with the fixed command in it
        errors = {k: 0.0 for k in ("vx", "vy", "wz")}
        falls, rewards = 0, 0.0
        feet = twin.feet
        contact, speed, alive = [], [], np.ones(twin.num_envs, bool)
        scored = []  # per step: the envs that have not fallen yet in this evaluation
        for _ in range(self.steps):
            obs, rew, terminated, _, info = twin.step(policy(obs))
            for k in errors:
                errors[k] += float(info["tracking_error"][k].mean())
            falls += int(terminated.sum())
            rewards += float(rew.mean())
            if feet is not None:
                alive &= ~terminated
                scored.append(alive.copy())
                contact.append(feet.contact.copy())
                speed.append(np.linalg.norm(feet.vel[..., :2], axis=-1))
        errors = {k: v / self.steps for k, v in errors.items()}
        if feet is not None:  # [T, N, F] -> [N, T, F], as sim.gait takes them
            c, v, m = np.swapaxes(np.array(contact), 0, 1), np.swapaxes(np.array(speed), 0, 1), np.array(scored).T
            errors |= {
                "trot_index": float(gait.trot_index(c, m).mean()),
                "mean_air_time_s": float(gait.mean_air_time(c, m, twin.spec.control_dt).mean()),
                "foot_slip_m_s": float(gait.foot_slip(v, c, m).mean()),
            }
        return self.score(errors, falls, rewards)

    def score(self, figures: dict[str, float], falls: int, mean_return: float) -> EvalResult:
        """figures: the tracking errors, and the gait for a robot with feet."""
        limits = {k: limit for k, limit in self.threshold.items() if k != "falls"}
        ratios = [
            limit / max(figures[k], 1e-6) if k in THRESHOLD_MINIMA else figures[k] / limit
            for k, limit in limits.items()
        ]
        score = max(ratios, default=0.0) + falls / self.twin.num_envs
        passed = all(figures[k] >= v if k in THRESHOLD_MINIMA else figures[k] < v for k, v in limits.items())
        passed = passed and falls <= self.threshold.get("falls", float("inf"))
        gait_figures = {k: figures[k] for k in GAIT_KEYS if k in figures}
        return EvalResult(
            figures["vx"], figures["vy"], figures["wz"], falls, mean_return, score, passed, **gait_figures
        )

    def close(self) -> None:
        self.twin.close()
