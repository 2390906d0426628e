"""One batch of scenarios on one BatchedTwin, driven by the exported artifact through the `edge` runtime.

This function is the unit of work of a campaign: it runs in the driver process (one worker) or as a Ray task,
and takes everything it needs as arguments, including the artifact's bytes, so a cluster node runs exactly the
bytes the driver verified (and the robot gets).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge.artifact import read_artifact
from edge.errors import ArtifactError
from edge.manifest import MANIFEST_FILE, Manifest
from edge.observation import projected_gravity
from edge.policy import Policy
from edge.runtime import load_policy
from sim.backends import FOOT_BACKENDS
from sim.campaign.commands import compile_sequence
from sim.campaign.config import COMMAND_AXIS, CampaignConfig
from sim.campaign.matrix import BatchJob, Scenario
from sim.kpis import ACTION_TOL, RobotLimits, Trajectory, episode_kpis
from sim.randomization import FIELD_KEYS, NOMINAL, PhysicsParams, RandomizationConfig
from sim.robot import RobotSpec, build_model, joint_ranges, pd_torques, scaled_gains
from sim.tasks import ObservationTerm, VelocityTaskConfig, load_task
from sim.tasks.terms import OBSERVATIONS
from sim.twin import BatchedTwin

TRACE_POINTS = 250  # a stored trajectory keeps at most this many points per channel (report plots)
TRACE_CHANNELS = ("t", "cmd_vx", "vx", "cmd_wz", "wz", "tilt_deg", "base_height", "torque_ratio", "intervention")


@dataclass(frozen=True)
class ArtifactFiles:
    """An artifact's files as the driver read and verified them."""

    files: dict  # file name -> bytes (manifest.json, policy.onnx)
    sha256: str  # of policy.onnx

    @classmethod
    def read(cls, artifact_dir: str | Path) -> ArtifactFiles:
        manifest, onnx_bytes = read_artifact(artifact_dir)  # refuses a tampered or truncated artifact
        manifest_bytes = (Path(artifact_dir) / MANIFEST_FILE).read_bytes()
        return cls({MANIFEST_FILE: manifest_bytes, manifest.policy["file"]: onnx_bytes}, manifest.policy["sha256"])


@dataclass
class BatchResult:
    key: str
    rows: list  # one dict per episode: id, batch, seed, axes, kpis, steps, trace_index
    trace: np.ndarray  # (episodes, points, len(TRACE_CHANNELS)) float32
    env_steps: int
    seconds: float
    contacts: np.ndarray | None = None  # (episodes, steps, feet) bool at every step (footfall diagrams)
    feet: tuple[str, ...] = ()


_POLICIES: dict[tuple[str, str], Policy] = {}  # per worker process: load each artifact once


def _policy(files: ArtifactFiles, runtime: str, max_batch: int) -> Policy:
    key = (files.sha256, runtime)
    if key not in _POLICIES:
        with tempfile.TemporaryDirectory(prefix="campaign-policy-") as tmp:
            for name, data in files.files.items():
                (Path(tmp) / name).write_bytes(data)
            _POLICIES[key] = load_policy(tmp, backend=runtime, max_batch=max_batch)  # verifies the sha256 again
    return _POLICIES[key]


def observed_task(manifest: Manifest, spec: RobotSpec) -> VelocityTaskConfig:
    """The robot's task observing what the artifact observes: a policy trained on another task of the robot (a
    gait clock's, say) is judged with its own observation layout."""
    terms = [t["name"] for t in manifest.observation["terms"]]
    return dataclasses.replace(
        load_task(spec), observations={name: ObservationTerm(OBSERVATIONS[name]) for name in terms}
    )


def check_compatible(manifest: Manifest, spec: RobotSpec) -> None:
    """Refuse to validate an artifact on a robot whose joints or control period differ, or that observes a term
    the twin cannot compute."""
    terms = [t["name"] for t in manifest.observation["terms"]]
    problems = []
    if manifest.joint_names != list(spec.joints):
        problems.append(f"joints {manifest.joint_names} vs {list(spec.joints)}")
    unknown = [t for t in terms if t not in OBSERVATIONS]
    if unknown:
        problems.append(
            f"observation terms {unknown} the twin does not compute (it computes {', '.join(OBSERVATIONS)})"
        )
    if abs(manifest.control_period - spec.control_dt) > 1e-9 or manifest.control["mode"] != spec.control_mode:
        problems.append("control mode or period")
    if problems:
        raise ArtifactError(
            f"the artifact was exported for robot {manifest.robot['name']!r}, which does not match the campaign's "
            f"robot {spec.name!r}: {'; '.join(problems)}"
        )


