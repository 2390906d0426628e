"""Synthetic field logs for retraining tests: a rover driving a command script, written as ROS 2 MCAP with
small chunks (so a truncated file still holds whole chunks before the damage)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from mcap_ros2.writer import Writer
from rosbags.typesys import Stores, get_typestore

JOINTS = ["left_wheel_joint", "right_wheel_joint"]


def write_log(
    path: Path,
    commands: list[tuple[float, float, float, float]],
    lag: float = 0.0,
    dt: float = 0.02,
    chunk_size: int = 2048,
    foot_forces=None,
    gyro_bias: float = 0.0,
) -> Path:
    """commands: (seconds, vx, vy, wz) segments. The 'robot' reaches each command with a first-order lag of
    `lag` seconds' time constant and keeps a steady error proportional to `lag` (a drifted robot is laggier).
    foot_forces: step -> the feet's contact forces (N), logged on /foot_forces before each /odom; None: no feet.
    gyro_bias: rad/s the IMU adds to the yaw rate, which the odometry reads true."""
    store = get_typestore(Stores.ROS2_JAZZY)
    with open(path, "wb") as f:
        writer = Writer(f, chunk_size=chunk_size)
        schemas = {
            t: writer.register_msgdef(t, store.generate_msgdef(t, ros_version=2)[0])
            for t in (
                "geometry_msgs/msg/Twist",
                "nav_msgs/msg/Odometry",
                "sensor_msgs/msg/Imu",
                "sensor_msgs/msg/JointState",
                "std_msgs/msg/Float64MultiArray",
            )
        }
        vel, t_ns, step = np.zeros(3), 0, 0
        alpha = dt / (lag + dt)
        for seconds, vx, vy, wz in commands:
            cmd = np.array([vx, vy, wz])
            for _ in range(int(round(seconds / dt))):
                vel = vel + alpha * (cmd * (1 - lag) - vel)
                vec = {"x": 0.0, "y": 0.0, "z": 0.0}
                writer.write_message(
                    "/cmd_vel",
                    schemas["geometry_msgs/msg/Twist"],
                    {"linear": {**vec, "x": vx, "y": vy}, "angular": {**vec, "z": wz}},
                    log_time=t_ns,
                )
                stamp = {"sec": t_ns // 10**9, "nanosec": t_ns % 10**9}
                writer.write_message(
                    "/imu/data",
                    schemas["sensor_msgs/msg/Imu"],
                    {
                        "header": {"stamp": stamp, "frame_id": "imu_link"},
                        "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0},
                        "angular_velocity": {**vec, "z": float(vel[2]) + gyro_bias},
                    },
                    log_time=t_ns,
                )
                writer.write_message(
                    "/joint_states",
                    schemas["sensor_msgs/msg/JointState"],
                    {
                        "header": {"stamp": stamp},
                        "name": JOINTS,
                        "position": [0.0, 0.0],
                        "velocity": [float(vel[0] * 10), float(vel[0] * 10)],
                        "effort": [],
                    },
                    log_time=t_ns,
                )
                if foot_forces is not None:
                    writer.write_message(
                        "/foot_forces",
                        schemas["std_msgs/msg/Float64MultiArray"],
                        {"layout": {"dim": [], "data_offset": 0}, "data": [float(f) for f in foot_forces(step)]},
                        log_time=t_ns,
                    )
                writer.write_message(
                    "/odom",
                    schemas["nav_msgs/msg/Odometry"],
                    {
                        "header": {"stamp": stamp, "frame_id": "odom"},
                        "child_frame_id": "base_link",
                        "pose": {
                            "pose": {
                                "position": {**vec, "z": 0.1},
                                "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0},
                            }
                        },
                        "twist": {
                            "twist": {
                                "linear": {**vec, "x": float(vel[0]), "y": float(vel[1])},
                                "angular": {**vec, "z": float(vel[2])},
                            }
                        },
                    },
                    log_time=t_ns,
                )
                t_ns += int(dt * 1e9)
                step += 1
        writer.finish()
    return path


def write_twin_log(
    path: Path, artifact: Path, twin_params: dict, commands: list[tuple[float, float, float, float]], seed: int = 0
) -> Path:
    """A field log as `sim2real sil --field-twin --record` makes it, without ROS: the artifact drives a twin with
    hidden parameters `twin_params` in closed loop (ONNX Runtime, safety filter, as policy_node runs it), and the
    topics the robot and the policy node publish are written with their header stamps, in their order.
    commands: (seconds, vx, vy, wz) segments."""
    from edge.runtime import load_policy
    from sim.randomization import RandomizationConfig, fixed_params
    from sim.twin import BatchedTwin

    policy = load_policy(artifact, "onnxruntime")
    twin = BatchedTwin(
        policy.manifest.robot["name"],
        num_envs=1,
        seed=seed,
        randomization=RandomizationConfig(enabled=False),
        nthread=1,
    ).hold_commands()
    spec = twin.spec
    twin.max_episode_steps = np.iinfo(np.int64).max
    twin.reset()
    twin.set_params(fixed_params(twin_params, spec.sim_dt))
    offset = np.asarray(spec.default_pose) if spec.control_mode == "position" else 0.0
    store = get_typestore(Stores.ROS2_JAZZY)
    dt_ns = int(round(spec.control_dt * 1e9))
    with open(path, "wb") as f:
        writer = Writer(f)
        schemas = {
            t: writer.register_msgdef(t, store.generate_msgdef(t, ros_version=2)[0])
            for t in (
                "geometry_msgs/msg/Twist",
                "nav_msgs/msg/Odometry",
                "sensor_msgs/msg/Imu",
                "sensor_msgs/msg/JointState",
                "std_msgs/msg/Float64MultiArray",
            )
        }
        t_ns = 0
        for seconds, vx, vy, wz in commands:
            twin.set_commands(np.array([vx, vy, wz]))
            for _ in range(int(round(seconds / spec.control_dt))):
                s = twin.backend.state()
                lin, ang = twin.task.base_velocities(s)
                stamp = {"sec": t_ns // 10**9, "nanosec": t_ns % 10**9}
                w, x, y, z = (float(v) for v in s["base_quat"][0])
                vec = {"x": 0.0, "y": 0.0, "z": 0.0}
                writer.write_message(
                    "/cmd_vel",
                    schemas["geometry_msgs/msg/Twist"],
                    {"linear": {**vec, "x": vx, "y": vy}, "angular": {**vec, "z": wz}},
                    log_time=t_ns,
                )
                writer.write_message(
                    "/imu/data",
                    schemas["sensor_msgs/msg/Imu"],
                    {
                        "header": {"stamp": stamp, "frame_id": "imu_link"},
                        "orientation": {"x": x, "y": y, "z": z, "w": w},
                        "angular_velocity": dict(zip("xyz", map(float, ang[0]), strict=True)),
                    },
                    log_time=t_ns,
                )
                writer.write_message(
                    "/odom",
                    schemas["nav_msgs/msg/Odometry"],
                    {
                        "header": {"stamp": stamp, "frame_id": "odom"},
                        "child_frame_id": "base_link",
                        "pose": {
                            "pose": {
                                "position": dict(zip("xyz", map(float, s["base_pos"][0]), strict=True)),
                                "orientation": {"x": x, "y": y, "z": z, "w": w},
                            }
                        },
                        "twist": {
                            "twist": {
                                "linear": dict(zip("xyz", map(float, lin[0]), strict=True)),
                                "angular": dict(zip("xyz", map(float, ang[0]), strict=True)),
                            }
                        },
                    },
                    log_time=t_ns,
                )
                writer.write_message(
                    "/joint_states",
                    schemas["sensor_msgs/msg/JointState"],
                    {
                        "header": {"stamp": stamp},
                        "name": list(spec.joints),
                        "position": s["joint_pos"][0].tolist(),
                        "velocity": s["joint_vel"][0].tolist(),
                        "effort": [],
                    },
                    log_time=t_ns,
                )
                action = policy.act(twin.observations)
                writer.write_message(
                    "/joint_commands",
                    schemas["std_msgs/msg/Float64MultiArray"],
                    {
                        "layout": {"dim": [], "data_offset": 0},
                        "data": (spec.action_scale * action[0] + offset).tolist(),
                    },
                    log_time=t_ns,
                )
                twin.step(action)
                t_ns += dt_ns
        writer.finish()
    twin.close()
    return path
