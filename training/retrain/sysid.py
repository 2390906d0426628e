"""System identification: fit the twin's physical parameters to field logs by replaying the logged joint targets
open loop from the logged initial states and matching the logged base velocities and, weighted by
`joint_pos_weight`, joint positions (a legged robot's joints show its actuators' gains and delay, and its load,
before its base velocities tell candidates apart).

The continuous parameters are fitted by MuJoCo's own nonlinear least squares (`mujoco.minimize`), each Jacobian
one batched replay of the twin, and each gets a 95% confidence interval from the Jacobian at the fit
(`mujoco.sysid.calculate_intervals`). The actuation delay moves in whole physics steps, so the residual is flat
between steps and has no derivative: least squares cannot fit it, and a scan of every step in its bounds (one
batched replay) finds it exactly, its interval the steps that a likelihood-ratio test cannot reject. A parameter
whose interval is infinite (an ill-conditioned direction, or one the logs never excite) or wider than
`determined_within` of its search box, or whose fit sits at an edge of that box (0 excepted: the search may have
been cut off there), is reported as not determined.

Beside the twin's parameters it fits what a sensor adds that no twin parameter expresses (SENSOR_PARAMS: an
encoder offset), by reading the replay as that sensor would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.observation import rotate_world_to_base
from sim.randomization import FIELD_KEYS, NOMINAL, RandomizationConfig, fixed_params
from sim.robot import RobotSpec
from sim.twin import BatchedTwin
from training.errors import ConfigError
from training.retrain.estimate import Estimate
from training.retrain.ingest import FieldLog

# what the robot's sensors add that no twin parameter expresses, fitted beside the twin's parameters: the replay
# starts from the logged joint positions less the offset and reads its own plus it (sim.field_robot's
# encoder_offset_rad). 0 is the twin as it is.
SENSOR_PARAMS = {"encoder_offset": 0.0}
IDENTIFIABLE = (*FIELD_KEYS, *SENSOR_PARAMS)
EARLIER_TARGETS = 10  # targets logged before a replay window that refill the twin's delay buffer (0.2 s at 50 Hz)
SLICE_POINTS = 21  # values per parameter on its box when its interval is probed (see _Fit.slices)
DEFAULT_BOUNDS = {
    "friction": (0.2, 1.5),
    "payload_kg": (-1.0, 5.0),
    "motor_strength": (0.5, 1.5),
    "kp_scale": (0.5, 1.5),
    "kd_scale": (0.5, 1.5),
    "latency_s": (0.0, 0.04),
    "motor_lag_s": (0.0, 0.1),
    "joint_friction": (0.0, 1.0),
    "joint_armature": (0.0, 0.05),
    "payload_com_x": (-0.3, 0.3),
    "payload_com_y": (-0.3, 0.3),
    "payload_com_z": (-0.1, 0.3),
    "encoder_offset": (-0.05, 0.05),
}


@dataclass
class SysIdConfig:
    params: tuple[str, ...] = ("payload_kg", "motor_strength", "latency_s")
    bounds: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_BOUNDS))
    population: int = 16  # per CMA-ES run
    generations: int = 15
    runs: int = 1  # independent CMA-ES runs (seeds seed+1, seed+2, ...) evaluated together; the best wins
    seed: int = 0
    iterations: int = 20  # least-squares iterations at most (each: one Jacobian replay and a few line-search ones)
    joint_pos_weight: float = 0.0  # weight of the joint-position error (rad^2) beside the base-velocity one
    determined_within: float = 0.1  # a 95% half-width above this fraction of the search box: not determined
    # the finite-difference step of the Jacobian, a fraction of each search box: a replay's error is rough at small
    # scales (a contact that slips or not), so a derivative over a tiny step sees that grain, not the valley
    fd_step: float = 0.01

    def __post_init__(self) -> None:
        unknown = sorted(set(self.params) - set(IDENTIFIABLE))
        if unknown:
            raise ConfigError(f"cannot identify {', '.join(unknown)}; identifiable: {', '.join(IDENTIFIABLE)}")
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
    estimates: dict[str, Estimate]
    error_before: float  # trajectory error of the nominal twin
    error_after: float  # trajectory error with the identified values
    history: list[float]  # trajectory error after each least-squares iteration
    steps: int = 0  # logged control steps replayed per candidate

    @property
    def values(self) -> dict[str, float]:
        return {name: e.value for name, e in self.estimates.items()}

    @property
    def undetermined(self) -> list[str]:
        return [name for name, e in self.estimates.items() if not e.determined]

    def to_dict(self) -> dict:
        return {
            "values": self.values,
            "estimates": {name: e.to_dict() for name, e in self.estimates.items()},
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
        # a window [a, a + length) starts from the state logged at row a - 1, its delay buffer refilled with the
        # EARLIER_TARGETS targets logged before it: a window nearer the log's start would guess what the drives
        # were still applying (a delay of three control steps reaches three targets back)
        first = (int(np.argmax(known)) if known.any() else len(log.t)) + EARLIER_TARGETS
        valid = [
            first <= a and bool(known[a - EARLIER_TARGETS : a + length].all()) for a in range(len(log.t) - length + 1)
        ]
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
    before = log.joint_targets[a - EARLIER_TARGETS : a][::-1]  # most recent first; known (log_windows)
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
    return (residuals(spec, windows, candidates, joint_pos_weight) ** 2).sum(0) / (
        len(windows[0].targets) * len(windows)
    )


def residuals(
    spec: RobotSpec, windows: list[Window], candidates: list[dict[str, float]], joint_pos_weight: float = 0.0
) -> np.ndarray:
    """Replayed minus logged, per step, window and signal, one column per candidate: [residuals, candidates]. The
    signals are vx, vy, wz and, scaled by sqrt(joint_pos_weight), the joint positions."""
    velocities, joints = replay(spec, windows, candidates, joints=True)  # (T, candidates, windows, 3 | n)
    logged = np.stack([np.concatenate([w.lin_vel[:, :2], w.ang_vel[:, 2:]], 1) for w in windows], 1)
    parts = [velocities - logged[:, None]]
    if joint_pos_weight:
        if any(w.joint_pos is None for w in windows):
            raise ValueError("joint_pos_weight needs the logged joint positions of every replay window")
        logged_joints = np.stack([w.joint_pos for w in windows], 1)
        parts.append(np.sqrt(joint_pos_weight) * (joints - logged_joints[:, None]))
    return np.concatenate([p.transpose(0, 2, 3, 1).reshape(-1, len(candidates)) for p in parts])


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
        twin_values = {k: v for k, v in values.items() if k not in SENSOR_PARAMS}
        twin.set_params(fixed_params(twin_values, spec.physics_dt, nw), np.arange(i * nw, (i + 1) * nw))
    tile = lambda get: np.tile(np.stack([get(w) for w in windows]), (nc, 1))  # noqa: E731
    # each env's encoder offset (its candidate's): the twin's joints are where the robot's were, not where they read
    offset = np.repeat([c.get("encoder_offset", 0.0) for c in candidates], nw)[:, None]
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
        tile(lambda w: w.start_joint_pos) - offset,
        tile(lambda w: w.start_joint_vel),
    )
    # the actuation delay still applies targets issued before the window, and the drives' lag is still catching up
    # with them: refill the history with every target logged before it, and settle the lag over them
    rest = np.zeros(spec.num_actions) if spec.control_mode == "velocity" else np.asarray(spec.default_pose)
    state = twin.state_dict()
    kept = state["arrays"]["target_history"]
    history = np.empty((max(len(kept), EARLIER_TARGETS), *kept.shape[1:]))
    for j in range(len(history)):
        history[j] = tile(
            lambda w, j=j: w.earlier_targets[min(j, len(w.earlier_targets) - 1)] if len(w.earlier_targets) else rest
        )
    state["arrays"]["target_history"] = history
    twin.load_state_dict(state)
    twin.settle_drives()
    twin.max_episode_steps = T + 1
    targets = np.tile(np.stack([w.targets for w in windows], 1), (1, nc, 1))  # (T, n, actions)
    out, joint_pos = np.zeros((T, n, 3)), np.zeros((T, n, spec.num_actions))
    for t in range(T):
        twin.step(twin.actions_from_targets(targets[t]))
        state = twin.backend.state()
        lin, ang = twin.task.base_velocities(state)
        out[t, :, :2], out[t, :, 2] = lin[:, :2], ang[:, 2]
        joint_pos[t] = state["joint_pos"] + offset
    twin.close()
    velocities = out.reshape(T, nc, nw, 3)
    return (velocities, joint_pos.reshape(T, nc, nw, -1)) if joints else velocities


def identify(spec: RobotSpec, windows: list[Window], cfg: SysIdConfig | None = None, progress=None) -> SysIdResult:
    """Fit cfg.params to the replay windows: the values, their intervals and the trajectory errors before and
    after. progress(fraction, error) after each CMA-ES generation and at the end."""
    cfg = cfg or SysIdConfig()
    if not windows:
        raise ValueError(
            "no stretch of the logs has /joint_commands, /joint_states and /odom together; "
            "system id replays the logged joint commands"
        )
    if not all(np.all(np.isfinite(w.targets)) for w in windows):
        raise ValueError("a replay window has missing /joint_commands; system id replays them")
    fit = _Fit(spec, windows, cfg, progress)
    found = fit.search()
    best = {**found, **fit.least_squares({p: found[p] for p in fit.names}, found.get("latency_s"))}
    before, after = fit.errors([{}, best])
    estimates = fit.intervals(best, float(after))
    return SysIdResult(
        {p: estimates[p] for p in cfg.params},
        float(before),
        float(after),
        fit.history,
        sum(len(w.targets) for w in windows),
    )


class _Fit:
    """The replays behind one identification, in three steps: a global search of every parameter (CMA-ES), least
    squares of the continuous ones from its best (mujoco.minimize), and the intervals at the fit."""

    def __init__(self, spec: RobotSpec, windows: list[Window], cfg: SysIdConfig, progress=None):
        self.spec, self.windows, self.cfg, self.progress = spec, windows, cfg, progress
        self.history: list[float] = []
        self.run_bests: list[dict[str, float]] = []  # each CMA-ES run's best (search)
        self.samples: list[dict[str, float]] = []  # every candidate the search replayed, and its trajectory error
        self.norm = len(windows[0].targets) * len(windows)  # a trajectory error times this: the sum of squares
        self.sample_errors = np.zeros(0)
        self.names = [p for p in cfg.params if p != "latency_s"]
        self.lo = np.array([cfg.bounds[p][0] for p in self.names])
        self.hi = np.array([cfg.bounds[p][1] for p in self.names])

    def residuals(self, candidates: list[dict[str, float]]) -> np.ndarray:
        return residuals(self.spec, self.windows, candidates, self.cfg.joint_pos_weight)

    def noise(self, ssr: float, params: int) -> float:
        """The residual variance behind a likelihood-ratio test, counting each window as one observation: a
        window's residuals are not independent (a start state read with noise, or a twin that cannot follow the
        robot, puts one error on every step of it), so the per-step count would make every test too sure."""
        return ssr / max(len(self.windows) - params, 1)

    def errors(self, candidates: list[dict[str, float]]) -> np.ndarray:
        return replay_errors(self.spec, self.windows, candidates, self.cfg.joint_pos_weight)

    def _candidates(self, z: np.ndarray, latency: float | None) -> list[dict[str, float]]:
        """z: [parameters, candidates], each parameter as a fraction of its search box (so one finite-difference
        step and one tolerance serve kilograms and gain scales alike); mujoco.minimize evaluates a Jacobian's
        points in one call, one batched replay."""
        extra = {} if latency is None else {"latency_s": latency}
        x = self.lo[:, None] + z * (self.hi - self.lo)[:, None]
        return [{**dict(zip(self.names, map(float, col), strict=True)), **extra} for col in x.T]

    def _unit(self, values: dict) -> np.ndarray:
        return (np.array([values[p] for p in self.names]) - self.lo) / (self.hi - self.lo)

    def search(self) -> dict[str, float]:
        """CMA-ES over every parameter: the global stage. A replay's error is rough (a contact that slips or not
        turns it at a cusp, and a slightly wrong twin's replay drifts apart), so a local method started from the
        nominal twin settles in the first dip; and the delay moves in whole physics steps (an integer variable),
        which least squares cannot differentiate. Several runs evaluated together; each generation of every run
        is one batched replay."""
        import cma

        cfg, dt = self.cfg, self.spec.physics_dt
        lo = np.array([cfg.bounds[p][0] for p in cfg.params])
        hi = np.array([cfg.bounds[p][1] for p in cfg.params])
        is_latency = np.array([p == "latency_s" for p in cfg.params])
        top = np.where(is_latency, np.floor(hi / dt), 1.0)  # continuous ones search [0, 1] of their bounds

        def decode(x: np.ndarray) -> dict[str, float]:
            x = np.clip(x, 0, top)
            values = np.where(is_latency, np.round(x) * dt, lo + x * (hi - lo))
            return {p: float(v) for p, v in zip(cfg.params, values, strict=True)}

        start = {**NOMINAL, **SENSOR_PARAMS}
        nominal = np.clip([start[p] for p in cfg.params], lo, hi)  # the search starts from the twin as it was
        x0 = np.where(is_latency, np.round(nominal / dt), (nominal - lo) / (hi - lo))
        options = {
            "bounds": [np.zeros(len(top)).tolist(), top.tolist()],
            "CMA_stds": np.where(is_latency, top, 1.0).tolist(),
            "integer_variables": np.flatnonzero(is_latency).tolist(),
            "popsize": cfg.population,
            "verbose": -9,
        }
        runs = [cma.CMAEvolutionStrategy(x0, 0.3, {**options, "seed": cfg.seed + 1 + r}) for r in range(cfg.runs)]
        for g in range(cfg.generations):
            asked = [es.ask() for es in runs]
            candidates = [decode(x) for xs in asked for x in xs]
            errors = self.errors(candidates)
            self.samples += candidates
            self.sample_errors = np.append(self.sample_errors, errors)
            for k, (es, xs) in enumerate(zip(runs, asked, strict=True)):
                es.tell(xs, errors[k * cfg.population : (k + 1) * cfg.population].tolist())
            self.history.append(min(float(es.result.fbest) for es in runs))
            if self.progress is not None:
                self.progress(0.9 * (g + 1) / cfg.generations, self.history[-1])
        self.run_bests = [decode(es.result.xbest) for es in runs]
        best = decode(min(runs, key=lambda e: e.result.fbest).result.xbest)
        before, after = self.errors([{}, best])
        return best if after < before else decode(x0)  # nothing fits better than the twin as it was

    def equally_good(self, best: dict[str, float]) -> list[dict[str, float]]:
        """The other search runs' bests that fit the logs as well as `best` does, as a likelihood-ratio test over
        all the parameters together tells (chi-square with one degree per parameter): a log that several sets of
        values fit alike does not determine the parameters in which they differ, however narrow each one's local
        interval is."""
        from scipy.stats import chi2

        others = [b for b in self.run_bests if b != best]
        if not others:
            return []
        r = self.residuals([best, *others])
        ssr = (r**2).sum(0)
        s2 = self.noise(ssr[0], len(best))
        return [b for b, x in zip(others, ssr[1:], strict=True) if x - ssr[0] <= chi2.ppf(0.95, len(best)) * s2]

    def sampled_ranges(self, best: dict[str, float], error: float) -> dict[str, tuple[float, float]]:
        """Per parameter, the span of the values among the search's own candidates that a likelihood-ratio test
        (one degree of freedom, as a profile) cannot tell from the fit. A valley that runs along no one parameter
        (a payload's mass and the moment of its offset trade against each other) is where CMA-ES samples, and
        neither a slice nor a Jacobian at one point sees it: no extra replays. `error`: the fit's trajectory error."""
        from scipy.stats import chi2

        if not self.samples:
            return {}
        floor = min(error, float(self.sample_errors.min())) * self.norm
        keep = self.sample_errors * self.norm - floor <= chi2.ppf(0.95, 1) * self.noise(floor, len(best))
        kept = [c for c, k in zip(self.samples, keep, strict=True) if k]
        return {p: (min(c[p] for c in kept), max(c[p] for c in kept)) for p in best} if kept else {}

    def least_squares(self, values: dict, latency: float | None) -> dict[str, float]:
        """The continuous parameters at the delay found, polished from `values` by least squares: steps that
        only ever lower the error, to the bottom of the valley that the search found."""
        if not self.names:
            return {}
        from mujoco import minimize

        def on_iteration(trace) -> None:
            self.history.append(float(2 * trace[-1].objective / self.norm))  # minimize's objective: half the sum

        z, trace = minimize.least_squares(
            self._unit(values),
            lambda z: self.residuals(self._candidates(z.reshape(len(self.names), -1), latency)),
            bounds=[np.zeros(len(self.names)), np.ones(len(self.names))],
            eps=self.cfg.fd_step,
            max_iter=self.cfg.iterations,
            verbose=minimize.Verbosity.SILENT,
            iter_callback=on_iteration,
        )
        if self.progress is not None:
            self.progress(1.0, 2 * trace[-1].objective / self.norm)
        return self._candidates(z.reshape(-1, 1), None)[0]

    def _latency_steps(self) -> np.ndarray:
        lo, hi = self.cfg.bounds["latency_s"]
        dt = self.spec.physics_dt
        return np.arange(int(np.ceil(lo / dt - 1e-9)), int(np.floor(hi / dt + 1e-9)) + 1)

    def slices(self, best: dict[str, float]) -> dict[str, tuple[float, float]]:
        """Per parameter, the values that a likelihood-ratio test keeps at 95% (one parameter: chi-square 3.84,
        the noise taken from the residual at the fit) when it alone moves over its box, the others held at the
        fit: a grid of 21 values (the delay: every whole step), all in one batched replay. A slice sees the rough
        error's envelope, which a Jacobian at one point cannot; it does not see correlations, which the Jacobian
        does. The delay and the drives' lag trade against each other (a dead time against the curve after it), and
        the delay has no derivative: where both are fitted, each one's slice is profiled over the other on a joint
        grid (the best error over the other's values)."""
        from scipy.stats import chi2

        grids = {p: np.linspace(*self.cfg.bounds[p], SLICE_POINTS) for p in self.names}
        if "latency_s" in best:
            grids["latency_s"] = self._latency_steps() * self.spec.physics_dt
        candidates = [best] + [{**best, p: float(v)} for p, grid in grids.items() for v in grid]
        paired = ("latency_s", "motor_lag_s") if {"latency_s", "motor_lag_s"} <= set(best) else ()
        if paired:
            candidates += [
                {**best, paired[0]: float(a), paired[1]: float(b)} for a in grids[paired[0]] for b in grids[paired[1]]
            ]
        ssr = (self.residuals(candidates) ** 2).sum(0)
        floor = float(ssr.min())
        threshold = chi2.ppf(0.95, 1) * self.noise(floor, len(best))
        profiles, at = {}, 1
        for p, grid in grids.items():
            profiles[p] = ssr[at : at + len(grid)]
            at += len(grid)
        if paired:
            joint = ssr[at:].reshape(len(grids[paired[0]]), len(grids[paired[1]]))
            profiles[paired[0]] = np.minimum(profiles[paired[0]], joint.min(1))
            profiles[paired[1]] = np.minimum(profiles[paired[1]], joint.min(0))
        ranges = {}
        for p, grid in grids.items():
            kept = np.append(grid[profiles[p] - floor <= threshold], best[p])
            ranges[p] = (float(kept.min()), float(kept.max()))
        return ranges

    def clustered_half_widths(self, r: np.ndarray, jac: np.ndarray) -> np.ndarray:
        """95% half-widths from the window-clustered (sandwich) covariance of the least-squares fit: the spread
        of each window's pull on the parameters, which holds when residuals within a window are correlated or the
        twin cannot match the robot. mujoco.sysid.calculate_intervals takes every residual for independent noise
        and comes out far narrower: on the hard rover it "determined" a 3 kg payload at 1.76 +/- 0.02 kg."""
        from scipy.stats import t

        nw, n = len(self.windows), jac.shape[1]
        rows = self.window_of_row()
        scores = np.zeros((nw, n))
        np.add.at(scores, rows, jac * r[:, None])  # each window's gradient of the half sum of squares
        bread = np.linalg.pinv(jac.T @ jac)
        cov = bread @ (scores.T @ scores) @ bread * nw / max(nw - n, 1)
        return np.sqrt(np.maximum(np.diag(cov), 0.0)) * t.ppf(0.975, max(nw - n, 1))

    def window_of_row(self) -> np.ndarray:
        """The window each residual row comes from (rows as `residuals` orders them: step, window, signal)."""
        nw, steps = len(self.windows), len(self.windows[0].targets)
        signals = [3] + ([self.spec.num_actions] if self.cfg.joint_pos_weight else [])
        return np.concatenate([np.tile(np.repeat(np.arange(nw), k), steps) for k in signals])

    def intervals(self, best: dict[str, float], error: float) -> dict[str, Estimate]:
        """95% intervals at the fit (`error`: its trajectory error), each the widest of: the Jacobian's
        (mujoco.sysid.calculate_intervals, correlations included, and the window-clustered covariance: see
        `clustered_half_widths`), the parameter's slice (see `slices`) and the search's candidates that fit as well
        (see `sampled_ranges`). The delay has no derivative: its slice and the candidates alone."""
        from mujoco import minimize, sysid

        latency = best.get("latency_s")
        n = len(self.names)
        jac, half = np.zeros((0, n)), np.zeros(n)
        if n:
            z = self._unit(best)[:, None]
            f = lambda z: self.residuals(self._candidates(z, latency))  # noqa: E731
            r = f(z)
            jac, _ = minimize.jacobian_fd(f, z, r, self.cfg.fd_step, 0, [np.zeros((n, 1)), np.ones((n, 1))])
            with np.errstate(invalid="ignore"):
                _, half = sysid.calculate_intervals([r[:, 0]], jac)  # in fractions of each box: inf if ill-posed
            half = np.maximum(half, self.clustered_half_widths(r[:, 0], jac))
        estimates = {}
        alike = self.equally_good(best)
        sampled = self.sampled_ranges(best, error)
        for p, (low, high) in self.slices(best).items():
            low, high = min(low, *sampled.get(p, [low])), max(high, *sampled.get(p, [high]))
            box = self.cfg.bounds[p][1] - self.cfg.bounds[p][0]
            why = ""
            apart = [b[p] for b in alike if abs(b[p] - best[p]) > self.cfg.determined_within * box]
            if apart:
                why = f"another search run fits the logs as well at {apart[0]:.4g}"
                low, high = min(low, *apart), max(high, *apart)
            if p in self.names:
                j = self.names.index(p)
                h = float(half[j]) * box
                if why:
                    low, high = min(low, best[p] - h), max(high, best[p] + h)
                elif not np.any(jac[:, j]):
                    why = "the logs do not excite it"
                elif not np.isfinite(h):
                    why = "ill-conditioned: the logs cannot tell it apart from " + _confounded(jac, j, self.names)
                    low, high = self.cfg.bounds[p]
                else:
                    low, high = min(low, best[p] - h), max(high, best[p] + h)
            low, high = max(low, self.cfg.bounds[p][0]), min(high, self.cfg.bounds[p][1])  # nothing beyond the box
            if not why and (high - low) / 2 > self.cfg.determined_within * box:
                why = f"its 95% interval spans more than {2 * self.cfg.determined_within:.0%} of its search box"
            edge = _at_bound(best[p], self.cfg.bounds[p], self.spec.physics_dt / 2 if p == "latency_s" else 0.01 * box)
            if not why and edge is not None:
                why = f"at the edge of its search box ({edge:g}): the logs may want a value beyond it"
            estimates[p] = Estimate(best[p], float(low), float(high), not why, why)
        return estimates


def _at_bound(value: float, bounds: tuple[float, float], tolerance: float) -> float | None:
    """The bound of a search box `value` sits at (within `tolerance`), or None. A bound at 0 does not count: it is
    where a delay or a friction ends, not where the search was cut off."""
    return next((b for b in bounds if b != 0 and abs(value - b) <= tolerance), None)


def _confounded(jac: np.ndarray, j: int, names: list[str]) -> str:
    """The parameter whose effect on the replay is most nearly parallel to parameter j's."""
    unit = jac / np.maximum(np.linalg.norm(jac, axis=0), 1e-300)
    cosines = np.abs(unit.T @ unit[:, j])
    cosines[j] = -1
    return names[int(np.argmax(cosines))] if len(names) > 1 else "noise"
