"""Env-steps/s (policy inference included) of a validation campaign at 1 and 2 workers, beside the naive anchor.

The anchor runs the same scenarios the way sim2sim scripts do (humanoid-gym, MuJoCo Playground's C sim2sim):
one env at a time in a Python loop, ONNX Runtime at batch 1, the PD law computed in Python each physics step
and written to MjData.ctrl, mj_step. The campaign runs the artifact through the `edge` runtime (safety filter
included) in batched twins: one worker in this process, two as Ray tasks (Ray start-up reported apart).
Reports are not rendered here: this measures simulation and inference.

    python -m benchmarks.campaign_throughput [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time

import mujoco
import numpy as np
import onnxruntime as ort

from benchmarks.edge_policies import export_random_policy
from edge.observation import projected_gravity
from sim.campaign.commands import compile_sequence
from sim.campaign.config import COMMAND_AXIS, campaign_from_dict
from sim.campaign.execute import Executor
from sim.campaign.matrix import Scenario, batches
from sim.campaign.rollout import ArtifactFiles
from sim.robot import RobotSpec, build_model, load_robot, set_pd_gains
from sim.tasks.velocity_tracking import VelocityTrackingTask

ROBOT = "quadruped"


def campaign(quick: bool):
    axes = {
        "friction": [0.5, 1.0],
        "payload_kg": [0.0, 2.0],
        "motor_strength": [0.9, 1.0],
        "latency_s": [0.0, 0.01],
        COMMAND_AXIS: ["forward", "turn"],
    }
    if not quick:
        axes["friction"] = [0.3, 0.6, 1.0, 1.3]
    raw = {
        "name": "throughput",
        "robot": ROBOT,
        "episode_s": 2.0 if quick else 5.0,
        "axes": axes,
        "commands": {"forward": ["forward"], "turn": ["forward and turn left"]},
    }
    cfg = campaign_from_dict(raw)
    n = int(np.prod([len(v) for v in axes.values()]))
    return dataclasses.replace(cfg, batch_size=n // 2)  # two batches: one per worker at 2 workers


def naive_rate(spec: RobotSpec, cfg, onnx_bytes: bytes, scenarios: list[Scenario]) -> tuple[float, int]:
    """(env-steps/s, env-steps) of the sim2sim-script loop over `scenarios`, one env at a time."""
    torque_spec = dataclasses.replace(spec, control_mode="torque")
    task = VelocityTrackingTask(spec)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
    steps = int(round(cfg.episode_s / spec.control_dt))
    nu, default = spec.num_actions, np.asarray(spec.default_pose)
    total, start = 0, time.perf_counter()
    for s in scenarios:
        model = build_model(torque_spec)  # the PD law runs in Python below, as sim2sim scripts do
        strength = float(s.value("motor_strength"))
        set_pd_gains(model, torque_spec, np.zeros(nu), np.zeros(nu), np.full(nu, strength))
        model.geom_friction[:, 0] = s.value("friction")
        data = mujoco.MjData(model)
        data.qpos[2] = spec.base_height
        jq = np.array([model.joint(j).qposadr[0] for j in spec.joints])
        jv = np.array([model.joint(j).dofadr[0] for j in spec.joints])
        data.qpos[jq] = default
        commands = compile_sequence(cfg.commands[s.value(COMMAND_AXIS)], spec.command_limits, spec.control_dt, steps)
        action = np.zeros((1, nu), np.float32)
        for t in range(steps):
            state = {
                "base_pos": data.qpos[None, 0:3],
                "base_quat": data.qpos[None, 3:7],
                "base_lin_vel": data.qvel[None, 0:3],
                "base_ang_vel": data.qvel[None, 3:6],
                "joint_pos": data.qpos[None, jq],
                "joint_vel": data.qvel[None, jv],
            }
            obs = task.observe(state, commands[None, t], action, 0.0, None)
            action = session.run(["actions"], {"obs": obs})[0]
            target = default + spec.action_scale * np.clip(action[0], -10, 10)
            for _ in range(spec.physics_steps):
                tau = spec.joint_kp * (target - data.qpos[jq]) - spec.joint_kd * data.qvel[jv]
                data.ctrl[:] = np.clip(tau, -np.asarray(spec.torque_limit), spec.torque_limit) * strength
                mujoco.mj_step(model, data)
            if projected_gravity(data.qpos[None, 3:7])[0, 2] > -np.cos(task.cfg.max_tilt_rad):
                mujoco.mj_resetData(model, data)  # fell: the twin would reset it too
                data.qpos[2], data.qpos[jq] = spec.base_height, default
        total += steps
    return total / (time.perf_counter() - start), total


def campaign_rate(cfg, spec, files, workers: int) -> tuple[float, float, int]:
    """(env-steps/s, seconds of start-up, env-steps) of the campaign's batches on `workers` workers. Start-up
    (Ray, and each worker's first imports and policy load, measured with a 5-step pass) is reported apart."""
    counted = []
    t0 = time.perf_counter()
    with Executor(workers=workers) as executor:
        warm = dataclasses.replace(cfg, episode_s=5 * spec.control_dt)
        executor.run(batches(warm), warm, spec, files, lambda r: None)
        t1 = time.perf_counter()
        executor.run(batches(cfg), cfg, spec, files, lambda r: counted.append(r.env_steps))
        elapsed = time.perf_counter() - t1
    return sum(counted) / elapsed, t1 - t0, sum(counted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter episodes")
    args = parser.parse_args()
    cfg = campaign(args.quick)
    spec = load_robot(ROBOT)
    with tempfile.TemporaryDirectory() as tmp:
        export_random_policy(ROBOT, tmp, seed=0)
        files = ArtifactFiles.read(tmp)
    jobs = batches(cfg)
    scenarios = [s for j in jobs for s in j.scenarios]
    naive_scenarios = scenarios[:: max(1, len(scenarios) // 8)]  # the anchor is slow: a spread-out sample
    onnx_bytes = files.files["policy.onnx"]

    naive, naive_steps = naive_rate(spec, cfg, onnx_bytes, naive_scenarios)
    one, _, one_steps = campaign_rate(cfg, spec, files, 1)
    two, start_up, _ = campaign_rate(cfg, spec, files, 2)
    episode_steps = int(round(cfg.episode_s / spec.control_dt))

    rows = [
        ("naive: 1 env, Python loop, ORT batch 1", naive, naive_steps),
        ("campaign, 1 worker (in process)", one, one_steps),
        (f"campaign, 2 Ray workers (+{start_up:.1f} s start-up)", two, one_steps),
    ]
    print(f"{ROBOT}, {len(scenarios)} scenarios x {cfg.episode_s:g} s ({episode_steps} env-steps), random policy")
    print(f"{'run':<52}{'env-steps/s':>14}{'episodes/s':>12}{'env-steps':>11}")
    for name, rate, steps in rows:
        print(f"{name:<52}{rate:>14,.0f}{rate / episode_steps:>12.2f}{steps:>11,}")
    print(
        json.dumps(
            {
                "bench": "campaign_throughput",
                "robot": ROBOT,
                "scenarios": len(scenarios),
                "episode_s": cfg.episode_s,
                "env_steps_per_s": {
                    "naive": round(naive),
                    "campaign_1_worker": round(one),
                    "campaign_2_workers": round(two),
                },
                "episodes_per_s": {
                    "campaign_1_worker": round(one / episode_steps, 3),
                    "campaign_2_workers": round(two / episode_steps, 3),
                },
                "ray_start_up_s": round(start_up, 2),
                "baseline": "one env at a time, Python loop, ORT batch 1, PD in Python (sim2sim script style)",
                "ratio": round(one / naive, 2),
                "ratio_2_workers": round(two / naive, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
