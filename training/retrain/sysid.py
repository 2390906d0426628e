"""System identification: fit the twin's physical parameters to a field log by replaying the logged joint
targets open loop and matching the logged base velocities. CMA-ES (the `cma` package) proposes parameter sets;
each generation is evaluated as one batched twin, one env per candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.randomization import FIELD_KEYS, RandomizationConfig, fixed_params
from sim.robot import RobotSpec
from sim.twin import BatchedTwin

DEFAULT_BOUNDS = {
    "friction": (0.2, 1.5),
    "payload_kg": (-1.0, 5.0),
    "motor_strength": (0.5, 1.5),
    "kp_scale": (0.5, 1.5),
    "kd_scale": (0.5, 1.5),
    "latency_s": (0.0, 0.04),
}


@dataclass
class SysIdConfig:
    params: tuple[str, ...] = ("payload_kg", "motor_strength", "latency_s")
    bounds: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_BOUNDS))
    population: int = 16
    generations: int = 15
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.params) - set(FIELD_KEYS))
        if unknown:
            raise ValueError(f"cannot identify {', '.join(unknown)}; identifiable: {', '.join(FIELD_KEYS)}")


@dataclass
class SysIdResult:
    values: dict[str, float]
    error_before: float  # trajectory error of the nominal twin
    error_after: float  # trajectory error with the identified values
    history: list[float]  # best error per generation


def replay_errors(spec: RobotSpec, targets: np.ndarray, lin_vel: np.ndarray, ang_vel: np.ndarray,
                  candidates: list[dict[str, float]]) -> np.ndarray:
    """Mean squared base-velocity error (vx, vy, wz) of each candidate replaying `targets` [T, n] from rest."""
    n = len(candidates)
    twin = BatchedTwin(spec, num_envs=n, seed=0, randomization=RandomizationConfig(enabled=False),
                       resample_commands=False)
    twin.reset()
    state = twin.backend.state()
    start = np.tile(np.asarray(spec.default_pose, dtype=np.float64), (n, 1))
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    twin.backend.set_state(np.arange(n), state["base_pos"] * [0, 0, 1], quat, np.zeros((n, 3)), np.zeros((n, 3)),
                           start, np.zeros_like(start))
    for i, values in enumerate(candidates):
        twin.set_params(fixed_params(values, spec.sim_dt), np.array([i]))
    twin.max_episode_steps = len(targets) + 1
    err = np.zeros(n)
    for t in range(len(targets)):
        twin.step(np.tile(twin.actions_from_targets(targets[t]), (n, 1)))
        lin, ang = twin.task.base_velocities(twin.backend.state())
        err += (lin[:, 0] - lin_vel[t, 0]) ** 2 + (lin[:, 1] - lin_vel[t, 1]) ** 2 + (ang[:, 2] - ang_vel[t, 2]) ** 2
    twin.close()
    return err / len(targets)


def identify(spec: RobotSpec, targets: np.ndarray, lin_vel: np.ndarray, ang_vel: np.ndarray,
             cfg: SysIdConfig | None = None, progress=None) -> SysIdResult:
    """Fit cfg.params to the log (targets [T, n], base-frame velocities [T, 3]); returns values and errors."""
    import cma

    cfg = cfg or SysIdConfig()
    if not np.all(np.isfinite(targets)):
        raise ValueError("the log has no usable /joint_commands over its whole span; system id replays them")
    lo = np.array([cfg.bounds[p][0] for p in cfg.params])
    hi = np.array([cfg.bounds[p][1] for p in cfg.params])

    def decode(x: np.ndarray) -> dict[str, float]:  # CMA works in [0, 1] per parameter
        values = {p: float(v) for p, v in zip(cfg.params, lo + np.clip(x, 0, 1) * (hi - lo), strict=True)}
        if "latency_s" in values:  # the twin applies whole physics steps of delay
            values["latency_s"] = round(values["latency_s"] / spec.sim_dt) * spec.sim_dt
        return values

    es = cma.CMAEvolutionStrategy(np.full(len(cfg.params), 0.5), 0.3, {
        "bounds": [0, 1], "popsize": cfg.population, "seed": cfg.seed + 1, "verbose": -9})
    history = []
    for g in range(cfg.generations):
        xs = es.ask()
        errors = replay_errors(spec, targets, lin_vel, ang_vel, [decode(x) for x in xs])
        es.tell(xs, errors.tolist())
        history.append(float(es.result.fbest))
        if progress is not None:
            progress(g + 1, cfg.generations, history[-1])
    best = decode(es.result.xbest)
    before, after = replay_errors(spec, targets, lin_vel, ang_vel, [{}, best])
    return SysIdResult(best, float(before), float(after), history)
