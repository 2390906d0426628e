"""Robot description: an MJCF file plus a short YAML of constants (joints in action order, default pose, PD
gains, torque limits, control mode and timing, base body and height, command limits). `sim2real robot init`
(sim.robot_init) writes one from an MJCF's own actuators and keyframe.

The YAML is the single source of every number the twin, the exported manifest and the robot use, so nothing
is copied by hand between training, validation and deployment. What the robot is asked to learn (rewards,
observations, terminations, commands, randomisation) is the task's: see sim.tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from edge.fileio import read_yaml_mapping
from edge.manifest import SAFE_MODES
from edge.resources import config_path
from sim.errors import RobotConfigError
from sim.floor import add_floor, has_floor

ASSET_DIR = Path(__file__).resolve().parent / "assets"
# A source checkout keeps the YAMLs in config/robots; a colcon install puts them in share/edge/config/robots.
ROBOT_CONFIG_DIRS = (config_path("robots"),)
CONTROL_MODES = ("position", "velocity", "torque")
# keys a robot YAML held before the task had its own config; named in the error so a user knows where they went
TASK_KEYS = ("episode_length_s", "command_resample_s", "termination", "observations", "rewards", "randomization")


@dataclass(frozen=True)
class CommandLimits:
    """Base-velocity command ranges (vx, vy in m/s; wz in rad/s, positive = left, as in ROS)."""

    vx: tuple[float, float] = (-1.0, 1.0)
    vy: tuple[float, float] = (0.0, 0.0)
    wz: tuple[float, float] = (-1.0, 1.0)

    @classmethod
    def from_dict(cls, raw: dict, source: str, base: CommandLimits | None = None) -> CommandLimits:
        """{vx: [low, high], ...} over `base` (the defaults when None); `source` prefixes the error messages."""
        if not isinstance(raw, dict):
            raise RobotConfigError(f"{source} must be a mapping of vx, vy, wz ranges, got {raw!r}")
        unknown = sorted(set(raw) - {"vx", "vy", "wz"})
        if unknown:
            raise RobotConfigError(f"{source}: unknown axis(es) {', '.join(unknown)}; known: vx, vy, wz")
        return dataclasses.replace(base or cls(), **{k: _pair(v, f"{source}.{k}") for k, v in raw.items()})

    def low(self) -> np.ndarray:
        return np.array([self.vx[0], self.vy[0], self.wz[0]])

    def high(self) -> np.ndarray:
        return np.array([self.vx[1], self.vy[1], self.wz[1]])


@dataclass(frozen=True)
class RobotSpec:
    name: str
    mjcf: Path
    base_body: str
    joints: tuple[str, ...]
    default_pose: tuple[float, ...]
    kp: float | tuple[float, ...]  # one gain for every joint, or one per joint (as the YAML gives it)
    kd: float | tuple[float, ...]
    torque_limit: tuple[float, ...]
    control_mode: str = "position"
    safe_mode: str = "hold"  # edge.manifest.SAFE_MODES: hold the default pose, or damp (kp = 0, kd kept)
    action_scale: float = 0.25
    base_height: float = 0.3
    sim_dt: float = 0.005
    decimation: int = 4
    command_limits: CommandLimits = field(default_factory=CommandLimits)  # the physical envelope (manifest)
    feet: tuple[str, ...] = ()  # foot geoms (MJCF names): contacts, air time and slip of legged tasks and KPIs

    @property
    def num_actions(self) -> int:
        return len(self.joints)

    @property
    def joint_kp(self) -> np.ndarray:
        """kp per joint, in action order."""
        return np.broadcast_to(np.asarray(self.kp, dtype=float), (self.num_actions,)).copy()

    @property
    def joint_kd(self) -> np.ndarray:
        """kd per joint, in action order."""
        return np.broadcast_to(np.asarray(self.kd, dtype=float), (self.num_actions,)).copy()

    @property
    def control_dt(self) -> float:
        return self.sim_dt * self.decimation

    @property
    def asset_sha256(self) -> str:
        import hashlib

        return hashlib.sha256(self.mjcf.read_bytes()).hexdigest()

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["mjcf"] = str(self.mjcf)
        return d


def _pair(value, where: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise RobotConfigError(f"{where} must be a [low, high] pair, got {value!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RobotConfigError(f"{where} must be finite, got {value!r}")
    if lo > hi:
        raise RobotConfigError(f"{where} low {lo} exceeds high {hi}")
    return lo, hi


def _number(raw: dict, key: str, source: str, default: float | None = None, integer: bool = False) -> float:
    """A finite number (an integer with `integer`) from the YAML mapping, naming the key when it is not one."""
    value = raw.get(key, default)
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not np.isfinite(value):
        raise RobotConfigError(f"{source}: {key} must be a finite {'integer' if integer else 'number'}, got {value!r}")
    return value


def _choice(raw: dict, key: str, choices: tuple[str, ...], source: str) -> str:
    value = raw.get(key, choices[0])
    if value not in choices:
        raise RobotConfigError(f"{source}: {key} {value!r} is not one of {', '.join(choices)}")
    return value


def _text(raw: dict, key: str, source: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise RobotConfigError(f"{source}: {key} must be a non-empty string, got {value!r}")
    return value


def _vector(value, key: str, n: int, source: str) -> tuple[float, ...]:
    if np.isscalar(value):
        value = [value] * n
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise RobotConfigError(f"{source}: {key} must be a list of {n} numbers (one per joint)") from None
    if arr.shape != (n,):
        raise RobotConfigError(f"{source}: {key} needs {n} values (one per joint), got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise RobotConfigError(f"{source}: {key} holds a non-finite value")
    return tuple(float(v) for v in arr)


def _gain(raw: dict, key: str, n: int, source: str) -> float | tuple[float, ...]:
    """A PD gain: one number for every joint (kept a number, so manifests and run snapshots stay as they were) or
    a list of one per joint."""
    if isinstance(raw[key], list):
        return _vector(raw[key], key, n, source)
    return float(_number(raw, key, source))


def _names(value, key: str, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or len(set(value)) != len(value):
        raise RobotConfigError(f"{source}: {key} must be a list of distinct names, got {value!r}")
    return tuple(value)


def resolve_robot_path(name_or_path: str | Path) -> Path:
    """`rover` -> config/robots/rover.yaml; an existing path is used as it is."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise RobotConfigError(f"robot config {p} does not exist")
        return p
    for directory in ROBOT_CONFIG_DIRS:
        candidate = directory / f"{name_or_path}.yaml"
        if candidate.is_file():
            return candidate
    known = sorted({q.stem for d in ROBOT_CONFIG_DIRS for q in d.glob("*.yaml")})
    raise RobotConfigError(f"unknown robot {name_or_path!r}; known: {', '.join(known)} (or pass a .yaml path)")


