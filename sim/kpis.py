"""Episode KPIs: pure numpy over trajectory arrays, so a validation campaign, a training evaluation and a field
log (MCAP -> arrays) are all scored by the same code.

A trajectory is a set of arrays over T control steps (the policy's period `dt`), optionally with leading batch
axes (E episodes): vectors are (..., T, k), flags are (..., T). Every KPI is "lower is better", except the three
that describe a gait (DESCRIPTIVE_KPIS: not gated):

| KPI | unit | definition |
|---|---|---|
| tracking_error_lin | m/s | mean over scored steps of the xy norm of (commanded - measured) base-frame velocity |
| tracking_error_ang | rad/s | mean over scored steps of abs(commanded - measured) yaw rate |
| falls | count | fall events (rising edges of the fall flag); a simulated episode ends at its first fall |
| joint_limit_violations | steps | steps on which any joint is beyond its range by more than JOINT_LIMIT_TOL |
| peak_torque | N m | largest abs(joint torque) |
| peak_torque_ratio | 1 | largest abs(torque) / torque limit (1.0 = a motor at its limit) |
| energy_j | J | positive mechanical work of the motors, sum of abs(tau * qd) * dt |
| safety_interventions | steps | steps on which the safety filter changed the policy's action (clamp, rate limit, NaN) |
| mean_air_time_s | s | mean duration of the feet's completed flights (sim.gait) |
| duty_factor | 1 | share of the time a foot is in stance, averaged over feet |
| trot_index | 1 | share of stance time with one diagonal pair down and the other up (four feet) |
| foot_slip_m_s | m/s | mean horizontal speed of the feet in contact |
| cost_of_transport | 1 | energy_j / (m g distance) over the steps with a motion command (sim.gait) |

The gait KPIs need the foot contacts (a robot with feet on a backend that senses them); field logs give them from
/foot_forces (training.retrain.ingest): air time, duty factor and trot index, without foot speeds or torques.

Scored steps are the steps before the first fall; the tracking errors also skip the first `settle_s` after the
start and after every change of the command (the response time a step command needs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim import gait

KPI_UNITS = {
    "tracking_error_lin": "m/s",
    "tracking_error_ang": "rad/s",
    "falls": "count",
    "joint_limit_violations": "steps",
    "peak_torque": "N m",
    "peak_torque_ratio": "1",
    "energy_j": "J",
    "safety_interventions": "steps",
    "mean_air_time_s": "s",
    "duty_factor": "1",
    "trot_index": "1",
    "foot_slip_m_s": "m/s",
    "cost_of_transport": "1",
}
KPI_NAMES = tuple(KPI_UNITS)
GAIT_KPIS = ("mean_air_time_s", "duty_factor", "trot_index", "foot_slip_m_s", "cost_of_transport")
DESCRIPTIVE_KPIS = ("mean_air_time_s", "duty_factor", "trot_index")  # describe the gait: neither side is worse
JOINT_LIMIT_TOL = 0.02  # rad: MuJoCo's soft joint limits let a joint sink this far into its range end
ACTION_TOL = 1e-6  # an action the filter moved by less than this was not changed (float32 round trip)


@dataclass
class Trajectory:
    """What the KPIs read; a field log fills the same fields from /cmd_vel, /odom, /imu/data, /joint_states and
    the policy node's diagnostics. Optional fields (None) drop the KPIs or criteria that need them."""

    dt: float  # control period (s)
    commands: np.ndarray  # (..., T, 3) vx, vy, wz commanded
    base_lin_vel: np.ndarray  # (..., T, 3) base frame
    base_ang_vel: np.ndarray  # (..., T, 3) base frame
    projected_gravity: np.ndarray  # (..., T, 3) unit gravity in the base frame
    joint_pos: np.ndarray  # (..., T, n)
    joint_vel: np.ndarray  # (..., T, n)
    torques: np.ndarray | None = None  # (..., T, n) applied joint torques
    actions_raw: np.ndarray | None = None  # (..., T, n) policy output before the safety filter
    actions: np.ndarray | None = None  # (..., T, n) after it
    base_height: np.ndarray | None = None  # (..., T) unknown on most robots (no motion capture)
    fell: np.ndarray | None = None  # (..., T) falls detected elsewhere (the twin's terminations)
    foot_contact: np.ndarray | None = None  # (..., T, F) bool, feet in the robot YAML's order
    foot_speed: np.ndarray | None = None  # (..., T, F) horizontal foot speed (m/s)


@dataclass(frozen=True)
class RobotLimits:
    """The robot-specific numbers the KPIs compare against (from the robot YAML / MJCF)."""

    joint_low: np.ndarray  # (n,) rad; -inf where a joint has no range
    joint_high: np.ndarray
    torque_limit: np.ndarray  # (n,) N m
    max_tilt_rad: float
    min_base_height: float
    mass_kg: float | None = None  # the whole robot (cost of transport)


def fall_flags(
    projected_gravity: np.ndarray, max_tilt_rad: float, base_height: np.ndarray | None, min_base_height: float
) -> np.ndarray:
    """(..., T) True where the base is tilted beyond max_tilt_rad or (when known) lower than min_base_height:
    the twin's termination criterion (sim.tasks.velocity_tracking)."""
    flags = projected_gravity[..., 2] > -np.cos(max_tilt_rad)
    if base_height is not None:
        flags = flags | (base_height < min_base_height)
    return flags


def before_first(flags: np.ndarray) -> np.ndarray:
    """(..., T) True on the steps before the first True of `flags` (all steps when there is none)."""
    return np.cumsum(flags, axis=-1) == 0


