"""Env-steps/s of the batched twin beside gymnasium's SyncVectorEnv over the same MJCF and the physics ceiling, and
beside EnvPool (a C++ batched executor) on gymnasium's Ant.

One env-step = one policy step = `decimation` physics steps, for every figure here. The ceiling is the
single-thread `mj_step` rate on the twin's own workload (each env's randomised model and moving state, stepped
in a plain Python loop over envs), times the threads the twin uses, divided by the decimation.

The bare executor: MuJoCo's own `mujoco.batch` stepping the twin's model from the same states with the same
targets and nothing else (no observations, rewards or resets), measured in windows alternating with the twin's;
the twin's fraction of it is what its task costs (target: at least 80%).

EnvPool: its Ant-v4 (gymnasium's ant.xml, frame skip 5) beside the twin on the same ant.xml brought as a user
brings a robot (`sim2real robot init ant.xml --kp 50 --kd 1`, decimation 5 to match the frame skip, the default
velocity task), with the same envs and threads.

    python -m benchmarks.twin_throughput [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.envs.mujoco import MujocoEnv

from sim.robot import RobotSpec, build_mjspec, load_robot, set_pd_gains
from sim.robot_init import init_robot
from sim.tasks import load_task
from sim.tasks.terms import TermContext
from sim.tasks.velocity_tracking import VelocityTrackingTask
from sim.twin import BatchedTwin


class GymnasiumTwin(MujocoEnv):
    """The anchor: one env as gymnasium's MuJoCo envs are written (MujocoEnv, do_simulation), with the same
    MJCF, actuators, observation and reward terms as the twin (less the foot terms, which need foot sensors)."""

    metadata = {"render_modes": ["human", "rgb_array", "depth_array", "rgbd_tuple"]}

    def __init__(self, spec: RobotSpec, xml_path: str):
        self.spec = spec
        # without the foot terms (this anchor senses no feet): it does less per step than the twin, not more
        self.task = VelocityTrackingTask(spec, load_task(spec).without_foot_terms())
        obs_space = gym.spaces.Box(-np.inf, np.inf, (self.task.obs_dim,), np.float32)
        super().__init__(xml_path, spec.physics_steps, observation_space=obs_space, width=64, height=64)
        n = spec.num_actions
        set_pd_gains(self.model, spec, spec.joint_kp, spec.joint_kd, np.ones(n))
        self.action_space = gym.spaces.Box(-10, 10, (n,), np.float32)
        self._jq = np.array([self.model.joint(j).qposadr[0] for j in spec.joints])
        self._jv = np.array([self.model.joint(j).dofadr[0] for j in spec.joints])
        self._last = np.zeros((1, n))
        self._cmd = np.array([[0.5, 0.0, 0.0]])

    def _state(self) -> dict[str, np.ndarray]:
        q, v = self.data.qpos[None], self.data.qvel[None]
        return {
            "base_pos": q[:, 0:3],
            "base_quat": q[:, 3:7],
            "base_lin_vel": v[:, 0:3],
            "base_ang_vel": v[:, 3:6],
            "joint_pos": q[:, self._jq],
            "joint_vel": v[:, self._jv],
        }

    def step(self, action):
        a = np.asarray(action, dtype=np.float64)[None]
        scaled = self.spec.action_scale * a[0]
        target = scaled + np.asarray(self.spec.default_pose) if self.spec.control_mode == "position" else scaled
        vel_before = self.data.qvel[self._jv][None].copy()
        self.do_simulation(target, self.frame_skip)
        state = self._state()
        terminated = self.task.terminated(state)
        step = TermContext(
            self.spec,
            state,
            commands=self._cmd,
            actions=a,
            last_actions=self._last,
            torques=np.zeros_like(a),
            joint_vel_before=vel_before,
            terminated=terminated,
        )
        terms = self.task.reward_terms(step)
        self._last = a
        obs = self.task.observe(state, self._cmd, a, 0.0, self.np_random, self._episode_time())[0]
        return obs, float(sum(v[0] for v in terms.values())), bool(terminated[0]), False, {}

    def reset_model(self):
        qpos = self.init_qpos.copy()
        qpos[2] = self.spec.base_height
        qpos[self._jq] = self.spec.default_pose
        self.set_state(qpos, self.init_qvel)
        self._last[:] = 0
        return self.task.observe(self._state(), self._cmd, self._last, 0.0, self.np_random, self._episode_time())[0]

    def _episode_time(self) -> np.ndarray:
        """The gait clock's time (the twin's episode time: MuJoCo's, reset with the episode)."""
        return np.array([self.data.time])