def robot_limits(spec: RobotSpec) -> RobotLimits:
    """Joint ranges from the MJCF (every control mode), torque limits from the robot YAML, fall criterion from
    its task (the twin's terminations), the nominal mass from the MJCF."""
    low, high = joint_ranges(spec)
    task = load_task(spec)
    mass = float(build_model(spec).body_mass.sum())
    return RobotLimits(low, high, np.asarray(spec.torque_limit), task.max_tilt_rad, task.min_base_height, mass)


def _twin_randomization(cfg: CampaignConfig, job: BatchJob) -> RandomizationConfig:
    # ranges pinned to nominal (scenario values come per env through set_params); noise and pushes are twin-wide
    return RandomizationConfig(
        enabled=True,
        **{k: (v, v) for k, v in NOMINAL.items()},
        obs_noise=job.obs_noise,
        push_interval_s=cfg.push_interval_s if job.push_velocity > 0 else 0.0,
        push_velocity=job.push_velocity,
    )


def _params(scenarios: tuple[Scenario, ...], sim_dt: float) -> PhysicsParams:
    def col(axis: str) -> np.ndarray:
        return np.array([float(s.value(axis)) for s in scenarios])

    return PhysicsParams.from_columns({k: col(k) for k in FIELD_KEYS}, sim_dt)


