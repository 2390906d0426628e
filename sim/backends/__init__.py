"""Physics backends behind one interface, so a task is written once (see base.TwinBackend)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.backends.base import TwinBackend
from sim.errors import SimError

if TYPE_CHECKING:  # annotations only: importing BACKENDS (CLI choices) must not load MuJoCo
    from sim.robot import RobotSpec
    from sim.terrain import TerrainGrid

BACKENDS = ("mujoco", "newton", "isaacsim")
FOOT_BACKENDS = ("mujoco",)  # the backends whose feet() gives foot contacts (TwinBackend.feet)

__all__ = ["BACKENDS", "FOOT_BACKENDS", "TwinBackend", "make_backend"]


def make_backend(
    name: str, spec: RobotSpec, num_envs: int, nthread: int | None = None, terrain: TerrainGrid | None = None
) -> TwinBackend:
    """terrain: a heightfield grid (MuJoCo only); None: the robot's own floor."""
    if terrain is not None and name != "mujoco":
        raise SimError(f"heightfield terrain needs the mujoco backend; {name} has the robot's flat floor only")
    if name == "mujoco":
        from sim.backends.mujoco_backend import MujocoBackend

        return MujocoBackend(spec, num_envs, nthread=nthread, terrain=terrain)
    if name == "newton":
        from sim.backends.newton_backend import NewtonBackend

        return NewtonBackend(spec, num_envs, nthread=nthread)
    if name == "isaacsim":
        from sim.backends.isaacsim_backend import IsaacSimBackend

        return IsaacSimBackend(spec, num_envs, nthread=nthread)
    raise SimError(f"unknown twin backend {name!r}; available: {', '.join(BACKENDS)}")
