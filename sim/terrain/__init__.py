"""Heightfield terrain: rough, slopes and stairs generated from a TerrainConfig, tiled into a grid of difficulty
levels (rows) by type (columns), put into the MuJoCo model as an hfield, and the legged_gym game-inspired
curriculum that moves each env between levels.

    from sim.terrain import TerrainConfig, TerrainGrid
    grid = TerrainGrid(TerrainConfig(types=("rough", "slopes", "stairs"), levels=10))
    grid.heights.shape        # (10, 3, 121, 121): level, type, y, x
"""

from sim.terrain.config import TERRAIN_TYPES, TerrainConfig
from sim.terrain.curriculum import TerrainCurriculum
from sim.terrain.generator import height_bounds, sub_terrain, terrain_grid
from sim.terrain.grid import TerrainGrid

__all__ = [
    "TERRAIN_TYPES",
    "TerrainConfig",
    "TerrainCurriculum",
    "TerrainGrid",
    "height_bounds",
    "sub_terrain",
    "terrain_grid",
]
