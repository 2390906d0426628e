"""Gait KPIs: plain numpy over foot-contact traces, so the campaign, a training evaluation and (where a log carries
contacts) a field log score a gait by the same code. Arrays are (..., T, F) for T control steps and F feet in the
robot YAML's `feet` order, with a (..., T) mask of the steps scored (before the first fall); results have the
batch shape.

Trot pairing comes from the foot order: the feet are listed front pair, then rear pair, with the sides in the same
order in both pairs (Go1's FR, FL, RR, RL; ANYmal's LF, RF, LH, RH), so feet 0 and 3, and 1 and 2, are diagonal.
"""

from __future__ import annotations

import numpy as np

from edge.observation import STILL_COMMAND  # one threshold for the KPIs, the terms and policy_node's gait clock

GRAVITY = 9.81  # m/s^2
DIAGONALS = ((0, 3), (1, 2))  # four feet in the order above
MIN_DISTANCE_M = 0.01  # cost of transport: a robot that spends energy without moving pays as if it moved 1 cm


def _masked_mean(values: np.ndarray, mask: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    n = mask.sum(axis=axes)
    return np.where(n > 0, np.sum(np.where(mask, values, 0.0), axis=axes) / np.maximum(n, 1), 0.0)


def duty_factor(contact: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Share of the scored time a foot is in stance, averaged over feet (0.5 for a trot without flight)."""
    return _masked_mean(contact, np.broadcast_to(mask[..., None], contact.shape), (-2, -1))


def flight_durations(contact: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
    """Per series (the batch axes and feet flattened, feet fastest): the lengths in steps of its completed flights,
    the runs of air steps that start with a lift-off and end with a touch-down inside the scored steps."""
    t_count, feet = contact.shape[-2:]
    code = np.where(np.broadcast_to(mask[..., None], contact.shape), contact.astype(np.int8), -1)  # -1: not scored
    series = np.moveaxis(code, -1, -2).reshape(-1, t_count)
    out = []
    for s in series:
        starts = np.concatenate([[0], np.flatnonzero(np.diff(s)) + 1])
        lengths = np.diff(np.concatenate([starts, [t_count]]))
        values = s[starts]
        inner = np.arange(1, len(starts) - 1)  # a run with runs on both sides
        completed = inner[(values[inner] == 0) & (values[inner - 1] == 1) & (values[inner + 1] == 1)]
        out.append(lengths[completed])
    return out


def mean_air_time(contact: np.ndarray, mask: np.ndarray, dt: float) -> np.ndarray:
    """Mean duration (s) of the completed flights of all feet (0 without any)."""
    batch = contact.shape[:-2]
    feet = contact.shape[-1]
    durations = flight_durations(contact, mask)
    per_episode = [np.concatenate(durations[i * feet : (i + 1) * feet]) for i in range(int(np.prod(batch, dtype=int)))]
    means = [float(d.mean()) * dt if d.size else 0.0 for d in per_episode]
    return np.array(means).reshape(batch)


def trot_index(contact: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Share of the feet's scored stance time spent in a trot: one diagonal pair in stance, the other in the air
    (1 for a trot, 0 for a pronk, bound or pace; 0 without stance). Four feet, ordered as the module says."""
    (a, d), (b, c) = DIAGONALS
    f = contact.astype(bool)
    first = f[..., a] & f[..., d] & ~f[..., b] & ~f[..., c]
    second = f[..., b] & f[..., c] & ~f[..., a] & ~f[..., d]
    trot_steps = np.sum((first | second) & mask, axis=-1)
    stance = np.sum(f & mask[..., None], axis=(-2, -1))
    return np.where(stance > 0, 2.0 * trot_steps / np.maximum(stance, 1), 0.0)


def foot_slip(foot_speed: np.ndarray, contact: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean horizontal foot speed (m/s) over the scored steps and feet in contact (0 without contact)."""
    return _masked_mean(foot_speed, contact.astype(bool) & mask[..., None], (-2, -1))


def moving(commands: np.ndarray) -> np.ndarray:
    """(..., T) True where the (vx, vy, wz) command asks to move."""
    return np.linalg.norm(commands, axis=-1) > STILL_COMMAND


def cost_of_transport(
    energy_j: np.ndarray, base_lin_vel: np.ndarray, dt: float, mass_kg: float, mask: np.ndarray
) -> np.ndarray:
    """Energy / (m g distance): the motors' positive work (sim.kpis.energy over the same steps) per weight and
    metre of horizontal travel over the steps of `mask` (scored, with a motion command), the distance floored at
    MIN_DISTANCE_M; 0 for an episode without such a step (nothing was to be transported)."""
    distance = np.sum(np.where(mask, np.linalg.norm(base_lin_vel[..., :2], axis=-1), 0.0), axis=-1) * dt
    cot = energy_j / (mass_kg * GRAVITY * np.maximum(distance, MIN_DISTANCE_M))
    return np.where(mask.any(axis=-1), cot, 0.0)
