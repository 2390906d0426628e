"""Reward terms: func(ctx, **params) -> [N] raw value; the task multiplies it by weight * control_dt
(legged_gym's convention). Add a term here and to REWARDS, then name it in a task YAML."""

from __future__ import annotations

import numpy as np

from sim.tasks.terms.context import TermContext


def tracking_lin_vel(ctx: TermContext, sigma: float) -> np.ndarray:
    """exp(-|v_xy* - v_xy|^2 / sigma): 1 on the commanded planar velocity."""
    err = np.sum((ctx.commands[:, :2] - ctx.base_lin_vel[:, :2]) ** 2, axis=1)
    return np.exp(-err / sigma)


def tracking_ang_vel(ctx: TermContext, sigma: float) -> np.ndarray:
    """exp(-(wz* - wz)^2 / sigma): 1 on the commanded yaw rate."""
    err = (ctx.commands[:, 2] - ctx.base_ang_vel[:, 2]) ** 2
    return np.exp(-err / sigma)


def lin_vel_z(ctx: TermContext) -> np.ndarray:
    """Vertical base velocity squared (bouncing)."""
    return ctx.base_lin_vel[:, 2] ** 2


def ang_vel_xy(ctx: TermContext) -> np.ndarray:
    """Roll and pitch rates squared (wobbling)."""
    return np.sum(ctx.base_ang_vel[:, :2] ** 2, axis=1)


def orientation(ctx: TermContext) -> np.ndarray:
    """|gravity_xy|^2 in the base frame: tilt of the base."""
    return np.sum(ctx.projected_gravity[:, :2] ** 2, axis=1)


def torques(ctx: TermContext) -> np.ndarray:
    """Sum of squared applied joint torques (energy)."""
    return np.sum(ctx.torques**2, axis=1)


def joint_acc(ctx: TermContext) -> np.ndarray:
    """Sum of squared joint accelerations over the policy period."""
    return np.sum(((ctx.state["joint_vel"] - ctx.joint_vel_before) / ctx.dt) ** 2, axis=1)


def action_rate(ctx: TermContext) -> np.ndarray:
    """Sum of squared action changes between two policy steps (smoothness)."""
    return np.sum((ctx.actions - ctx.last_actions) ** 2, axis=1)


def termination(ctx: TermContext) -> np.ndarray:
    """1 on the step an env terminates (falls), else 0."""
    return ctx.terminated.astype(np.float64)


REWARDS = {
    f.__name__: f
    for f in (
        tracking_lin_vel,
        tracking_ang_vel,
        lin_vel_z,
        ang_vel_xy,
        orientation,
        torques,
        joint_acc,
        action_rate,
        termination,
    )
}
