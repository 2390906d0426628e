"""Plans executed in the digital twin: the ground truth of the simulated operator, the preference page's plots and
the RL reward's sim-grounded term.

Each plan drives one env of a nominal (unrandomised) BatchedTwin, segment by segment, through sim.controllers'
hand-written wheel executor, or through a trained policy artifact for a robot without one (a legged robot: the
loop passes the policy it exported, so plans are judged by what that robot does with them), then `settle_s` at
zero command so the robot's lag is not counted as a miss (a first-order lag delays the motion but keeps its
integral). Plans run in batches sorted by duration so short plans do not wait
for long ones, and results are cached by plan, so repeated samples cost nothing. The batch steps on every core
(the twin's default): the RLHF stages around it train on one torch thread, and MuJoCo's batch gives the same
results at any thread count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edge.instruct.plan import Plan, format_plan
from training.errors import TrainingError
from training.rlhf.intent import plan_steps


@dataclass
class Execution:
    metrics: dict[str, float]  # executed: means over the plan's duration, distance_m and angle_rad incl. settling
    path: np.ndarray  # [steps + 1, 3]: x, y (m) and yaw (rad) relative to the start pose, every control step
    # executed metrics of each step of the plan (intent.plan_steps; the last one includes the settling)
    steps: list[dict[str, float]] = dataclasses.field(default_factory=list)


def wheel_controlled(spec) -> bool:
    """Whether sim.controllers' hand-written wheel executor can drive the robot (a two-wheel differential drive);
    any other robot executes plans through a trained policy."""
    return spec.control_mode == "velocity" and spec.num_actions == 2


class TwinExecutor:
    def __init__(
        self,
        robot: str = "rover",
        settle_s: float = 0.5,
        max_envs: int = 64,
        seed: int = 0,
        policy: str | None = None,
    ):
        """policy: a policy artifact directory for `robot` that executes the plans (ONNX Runtime, safety filter
        on, as on the robot); None: the hand-written wheel controller (a differential-drive robot)."""
        from sim.robot import load_robot

        spec = load_robot(robot)
        self.policy = None
        if policy:
            from edge.errors import EdgeError
            from edge.runtime import load_policy
            from sim.campaign.rollout import check_compatible

            try:
                self.policy = load_policy(policy, backend="onnxruntime")  # refuses a tampered artifact
                check_compatible(self.policy.manifest, spec)
            except EdgeError as e:
                raise TrainingError(f"plan execution policy {policy}: {e}") from None
        elif not wheel_controlled(spec):
            raise TrainingError(
                f"plans run on the twin through the hand-written wheel controller, and {spec.name} has none: "
                "give a trained policy artifact of it to execute them (--policy; the loop passes its own)"
            )
        self.spec = spec
        self.settle_s, self.max_envs, self.seed = settle_s, max_envs, seed
        self._cache: dict[str, Execution] = {}

    def execute(self, plans: Sequence[Plan]) -> list[Execution]:
        keys = [format_plan(p) for p in plans]
        todo = sorted(
            {k: p for k, p in zip(keys, plans, strict=True) if k not in self._cache}.items(),
            key=lambda kv: sum(s.duration_s for s in kv[1]),
        )
        for start in range(0, len(todo), self.max_envs):
            chunk = todo[start : start + self.max_envs]
            for (key, _), result in zip(chunk, self._run([p for _, p in chunk]), strict=True):
                self._cache[key] = result
        return [self._cache[k] for k in keys]

    def _run(self, plans: list[Plan]) -> list[Execution]:
        from sim.controllers import DiffDriveController
        from sim.tasks import load_task
        from sim.twin import BatchedTwin

        n, dt = len(plans), self.spec.control_dt
        durations = np.array([sum(s.duration_s for s in p) for p in plans])
        steps = int(np.ceil((durations.max() + self.settle_s) / dt))
        task = load_task(self.spec)
        task = dataclasses.replace(task, episode_length_s=steps * dt + 1.0, randomization=task.randomization.nominal())
        twin = BatchedTwin(self.spec, num_envs=n, seed=self.seed, task=task).hold_commands()
        try:
            twin.reset(seed=self.seed)
            state = twin.backend.state()  # start at rest: reset's small random velocities would show up as drift
            twin.backend.set_state(
                np.arange(n),
                state["base_pos"],
                state["base_quat"],
                np.zeros((n, 3)),
                np.zeros((n, 3)),
                state["joint_pos"],
                np.zeros_like(state["joint_vel"]),
            )
            if self.policy is None:
                controller = DiffDriveController(twin)
            else:
                self.policy.reset()
                controller = lambda: self.policy.act(twin.observations)  # noqa: E731 - the command is in them
            width = max(len(p) for p in plans) + 1  # one zero segment after every plan
            cmds = np.zeros((n, width, 3))
            ends = np.full((n, width), np.inf)
            for i, plan in enumerate(plans):
                cmds[i, : len(plan)] = [(s.vx, s.vy, s.wz) for s in plan]
                ends[i, : len(plan)] = np.cumsum([s.duration_s for s in plan])
            state = twin.backend.state()
            pos0, yaw0 = state["base_pos"][:, :2].copy(), _yaw(state["base_quat"])
            paths = np.zeros((steps + 1, n, 3))
            integrals = np.zeros((steps + 1, n, 3))  # distance (body x), lateral (body y), angle, so far
            rows = np.arange(n)
            for k in range(steps):
                seg = (k * dt >= ends - 1e-9).sum(axis=1)  # index of the active segment
                twin.set_commands(cmds[rows, seg])
                twin.step(controller())
                state = twin.backend.state()
                lin, ang = twin.task.base_velocities(state)
                integrals[k + 1] = integrals[k] + np.stack([lin[:, 0], lin[:, 1], ang[:, 2]], axis=1) * dt
                rel = state["base_pos"][:, :2] - pos0
                c, s = np.cos(-yaw0), np.sin(-yaw0)
                paths[k + 1, :, 0] = c * rel[:, 0] - s * rel[:, 1]
                paths[k + 1, :, 1] = s * rel[:, 0] + c * rel[:, 1]
                paths[k + 1, :, 2] = integrals[k + 1, :, 2]
        finally:
            twin.close()
        out = []
        for i, plan in enumerate(plans):
            d = durations[i]
            end = int(np.ceil((d + self.settle_s) / dt))
            # each segment's share of the integrals: from its first control step to the next one's (the last
            # segment's runs on through the settling)
            bounds = [0, *(min(int(np.ceil(t / dt - 1e-9)), end) for t in ends[i, : len(plan) - 1]), end]
            segments = [
                _metrics(*(integrals[b1, i] - integrals[b0, i]), seg.duration_s)
                for seg, b0, b1 in zip(plan, bounds[:-1], bounds[1:], strict=True)
            ]
            out.append(
                Execution(_metrics(*integrals[end, i], d), paths[: end + 1, i].copy(), plan_steps(plan, segments))
            )
        return out


def _metrics(distance: float, lateral: float, angle: float, duration: float) -> dict[str, float]:
    """Executed integrals over a commanded duration as plan metrics (means over that duration)."""
    mean = (lambda x: float(x) / duration) if duration > 0 else (lambda x: 0.0)
    return {
        "vx": mean(distance),
        "vy": mean(lateral),
        "wz": mean(angle),
        "duration_s": float(duration),
        "distance_m": float(distance),
        "angle_rad": float(angle),
    }


def _yaw(quat_wxyz: np.ndarray) -> np.ndarray:
    w, x, y, z = quat_wxyz.T
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
