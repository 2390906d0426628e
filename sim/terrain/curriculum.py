"""Which sub-terrain each env stands on: its type (a fixed column, the envs spread evenly over the types) and its
difficulty level, moved at reset by legged_gym's game-inspired rule. An env that walked further than half a
sub-terrain goes one level up; one that walked less than half the distance its command asked for over a whole
episode goes one level down; one that climbs past the top level starts again on a random level."""

from __future__ import annotations

import numpy as np

from sim.terrain.config import TerrainConfig


class TerrainCurriculum:
    def __init__(self, cfg: TerrainConfig, num_envs: int):
        self.cfg = cfg
        self.types = np.arange(num_envs) * len(cfg.types) // num_envs
        self.levels = np.zeros(num_envs, dtype=np.int64)

    def start(self, env_ids: np.ndarray, rng: np.random.Generator) -> None:
        """First levels: random up to max_init_level (curriculum), or anywhere (no curriculum)."""
        top = self.cfg.max_init_level + 1 if self.cfg.curriculum else self.cfg.levels
        self.levels[env_ids] = rng.integers(0, top, len(env_ids))

    def update(
        self, env_ids: np.ndarray, distance: np.ndarray, commanded: np.ndarray, rng: np.random.Generator
    ) -> None:
        """Levels for the next episode of `env_ids`, from how far each walked from its start (`distance`, m) and
        how far its command would have taken it in a whole episode (`commanded`, m)."""
        if not self.cfg.curriculum:
            self.start(env_ids, rng)
            return
        up = distance > self.cfg.size / 2
        down = (distance < 0.5 * commanded) & ~up
        levels = self.levels[env_ids] + up - down
        solved = levels >= self.cfg.levels
        levels[solved] = rng.integers(0, self.cfg.levels, int(solved.sum()))
        self.levels[env_ids] = np.maximum(levels, 0)
