"""What a term function reads: the backend's state arrays, the step's commands and actions, and the feet."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from functools import cached_property
from typing import TypeVar

import numpy as np

from edge.observation import projected_gravity, rotate_world_to_base
from sim.errors import SimError
from sim.robot import RobotSpec
from sim.tasks.terms.feet import FootTracker

T = TypeVar("T")


def given(value: T | None, field: str) -> T:
    """A field of the TermContext that a term needs (`field` names it): the phases that give it are on the class."""
    if value is None:
        raise SimError(f"a term reads ctx.{field}, which this phase's TermContext does not give")
    return value


def base_velocities(state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Base linear and angular velocity, both in the base frame (the backends give the angular one so already)."""
    return rotate_world_to_base(state["base_quat"], state["base_lin_vel"]), state["base_ang_vel"]


@dataclass(eq=False)  # compared by identity: its fields are arrays
class TermContext:
    """One batch of envs at one moment: arrays [N, ...] in physical units. Base-frame quantities are computed on
    first use and shared by every term that reads them. What a phase does not have is None: terminations see
    the state only, observations also the commands, actions and episode time, rewards everything."""

    robot: RobotSpec
    state: dict[str, np.ndarray]  # base_pos, base_quat (w, x, y, z), base_lin_vel (world), base_ang_vel, joint_*
    _: KW_ONLY
    commands: np.ndarray | None = None  # (vx, vy, wz) in the base frame
    actions: np.ndarray | None = None  # the latest policy output applied (before scaling)
    last_actions: np.ndarray | None = None  # the one before it
    torques: np.ndarray | None = None  # applied joint torques at the end of the step
    joint_vel_before: np.ndarray | None = None  # joint velocities at the start of the step
    terminated: np.ndarray | None = None
    feet: FootTracker | None = None  # contacts, air time, landings, foot positions and velocities (robots with feet)
    terrain_height: np.ndarray | None = None  # [N] the ground under the base; None: the flat floor at z = 0
    episode_time: np.ndarray | None = None  # [N] s since the episode began, in control steps (the gait clock)

    @property
    def base_height(self) -> np.ndarray:
        """[N] height of the base above the ground under it (m)."""
        z = self.state["base_pos"][:, 2]
        return z if self.terrain_height is None else z - self.terrain_height

    @property
    def dt(self) -> float:
        """The policy period (s)."""
        return self.robot.control_dt

    @cached_property
    def _base_velocities(self) -> tuple[np.ndarray, np.ndarray]:
        return base_velocities(self.state)

    @property
    def base_lin_vel(self) -> np.ndarray:
        return self._base_velocities[0]

    @property
    def base_ang_vel(self) -> np.ndarray:
        return self._base_velocities[1]

    @cached_property
    def projected_gravity(self) -> np.ndarray:
        """Unit gravity in the base frame: (0, 0, -1) when level."""
        return projected_gravity(self.state["base_quat"])
