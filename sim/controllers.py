"""Hand-written controllers: the physical sanity checks of the twin, the demo's driver, and the executor of
command plans before a trained policy exists. They read the twin's true state (no estimation)."""

from __future__ import annotations

import numpy as np

from sim.twin import BatchedTwin


class DiffDriveController:
    """Wheel-speed feedforward from the unicycle model plus a proportional correction on the measured base
    velocity, for a two-wheeled robot (joints ordered left, right)."""

    def __init__(
        self, twin: BatchedTwin, wheel_radius: float = 0.1, track: float = 0.4, k_v: float = 1.0, k_w: float = 1.0
    ):
        if twin.spec.num_actions != 2 or twin.spec.control_mode != "velocity":
            raise ValueError("DiffDriveController needs a velocity-controlled robot with two wheels (left, right)")
        self.twin, self.radius, self.track, self.k_v, self.k_w = twin, wheel_radius, track, k_v, k_w
        self._integral = np.zeros((twin.num_envs, 2))

    def __call__(self) -> np.ndarray:
        twin = self.twin
        lin, ang = twin.task.base_velocities(twin.backend.state())
        cmd = twin.commands
        err = np.stack([cmd[:, 0] - lin[:, 0], cmd[:, 2] - ang[:, 2]], axis=1)
        self._integral = np.clip(self._integral + err * twin.spec.control_dt, -0.5, 0.5)
        v = cmd[:, 0] + self.k_v * err[:, 0] + 2.0 * self.k_v * self._integral[:, 0]
        w = cmd[:, 2] + self.k_w * err[:, 1] + 2.0 * self.k_w * self._integral[:, 1]
        wheel = np.stack([v - w * self.track / 2, v + w * self.track / 2], axis=1) / self.radius
        return wheel / twin.spec.action_scale


class StandController:
    """Hold the default pose (the zero action of a position-controlled robot)."""

    def __init__(self, twin: BatchedTwin):
        self.twin = twin

    def __call__(self) -> np.ndarray:
        return np.tile(self.twin.safe_action(), (self.twin.num_envs, 1))


def controller_for(twin: BatchedTwin):
    """The hand-written controller that suits the robot's actuation."""
    return (
        DiffDriveController(twin)
        if twin.spec.control_mode == "velocity" and twin.spec.num_actions == 2
        else StandController(twin)
    )
