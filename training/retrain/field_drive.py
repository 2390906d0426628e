"""A field log without ROS: the field robot (sim.field_robot) driven through a command script in-process, logged as
its sensors read it. For measuring what a script lets system identification determine (benchmarks/
sysid_excitation.py) and for tests; the loop records its field logs over real ROS 2 (sim2real sil)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edge.observation import projected_gravity
from sim.field_robot import FieldRobot
from training.retrain.ingest import FieldLog

__all__ = ["drive_field_log"]


def drive_field_log(
    robot: FieldRobot, act: Callable[[], np.ndarray], command_at: Callable[[float], np.ndarray], seconds: float
) -> FieldLog:
    """`seconds` of the field robot's twin (env 0): each control step sets the command `command_at(t)` and steps
    the action `act()` chooses, late by the robot's jittering delay; the log holds what its sensors read and the joint
    targets the action asked for, as /joint_commands carries them."""
    twin = robot.twin
    spec = twin.spec
    offset = np.asarray(spec.default_pose) if spec.control_mode == "position" else 0.0
    rows = []
    for k in range(int(round(seconds / spec.control_dt))):
        twin.set_commands(np.asarray(command_at(k * spec.control_dt), dtype=np.float64))
        action = np.asarray(act(), dtype=np.float64).reshape(-1)
        robot.next_period()
        if twin.step(action[None])[2][0]:  # a fall: the twin restarts, nominal; the robot stays itself
            twin.set_params(robot.params)
        s = twin.backend.state()
        lin, ang = twin.task.base_velocities(s)
        odom_lin, odom_ang = robot.sense_odometry(lin[0], ang[0])
        rows.append(
            (
                twin.commands[0].copy(),
                odom_lin,
                robot.sense_gyro(ang[0]),  # ingest takes the angular velocity from the IMU
                projected_gravity(s["base_quat"])[0],
                s["base_pos"][0, 2],
                robot.sense_joints(s["joint_pos"][0]),
                s["joint_vel"][0],
                offset + spec.action_scale * action,
                s["base_quat"][0],
                odom_ang,
            )
        )
    cmd, lin, ang, grav, z, jp, jv, targets, quat, odom_ang = (np.array(c) for c in zip(*rows, strict=True))
    t = np.arange(len(rows)) * spec.control_dt
    return FieldLog(None, t, cmd, lin, ang, grav, z, jp, jv, targets, [], quat, odom_ang_vel=odom_ang)