def rate(step_fn, n_envs: int, seconds: float) -> float:
    """env-steps/s of `step_fn`, timed over at least `seconds` after a short warm-up."""
    for _ in range(3):
        step_fn()
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        step_fn()
        count += 1
    return count * n_envs / elapsed


def physics_ceiling(twin: BatchedTwin, seconds: float) -> float:
    """Single-thread physics steps/s on the twin's own workload: each env's randomised model and current state
    in its own MjData, stepped `decimation` times per env in a plain Python loop over envs."""
    backend = twin.backend
    models = [backend.model(i) for i in range(twin.num_envs)]
    datas = [backend.mjdata(i) for i in range(twin.num_envs)]
    for i, d in enumerate(datas):
        d.ctrl[:] = twin._target_history[0][i]
    dec, steps, start = twin.spec.physics_steps, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for model, data in zip(models, datas, strict=True):
            mujoco.mj_step(model, data, nstep=dec)
        steps += dec * twin.num_envs
    return steps / (time.perf_counter() - start)


def batch_rate(twin: BatchedTwin, threads: int, seconds: float) -> float:
    """env-steps/s of MuJoCo's own batch executor (mujoco.batch, persistent) stepping the twin's model from the
    twin's states with its current targets, `decimation` substeps an env-step, and nothing else: no observations,
    rewards, resets or randomisation. The twin's share of this is what its task costs."""
    import mujoco.batch

    backend, n = twin.backend, twin.num_envs
    batch = mujoco.batch.Batch(backend.base_model, n, nthread=threads, persistent=True)
    batch.qpos, batch.qvel = backend.batch.qpos, backend.batch.qvel
    batch.bind("ctrl")[:] = twin._target_history[0]
    return rate(lambda: batch.step(nstep=twin.spec.physics_steps), n, seconds)


def gymnasium_rate(spec: RobotSpec, num_envs: int, seconds: float) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, f"{spec.name}.xml")
        with open(xml, "w") as f:
            f.write(build_mjspec(spec).to_xml())
        sync = gym.vector.SyncVectorEnv([lambda: GymnasiumTwin(spec, xml)] * num_envs)
        sync.reset(seed=0)
        zeros = np.zeros((num_envs, spec.num_actions), np.float32)
        result = rate(lambda: sync.step(zeros), num_envs, seconds)
        sync.close()
    return result


def ant_robot(out_dir: str) -> RobotSpec:
    """gymnasium's ant.xml as a bring-your-own robot, stepped as EnvPool's Ant-v4 steps it (5 physics steps)."""
    import dataclasses

    mjcf = os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets", "ant.xml")
    path, _ = init_robot(mjcf, os.path.join(out_dir, "ant.yaml"), kp=50.0, kd=1.0)
    return dataclasses.replace(load_robot(path), decimation=5)


def envpool_rate(num_envs: int, threads: int, seconds: float) -> float:
    """EnvPool's synchronous step over all envs (batch = envs) on `threads` threads."""
    import envpool

    env = envpool.make_gymnasium("Ant-v4", num_envs=num_envs, batch_size=num_envs, num_threads=threads, seed=0)
    env.reset()
    zeros = np.zeros((num_envs, 8), np.float32)
    result = rate(lambda: env.step(zeros), num_envs, seconds)
    env.close()
    return result


