"""Base-velocity tracking at run time: a VelocityTaskConfig applied to one robot. Observations, reward terms,
terminations, commands and the reset distribution, written once over the backend's state arrays so every
backend and robot shares them."""

from __future__ import annotations

import numpy as np

from edge.observation import ObservationLayout
from sim.robot import RobotSpec
from sim.tasks.config import VelocityTaskConfig, check_task
from sim.tasks.loader import load_task
from sim.tasks.terms import TermContext, VelocityCommandTerm, base_velocities


class VelocityTrackingTask:
    def __init__(self, spec: RobotSpec, cfg: VelocityTaskConfig | None = None):
        """cfg: the task config; None: the robot's own (sim.tasks.load_task)."""
        self.spec = spec
        self.cfg = load_task(spec) if cfg is None else check_task(cfg, spec, "task config")
        self.weights = {name: term.weight for name, term in self.cfg.rewards.items()}
        self.layout = ObservationLayout(self.cfg.obs_terms(spec.num_actions))
        self.obs_dim = self.layout.dim
        c = self.cfg.commands
        duty = np.array(c.duty, dtype=float).reshape(-1, 4)
        self.commands = VelocityCommandTerm(
            c.ranges or spec.command_limits, c.stand_still_share, c.resample_s, spec.control_dt, duty, c.duty_share
        )

    @staticmethod
    def base_velocities(state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Base linear and angular velocity, both in the base frame."""
        return base_velocities(state)

    def observe(
        self,
        state: dict[str, np.ndarray],
        commands: np.ndarray,
        last_action: np.ndarray,
        noise_level: float,
        rng: np.random.Generator,
        episode_time: np.ndarray | None = None,
    ) -> np.ndarray:
        """The policy's observation batch; episode_time: [N] s since each episode began (the gait clock's time,
        needed by a task that observes gait_phase)."""
        ctx = TermContext(self.spec, state, commands=commands, actions=last_action, episode_time=episode_time)
        values = {name: term.func(ctx, **term.params) for name, term in self.cfg.observations.items()}
        noise = rng.uniform(-noise_level, noise_level, (len(commands), self.obs_dim)) if noise_level > 0 else None
        return self.layout.assemble(values, noise)

    def reward_terms(self, ctx: TermContext) -> dict[str, np.ndarray]:
        """Each term with a non-zero weight: func(ctx, **params) * weight * control_dt. `ctx`: the step, every
        field given; its feet (robots with feet) updated for this step."""
        dt = self.spec.control_dt
        return {
            name: term.func(ctx, **term.params) * (term.weight * dt)
            for name, term in self.cfg.rewards.items()
            if term.weight != 0.0
        }

    def tracking_errors(self, state: dict[str, np.ndarray], commands: np.ndarray) -> dict[str, np.ndarray]:
        lin_vel, ang_vel = base_velocities(state)
        return {
            "vx": np.abs(commands[:, 0] - lin_vel[:, 0]),
            "vy": np.abs(commands[:, 1] - lin_vel[:, 1]),
            "wz": np.abs(commands[:, 2] - ang_vel[:, 2]),
        }

    def terminated(self, state: dict[str, np.ndarray], terrain_height: np.ndarray | None = None) -> np.ndarray:
        ctx = TermContext(self.spec, state, terrain_height=terrain_height)
        done = np.zeros(len(state["base_pos"]), dtype=bool)
        for term in self.cfg.terminations.values():
            done |= term.func(ctx, **term.params)
        return done

    def reset_state(self, k: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        """k initial states (base_pos, base_quat, base_lin_vel, base_ang_vel, joint_pos, joint_vel): level at the
        robot's base height with a random heading, joints near the default pose, small base velocities."""
        spec, r = self.spec, self.cfg.reset
        yaw = rng.uniform(-np.pi, np.pi, k)
        quat = np.stack([np.cos(yaw / 2), np.zeros(k), np.zeros(k), np.sin(yaw / 2)], axis=1)
        pos = np.zeros((k, 3))
        pos[:, 2] = spec.base_height
        joint_pos = np.tile(np.asarray(spec.default_pose), (k, 1))
        if spec.control_mode == "position":  # a wheel's angle is no state worth spreading
            joint_pos += rng.uniform(-r.joint_pos_noise, r.joint_pos_noise, joint_pos.shape)
        v = r.base_velocity_noise
        lin, ang = rng.uniform(-v, v, (k, 3)), rng.uniform(-v, v, (k, 3))
        return pos, quat, lin, ang, joint_pos, np.zeros_like(joint_pos)