def count_events(flags: np.ndarray) -> np.ndarray:
    """Rising edges of a (..., T) flag: a fall that lasts ten steps is one fall."""
    f = flags.astype(np.int8)
    return f[..., 0] + np.sum(np.diff(f, axis=-1) == 1, axis=-1)


def settled(commands: np.ndarray, dt: float, settle_s: float) -> np.ndarray:
    """(..., T) False for the first settle_s after the start and after each change of the command."""
    t_count = commands.shape[-2]
    steps = np.arange(t_count)
    changed = np.any(np.diff(commands, axis=-2) != 0, axis=-1)  # (..., T-1): command at t+1 differs from t
    change_at = np.concatenate([np.ones(changed.shape[:-1] + (1,), bool), changed], axis=-1)
    last_change = np.maximum.accumulate(np.where(change_at, steps, 0), axis=-1)
    return (steps - last_change) * dt >= settle_s


def _masked_mean(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    n = mask.sum(axis=-1)
    return np.where(n > 0, np.sum(np.where(mask, values, 0.0), axis=-1) / np.maximum(n, 1), 0.0)


def tracking_errors(
    commands: np.ndarray, base_lin_vel: np.ndarray, base_ang_vel: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean xy linear-velocity error (m/s) and yaw-rate error (rad/s) over the steps where mask is True
    (0 when no step is scored)."""
    lin = np.linalg.norm(commands[..., :2] - base_lin_vel[..., :2], axis=-1)
    ang = np.abs(commands[..., 2] - base_ang_vel[..., 2])
    return _masked_mean(lin, mask), _masked_mean(ang, mask)


def joint_limit_violations(
    joint_pos: np.ndarray, low: np.ndarray, high: np.ndarray, mask: np.ndarray, tol: float = JOINT_LIMIT_TOL
) -> np.ndarray:
    """Steps (where mask) on which any joint lies more than `tol` outside [low, high]."""
    outside = np.any((joint_pos < low - tol) | (joint_pos > high + tol), axis=-1)
    return np.sum(outside & mask, axis=-1)


def peak_torque(torques: np.ndarray, mask: np.ndarray, limit: np.ndarray | None = None) -> np.ndarray:
    """Largest abs(torque) over joints and scored steps; divided per joint by `limit` when given."""
    t = np.abs(torques) if limit is None else np.abs(torques) / limit
    return np.max(np.where(mask[..., None], t, 0.0), axis=(-2, -1))


def energy(torques: np.ndarray, joint_vel: np.ndarray, dt: float, mask: np.ndarray) -> np.ndarray:
    """Positive mechanical work of the motors (J): sum of abs(tau * qd) * dt over joints and scored steps.
    Regenerative braking counts as work here, as it does for motors without energy recovery."""
    power = np.sum(np.abs(torques * joint_vel), axis=-1)
    return np.sum(np.where(mask, power, 0.0), axis=-1) * dt


def safety_interventions(actions_raw: np.ndarray, actions: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Steps (where mask) on which the filtered action differs from the policy's output, or the output held
    NaN/Inf (the filter then sent the safe action)."""
    with np.errstate(invalid="ignore"):
        changed = np.any(~(np.abs(actions - actions_raw) <= ACTION_TOL), axis=-1)
    return np.sum(changed & mask, axis=-1)


def episode_kpis(traj: Trajectory, limits: RobotLimits, settle_s: float = 0.5) -> dict[str, np.ndarray]:
    """Every KPI of KPI_NAMES that the trajectory's fields allow, one value per episode (shape = batch axes)."""
    falls = fall_flags(traj.projected_gravity, limits.max_tilt_rad, traj.base_height, limits.min_base_height)
    if traj.fell is not None:
        falls = falls | traj.fell
    scored = before_first(falls)
    lin, ang = tracking_errors(
        traj.commands, traj.base_lin_vel, traj.base_ang_vel, scored & settled(traj.commands, traj.dt, settle_s)
    )
    out = {
        "tracking_error_lin": lin,
        "tracking_error_ang": ang,
        "falls": count_events(falls),
        "joint_limit_violations": joint_limit_violations(traj.joint_pos, limits.joint_low, limits.joint_high, scored),
    }
    if traj.torques is not None:
        out["peak_torque"] = peak_torque(traj.torques, scored)
        out["peak_torque_ratio"] = peak_torque(traj.torques, scored, limits.torque_limit)
        out["energy_j"] = energy(traj.torques, traj.joint_vel, traj.dt, scored)
    if traj.actions_raw is not None and traj.actions is not None:
        out["safety_interventions"] = safety_interventions(traj.actions_raw, traj.actions, scored)
    if traj.foot_contact is not None:
        out.update(gait_kpis(traj, limits, scored))
    return out


def gait_kpis(traj: Trajectory, limits: RobotLimits, scored: np.ndarray) -> dict[str, np.ndarray]:
    """The GAIT_KPIS the trajectory allows (trot_index: four feet; cost_of_transport: torques and a mass)."""
    if traj.foot_contact is None:
        return {}
    contact = traj.foot_contact.astype(bool)
    out = {
        "mean_air_time_s": gait.mean_air_time(contact, scored, traj.dt),
        "duty_factor": gait.duty_factor(contact, scored),
    }
    if contact.shape[-1] == 4:
        out["trot_index"] = gait.trot_index(contact, scored)
    if traj.foot_speed is not None:
        out["foot_slip_m_s"] = gait.foot_slip(traj.foot_speed, contact, scored)
    if traj.torques is not None and limits.mass_kg is not None:
        move = scored & gait.moving(traj.commands)
        work = energy(traj.torques, traj.joint_vel, traj.dt, move)
        out["cost_of_transport"] = gait.cost_of_transport(work, traj.base_lin_vel, traj.dt, limits.mass_kg, move)
    return out
