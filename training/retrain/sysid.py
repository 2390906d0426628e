"""System identification: fit the twin's physical parameters to field logs by replaying the logged joint targets
open loop from the logged initial states and matching the logged base velocities and, weighted by
`joint_pos_weight`, joint positions (a legged robot's joints show its actuators' gains and delay, and its load,
before its base velocities tell candidates apart). CMA-ES (the `cma` package) proposes parameter sets; each
generation is evaluated as one batched twin, one env per (candidate, window).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.observation import rotate_world_to_base
from sim.randomization import FIELD_KEYS, RandomizationConfig, fixed_params
from sim.robot import RobotSpec
from sim.twin import BatchedTwin
from training.errors import ConfigError
from training.retrain.ingest import FieldLog

NOMINAL = {
    "friction": 1.0,
    "payload_kg": 0.0,
    "motor_strength": 1.0,
    "kp_scale": 1.0,
    "kd_scale": 1.0,
    "latency_s": 0.0,
}  # sim.randomization.fixed_params({}): the twin as trained
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
    population: int = 16  # per CMA-ES run
    generations: int = 15
    runs: int = 1  # independent CMA-ES runs (seeds seed+1, seed+2, ...) evaluated together; the best wins
    seed: int = 0
    joint_pos_weight: float = 0.0  # weight of the joint-position error (rad^2) beside the base-velocity one

    def __post_init__(self) -> None:
        unknown = sorted(set(self.params) - set(FIELD_KEYS))
        if unknown:
            raise ConfigError(f"cannot identify {', '.join(unknown)}; identifiable: {', '.join(FIELD_KEYS)}")
        self.bounds = {**DEFAULT_BOUNDS, **{k: (float(lo), float(hi)) for k, (lo, hi) in self.bounds.items()}}
        bad = [p for p in self.params if not self.bounds[p][0] < self.bounds[p][1]]
        if bad:
            raise ConfigError(f"sysid bounds of {', '.join(bad)} must be [low, high] with low < high")


@dataclass
class Window:
    """A stretch of a log to replay: the joint targets [T, n] and the base-frame velocities [T, 3] they produced,
    from the state just before the first target (base velocities, joint state) and the targets issued before it
    (what the actuation delay still applies during the first steps)."""

    targets: np.ndarray
    lin_vel: np.ndarray
    ang_vel: np.ndarray
    start_lin_vel: np.ndarray  # (3,)
    start_ang_vel: np.ndarray  # (3,)
    start_joint_pos: np.ndarray  # (n,)
    start_joint_vel: np.ndarray  # (n,)
    earlier_targets: np.ndarray  # (k, n), most recent first; empty: the robot was at rest
    start_quat: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))  # w, x, y, z
    start_height: float | None = None  # base height; None: the robot's nominal one
    joint_pos: np.ndarray | None = None  # (T, n) the joint positions the targets produced; None: not matched


@dataclass
class SysIdResult:
    values: dict[str, float]
    error_before: float  # trajectory error of the nominal twin
    error_after: float  # trajectory error with the identified values
    history: list[float]  # best error per generation
    steps: int = 0  # logged control steps replayed per candidate

    def to_dict(self) -> dict:
        return {
            "values": self.values,
            "error_before": self.error_before,
            "error_after": self.error_after,
            "history": self.history,
            "steps": self.steps,
        }


def log_windows(logs: list[FieldLog], seconds: float, count: int) -> list[Window]:
    """Up to `count` windows of `seconds` from the stretches of the logs where every input is known (after the
    first /joint_commands, /joint_states and /odom). Windows starting as the command changes come first: the
    robot accelerates there, often at its torque limit, which is where mass and motor strength show before
    small differences in contact grow apart (an open-loop replay of a wrong twin diverges within a second, and
    then every wrong twin is equally wrong). The rest are spread evenly over the logs."""
    at_changes, evenly = [], []
    for log in logs:
        if len(log.t) < 3:
            continue
        length = max(2, int(round(seconds / log.dt)))
        known = (
            np.isfinite(log.joint_targets).all(1)
            & np.isfinite(log.joint_pos).all(1)
            & np.isfinite(log.joint_vel).all(1)
        )
        first = max(int(np.argmax(known)) if known.any() else len(log.t), 1)
        # a window [a, a + length) starts from the state logged at row a - 1
        valid = [first <= a and bool(known[a - 1 : a + length].all()) for a in range(len(log.t) - length + 1)]
        changes = np.flatnonzero(np.any(np.diff(log.commands, axis=0) != 0, axis=1))  # the row before a change
        at_changes += [(log, int(a), length) for a in changes if a < len(valid) and valid[a]]
        evenly += [(log, a, length) for a in range(first, len(valid), length) if valid[a]]
    chosen = _spread(at_changes, count)
    chosen += _spread([c for c in evenly if c not in chosen], count - len(chosen))
    return [_window(log, a, length) for log, a, length in chosen]


def _spread(items: list, k: int) -> list:
    if k <= 0 or not items:
        return []
    return [items[i] for i in np.unique(np.linspace(0, len(items) - 1, min(k, len(items))).round().astype(int))]


def _window(log: FieldLog, a: int, length: int) -> Window:
    span = slice(a, a + length)
    before = log.joint_targets[max(0, a - 10) : a][::-1]
    before = before[: np.argmin(np.isfinite(before).all(1))] if not np.isfinite(before).all() else before
    height = float(log.base_height[a - 1]) if np.isfinite(log.base_height[a - 1]) else None
    # the whole orientation, yaw included: MuJoCo's pyramidal friction cones are not symmetric under yaw
    quat = log.orientation[a - 1] if log.orientation is not None else np.array([1.0, 0.0, 0.0, 0.0])
    return Window(
        log.joint_targets[span],
        log.base_lin_vel[span],
        log.base_ang_vel[span],
        log.base_lin_vel[a - 1],
        log.base_ang_vel[a - 1],
        log.joint_pos[a - 1],
        log.joint_vel[a - 1],
        before,
        quat / np.linalg.norm(quat),
        height,
        log.joint_pos[span],
    )


def replay_errors(
    spec: RobotSpec, windows: list[Window], candidates: list[dict[str, float]], joint_pos_weight: float = 0.0
) -> np.ndarray:
    """Mean squared base-velocity error (vx, vy, wz) of each candidate, averaged over the windows (equal lengths),
    plus joint_pos_weight times the mean squared joint-position error summed over the joints."""
    velocities, joints = replay(spec, windows, candidates, joints=True)  # (T, candidates, windows, 3 | n)
    logged = np.stack([np.concatenate([w.lin_vel[:, :2], w.ang_vel[:, 2:]], 1) for w in windows], 1)
    error = ((velocities - logged[:, None]) ** 2).sum(-1).mean(0).mean(-1)
    if joint_pos_weight:
        if any(w.joint_pos is None for w in windows):
            raise ValueError("joint_pos_weight needs the logged joint positions of every replay window")
        logged_joints = np.stack([w.joint_pos for w in windows], 1)
        error = error + joint_pos_weight * ((joints - logged_joints[:, None]) ** 2).sum(-1).mean(0).mean(-1)
    return error


def replay(
    spec: RobotSpec, windows: list[Window], candidates: list[dict[str, float]], joints: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The base velocities (vx, vy, wz) of each candidate replaying each window: [T, candidates, windows, 3];
    joints=True: and the joint positions, [T, candidates, windows, n]."""
    steps = {len(w.targets) for w in windows}
    if len(steps) != 1:
        raise ValueError(f"replay windows must have one length, got {sorted(steps)}")
    (T,), nc, nw = steps, len(candidates), len(windows)
    n = nc * nw  # env i = candidate i // nw on window i % nw
    twin = BatchedTwin(spec, num_envs=n, seed=0, randomization=RandomizationConfig(enabled=False)).hold_commands()
    twin.reset()
    for i, values in enumerate(candidates):
        twin.set_params(fixed_params(values, spec.sim_dt, nw), np.arange(i * nw, (i + 1) * nw))
    tile = lambda get: np.tile(np.stack([get(w) for w in windows]), (nc, 1))  # noqa: E731
    pos = np.zeros((n, 3))
    pos[:, 2] = tile(lambda w: [spec.base_height if w.start_height is None else w.start_height])[:, 0]
    quat = tile(lambda w: w.start_quat)
    conjugate = quat * [1.0, -1.0, -1.0, -1.0]  # rotate_world_to_base with the inverse: base -> world
    twin.backend.set_state(
        np.arange(n),
        pos,
        quat,
        rotate_world_to_base(conjugate, tile(lambda w: w.start_lin_vel)),
        tile(lambda w: w.start_ang_vel),
        tile(lambda w: w.start_joint_pos),
        tile(lambda w: w.start_joint_vel),
    )
    # the actuation delay still applies targets issued before the window: refill its history from the log
    rest = np.zeros(spec.num_actions) if spec.control_mode == "velocity" else np.asarray(spec.default_pose)
    state = twin.state_dict()
    history = state["arrays"]["target_history"]
    for j in range(len(history)):
        history[j] = tile(
            lambda w, j=j: w.earlier_targets[min(j, len(w.earlier_targets) - 1)] if len(w.earlier_targets) else rest
        )
    twin.load_state_dict(state)
    twin.max_episode_steps = T + 1
    targets = np.tile(np.stack([w.targets for w in windows], 1), (1, nc, 1))  # (T, n, actions)
    out, joint_pos = np.zeros((T, n, 3)), np.zeros((T, n, spec.num_actions))
    for t in range(T):
        twin.step(twin.actions_from_targets(targets[t]))
        state = twin.backend.state()
        lin, ang = twin.task.base_velocities(state)
        out[t, :, :2], out[t, :, 2] = lin[:, :2], ang[:, 2]
        joint_pos[t] = state["joint_pos"]
    twin.close()
    velocities = out.reshape(T, nc, nw, 3)
    return (velocities, joint_pos.reshape(T, nc, nw, -1)) if joints else velocities


