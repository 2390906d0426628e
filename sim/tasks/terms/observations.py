"""Observation terms: func(ctx, **params) -> [N, size] in physical units. Size, scale, noise width and ROS
source of each name are edge.observation's (the manifest's layout and what policy_node builds on the robot),
so a new term goes into edge.observation.obs_term's table as well as into OBSERVATIONS here."""

from __future__ import annotations

import numpy as np

from edge.observation import gait_phase as gait_clock
from sim.tasks.terms.context import TermContext, given


def base_lin_vel(ctx: TermContext) -> np.ndarray:
    return ctx.base_lin_vel


def base_ang_vel(ctx: TermContext) -> np.ndarray:
    return ctx.base_ang_vel


def projected_gravity(ctx: TermContext) -> np.ndarray:
    return ctx.projected_gravity


def velocity_command(ctx: TermContext) -> np.ndarray:
    return given(ctx.commands, "commands")


def joint_pos(ctx: TermContext) -> np.ndarray:
    """Joint positions relative to the default pose."""
    return ctx.state["joint_pos"] - np.asarray(ctx.robot.default_pose)


def joint_vel(ctx: TermContext) -> np.ndarray:
    return ctx.state["joint_vel"]


def last_action(ctx: TermContext) -> np.ndarray:
    return given(ctx.actions, "actions")


def gait_phase(ctx: TermContext) -> np.ndarray:
    """The gait clock at the episode's time: (sin, cos) of its angle, zero while the command is a stand-still one
    (policy_node computes the same from its control steps since activation)."""
    return gait_clock(given(ctx.episode_time, "episode_time"), given(ctx.commands, "commands"))


OBSERVATIONS = {
    f.__name__: f
    for f in (
        base_lin_vel,
        base_ang_vel,
        projected_gravity,
        velocity_command,
        joint_pos,
        joint_vel,
        last_action,
        gait_phase,
    )
}
