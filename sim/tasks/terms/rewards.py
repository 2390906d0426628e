"""Reward terms: func(ctx, **params) -> [N] raw value; the task multiplies it by weight * control_dt
(legged_gym's convention). Add a term here and to REWARDS, then name it in a task YAML. The terms of FOOT_TERMS
read ctx.feet (sim.tasks.terms.feet): they need a robot with feet and a backend that senses them.

The gait terms follow MuJoCo Playground's Go1 joystick task (go1/joystick.py) and mjlab's velocity task; the gait
clock's (gait_phase_contact, beside the gait_phase observation) mjbatch's Go1 joystick example."""

from __future__ import annotations

import numpy as np

from edge.observation import GAIT_HZ
from sim.gait import moving
from sim.symmetry import trot_offsets
from sim.tasks.terms.context import TermContext, given


def tracking_lin_vel(ctx: TermContext, sigma: float) -> np.ndarray:
    """exp(-|v_xy* - v_xy|^2 / sigma): 1 on the commanded planar velocity."""
    err = np.sum((given(ctx.commands, "commands")[:, :2] - ctx.base_lin_vel[:, :2]) ** 2, axis=1)
    return np.exp(-err / sigma)


def tracking_ang_vel(ctx: TermContext, sigma: float) -> np.ndarray:
    """exp(-(wz* - wz)^2 / sigma): 1 on the commanded yaw rate."""
    err = (given(ctx.commands, "commands")[:, 2] - ctx.base_ang_vel[:, 2]) ** 2
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
    return np.sum(given(ctx.torques, "torques") ** 2, axis=1)


def joint_acc(ctx: TermContext) -> np.ndarray:
    """Sum of squared joint accelerations over the policy period."""
    return np.sum(((ctx.state["joint_vel"] - given(ctx.joint_vel_before, "joint_vel_before")) / ctx.dt) ** 2, axis=1)


def action_rate(ctx: TermContext) -> np.ndarray:
    """Sum of squared action changes between two policy steps (smoothness)."""
    return np.sum((given(ctx.actions, "actions") - given(ctx.last_actions, "last_actions")) ** 2, axis=1)


def termination(ctx: TermContext) -> np.ndarray:
    """1 on the step an env terminates (falls), else 0."""
    return given(ctx.terminated, "terminated").astype(np.float64)


def _moving(ctx: TermContext) -> np.ndarray:
    """[N] 1.0 where the command asks to move, else 0.0."""
    return moving(given(ctx.commands, "commands")).astype(np.float64)


def feet_air_time(ctx: TermContext, threshold: float) -> np.ndarray:
    """Sum over the feet landing on this step of (air time - threshold) s, while the command asks to move
    (legged_gym; Playground's threshold is 0.1 s): long steps pay, short ones (shuffling) cost."""
    f = given(ctx.feet, "feet")
    return np.sum((f.last_air_time - threshold) * f.first_contact, axis=1) * _moving(ctx)


def feet_clearance(ctx: TermContext, target_height: float) -> np.ndarray:
    """Sum over feet of |foot z - target_height| * sqrt(foot xy speed) (Playground): a foot that moves is at the
    swing height. Heights are above the ground under each foot (the terrain's, or the flat floor's)."""
    f = given(ctx.feet, "feet")
    speed = np.linalg.norm(f.vel[..., :2], axis=-1)
    return np.sum(np.abs(f.height - target_height) * np.sqrt(speed), axis=1)


def feet_height(ctx: TermContext, target_height: float) -> np.ndarray:
    """Sum over the feet landing on this step of (swing peak / target_height - 1)^2, while the command asks to move
    (Playground's feet_height; mjlab's swing_height): each swing should peak at the target height."""
    f = given(ctx.feet, "feet")
    return np.sum((f.last_swing_peak / target_height - 1.0) ** 2 * f.first_contact, axis=1) * _moving(ctx)