def load_robot(name_or_path: str | Path) -> RobotSpec:
    """Load and validate a robot YAML, checking every name it gives against its MJCF."""
    path = resolve_robot_path(name_or_path)
    raw = read_yaml_mapping(path, RobotConfigError, "robot config", "expected a mapping at the top level")
    src = str(path)
    known = {f.name for f in dataclasses.fields(RobotSpec)}
    unknown = sorted(set(raw) - known)
    if unknown:
        moved = [k for k in unknown if k in TASK_KEYS]
        hint = f" ({', '.join(moved)}: the task's now, see sim.tasks and config/tasks/)" if moved else ""
        raise RobotConfigError(f"{src}: unknown key(s) {', '.join(unknown)}{hint}")
    missing = [
        k for k in ("name", "mjcf", "base_body", "joints", "default_pose", "kp", "kd", "torque_limit") if k not in raw
    ]
    if missing:
        raise RobotConfigError(f"{src}: missing key(s) {', '.join(missing)}")

    mjcf = Path(_text(raw, "mjcf", src))
    if not mjcf.is_absolute():
        mjcf = path.parent / mjcf if (path.parent / mjcf).is_file() else ASSET_DIR / mjcf
    if not mjcf.is_file():
        raise RobotConfigError(f"{src}: MJCF {raw['mjcf']} not found (looked beside the YAML and in {ASSET_DIR})")

    if not isinstance(raw["joints"], list) or not all(isinstance(j, str) and j for j in raw["joints"]):
        raise RobotConfigError(f"{src}: joints must be a list of joint names, got {raw['joints']!r}")
    joints = tuple(raw["joints"])
    if not joints or len(set(joints)) != len(joints):
        raise RobotConfigError(f"{src}: joints must list distinct joint names")
    n = len(joints)
    mode = raw.get("control_mode", "position")
    if mode not in CONTROL_MODES:
        raise RobotConfigError(f"{src}: control_mode {mode!r} is not one of {', '.join(CONTROL_MODES)}")
    spec = RobotSpec(
        name=_text(raw, "name", src),
        mjcf=mjcf.resolve(),
        base_body=_text(raw, "base_body", src),
        joints=joints,
        default_pose=_vector(raw["default_pose"], "default_pose", n, src),
        kp=_gain(raw, "kp", n, src),
        kd=_gain(raw, "kd", n, src),
        torque_limit=_vector(raw["torque_limit"], "torque_limit", n, src),
        control_mode=mode,
        safe_mode=_choice(raw, "safe_mode", SAFE_MODES, src),
        action_scale=float(_number(raw, "action_scale", src, 0.25)),
        base_height=float(_number(raw, "base_height", src, 0.3)),
        sim_dt=float(_number(raw, "sim_dt", src, 0.005)),
        decimation=int(_number(raw, "decimation", src, 4, integer=True)),
        command_limits=CommandLimits.from_dict(raw.get("command_limits") or {}, f"{src}: command_limits"),
        feet=_names(raw.get("feet", []), "feet", src),
    )
    negative_gain = min(spec.joint_kp) < 0 or min(spec.joint_kd) < 0
    if spec.decimation < 1 or spec.sim_dt <= 0 or spec.action_scale <= 0 or negative_gain:
        raise RobotConfigError(f"{src}: decimation must be >= 1, sim_dt and action_scale > 0, kp and kd >= 0")
    if min(spec.torque_limit) <= 0:
        raise RobotConfigError(f"{src}: torque_limit must be positive")
    build_model(spec)  # fails here, with the name of what is wrong, rather than deep inside a rollout
    return spec


