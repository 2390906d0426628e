"""The velocity command term: (vx, vy, wz) drawn uniformly from the task's ranges, a share of the draws set to
zero (the policy learns to stand still), redrawn every resample_s of an episode. A fine-tuning may take a share of
the draws from the commands the robot was given in the field instead (its duty, rows weighted by logged time)."""

from __future__ import annotations

import numpy as np

from sim.robot import CommandLimits


class VelocityCommandTerm:
    def __init__(
        self,
        ranges: CommandLimits,
        stand_still_share: float,
        resample_s: float,
        control_dt: float,
        duty: np.ndarray,
        duty_share: float,
    ):
        """duty: [K, 4] rows of (vx, vy, wz, weight), clipped to `ranges` (K may be 0); duty_share: the share of
        the draws taken from it (sim.tasks.config.duty_error checks both)."""
        self.low, self.high = ranges.low(), ranges.high()
        self.stand_still_share = stand_still_share
        self.resample_steps = max(1, int(round(resample_s / control_dt)))
        self.duty_share = duty_share
        self.duty = np.clip(duty[:, :3], self.low, self.high)
        self.duty_p = duty[:, 3] / duty[:, 3].sum() if len(duty) else duty[:, 3]

    def sample(self, k: int, rng: np.random.Generator) -> np.ndarray:
        """k fresh commands [k, 3]."""
        cmd = rng.uniform(self.low, self.high, (k, 3))
        cmd[rng.random(k) < self.stand_still_share] = 0.0
        if self.duty_share:
            from_duty = rng.random(k) < self.duty_share
            cmd[from_duty] = self.duty[rng.choice(len(self.duty), int(from_duty.sum()), p=self.duty_p)]
        return cmd

    def due(self, episode_length: np.ndarray) -> np.ndarray:
        """[N] bool: the envs whose command is redrawn after this step."""
        return episode_length % self.resample_steps == 0
