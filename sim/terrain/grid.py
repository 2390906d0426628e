"""TerrainGrid: the generated sub-terrains of one TerrainConfig and the questions the twin asks of them (the
height under a point, where a robot starts). Every env of the MuJoCo twin is its own MjModel, so each carries only
the sub-terrain its cell (level, type) holds, not the whole grid: memory grows with one cell per env."""

from __future__ import annotations

import numpy as np

from sim.terrain.config import TerrainConfig
from sim.terrain.generator import coords, height_bounds, terrain_grid

SPAWN_HALF_WIDTH = 0.5  # m: a robot starts above the highest point of the 1 m square around the centre


class TerrainGrid:
    def __init__(self, cfg: TerrainConfig):
        self.cfg = cfg
        self.heights = terrain_grid(cfg)  # [levels, types, n, n]
        self.coords = coords(cfg)
        self.bounds = height_bounds(cfg)
        near = np.abs(self.coords) <= SPAWN_HALF_WIDTH + 1e-9
        self.spawn_heights = self.heights[:, :, near][:, :, :, near].max(axis=(2, 3))  # [levels, types]

    @property
    def num_levels(self) -> int:
        return self.heights.shape[0]

    @property
    def num_types(self) -> int:
        return self.heights.shape[1]

    @property
    def half_extent(self) -> float:
        """Half the side of the heightfield (m): it spans [-half_extent, half_extent] in x and y."""
        return float(self.coords[-1])

    def height_at(self, levels: np.ndarray, types: np.ndarray, xy: np.ndarray) -> np.ndarray:
        """[k] terrain heights under the points xy [k, 2] of sub-terrains (levels[k], types[k]): MuJoCo's surface,
        which splits each square of samples into two triangles along its (x0, y0)-(x1, y1) diagonal; beyond the
        heightfield, its edge's height."""
        res, n = self.cfg.resolution, len(self.coords)
        u = np.clip((np.asarray(xy) + self.half_extent) / res, 0.0, n - 1.0)
        i0 = np.minimum(np.floor(u).astype(np.int64), n - 2)
        fx, fy = (u - i0).T
        c, r = i0.T
        h = self.heights
        levels, types = np.asarray(levels), np.asarray(types)
        h00, h11 = h[levels, types, r, c], h[levels, types, r + 1, c + 1]
        below = fx >= fy  # the triangle (x0, y0), (x1, y0), (x1, y1)
        h10, h01 = h[levels, types, r, c + 1], h[levels, types, r + 1, c]
        return np.where(below, h00 + fx * (h10 - h00) + fy * (h11 - h10), h00 + fy * (h01 - h00) + fx * (h11 - h01))

    def off_terrain(self, xy: np.ndarray) -> np.ndarray:
        """[k] bool: the point is halfway into the flat border or beyond (the episode ends as a time-out, before
        the robot could walk off the heightfield)."""
        return np.max(np.abs(xy), axis=1) > self.cfg.size / 2 + self.cfg.border / 2
