"""The ground under a robot whose MJCF has none (a Menagerie robot file without its scene.xml falls forever).

A model has ground when a geom of its world body can collide: a plane, a heightfield, a box. A terrain
replaces the floor, so whoever builds one skips `add_floor` and adds theirs.
"""

from __future__ import annotations

import mujoco

FLOOR_NAME = "twin_floor"


def has_floor(mj: mujoco.MjSpec) -> bool:
    """Whether the world body holds a geom that can collide."""
    return any(g.contype or g.conaffinity for g in mj.worldbody.geoms)


def add_floor(mj: mujoco.MjSpec) -> None:
    """A plane at z = 0 that collides with every robot geom that collides with anything: its contype meets the
    robot geoms' conaffinity bits and its conaffinity their contype bits (a geom with both 0 stays visual)."""
    robot = [g for g in mj.geoms if g.parent.name != mj.worldbody.name]
    contype = conaffinity = 0
    for g in robot:
        contype |= g.conaffinity
        conaffinity |= g.contype
    mj.worldbody.add_geom(
        name=FLOOR_NAME,
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0, 0, 0.05],
        contype=contype or 1,
        conaffinity=conaffinity or 1,
    )