def load_mjspec(path: Path) -> mujoco.MjSpec:
    """An MJCF file as an MjSpec, read from its own path (so a relative meshdir or include resolves)."""
    try:
        return mujoco.MjSpec.from_file(str(path))
    except ValueError as e:
        raise RobotConfigError(f"{path}: malformed MJCF: {_one_line(e)}") from None


def compile_mjspec(mj: mujoco.MjSpec, path: Path) -> mujoco.MjModel:
    try:
        return mj.compile()
    except ValueError as e:
        raise RobotConfigError(f"{path}: cannot compile: {_one_line(e)}") from None


def _one_line(e: Exception) -> str:
    # MuJoCo's messages run over several lines (the XML error, then where it is)
    return " ".join(str(e).split())


def build_mjspec(spec: RobotSpec) -> mujoco.MjSpec:
    """The robot's MJCF with one PD actuator per configured joint (existing actuators are replaced), on a floor
    (sim.floor) when the MJCF has no ground of its own. Loaded from its own path, so a relative meshdir works."""
    mj = load_mjspec(spec.mjcf)
    joint_names = {j.name for j in mj.joints}
    missing = [j for j in spec.joints if j not in joint_names]
    if missing:
        raise RobotConfigError(
            f"{spec.mjcf}: joint(s) {', '.join(missing)} named in the robot YAML are not in the MJCF"
        )
    body_names = {b.name for b in mj.bodies}
    if spec.base_body not in body_names:
        raise RobotConfigError(f"{spec.mjcf}: base_body {spec.base_body!r} is not in the MJCF")
    geom_names = {g.name for g in mj.geoms}
    missing = [g for g in spec.feet if g not in geom_names]
    if missing:
        raise RobotConfigError(
            f"{spec.mjcf}: foot geom(s) {', '.join(missing)} named in the robot YAML are not in the MJCF"
        )
    for act in list(mj.actuators):
        mj.delete(act)
    if not has_floor(mj):
        add_floor(mj)
    mj.option.timestep = spec.sim_dt
    for name, limit in zip(spec.joints, spec.torque_limit, strict=True):
        act = mj.add_actuator()
        act.name = f"{name}_motor"
        act.target = name
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.forcelimited = True
        act.forcerange = np.array([-limit, limit])
        act.ctrllimited = False
    return mj


