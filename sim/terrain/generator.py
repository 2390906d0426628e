"""Heights of the sub-terrains, as legged_gym's terrain_utils builds them: square patches of `size` with a flat
`border`, sampled every `resolution` metres, the robot's start at the centre.

    flat    all zero
    rough   uniform noise in +-rough_amplitude * difficulty (seeded), drawn every rough_scale metres and
            interpolated linearly in between (legged_gym's downsampled_scale)
    slopes  a pyramid rising at slope_deg * difficulty from the edge to a flat platform at the centre
    stairs  a pyramid of steps of width step_width rising by step_height (interpolated by difficulty) each

heights[r, c] is the height at x = coords[c], y = coords[r] (MuJoCo's hfield layout: rows run along y).
"""

from __future__ import annotations

import math

import numpy as np

from sim.terrain.config import TerrainConfig


def coords(cfg: TerrainConfig) -> np.ndarray:
    """Sample positions along x (and y), centred on 0, covering the sub-terrain and its border."""
    n = int(round((cfg.size + 2 * cfg.border) / cfg.resolution)) + 1
    half = (n - 1) * cfg.resolution / 2
    return np.linspace(-half, half, n)


def sub_terrain(cfg: TerrainConfig, kind: str, difficulty: float, rng: np.random.Generator) -> np.ndarray:
    """[n, n] heights (m) of one sub-terrain of type `kind` at `difficulty` in [0, 1]."""
    x = coords(cfg)
    # distance inward from the sub-terrain's edge (negative on the border), capped at the platform's edge
    inward = cfg.size / 2 - np.maximum(np.abs(x)[None, :], np.abs(x)[:, None])
    ramp = np.clip(inward, 0.0, (cfg.size - cfg.platform) / 2)
    if kind == "flat":
        return np.zeros_like(ramp)
    if kind == "rough":
        amplitude = cfg.rough_amplitude * difficulty
        coarse_x = np.linspace(-cfg.size / 2, cfg.size / 2, int(round(cfg.size / cfg.rough_scale)) + 1)
        # bilinear interpolation as two 1-D ones, W @ noise @ W.T: interpolated values stay within the bounds
        w = np.stack([np.interp(x, coarse_x, e) for e in np.eye(len(coarse_x))], axis=1)
        noise = w @ rng.uniform(-amplitude, amplitude, (len(coarse_x), len(coarse_x))) @ w.T
        return np.where(inward >= 0, noise, 0.0)
    if kind == "slopes":
        return math.tan(math.radians(cfg.slope_deg * difficulty)) * ramp
    if kind == "stairs":
        # a small tolerance keeps a sample that lies on a step edge on the step it starts
        return _step_height(cfg, difficulty) * np.floor(ramp / cfg.step_width + 1e-9)
    raise ValueError(f"unknown terrain type {kind!r}")


def _step_height(cfg: TerrainConfig, difficulty: float) -> float:
    lo, hi = cfg.step_height
    return lo + (hi - lo) * difficulty


def height_bounds(cfg: TerrainConfig) -> tuple[float, float]:
    """The lowest and the highest height any sub-terrain of `cfg` can have."""
    top = cfg.difficulty[1]
    lo = hi = 0.0
    if "rough" in cfg.types:
        lo, hi = -cfg.rough_amplitude * top, cfg.rough_amplitude * top
    if "slopes" in cfg.types:
        hi = max(hi, math.tan(math.radians(cfg.slope_deg * top)) * (cfg.size - cfg.platform) / 2)
    if "stairs" in cfg.types:
        steps = math.floor((cfg.size - cfg.platform) / 2 / cfg.step_width + 1e-9)
        hi = max(hi, steps * _step_height(cfg, top))
    return lo, hi


def terrain_grid(cfg: TerrainConfig) -> np.ndarray:
    """[levels, types, n, n] heights: row i at cfg.level_difficulty(i), column j of type cfg.types[j]."""
    rng = np.random.default_rng(cfg.seed)
    return np.stack(
        [
            np.stack([sub_terrain(cfg, kind, cfg.level_difficulty(i), rng) for kind in cfg.types])
            for i in range(cfg.levels)
        ]
    ).astype(np.float32)
