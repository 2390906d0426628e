"""What a term function reads: the backend's state arrays, the step's commands and actions, and the feet."""

from __future__ import annotations

from functools import cached_property

import numpy as np

from edge.observation import projected_gravity, rotate_world_to_base
from sim.robot import RobotSpec
from sim.tasks.terms.feet import FootTracker


def base_velocities(state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Base linear and angular velocity, both in the base frame (the backends give the angular one so already)."""
    return rotate_world_to_base(state["base_quat"], state["base_lin_vel"]), state["base_ang_vel"]


class TermContext:
    """One batch of envs at one moment: arrays [N, ...] in physical units. Base-frame quantities are computed on
    first use and shared by every term that reads them. What a phase does not have is None: terminations see
    the state only, observations also the commands and actions, rewards everything."""

    def __init__(
        self,
        robot: RobotSpec,
        state: dict[str, np.ndarray],
        *,
        commands: np.ndarray | None = None,
        actions: np.ndarray | None = None,
        last_actions: np.ndarray | None = None,
        torques: np.ndarray | None = None,
        joint_vel_before: np.ndarray | None = None,
        terminated: np.ndarray | None = None,
        feet: FootTracker | None = None,
        terrain_height: np.ndarray | None = None,
    ):
        self.robot = robot
        self.state = state  # base_pos, base_quat (w, x, y, z), base_lin_vel (world), base_ang_vel, joint_pos, joint_vel
        self.commands = commands  # (vx, vy, wz) in the base frame
        self.actions = actions  # the latest policy output applied (before scaling)
        self.last_actions = last_actions  # the one before it
        self.torques = torques  # applied joint torques at the end of the step
        self.joint_vel_before = joint_vel_before  # joint velocities at the start of the step
        self.terminated = terminated
        self.feet = feet  # contacts, air time, landings, foot positions and velocities (robots with feet)
        self.terrain_height = terrain_height  # [N] the ground under the base; None: the flat floor at z = 0

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
