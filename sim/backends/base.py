"""The contract between a physics engine and the task code (rewards, observations, resets)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np

from sim.errors import SimError
from sim.randomization import NOMINAL, PhysicsParams

if TYPE_CHECKING:  # annotations only: importing sim.backends (its BACKENDS) must not load MuJoCo
    from sim.robot import RobotSpec

# twin parameters that the MuJoCo backend applies as model fields (frictionloss, the base's inertial frame) and the
# Newton and Isaac Sim backends do not
MODEL_ONLY_PARAMS = ("joint_friction", "joint_armature", "payload_com_x", "payload_com_y", "payload_com_z")


class TwinBackend(ABC):
    """`num_envs` independent copies of one robot. State is exposed as batch arrays in a fixed convention:

    base position (world), base quaternion (w, x, y, z), base linear velocity (world frame), base angular
    velocity (base frame), joint positions and velocities in `spec.joints` order.
    """

    spec: RobotSpec
    num_envs: int

    @abstractmethod
    def step(self, targets: np.ndarray) -> None:
        """Advance every env by targets.shape[1] physics steps; targets[i, k] is env i's PD target at step k."""

    @abstractmethod
    def reset(self, env_ids: np.ndarray) -> None:
        """Return `env_ids` to the model's initial state (passive joints included)."""

    @abstractmethod
    def set_state(
        self, env_ids: np.ndarray, base_pos, base_quat, base_lin_vel, base_ang_vel, joint_pos, joint_vel
    ) -> None:
        """Overwrite the state of `env_ids` (a reset, or a push when only velocities change)."""

    @abstractmethod
    def set_params(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        """Apply per-env friction, payload and actuator parameters (latency is the twin's job)."""

    def refuse_params(self, params: PhysicsParams, names: tuple[str, ...]) -> None:
        """A SimError naming those of `names` that `params` sets away from nominal: a backend that cannot apply a
        parameter says so rather than simulating without it."""
        away = [n for n in names if np.any(getattr(params, n) != NOMINAL[n])]
        if away:
            raise SimError(f"the {type(self).__name__} cannot apply {', '.join(away)}; the mujoco backend can")

    def set_terrain(self, env_ids: np.ndarray, levels: np.ndarray, types: np.ndarray) -> None:
        """Put `env_ids` on the sub-terrains (levels[k], types[k]) of the TerrainGrid they were built with."""
        raise NotImplementedError(f"{type(self).__name__} has no heightfield terrain")

    @abstractmethod
    def state(self) -> dict[str, np.ndarray]:
        """base_pos, base_quat, base_lin_vel, base_ang_vel, joint_pos, joint_vel; leading axis num_envs.
        Fresh arrays each call: stepping never changes what an earlier call returned."""

    def feet(self) -> dict[str, np.ndarray]:
        """Per foot of `spec.feet`, in that order: contact_force [N, F] (N, the net contact force of the foot geom
        against the world's geoms: floor, terrain), pos [N, F, 3] and vel [N, F, 3] (the foot geom's centre, world
        frame). Fresh arrays each call. Backends without foot sensing raise a SimError (see FOOT_BACKENDS)."""
        raise SimError(
            f"the {type(self).__name__} gives no foot contacts; foot terms and gait KPIs need the mujoco backend"
        )

    def raw_state(self) -> np.ndarray:
        """The engine's complete state of every env (a copy), for exact snapshots; see load_raw_state."""
        raise NotImplementedError(f"{type(self).__name__} cannot snapshot its state")

    def load_raw_state(self, state: np.ndarray) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot restore a state snapshot")

    def close(self) -> None:  # noqa: B027 - optional hook
        pass