def run_batch(
    job: BatchJob, cfg: CampaignConfig, spec: RobotSpec, files: ArtifactFiles, threads: int = 1
) -> BatchResult:
    """Run every scenario of `job` for cfg.episode_s on one twin and score each episode with sim.kpis."""
    start = time.perf_counter()
    policy = _policy(files, cfg.runtime, cfg.batch_size)
    check_compatible(policy.manifest, spec)
    policy.reset()
    n, steps, nu = len(job.scenarios), max(1, int(round(cfg.episode_s / spec.control_dt))), spec.num_actions
    commands = np.stack(
        [
            compile_sequence(cfg.commands[s.value(COMMAND_AXIS)], spec.command_limits, spec.control_dt, steps)
            for s in job.scenarios
        ]
    )
    params = _params(job.scenarios, spec.physics_dt)
    task = observed_task(policy.manifest, spec)
    if cfg.backend not in FOOT_BACKENDS:  # rewards are no KPI: a backend without feet runs without the foot terms
        task = task.without_foot_terms()
    if job.terrain is not None:
        task = dataclasses.replace(task, terrain=cfg.terrains[job.terrain])
    twin = BatchedTwin(
        spec,
        num_envs=n,
        seed=job.twin_seed,
        task=task,
        randomization=_twin_randomization(cfg, job),
        backend=cfg.backend,
        nthread=threads,
    ).hold_commands()
    twin.max_episode_steps = steps + 1  # the campaign's episode length, not the robot's training one
    twin.terrain_timeout = False  # an episode runs its length: the campaign's terrains are sized for it
    twin.set_commands(commands[:, 0])  # before reset, so the first observation carries the first command
    obs, _ = twin.reset()
    twin.set_params(params)

    rec = {
        k: np.zeros((n, steps, d), np.float32)
        for k, d in (("lin", 3), ("ang", 3), ("grav", 3), ("q", nu), ("qd", nu), ("tau", nu), ("raw", nu), ("act", nu))
    }
    height = np.zeros((n, steps), np.float32)
    fell = np.zeros((n, steps), bool)
    feet = twin.feet  # None: no feet, or a backend that does not sense them (no gait KPIs)
    if feet is not None:
        contact = np.zeros((n, steps, len(spec.feet)), bool)
        foot_speed = np.zeros((n, steps, len(spec.feet)), np.float32)
    scale, offset = policy.manifest.action_vector("scale"), policy.manifest.action_vector("offset")
    kp, kd = scaled_gains(spec, params.kp_scale, params.kd_scale)
    down = np.zeros(n, bool)
    for t in range(steps):
        raw = policy.infer(obs)
        # exactly policy.act(obs), keeping the raw output to count interventions
        act = raw if policy.safety is None else policy.safety(raw, obs)
        if t + 1 < steps:  # the observation returned by this step must carry the next step's command
            changed = np.flatnonzero(np.any(commands[:, t + 1] != commands[:, t], axis=1))
            if changed.size:
                twin.set_commands(commands[changed, t + 1], changed)
        obs, _, terminated, _, _ = twin.step(act)
        state = twin.backend.state()
        targets = offset + scale * np.clip(act, -twin.clip_actions, twin.clip_actions)
        lin, ang = twin.task.base_velocities(state)
        down |= terminated  # the twin resets a fallen env at once; what follows is another episode
        rec["lin"][:, t], rec["ang"][:, t] = lin, ang
        rec["grav"][:, t] = projected_gravity(state["base_quat"])
        rec["q"][:, t], rec["qd"][:, t] = state["joint_pos"], state["joint_vel"]
        rec["tau"][:, t] = pd_torques(spec, state, targets, kp, kd, params.motor_strength)
        rec["raw"][:, t], rec["act"][:, t] = raw, act
        height[:, t] = twin.base_height(state)  # above the terrain under the base
        fell[:, t] = down
        if feet is not None:
            contact[:, t] = feet.contact
            foot_speed[:, t] = np.linalg.norm(feet.vel[..., :2], axis=-1)
    twin.close()

    traj = Trajectory(
        dt=spec.control_dt,
        commands=commands,
        base_lin_vel=rec["lin"],
        base_ang_vel=rec["ang"],
        projected_gravity=rec["grav"],
        joint_pos=rec["q"],
        joint_vel=rec["qd"],
        torques=rec["tau"],
        actions_raw=rec["raw"],
        actions=rec["act"],
        base_height=height,
        fell=fell,
        foot_contact=None if feet is None else contact,
        foot_speed=None if feet is None else foot_speed,
    )
    limits = robot_limits(spec)
    kpis = episode_kpis(traj, limits, cfg.settle_s)
    scored = (~fell).sum(axis=1)
    rows = [
        {
            "type": "episode",
            "id": s.id,
            "batch": job.key,
            "seed": s.seed,
            "axes": dict(s.values),
            "kpis": {k: float(v[i]) for k, v in kpis.items()},
            "steps": int(scored[i]),
            "trace_index": i,
        }
        for i, s in enumerate(job.scenarios)
    ]
    elapsed = time.perf_counter() - start
    return BatchResult(job.key, rows, _trace(traj, limits), n * steps, elapsed, traj.foot_contact, spec.feet)


def _trace(traj: Trajectory, limits: RobotLimits) -> np.ndarray:
    """Downsampled channels for the report's worst-case plots (TRACE_CHANNELS)."""
    torques, raw, actions, height, fell = traj.torques, traj.actions_raw, traj.actions, traj.base_height, traj.fell
    assert torques is not None and raw is not None and actions is not None, "run_batch records every channel"
    assert height is not None and fell is not None, "run_batch records every channel"
    steps = traj.commands.shape[1]
    idx = np.arange(0, steps, max(1, -(-steps // TRACE_POINTS)))
    tilt = np.degrees(np.arccos(np.clip(-traj.projected_gravity[..., 2], -1.0, 1.0)))
    with np.errstate(invalid="ignore"):
        intervention = np.any(~(np.abs(actions - raw) <= ACTION_TOL), axis=-1)
    channels = [
        np.broadcast_to((np.arange(steps) + 1) * traj.dt, traj.commands.shape[:2]),
        traj.commands[..., 0],
        traj.base_lin_vel[..., 0],
        traj.commands[..., 2],
        traj.base_ang_vel[..., 2],
        tilt,
        height,
        np.max(np.abs(torques) / limits.torque_limit, axis=-1),
        intervention,
    ]
    out = np.stack(channels, axis=-1)[:, idx].astype(np.float32)
    out[fell[:, idx]] = np.nan  # after a fall the env is already in its next episode: not this one's data
    out[..., 0] = ((idx + 1) * traj.dt)[None]
    return out
