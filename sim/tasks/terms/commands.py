"""The velocity command term: (vx, vy, wz) drawn uniformly from the task's ranges, a share of the draws set to
zero (the policy learns to stand still), redrawn every resample_s of an episode."""

from __future__ import annotations

import numpy as np

from sim.robot import CommandLimits


class UniformVelocityCommand:
    def __init__(self, ranges: CommandLimits, stand_still_share: float, resample_s: float, control_dt: float):
        self.low, self.high = ranges.low(), ranges.high()
        self.stand_still_share = stand_still_share
        self.resample_steps = max(1, int(round(resample_s / control_dt)))

    def sample(self, k: int, rng: np.random.Generator) -> np.ndarray:
        """k fresh commands [k, 3]."""
        cmd = rng.uniform(self.low, self.high, (k, 3))
        cmd[rng.random(k) < self.stand_still_share] = 0.0
        return cmd

    def due(self, episode_length: np.ndarray) -> np.ndarray:
        """[N] bool: the envs whose command is redrawn after this step."""
        return episode_length % self.resample_steps == 0
