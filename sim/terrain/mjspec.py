"""The terrain in a MuJoCo model: `add_terrain` edits the robot's MjSpec before it compiles (the world's floor
planes give way to one heightfield geom, and each sub-terrain of the grid becomes an hfield of its own),
`set_heights` writes the grid's heights into the compiled model, and `cell_hfields` names the hfield of each
sub-terrain: the geom stands on the one its data id (geom_dataid) points at.

MuJoCo's heightfield surface is geom z + elevation * size[2] with elevations in [0, 1]; the geom sits at the
grid's lowest height and size[2] spans its bounds, so every sub-terrain of the grid fits the one compiled size.
"""

from __future__ import annotations

import mujoco
import numpy as np

from sim.terrain.grid import TerrainGrid

NAME = "terrain"  # the geom's name, and the prefix of the hfields' names
_MIN_SPAN = 1e-3  # m: an all-flat grid still needs a positive elevation range
_BASE_THICKNESS = 0.5  # m of solid below the lowest point (MuJoCo needs some; collisions never reach it)
_CONTACT_ATTRS = ("contype", "conaffinity", "condim", "friction", "priority", "solref", "solimp", "margin", "rgba")


def _hfield_name(level: int, kind: int) -> str:
    return f"{NAME}_{level}_{kind}"


def add_terrain(mj: mujoco.MjSpec, grid: TerrainGrid) -> None:
    """Replace the world body's planes (the floor, including one a loader added) with the grid's heightfield;
    it takes the first plane's contact settings, so the robot touches it as it touched the floor. The geom starts
    on sub-terrain (0, 0)."""
    world = mj.worldbody
    planes = [g for g in world.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE]
    settings = {a: np.copy(getattr(planes[0], a)) for a in _CONTACT_ATTRS} if planes else {}
    for plane in planes:
        mj.delete(plane)
    lo, hi = grid.bounds
    n, half = len(grid.coords), grid.half_extent
    size = [half, half, max(hi - lo, _MIN_SPAN), _BASE_THICKNESS]
    # compiling normalises userdata to [0, 1]: set_heights writes the heights afterwards
    for level in range(grid.num_levels):
        for kind in range(grid.num_types):
            mj.add_hfield(name=_hfield_name(level, kind), size=size, nrow=n, ncol=n, userdata=[0.0] * (n * n))
    geom = world.add_geom(name=NAME, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=_hfield_name(0, 0), pos=[0, 0, lo])
    for attr, value in settings.items():
        setattr(geom, attr, value)


def cell_hfields(model: mujoco.MjModel, grid: TerrainGrid) -> np.ndarray:
    """[levels, types] the hfield id of each sub-terrain of `model` (compiled from an MjSpec add_terrain edited)."""
    return np.array(
        [
            [model.hfield(_hfield_name(level, kind)).id for kind in range(grid.num_types)]
            for level in range(grid.num_levels)
        ]
    )


def set_heights(model: mujoco.MjModel, grid: TerrainGrid) -> None:
    """Write each sub-terrain of `grid` into its hfield of `model`."""
    lo = model.geom_pos[model.geom(NAME).id, 2]
    for (level, kind), hid in np.ndenumerate(cell_hfields(model, grid)):
        start, size = model.hfield_adr[hid], model.hfield_nrow[hid] * model.hfield_ncol[hid]
        model.hfield_data[start : start + size] = (np.ravel(grid.heights[level, kind]) - lo) / model.hfield_size[hid, 2]
