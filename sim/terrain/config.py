"""TerrainConfig: the heightfield terrain of a task (the `terrain:` section of a task YAML) or of a campaign
scenario. Empty `types` (the default) means no heightfield: the robot's own floor, as before terrain existed.

The terrain is a grid of sub-terrains, legged_gym style: columns are the types, rows the difficulty levels.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge.config import setting
from sim.errors import SimError

TERRAIN_TYPES = ("flat", "rough", "slopes", "stairs")
MAX_SAMPLES = 1001  # per side of a sub-terrain with its border: 100 m at 0.1 m, 4 MB per env
MAX_GRID_SAMPLES = 50_000_000  # the whole grid of levels x types (200 MB of float32)


@dataclass(frozen=True)
class TerrainConfig:
    types: tuple[str, ...] = setting(
        (),
        "sub-terrain types, the grid's columns; empty: no heightfield, the robot's own floor",
        choices=TERRAIN_TYPES,
        unique=True,
    )
    levels: int = setting(1, "difficulty levels, the grid's rows", ge=1)
    difficulty: tuple[float, float] = setting(
        (0.0, 1.0), "difficulty (0..1) of the first and the last level, linear in between", ge=0, le=1
    )
    curriculum: bool = setting(
        True, "move an env a level up or down at reset by how far it walked (legged_gym); false: a random level"
    )
    max_init_level: int = setting(0, "envs start on a random level from 0 to this one", ge=0)
    size: float = setting(8.0, "side of one sub-terrain (m); the robot starts at its centre", gt=0)
    border: float = setting(2.0, "flat margin around the sub-terrain (m); episodes time out halfway into it", ge=0)
    resolution: float = setting(0.1, "spacing of the height samples (m)", gt=0)
    platform: float = setting(2.0, "side of the flat top of slopes and stairs, where the robot starts (m)", ge=0)
    rough_amplitude: float = setting(0.05, "rough: heights uniform in +-this at difficulty 1 (m)", ge=0)
    rough_scale: float = setting(0.2, "rough: spacing of the random heights, linear in between (m)", gt=0)
    slope_deg: float = setting(20.0, "slopes: the pyramid's angle at difficulty 1 (degrees)", ge=0, lt=90)
    step_height: tuple[float, float] = setting((0.05, 0.2), "stairs: step height at difficulty 0 and 1 (m)", ge=0)
    step_width: float = setting(0.3, "stairs: tread depth (m)", gt=0)
    seed: int = setting(0, "seed of the rough sub-terrains' noise: the same seed gives the same heights")

    def __post_init__(self) -> None:
        if self.difficulty[0] > self.difficulty[1] or self.step_height[0] > self.step_height[1]:
            raise SimError("difficulty and step_height must be [low, high] pairs with low <= high")
        if self.platform >= self.size:
            raise SimError(f"platform {self.platform} must be smaller than the sub-terrain size {self.size}")
        if self.resolution > min(self.size, self.step_width, self.rough_scale) / 2:
            raise SimError(
                f"resolution {self.resolution} is too coarse for size {self.size}, step_width {self.step_width} "
                f"and rough_scale {self.rough_scale} (at most half of each)"
            )
        side = (self.size + 2 * self.border) / self.resolution + 1
        if side > MAX_SAMPLES or side**2 * self.levels * len(self.types) > MAX_GRID_SAMPLES:
            raise SimError(
                f"{side:.0f} samples a side x {self.levels} levels x {len(self.types)} types is too large a terrain "
                f"(at most {MAX_SAMPLES} a side and {MAX_GRID_SAMPLES} in all): a coarser resolution or a smaller size"
            )
        if self.types and self.max_init_level >= self.levels:
            raise SimError(f"max_init_level {self.max_init_level} must be below levels ({self.levels})")

    @property
    def enabled(self) -> bool:
        return bool(self.types)

    def level_difficulty(self, level: int) -> float:
        lo, hi = self.difficulty
        return lo + (hi - lo) * level / max(self.levels - 1, 1)