def identify(spec: RobotSpec, windows: list[Window], cfg: SysIdConfig | None = None, progress=None) -> SysIdResult:
    """Fit cfg.params to the replay windows; returns the values and the trajectory errors before and after."""
    import cma

    cfg = cfg or SysIdConfig()
    if not windows:
        raise ValueError(
            "no stretch of the logs has /joint_commands, /joint_states and /odom together; "
            "system id replays the logged joint commands"
        )
    if not all(np.all(np.isfinite(w.targets)) for w in windows):
        raise ValueError("a replay window has missing /joint_commands; system id replays them")
    # continuous parameters search [0, 1] of their bounds; latency searches whole physics steps (an integer
    # variable: the twin delays by whole steps, so a continuous latency would give CMA flat steps to climb)
    lo = np.array([cfg.bounds[p][0] for p in cfg.params])
    hi = np.array([cfg.bounds[p][1] for p in cfg.params])
    is_latency = np.array([p == "latency_s" for p in cfg.params])
    top = np.where(is_latency, np.floor(hi / spec.sim_dt), 1.0)

    def decode(x: np.ndarray) -> dict[str, float]:
        x = np.clip(x, 0, top)
        values = np.where(is_latency, np.round(x) * spec.sim_dt, lo + x * (hi - lo))
        return {p: float(v) for p, v in zip(cfg.params, values, strict=True)}

    nominal = np.array([NOMINAL[p] for p in cfg.params])  # the search starts from the twin as it was
    x0 = np.where(
        is_latency, np.round(np.clip(nominal, lo, hi) / spec.sim_dt), (np.clip(nominal, lo, hi) - lo) / (hi - lo)
    )
    options = {
        "bounds": [np.zeros(len(top)).tolist(), top.tolist()],
        "CMA_stds": np.where(is_latency, top, 1.0).tolist(),
        "integer_variables": np.flatnonzero(is_latency).tolist(),
        "popsize": cfg.population,
        "verbose": -9,
    }
    # several runs: the error has narrow valleys (a replay diverges once the twin is slightly off), and one run
    # can settle in the wrong one; each generation of every run is one batched replay
    runs = [cma.CMAEvolutionStrategy(x0, 0.3, {**options, "seed": cfg.seed + 1 + r}) for r in range(cfg.runs)]
    history = []
    for g in range(cfg.generations):
        asked = [es.ask() for es in runs]
        errors = replay_errors(spec, windows, [decode(x) for xs in asked for x in xs], cfg.joint_pos_weight)
        for k, (es, xs) in enumerate(zip(runs, asked, strict=True)):
            es.tell(xs, errors[k * cfg.population : (k + 1) * cfg.population].tolist())
        history.append(min(float(es.result.fbest) for es in runs))
        if progress is not None:
            progress(g + 1, cfg.generations, history[-1])
    es = min(runs, key=lambda e: e.result.fbest)
    best = decode(es.result.xbest)
    before, after = replay_errors(spec, windows, [{}, best], cfg.joint_pos_weight)
    if after >= before:  # nothing fits better than the twin as it was
        best, after = decode(x0), before
    return SysIdResult(best, float(before), float(after), history, sum(len(w.targets) for w in windows))