def feet_slip(ctx: TermContext) -> np.ndarray:
    """Sum over the feet in contact of their xy speed (m/s), as mjlab's feet_slide (Playground squares it)."""
    f = given(ctx.feet, "feet")
    return np.sum(np.linalg.norm(f.vel[..., :2], axis=-1) * f.contact, axis=1)


def gait_phase_contact(
    ctx: TermContext,
    swing_height: float = 0.08,
    max_height: float = 0.1,
    height_sigma: float = 0.035,
    slip_sigma: float = 0.05,
) -> np.ndarray:
    """How well the feet follow a trot on the gait clock (the gait_phase observation's), in [0, 1], averaged over
    feet, while the command asks to move (0 at a stand-still command). Foot i's phase is sin(2 pi (GAIT_HZ t +
    offset_i)), the diagonal pairs half a cycle apart (sim.symmetry.trot_offsets). Its swing half (phase > 0) pays a
    foot off the ground at least swing_height x phase high and at most max_height: exp(-(shortfall^2 + excess^2)
    / height_sigma^2); its stance half a foot in contact that does not slide: exp(-|v_xy|^2 / slip_sigma), with
    slip_sigma in (m/s)^2. The halves blend over a ramp, clip(0.5 + phase, 0, 1), not a switch. Heights are the
    foot geom's centre above the ground under it (a Go1 foot rests at its 2.2 cm radius): the defaults are
    mjbatch's 6 cm swing and 7.5 cm ceiling plus that radius."""
    f = given(ctx.feet, "feet")
    go = _moving(ctx)
    cycles = GAIT_HZ * given(ctx.episode_time, "episode_time")[:, None] + trot_offsets(ctx.robot)
    phase = np.sin(2.0 * np.pi * cycles) * go[:, None]
    short = np.minimum(f.height - swing_height * phase, 0.0)
    excess = np.maximum(f.height - max_height, 0.0)
    swing = ~f.contact * np.exp(-(short**2 + excess**2) / height_sigma**2)
    stance = f.contact * np.exp(-np.sum(f.vel[..., :2] ** 2, axis=-1) / slip_sigma)
    blend = np.clip(0.5 + phase, 0.0, 1.0)
    return np.mean(blend * swing + (1.0 - blend) * stance, axis=1) * go


def pose(ctx: TermContext, joint_weights: float | tuple[float, ...] = 1.0) -> np.ndarray:
    """exp(-sum_j w_j (q_j - q0_j)^2): 1 at the default pose (Playground; its Go1 weights are 1, 1, 0.1 for each
    leg's hip, thigh, calf). joint_weights: one number, or one per joint in action order."""
    dev = ctx.state["joint_pos"] - np.asarray(ctx.robot.default_pose)
    return np.exp(-np.sum(np.asarray(joint_weights) * dev**2, axis=1))


def stand_still(ctx: TermContext) -> np.ndarray:
    """Sum of |q - q0| (rad) while the command is zero (legged_gym, Playground): asked to stand, the robot stands
    still in its default pose, where this is 0."""
    dev = ctx.state["joint_pos"] - np.asarray(ctx.robot.default_pose)
    return np.sum(np.abs(dev), axis=1) * (1.0 - _moving(ctx))


def energy(ctx: TermContext) -> np.ndarray:
    """Sum of |tau * qd| (W): the motors' mechanical power (Playground)."""
    return np.sum(np.abs(given(ctx.torques, "torques") * ctx.state["joint_vel"]), axis=1)


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
        feet_air_time,
        feet_clearance,
        feet_height,
        feet_slip,
        gait_phase_contact,
        pose,
        stand_still,
        energy,
    )
}
FOOT_TERMS = frozenset({feet_air_time, feet_clearance, feet_height, feet_slip, gait_phase_contact})
CLOCK_TERMS = frozenset({gait_phase_contact})  # need a robot whose feet are two diagonal pairs (trot_offsets)
