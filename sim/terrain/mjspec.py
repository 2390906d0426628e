"""The terrain in a MuJoCo model: `add_terrain` edits the robot's MjSpec before it compiles (the world's floor
planes give way to one heightfield geom), `set_heights` writes a sub-terrain into a compiled model.

MuJoCo's heightfield surface is geom z + elevation * size[2] with elevations in [0, 1]; the geom sits at the
grid's lowest height and size[2] spans its bounds, so every sub-terrain of the grid fits the one compiled size.
"""

from __future__ import annotations

import mujoco
import numpy as np

from sim.terrain.grid import TerrainGrid

NAME = "terrain"  # the hfield asset's and the geom's name
_MIN_SPAN = 1e-3  # m: an all-flat grid still needs a positive elevation range
_BASE_THICKNESS = 0.5  # m of solid below the lowest point (MuJoCo needs some; collisions never reach it)
_CONTACT_ATTRS = ("contype", "conaffinity", "condim", "friction", "priority", "solref", "solimp", "margin", "rgba")


def add_terrain(mj: mujoco.MjSpec, grid: TerrainGrid) -> None:
    """Replace the world body's planes (the floor, including one a loader added) with the grid's heightfield;
    it takes the first plane's contact settings, so the robot touches it as it touched the floor."""
    world = mj.worldbody
    planes = [g for g in world.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE]
    settings = {a: np.copy(getattr(planes[0], a)) for a in _CONTACT_ATTRS} if planes else {}
    for plane in planes:
        mj.delete(plane)
    lo, hi = grid.bounds
    n, half = len(grid.coords), grid.half_extent
    span = max(hi - lo, _MIN_SPAN)
    mj.add_hfield(name=NAME, size=[half, half, span, _BASE_THICKNESS], nrow=n, ncol=n, userdata=[0.0] * (n * n))
    geom = world.add_geom(name=NAME, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=NAME, pos=[0.0, 0.0, lo])
    for attr, value in settings.items():
        setattr(geom, attr, value)


def set_heights(model: mujoco.MjModel, grid: TerrainGrid, heights: np.ndarray) -> None:
    """Make `model`'s terrain the sub-terrain `heights` [n, n] (one of grid.heights)."""
    hid = model.hfield(NAME).id
    start, size = model.hfield_adr[hid], model.hfield_nrow[hid] * model.hfield_ncol[hid]
    lo = model.geom_pos[model.geom(NAME).id, 2]
    model.hfield_data[start : start + size] = (np.ravel(heights) - lo) / model.hfield_size[hid, 2]
