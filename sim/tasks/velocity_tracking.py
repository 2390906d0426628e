"""Base-velocity tracking (legged_gym style): observations, reward terms and terminations, written once over
the backend's state arrays so every backend and robot shares them."""

from __future__ import annotations

import numpy as np

from edge.observation import ObservationLayout, obs_term, projected_gravity, rotate_world_to_base
from sim.robot import RobotSpec

# Per-term weights; each term is multiplied by weight * control_dt, as in legged_gym.
REWARD_WEIGHTS = {
    "tracking_lin_vel": 1.0,  # exp(-|v_xy* - v_xy|^2 / sigma)
    "tracking_ang_vel": 0.5,  # exp(-(wz* - wz)^2 / sigma)
    "lin_vel_z": -2.0,
    "ang_vel_xy": -0.05,
    "orientation": -1.0,  # |gravity_xy|^2: tilt of the base
    "torques": -1e-5,
    "joint_acc": -2.5e-7,
    "action_rate": -0.01,
    "termination": -5.0,  # per control step of the terminal step, before the dt factor: -5*dt per fall
}
TRACKING_SIGMA = 0.25


class VelocityTrackingTask:
    def __init__(self, spec: RobotSpec):
        self.spec = spec
        self.weights = {**REWARD_WEIGHTS, **spec.rewards}  # names checked in load_robot
        self.layout = ObservationLayout([obs_term(name, spec.num_actions) for name in spec.observations])
        self.obs_dim = self.layout.dim
        self.default_pose = np.asarray(spec.default_pose)
        self.torque_limit = np.asarray(spec.torque_limit)

    def base_velocities(self, state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Base linear and angular velocity, both in the base frame."""
        return rotate_world_to_base(state["base_quat"], state["base_lin_vel"]), state["base_ang_vel"]

    def observe(
        self,
        state: dict[str, np.ndarray],
        commands: np.ndarray,
        last_action: np.ndarray,
        noise_level: float,
        rng: np.random.Generator,
    ) -> np.ndarray:
        lin_vel, ang_vel = self.base_velocities(state)
        values = {
            "base_lin_vel": lin_vel,
            "base_ang_vel": ang_vel,
            "projected_gravity": projected_gravity(state["base_quat"]),
            "velocity_command": commands,
            "joint_pos": state["joint_pos"] - self.default_pose,
            "joint_vel": state["joint_vel"],
            "last_action": last_action,
        }
        noise = rng.uniform(-noise_level, noise_level, (len(commands), self.obs_dim)) if noise_level > 0 else None
        return self.layout.assemble(values, noise)

    def torques(
        self, state: dict[str, np.ndarray], targets: np.ndarray, kp: np.ndarray, kd: np.ndarray, strength: np.ndarray
    ) -> np.ndarray:
        """The PD law the actuators apply (see sim.robot.set_pd_gains), evaluated at the end of the step."""
        q, qd = state["joint_pos"], state["joint_vel"]
        mode = self.spec.control_mode
        if mode == "position":
            tau = kp[:, None] * (targets - q) - kd[:, None] * qd
        elif mode == "velocity":
            tau = kd[:, None] * (targets - qd)
        else:
            tau = targets
        limit = self.torque_limit * strength[:, None]
        return np.clip(tau * strength[:, None], -limit, limit)

    def reward_terms(
        self,
        state: dict[str, np.ndarray],
        commands: np.ndarray,
        actions: np.ndarray,
        last_actions: np.ndarray,
        torques: np.ndarray,
        joint_vel_before: np.ndarray,
        terminated: np.ndarray,
    ) -> dict[str, np.ndarray]:
        lin_vel, ang_vel = self.base_velocities(state)
        gravity = projected_gravity(state["base_quat"])
        dt = self.spec.control_dt
        lin_err = np.sum((commands[:, :2] - lin_vel[:, :2]) ** 2, axis=1)
        ang_err = (commands[:, 2] - ang_vel[:, 2]) ** 2
        raw = {
            "tracking_lin_vel": np.exp(-lin_err / TRACKING_SIGMA),
            "tracking_ang_vel": np.exp(-ang_err / TRACKING_SIGMA),
            "lin_vel_z": lin_vel[:, 2] ** 2,
            "ang_vel_xy": np.sum(ang_vel[:, :2] ** 2, axis=1),
            "orientation": np.sum(gravity[:, :2] ** 2, axis=1),
            "torques": np.sum(torques**2, axis=1),
            "joint_acc": np.sum(((state["joint_vel"] - joint_vel_before) / dt) ** 2, axis=1),
            "action_rate": np.sum((actions - last_actions) ** 2, axis=1),
            "termination": terminated.astype(np.float64),
        }
        return {k: v * (self.weights[k] * dt) for k, v in raw.items() if self.weights[k] != 0.0}

    def tracking_errors(self, state: dict[str, np.ndarray], commands: np.ndarray) -> dict[str, np.ndarray]:
        lin_vel, ang_vel = self.base_velocities(state)
        return {
            "vx": np.abs(commands[:, 0] - lin_vel[:, 0]),
            "vy": np.abs(commands[:, 1] - lin_vel[:, 1]),
            "wz": np.abs(commands[:, 2] - ang_vel[:, 2]),
        }

    def terminated(self, state: dict[str, np.ndarray]) -> np.ndarray:
        term = self.spec.termination
        gravity_z = projected_gravity(state["base_quat"])[:, 2]
        fell = state["base_pos"][:, 2] < term.min_base_height
        tilted = gravity_z > -np.cos(term.max_tilt_rad)
        return fell | tilted