def build_model(spec: RobotSpec, edit: Callable[[mujoco.MjSpec], None] | None = None) -> mujoco.MjModel:
    """Compile the robot with its actuators' PD law set from the YAML; `edit` changes the MjSpec before it
    compiles (the MuJoCo backend's foot sensors, sim.terrain.mjspec.add_terrain's heightfield)."""
    mj = build_mjspec(spec)
    if edit is not None:
        edit(mj)
    model = compile_mjspec(mj, spec.mjcf)
    base = model.body(spec.base_body)
    if model.body_jntnum[base.id] != 1 or model.jnt_type[model.body_jntadr[base.id]] != mujoco.mjtJoint.mjJNT_FREE:
        raise RobotConfigError(f"{spec.mjcf}: base_body {spec.base_body!r} needs exactly one free joint")
    set_pd_gains(model, spec, spec.joint_kp, spec.joint_kd, np.ones(spec.num_actions))
    return model


def scaled_gains(spec: RobotSpec, kp_scale: np.ndarray, kd_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The per-env, per-joint gains [N, nu] of envs whose kp and kd are scaled by kp_scale, kd_scale [N]
    (domain randomisation, system identification)."""
    return np.asarray(kp_scale)[:, None] * spec.joint_kp, np.asarray(kd_scale)[:, None] * spec.joint_kd


def set_pd_gains(model: mujoco.MjModel, spec: RobotSpec, kp: np.ndarray, kd: np.ndarray, strength: np.ndarray) -> None:
    """Write the PD law of `spec.control_mode` into the actuators (strength scales torque, as a weak motor does);
    kp, kd and strength hold one value per joint.

    position: tau = s*(kp*(ctrl - q) - kd*qd);  velocity: tau = s*kd*(ctrl - qd);  torque: tau = s*ctrl.
    """
    model.actuator_gainprm[:, :3] = 0.0
    model.actuator_biasprm[:, :3] = 0.0
    if spec.control_mode == "position":
        model.actuator_gainprm[:, 0] = strength * kp
        model.actuator_biasprm[:, 1] = -strength * kp
        model.actuator_biasprm[:, 2] = -strength * kd
    elif spec.control_mode == "velocity":
        model.actuator_gainprm[:, 0] = strength * kd
        model.actuator_biasprm[:, 2] = -strength * kd
    else:
        model.actuator_gainprm[:, 0] = strength
    limit = np.asarray(spec.torque_limit)
    model.actuator_forcerange[:, 0] = -strength * limit
    model.actuator_forcerange[:, 1] = strength * limit


def pd_torques(
    spec: RobotSpec,
    state: dict[str, np.ndarray],
    targets: np.ndarray,
    kp: np.ndarray,
    kd: np.ndarray,
    strength: np.ndarray,
) -> np.ndarray:
    """The torques the actuators of set_pd_gains apply at `state`, batched over envs: kp, kd are [N, nu]
    (scaled_gains), strength is [N]."""
    q, qd = state["joint_pos"], state["joint_vel"]
    if spec.control_mode == "position":
        tau = kp * (targets - q) - kd * qd
    elif spec.control_mode == "velocity":
        tau = kd * (targets - qd)
    else:
        tau = targets
    limit = np.asarray(spec.torque_limit) * strength[:, None]
    return np.clip(tau * strength[:, None], -limit, limit)


def joint_ranges(spec: RobotSpec) -> tuple[np.ndarray, np.ndarray]:
    """The MJCF's joint ranges in action order (+-inf where a joint has none)."""
    model = build_model(spec)
    low, high = np.full(spec.num_actions, -np.inf), np.full(spec.num_actions, np.inf)
    for i, name in enumerate(spec.joints):
        joint = model.joint(name)
        if model.jnt_limited[joint.id]:
            low[i], high[i] = joint.range
    return low, high


def joint_target_limits(spec: RobotSpec) -> tuple[np.ndarray, np.ndarray] | None:
    """Target limits for the exported artifact: the joint ranges of a position-controlled robot; None otherwise
    (velocity robots rely on the action clip, torque robots on their torque limits)."""
    return joint_ranges(spec) if spec.control_mode == "position" else None
