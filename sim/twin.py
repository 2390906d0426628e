"""The batched digital twin: N copies of one robot stepped together on one task, as a gymnasium VectorEnv.

Batch arrays in and out, control decimation (one env-step = `decimation` physics steps), auto-reset in the
same step (the finished episode's last observation is in info["final_obs"]), domain randomisation per env,
actuation latency at physics-step resolution, drives that follow their delayed targets through a first-order lag
(motor_lag_s, on every backend: the actuation path is the twin's, the physics the backend's), and non-finite actions
replaced by the safe action and counted.
What is observed, rewarded and terminated, the commands and the reset distribution are the task's (sim.tasks).
For a robot with feet on a backend that senses them (sim.backends.FOOT_BACKENDS), `feet` is the foot state
(contacts, air time, landings; sim.tasks.terms.FootTracker), updated every step and reset with the envs.

A task with terrain puts each env on a sub-terrain of a heightfield grid (sim.terrain): it starts above the
terrain at the centre, its heights (terminations, base_height) are measured from the ground under it, it times
out before it walks off the heightfield, and the curriculum moves it between difficulty levels at each reset.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from sim.backends import FOOT_BACKENDS, make_backend
from sim.errors import SimError
from sim.randomization import PhysicsParams, RandomizationConfig, Rehearsal, sample_params
from sim.robot import RobotSpec, load_robot, pd_torques, scaled_gains
from sim.tasks import VelocityTaskConfig, VelocityTrackingTask, load_task
from sim.tasks.terms import FootTracker, TermContext
from sim.terrain import TerrainCurriculum, TerrainGrid

CLIP_ACTIONS = 10.0  # the policy's actions are clipped to +-this (action units); the exported artifact records it
_SNAPSHOT_ARRAYS = ("commands", "actions", "last_actions", "episode_length", "episode_return")


class BatchedTwin(gym.vector.VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
    # the robot. gymnasium's VectorEnv keeps its registration EnvSpec under this name, which a twin (made directly,
    # never by gym.make) has none of; the callers across the packages read twin.spec as the robot
    spec: RobotSpec

    def __init__(
        self,
        robot: RobotSpec | str | Path,
        num_envs: int = 64,
        seed: int = 0,
        task: VelocityTaskConfig | str | Path | None = None,
        randomization: RandomizationConfig | Rehearsal | None = None,
        backend: str = "mujoco",
        nthread: int | None = None,
    ):
        """task: a VelocityTaskConfig or a task YAML; None: the robot's velocity task (sim.tasks.load_task).
        randomization: replaces the task's; a Rehearsal: its first envs draw their physics from the rehearsed
        randomisation. The commands are resampled as the task says until hold_commands()."""
        self.spec = robot if isinstance(robot, RobotSpec) else load_robot(robot)
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        self.num_envs = num_envs
        cfg = task if isinstance(task, VelocityTaskConfig) else load_task(self.spec, task)
        if cfg.foot_terms and backend not in FOOT_BACKENDS:
            raise SimError(
                f"the {backend} backend senses no feet, and the task's rewards {', '.join(cfg.foot_terms)} need them; "
                f"use a backend of {', '.join(FOOT_BACKENDS)} or drop those terms"
            )
        self.task = VelocityTrackingTask(self.spec, cfg)
        self.rehearsal = randomization if isinstance(randomization, Rehearsal) else None
        own = randomization.randomization if isinstance(randomization, Rehearsal) else randomization
        self.randomization: RandomizationConfig = cfg.randomization if own is None else own
        self._rehearsing = self.rehearsal.envs(num_envs) if self.rehearsal is not None else 0
        self.terrain = TerrainGrid(cfg.terrain) if cfg.terrain.enabled else None
        self.curriculum = TerrainCurriculum(cfg.terrain, num_envs) if self.terrain is not None else None
        # an env halfway into the terrain's border times out; False lets episodes run on (terrains sized for them)
        self.terrain_timeout = self.terrain is not None
        self.backend = make_backend(backend, self.spec, num_envs, nthread=nthread, terrain=self.terrain)
        self.clip_actions = CLIP_ACTIONS
        self.resample_commands = True

        nu, spec = self.spec.num_actions, self.spec
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (self.task.obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Box(-CLIP_ACTIONS, CLIP_ACTIONS, (nu,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

        self.max_episode_steps = int(round(self.task.cfg.episode_length_s / spec.control_dt))
        r = self.randomization
        self.push_steps = int(round(r.push_interval_s / spec.control_dt)) if r.enabled and r.push_interval_s > 0 else 0
        physics = [r] if self.rehearsal is None else [r, self.rehearsal.rehearsed]
        max_latency = max(int(math.ceil(c.latency_s[1] / spec.physics_dt)) if c.enabled else 0 for c in physics)
        self._history_len = max_latency // spec.physics_steps + 2

        self.rng = np.random.default_rng(seed)
        self.params = PhysicsParams.nominal(num_envs)
        self.commands = np.zeros((num_envs, 3))
        self.actions = np.zeros((num_envs, nu))
        self.last_actions = np.zeros((num_envs, nu))
        self.episode_length = np.zeros(num_envs, dtype=np.int64)
        self.episode_return = np.zeros(num_envs)
        self.episode_terms: dict[str, np.ndarray] = {}
        self.nan_action_count = 0
        self.physics_fault_count = 0
        self._target_history = np.zeros((self._history_len, num_envs, nu))
        self._drive_targets = np.zeros((num_envs, nu))  # what each drive applies: its target, delayed and lagged
        self._obs = np.zeros((num_envs, self.task.obs_dim), np.float32)
        self.feet = (
            FootTracker(num_envs, len(spec.feet), spec.control_dt, cfg.feet.contact_force_n)
            if spec.feet and backend in FOOT_BACKENDS
            else None
        )

    def __repr__(self) -> str:  # VectorEnv's reads the EnvSpec's id
        return f"{type(self).__name__}({self.spec.name}, num_envs={self.num_envs})"

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        if self.curriculum is not None:
            self.curriculum.start(np.arange(self.num_envs), self.rng)
        self._reset_envs(np.arange(self.num_envs))
        self._obs = self._observe()
        return self._obs.copy(), {}

    def step(self, actions):
        actions = self._check_actions(actions)
        spec, n = self.spec, self.num_envs
        self.last_actions = self.actions
        self.actions = actions
        joint_vel_before = self.backend.state()["joint_vel"]

        self._target_history = np.roll(self._target_history, 1, axis=0)
        self._target_history[0] = self._targets(actions)
        self.backend.step(self._lagged(self._substep_targets()))
        state = self.backend.state()

        fault = ~np.all(np.isfinite(np.concatenate(list(state.values()), axis=1)), axis=1)
        if fault.any():
            self.physics_fault_count += int(fault.sum())
            state = _zero_rows(state, fault)
        if self.feet is not None:
            feet = self.backend.feet()
            feet = _zero_rows(feet, fault) if fault.any() else feet
            self.feet.update(feet, self.foot_ground(feet["pos"]))
        self.episode_length += 1
        ground = self.terrain_height(state)
        terminated = self.task.terminated(state, ground) | fault
        truncated = (self.episode_length >= self.max_episode_steps) & ~terminated
        if self.terrain_timeout and self.terrain is not None:  # a time-out, not a fall: the policy walked far
            truncated |= self.terrain.off_terrain(state["base_pos"][:, :2]) & ~terminated

        kp, kd = scaled_gains(spec, self.params.kp_scale, self.params.kd_scale)
        torques = pd_torques(spec, state, self._target_history[0], kp, kd, self.params.motor_strength)
        step = TermContext(
            spec,
            state,
            commands=self.commands,
            actions=actions,
            last_actions=self.last_actions,
            torques=torques,
            joint_vel_before=joint_vel_before,
            terminated=terminated,
            feet=self.feet,
            terrain_height=ground,
            episode_time=self.episode_time,
        )
        terms = self.task.reward_terms(step)
        rewards = self.task.cfg.total_reward(terms)
        for k, v in terms.items():
            self.episode_terms.setdefault(k, np.zeros(n))[:] += v
        self.episode_return += rewards
        info = {
            "reward_terms": terms,
            "tracking_error": self.task.tracking_errors(state, self.commands),
            "nan_actions": self._nan_this_step,
            "physics_faults": int(fault.sum()),
        }
        if self.curriculum is not None:
            info["terrain_level"] = self.curriculum.levels.copy()  # the levels of the episodes that ran this step

        done = terminated | truncated
        self._advance_commands_and_pushes(done)
        obs = self._observe()
        if done.any():
            ids = np.flatnonzero(done)
            info["final_obs"] = obs.copy()
            info["_final_obs"] = done
            info["episode"] = {
                "r": self.episode_return[ids].copy(),
                "l": self.episode_length[ids].copy(),
                "terms": {k: v[ids].copy() for k, v in self.episode_terms.items()},
                "env_ids": ids,
            }
            if self.curriculum is not None:
                self._update_curriculum(ids, state)
            self._reset_envs(ids)
            obs[ids] = self._observe()[ids]

        self._obs = obs
        return obs.copy(), rewards.astype(np.float32), terminated, truncated, info

    def close_extras(self, **kwargs) -> None:
        self.backend.close()

    # ------------------------------------------------------------------ control
    def hold_commands(self) -> BatchedTwin:
        """Hold the commands set_commands gives from now on, instead of resampling them (campaigns, replays, the
        language interface); returns the twin."""
        self.resample_commands = False
        return self

    def set_commands(self, commands: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        """Set (vx, vy, wz) commands, clipped to the robot's limits; turn off resampling to hold them."""
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids)
        cmd = np.broadcast_to(np.asarray(commands, dtype=np.float64), (len(ids), 3))
        if not np.all(np.isfinite(cmd)):
            raise ValueError("commands must be finite")
        lim = self.spec.command_limits
        self.commands[ids] = np.clip(cmd, lim.low(), lim.high())
        self._obs = self._observe()

    def set_params(self, params: PhysicsParams, env_ids: np.ndarray | None = None) -> None:
        """Fix physical parameters (e.g. a field twin's hidden offsets) until the next reset of those envs."""
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids)
        self._keep_targets_for(int(params.latency_steps.max()))
        self.params.assign(ids, params)
        self.backend.set_params(ids, params)

    def set_latency(self, steps: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        """Set the actuation delay alone, in physics steps, from the next step on: what a field robot's timing
        jitter changes every control period (the delay is the twin's own; the physics is left as it is)."""
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids)
        steps = np.asarray(steps, dtype=np.int64)
        if np.any(steps < 0):
            raise ValueError("an actuation delay cannot be negative")
        self._keep_targets_for(int(steps.max()))
        self.params.latency_steps[ids] = steps

    def settle_drives(self) -> None:
        """Bring each drive's lag to where the targets in the history, applied in turn from the oldest, leave it:
        for a state set from a log (system identification's replays), whose drives were still catching up with the
        targets logged before it. A no-op without a lag."""
        self._drive_targets = self._target_history[-1].copy()
        for shift in range(self._history_len - 2, -1, -1):
            self._lagged(self._substep_targets(shift))

    def _keep_targets_for(self, latency_steps: int) -> None:
        """Keep enough past targets for a delay of latency_steps physics steps."""
        needed = latency_steps // self.spec.physics_steps + 2
        if needed > self._history_len:
            extra = np.repeat(self._target_history[-1:], needed - self._history_len, axis=0)
            self._target_history = np.concatenate([self._target_history, extra])
            self._history_len = needed

    def safe_action(self) -> np.ndarray:
        """The action that holds the default pose (position) or stops the joints (velocity, torque)."""
        return np.zeros(self.spec.num_actions)

    def terrain_height(self, state: dict[str, np.ndarray]) -> np.ndarray | None:
        """[N] the terrain's height under each base; None without terrain (the robot's own floor, z = 0)."""
        ground = self.foot_ground(state["base_pos"][:, None])
        return None if ground is None else ground[:, 0]

    def foot_ground(self, points: np.ndarray) -> np.ndarray | None:
        """[N, K] the terrain's height under each env's K points (points [N, K, >= 2]: its feet, or its base);
        None without terrain."""
        if self.terrain is None:
            return None
        terrain, c = self._on_terrain()
        n, k = points.shape[:2]
        xy = points[..., :2].reshape(-1, 2)
        return terrain.height_at(np.repeat(c.levels, k), np.repeat(c.types, k), xy).reshape(n, k)

    def base_height(self, state: dict[str, np.ndarray]) -> np.ndarray:
        """[N] each base's height above the ground under it (what base_too_low and the fall KPIs measure)."""
        ground = self.terrain_height(state)
        return state["base_pos"][:, 2] - (0.0 if ground is None else ground)

    @property
    def episode_time(self) -> np.ndarray:
        """[N] s since each episode began, counted in control steps: the gait clock's time (the state after the
        latest step, and its observation, are at this time)."""
        return self.episode_length * self.spec.control_dt

    # ------------------------------------------------------------------ snapshot
    @property
    def observations(self) -> np.ndarray:
        """The current observation batch (after reset, step, set_commands or load_state_dict), as a copy."""
        return self._obs.copy()

    def state_dict(self) -> dict:
        """Everything the next step depends on, as numpy arrays, numbers and strings (no pickling needed):
        physics, commands, actions, episode counters and reward sums, the actuation-latency history, the
        randomised parameters and the random generator. load_state_dict() continues exactly from here."""
        arrays = {k: np.array(getattr(self, k)) for k in _SNAPSHOT_ARRAYS}
        return {
            "num_envs": self.num_envs,
            "physics": self.backend.raw_state(),
            "arrays": {
                **arrays,
                "target_history": self._target_history.copy(),
                "drive_targets": self._drive_targets.copy(),
                "observations": self._obs.copy(),
            },
            "episode_terms": {k: v.copy() for k, v in self.episode_terms.items()},
            "params": {f.name: getattr(self.params, f.name).copy() for f in dataclasses.fields(PhysicsParams)},
            # PCG64's state holds 128-bit integers: JSON keeps them exact
            "rng": json.dumps(self.rng.bit_generator.state),
            "counters": {"nan_action_count": self.nan_action_count, "physics_fault_count": self.physics_fault_count},
            "feet": {} if self.feet is None else self.feet.state_dict(),
            **({"terrain_levels": self.curriculum.levels.copy()} if self.curriculum is not None else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        if state["num_envs"] != self.num_envs:
            raise ValueError(f"state holds {state['num_envs']} envs, the twin has {self.num_envs}")
        self.backend.load_raw_state(state["physics"])
        arrays = state["arrays"]
        for k in _SNAPSHOT_ARRAYS:
            setattr(self, k, np.array(arrays[k]))
        self._target_history = np.array(arrays["target_history"])
        self._history_len = len(self._target_history)
        # a snapshot from before the lag existed: its drives applied their newest target
        self._drive_targets = np.array(arrays.get("drive_targets", self._target_history[0]))
        self._obs = np.array(arrays["observations"], dtype=np.float32)
        self.episode_terms = {k: np.array(v) for k, v in state["episode_terms"].items()}
        # a snapshot from before a parameter existed holds none of it: the twin as trained had it nominal
        nominal = PhysicsParams.nominal(self.num_envs)
        self.params = PhysicsParams(**{**vars(nominal), **{k: np.array(v) for k, v in state["params"].items()}})
        self.backend.set_params(np.arange(self.num_envs), self.params)
        self.rng.bit_generator.state = json.loads(state["rng"])
        for k, v in state["counters"].items():
            setattr(self, k, int(v))
        if self.feet is not None:
            self.feet.load_state_dict(state["feet"])
        if self.curriculum is not None:
            self.curriculum.levels[:] = state["terrain_levels"]
            self._place_on_terrain(np.arange(self.num_envs))

    # ------------------------------------------------------------------ internals
    def _check_actions(self, actions) -> np.ndarray:
        actions = np.asarray(actions, dtype=np.float64)
        expected = (self.num_envs, self.spec.num_actions)
        if actions.shape != expected:
            raise ValueError(f"actions must have shape {expected} (num_envs, num_actions), got {actions.shape}")
        bad = ~np.all(np.isfinite(actions), axis=1)
        self._nan_this_step = int(bad.sum())
        if self._nan_this_step:
            self.nan_action_count += self._nan_this_step
            actions = actions.copy()
            actions[bad] = self.safe_action()
        return np.clip(actions, -self.clip_actions, self.clip_actions)

    def _targets(self, actions: np.ndarray) -> np.ndarray:
        scaled = self.spec.action_scale * actions
        return scaled + np.asarray(self.spec.default_pose) if self.spec.control_mode == "position" else scaled

    def actions_from_targets(self, targets: np.ndarray) -> np.ndarray:
        """The actions that produce these PD targets (what /joint_commands carries on the robot)."""
        offset = np.asarray(self.spec.default_pose) if self.spec.control_mode == "position" else 0.0
        return (np.asarray(targets, dtype=np.float64) - offset) / self.spec.action_scale

    def _substep_targets(self, steps_before: int = 0) -> np.ndarray:
        """[N, decimation, nu]: physics step k of this env-step (of the one `steps_before` env-steps earlier, as
        settle_drives replays them) applies the target issued `latency` physics steps earlier."""
        dec = self.spec.physics_steps
        k = np.arange(dec)[None, :] - self.params.latency_steps[:, None]  # (n, dec), may be negative
        back = np.minimum(-(k // dec) + steps_before, self._history_len - 1)
        return self._target_history[back, np.arange(self.num_envs)[:, None]]

    def _lagged(self, targets: np.ndarray) -> np.ndarray:
        """The substep targets [N, decimation, nu] as the drives apply them: each through a first-order lag of
        time constant motor_lag_s, stepped exactly for a target held over a physics step; the drives keep the
        last."""
        alpha = -np.expm1(-self.spec.physics_dt / np.maximum(self.params.motor_lag_s, 1e-9))[:, None]  # 1: no lag
        if np.all(alpha == 1.0):
            self._drive_targets = targets[:, -1].copy()
            return targets
        applied = np.empty_like(targets)
        for k in range(targets.shape[1]):
            self._drive_targets = self._drive_targets + alpha * (targets[:, k] - self._drive_targets)
            applied[:, k] = self._drive_targets
        return applied

    def _observe(self, state: dict[str, np.ndarray] | None = None) -> np.ndarray:
        state = self.backend.state() if state is None else state
        noise = self.randomization.obs_noise if self.randomization.enabled else 0.0
        return self.task.observe(state, self.commands, self.actions, noise, self.rng, self.episode_time)

    def _reset_envs(self, ids: np.ndarray) -> None:
        spec, k = self.spec, len(ids)
        params = sample_params(self.randomization, k, spec.physics_dt, self.rng)
        rehearsing = np.flatnonzero(ids < self._rehearsing)
        if self.rehearsal is not None and rehearsing.size:
            rehearsed = sample_params(self.rehearsal.rehearsed, rehearsing.size, spec.physics_dt, self.rng)
            params.assign(rehearsing, rehearsed)
        self.params.assign(ids, params)
        self.backend.set_params(ids, params)
        self.backend.reset(ids)
        pos, *rest = self.task.reset_state(k, self.rng)
        if self.terrain is not None:
            pos[:, 2] += self._place_on_terrain(ids)
        self.backend.set_state(ids, pos, *rest)
        self.actions[ids] = 0.0
        self.last_actions[ids] = 0.0
        if self.feet is not None:
            self.feet.reset(ids)
        self._target_history[:, ids] = self._drive_targets[ids] = self._targets(np.zeros((k, spec.num_actions)))
        self.episode_length[ids] = 0
        self.episode_return[ids] = 0.0
        for v in self.episode_terms.values():
            v[ids] = 0.0
        if self.resample_commands:
            self.commands[ids] = self.task.commands.sample(k, self.rng)

    def _place_on_terrain(self, ids: np.ndarray) -> np.ndarray:
        """Put `ids` on their curriculum cells; returns the height each starts above (its spawn point's)."""
        terrain, c = self._on_terrain()
        self.backend.set_terrain(ids, c.levels[ids], c.types[ids])
        return terrain.spawn_heights[c.levels[ids], c.types[ids]]

    def _update_curriculum(self, ids: np.ndarray, state: dict[str, np.ndarray]) -> None:
        # every env starts at the centre of its sub-terrain, (0, 0)
        distance = np.linalg.norm(state["base_pos"][ids, :2], axis=1)
        commanded = np.linalg.norm(self.commands[ids, :2], axis=1) * self.task.cfg.episode_length_s
        self._on_terrain()[1].update(ids, distance, commanded, self.rng)

    def _on_terrain(self) -> tuple[TerrainGrid, TerrainCurriculum]:
        """The terrain and its curriculum (a twin has both or neither), for the steps that run only on terrain."""
        assert self.terrain is not None and self.curriculum is not None, "the twin has no terrain"
        return self.terrain, self.curriculum

    def _advance_commands_and_pushes(self, done: np.ndarray) -> None:
        live = ~done
        if self.resample_commands:
            due = np.flatnonzero(live & self.task.commands.due(self.episode_length))
            if due.size:
                self.commands[due] = self.task.commands.sample(due.size, self.rng)
        if self.push_steps:
            due = np.flatnonzero(live & (self.episode_length % self.push_steps == 0))
            if due.size:
                s = self.backend.state()
                lin = s["base_lin_vel"][due].copy()
                lin[:, :2] += self.rng.uniform(-1, 1, (due.size, 2)) * self.randomization.push_velocity
                self.backend.set_state(
                    due,
                    s["base_pos"][due],
                    s["base_quat"][due],
                    lin,
                    s["base_ang_vel"][due],
                    s["joint_pos"][due],
                    s["joint_vel"][due],
                )


def _zero_rows(arrays: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays with the rows (envs) of a physics fault set to zero: no NaN reaches the terms."""
    return {k: np.where(rows.reshape((-1,) + (1,) * (v.ndim - 1)), 0.0, v) for k, v in arrays.items()}