def twin_rates(spec: RobotSpec, env_counts: tuple[int, ...], seconds: float, threads: int) -> dict:
    """{envs: (env-steps/s, ceiling env-steps/s, bare mujoco.batch env-steps/s)}. The three are measured in
    alternating windows on the same batch, and the medians kept, so a load change on the machine hits them alike."""
    results = {}
    for n in env_counts:
        twin = BatchedTwin(spec, num_envs=n, seed=0)
        twin.reset()
        zeros = np.zeros((n, spec.num_actions))
        rate(lambda: twin.step(zeros), n, 0.2)  # noqa: B023 - called before the loop moves on
        twin_samples, ceiling_samples, batch_samples = [], [], []
        for _ in range(3):
            twin_samples.append(rate(lambda: twin.step(zeros), n, seconds / 3))  # noqa: B023
            ceiling_samples.append(physics_ceiling(twin, seconds / 3) * threads / spec.physics_steps)
            batch_samples.append(batch_rate(twin, threads, seconds / 3))
        results[n] = tuple(float(np.median(x)) for x in (twin_samples, ceiling_samples, batch_samples))
        twin.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter timings, fewer env counts")
    args = parser.parse_args()
    seconds = 0.7 if args.quick else 2.5
    env_counts = (1, 16, 256) if args.quick else (1, 16, 256, 1024)
    threads = os.cpu_count() or 1
    print(
        f"{'robot':>10} {'envs':>6} {'env-steps/s':>12} {'x gymnasium':>12} {'of ceiling':>11} {'ceiling':>12} "
        f"{'of batch':>9} {'batch':>10}"
    )
    summary = {}
    for robot in ("rover", "quadruped"):
        spec = load_robot(robot)
        gym_rate = gymnasium_rate(spec, 16, seconds)
        for n, (r, ceiling, bare) in twin_rates(spec, env_counts, seconds, threads).items():
            print(
                f"{robot:>10} {n:>6} {r:>12,.0f} {r / gym_rate:>12.2f} {r / ceiling:>10.0%} {ceiling:>12,.0f} "
                f"{r / bare:>8.0%} {bare:>10,.0f}"
            )
            if robot == "quadruped" and n == 256:
                summary = {
                    "steps_per_s": round(r),
                    "ratio_vs_gymnasium": round(r / gym_rate, 2),
                    "fraction_of_ceiling": round(r / ceiling, 3),
                    "gymnasium_steps_per_s": round(gym_rate),
                    "ceiling_steps_per_s": round(ceiling),
                    "fraction_of_batch": round(r / bare, 3),
                    "batch_steps_per_s": round(bare),
                }
        print(f"{'':>10} gymnasium SyncVectorEnv (16 envs, same MJCF, obs and rewards): {gym_rate:,.0f} env-steps/s")
    print(f"ceiling = {threads} threads x single-thread mj_step rate on the same batch / decimation")
    print("batch = mujoco.batch stepping the same model and states, no task terms (target: the twin >= 80% of it)")
    with tempfile.TemporaryDirectory() as tmp:
        ant = ant_robot(tmp)
        ant_envs = 64 if args.quick else 256
        pool = envpool_rate(ant_envs, threads, seconds)
        ((twin_ant, _, _),) = twin_rates(ant, (ant_envs,), seconds, threads).values()
    print(
        f"{'ant':>10} {ant_envs:>6} {twin_ant:>12,.0f}  twin on gymnasium's ant.xml via robot init; EnvPool Ant-v4 "
        f"{pool:,.0f} env-steps/s ({threads} threads): {twin_ant / pool:.2f}x"
    )
    load = os.getloadavg()[0]
    print(f"load average (1 min): {load:.2f} on {threads} CPUs")
    print(
        json.dumps(
            {
                "bench": "twin_throughput",
                "robot": "quadruped",
                "envs": 256,
                **summary,
                "baseline": "gymnasium SyncVectorEnv",
                "ant_envs": ant_envs,
                "ant_steps_per_s": round(twin_ant),
                "envpool_ant_steps_per_s": round(pool),
                "ratio_vs_envpool": round(twin_ant / pool, 2),
                "threads": threads,
                "load_avg_1m": round(load, 2),
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
