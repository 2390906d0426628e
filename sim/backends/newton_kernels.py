"""The Newton backend's Warp kernel: the robot YAML's PD law for each (env, joint), written into control.joint_f.

Imported by sim.backends.newton_backend only after it has set Warp's options (no backward kernels, quiet logs):
Warp reads them when the first kernel of a module is defined. No `from __future__ import annotations` here: Warp
reads a struct's and a kernel's annotations as types.

This file is Warp's kernel language, which Python's typing does not describe: its annotations are Warp's type
constructors (calls), a @wp.struct is an instance used as a type, and wp.tid() returns as many indices as it is
unpacked into. pyright's rules for those three are off here, and only here.
"""
# pyright: reportInvalidTypeForm=false, reportGeneralTypeIssues=false, reportAssignmentType=false

import warp as wp


@wp.struct
class Actuators:
    """What the PD law reads besides the state: where each (env, joint)'s coordinate and velocity sit in Newton's
    flat state arrays, the control mode, the gains, each env's motor strength and each joint's torque limit."""

    q_index: wp.array2d(dtype=wp.int32)
    qd_index: wp.array2d(dtype=wp.int32)
    mode: wp.int32  # 0 position, 1 velocity, 2 torque
    kp: wp.array2d(dtype=wp.float32)
    kd: wp.array2d(dtype=wp.float32)
    strength: wp.array(dtype=wp.float32)
    limit: wp.array(dtype=wp.float32)


@wp.kernel
def pd_torques(
    joint_q: wp.array(dtype=wp.float32),
    joint_qd: wp.array(dtype=wp.float32),
    targets: wp.array3d(dtype=wp.float32),
    k: int,
    act: Actuators,
    joint_f: wp.array(dtype=wp.float32),
):
    env, j = wp.tid()
    q = joint_q[act.q_index[env, j]]
    qd = joint_qd[act.qd_index[env, j]]
    target = targets[env, k, j]
    tau = target
    if act.mode == 0:  # position
        tau = act.kp[env, j] * (target - q) - act.kd[env, j] * qd
    elif act.mode == 1:  # velocity
        tau = act.kd[env, j] * (target - qd)
    s = act.strength[env]
    bound = s * act.limit[j]
    joint_f[act.qd_index[env, j]] = wp.clamp(s * tau, -bound, bound)
