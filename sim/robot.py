"""Robot description: an MJCF file plus a short YAML of constants (joints in action order, default pose, PD
gains, torque limits, control mode and timing, base body and height, command limits). The YAML's keys are
RobotConfig's fields, loaded by edge.config's one validating loader; load_robot resolves them against the MJCF into
a RobotSpec. `sim2real robot init` (sim.robot_init) writes one from an MJCF's own actuators and keyframe.

The YAML is the single source of every number the twin, the exported manifest and the robot use, so nothing
is copied by hand between training, validation and deployment. What the robot is asked to learn (rewards,
observations, terminations, commands, randomisation) is the task's: see sim.tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import mujoco
import numpy as np

from edge.config import check_values, load_dataclass, setting
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
PER_JOINT = "one number for every joint, or a list of one per joint"


@dataclass(frozen=True)
class CommandLimits:
    """Base-velocity command ranges (vx, vy in m/s; wz in rad/s, positive = left, as in ROS)."""

    vx: tuple[float, float] = setting((-1.0, 1.0), "[low, high] of the forward speed command (m/s)")
    vy: tuple[float, float] = setting((0.0, 0.0), "[low, high] of the sideways speed command (m/s, positive = left)")
    wz: tuple[float, float] = setting((-1.0, 1.0), "[low, high] of the turn rate command (rad/s, positive = left)")

    def __post_init__(self) -> None:
        for axis in ("vx", "vy", "wz"):
            low, high = getattr(self, axis)
            if low > high:
                raise RobotConfigError(f"{axis} must be [low, high] with low <= high, got [{low:g}, {high:g}]")

    @classmethod
    def from_dict(cls, raw: object, source: str, base: CommandLimits | None = None) -> CommandLimits:
        """{vx: [low, high], ...} over `base` (the defaults when None), checked by edge.config; `source` names
        the mapping in the error messages."""
        given = check_values(cls, raw, name=source, error=RobotConfigError)  # each axis named as given
        merged = {**dataclasses.asdict(base or cls()), **given}
        return load_dataclass(cls, merged, name=source, error=RobotConfigError)

    def low(self) -> np.ndarray:
        return np.array([self.vx[0], self.vy[0], self.wz[0]])

    def high(self) -> np.ndarray:
        return np.array([self.vx[1], self.vy[1], self.wz[1]])


CONTACTS = ("all", "feet", "feet_and_base")
SOLVERS = {"newton": mujoco.mjtSolver.mjSOL_NEWTON, "cg": mujoco.mjtSolver.mjSOL_CG, "pgs": mujoco.mjtSolver.mjSOL_PGS}
CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}
INTEGRATORS = {
    "euler": mujoco.mjtIntegrator.mjINT_EULER,
    "rk4": mujoco.mjtIntegrator.mjINT_RK4,
    "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
    "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
}


@dataclass(frozen=True)
class PhysicsOptions:
    """Cheaper physics a robot YAML can choose for training (its `physics:` section); each unset field keeps the
    MJCF's own. Campaigns validate on the MJCF's own physics (RobotSpec.with_mjcf_physics), so a policy trained on
    the cheap model is judged on the full one."""

    contacts: str = setting(
        "all",
        "which of the robot's geoms collide: all (the MJCF's own), feet (only the feet: a fall ends by base height), "
        "feet_and_base (the feet and the base body's geoms)",
        choices=CONTACTS,
    )
    solver: str | None = setting(None, "constraint solver; none: the MJCF's", choices=tuple(SOLVERS))
    iterations: int | None = setting(None, "the solver's iteration limit; none: the MJCF's", ge=1)
    cone: str | None = setting(None, "friction cone; none: the MJCF's", choices=tuple(CONES))
    integrator: str | None = setting(None, "integrator; none: the MJCF's", choices=tuple(INTEGRATORS))
    substeps: int | None = setting(
        None,
        "physics steps per policy step: the timestep becomes the policy period / substeps (the policy period stays "
        "sim_dt x decimation); none: decimation, at sim_dt",
        ge=1,
    )

    def apply(self, mj: mujoco.MjSpec, base_body: str, feet: tuple[str, ...]) -> None:
        """Set these options on the robot's MjSpec; collisions off for the robot's geoms the contacts leave out."""
        if self.solver is not None:
            mj.option.solver = SOLVERS[self.solver]
        if self.iterations is not None:
            mj.option.iterations = self.iterations
        if self.cone is not None:
            mj.option.cone = CONES[self.cone]
        if self.integrator is not None:
            mj.option.integrator = INTEGRATORS[self.integrator]
        if self.contacts == "all":
            return
        if not feet:
            raise RobotConfigError(f"physics contacts {self.contacts} needs the robot's feet: list them under feet:")
        base = mj.body(base_body)
        for body in [base, *base.find_all(mujoco.mjtObj.mjOBJ_BODY)]:
            if body is base and self.contacts == "feet_and_base":
                continue
            for geom in body.geoms:
                if not geom.name or geom.name not in feet:
                    geom.contype, geom.conaffinity = 0, 0


@dataclass(frozen=True)
class RobotConfig:
    """A robot YAML as written (config/robots/<name>.yaml), loaded by edge.config: every key, its default, what
    it allows and what it means. `load_robot` resolves it, with its MJCF, into a RobotSpec."""

    name: str = setting(help="robot name (the manifest's, the run directories')", length=(1, None))
    mjcf: str = setting(
        help="MJCF path, relative to the YAML or sim/assets/ (loaded from its own path, so a relative meshdir works)",
        length=(1, None),
    )
    base_body: str = setting(help="the MJCF body with the free joint", length=(1, None))
    joints: tuple[str, ...] = setting(
        help="actuated joints (MJCF names), in action order; an actuator is generated for each (the MJCF's own are "
        "replaced)",
        length=(1, None),
        unique=True,
    )
    default_pose: float | tuple[float, ...] = setting(help=f"joint targets at zero action: {PER_JOINT}")
    kp: float | tuple[float, ...] = setting(help=f"PD stiffness (N m/rad): {PER_JOINT}", ge=0)
    kd: float | tuple[float, ...] = setting(help=f"PD damping (N m s/rad; velocity mode's gain): {PER_JOINT}", ge=0)
    torque_limit: float | tuple[float, ...] = setting(help=f"motor torque limits (N m): {PER_JOINT}", gt=0)
    control_mode: str = setting(
        "position",
        "position: PD to a joint target; velocity: P (kd) to a joint speed; torque: the action is the torque",
        choices=CONTROL_MODES,
    )
    safe_mode: str = setting(
        "hold",
        "on a fault or e-stop: hold the default pose at full gains, or damp (kp = 0, kd kept: a legged robot sinks)",
        choices=SAFE_MODES,
    )
    action_scale: float = setting(
        0.25, "target units per unit of action (target = default_pose + scale * action)", gt=0
    )
    base_height: float = setting(0.3, "base height at reset (m)")
    sim_dt: float = setting(0.005, "physics period (s)", gt=0)
    decimation: int = setting(4, "physics steps per policy step: policy period = sim_dt * decimation", ge=1)
    command_limits: CommandLimits = dataclasses.field(
        default_factory=CommandLimits,
        metadata={
            "help": "the physical envelope of (vx, vy, wz), each [low, high] with low <= high: the manifest's "
            "limits, the clip of every command"
        },
    )
    feet: tuple[str, ...] = setting(
        (),
        "foot geoms (MJCF names) for the foot terms and gait KPIs (optional); four feet are listed front pair, then "
        "rear pair, sides in the same order (FR, FL, RR, RL): the trot index takes its diagonals from that",
        unique=True,
    )
    physics: PhysicsOptions = dataclasses.field(
        default_factory=PhysicsOptions,
        metadata={
            "help": "cheaper training physics (contacts, solver, iterations, cone, integrator, substeps; each unset "
            "keeps the MJCF's or the YAML's); campaigns validate on the MJCF's own"
        },
    )

    def __post_init__(self) -> None:
        n = len(self.joints)
        for key in ("default_pose", "kp", "kd", "torque_limit"):
            value = getattr(self, key)
            if isinstance(value, tuple) and len(value) != n:
                raise RobotConfigError(f"{key} needs {n} values (one per joint) or one for all, got {len(value)}")


@dataclass(frozen=True)
class RobotSpec:
    """A robot as loaded (load_robot): a RobotConfig whose mjcf is resolved to a file and whose default pose and
    torque limits hold one value per joint; the fields mean what RobotConfig's say."""

    name: str
    mjcf: Path
    base_body: str
    joints: tuple[str, ...]
    default_pose: tuple[float, ...]
    kp: float | tuple[float, ...]  # one gain for every joint, or one per joint (as the YAML gives it)
    kd: float | tuple[float, ...]
    torque_limit: tuple[float, ...]
    control_mode: str
    safe_mode: str  # edge.manifest.SAFE_MODES
    action_scale: float
    base_height: float
    sim_dt: float
    decimation: int
    command_limits: CommandLimits  # the physical envelope (manifest)
    feet: tuple[str, ...]  # foot geoms: contacts, air time and slip of legged tasks and KPIs
    physics: PhysicsOptions

    def with_mjcf_physics(self) -> RobotSpec:
        """This robot on its MJCF's own physics (every contact, the MJCF's solver settings, sim_dt x decimation):
        what campaigns judge."""
        return dataclasses.replace(self, physics=PhysicsOptions())

    @property
    def physics_steps(self) -> int:
        """Physics steps per policy step in the twin: the physics section's substeps, else decimation."""
        return self.physics.substeps or self.decimation

    @property
    def physics_dt(self) -> float:
        """The twin's physics timestep (s): sim_dt, or the policy period / substeps under the physics section."""
        return self.control_dt / self.physics_steps if self.physics.substeps else self.sim_dt

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
    """Load and validate a robot YAML (RobotConfig), checking every name it gives against its MJCF."""
    path = resolve_robot_path(name_or_path)
    raw = read_yaml_mapping(path, RobotConfigError, "robot config", "expected a mapping of RobotConfig fields")
    moved = [str(k) for k in raw if k in TASK_KEYS]
    if moved:
        raise RobotConfigError(
            f"{path}: unknown key(s) {', '.join(moved)} ({', '.join(moved)}: the task's now, see sim.tasks and "
            "config/tasks/)"
        )
    cfg = load_dataclass(RobotConfig, raw, name=str(path), error=RobotConfigError)
    mjcf = Path(cfg.mjcf)
    if not mjcf.is_absolute():
        mjcf = path.parent / mjcf if (path.parent / mjcf).is_file() else ASSET_DIR / mjcf
    if not mjcf.is_file():
        raise RobotConfigError(f"{path}: MJCF {cfg.mjcf} not found (looked beside the YAML and in {ASSET_DIR})")
    n = len(cfg.joints)
    resolved = {"mjcf": mjcf.resolve(), "default_pose": _per_joint(cfg.default_pose, n)}
    resolved["torque_limit"] = _per_joint(cfg.torque_limit, n)
    spec = RobotSpec(**{**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}, **resolved})
    build_model(spec)  # fails here, with the name of what is wrong, rather than deep inside a rollout
    return spec


def _per_joint(value: float | tuple[float, ...], n: int) -> tuple[float, ...]:
    return value if isinstance(value, tuple) else (value,) * n


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
    # an unnamed element's name is "": no name in the YAML can match it
    joint_names = {j.name for j in mj.joints} - {""}
    missing = [j for j in spec.joints if j not in joint_names]
    if missing:
        raise RobotConfigError(
            f"{spec.mjcf}: joint(s) {', '.join(map(repr, missing))} named in the robot YAML are not in the MJCF"
        )
    if spec.base_body not in {b.name for b in mj.bodies} - {""}:
        raise RobotConfigError(f"{spec.mjcf}: base_body {spec.base_body!r} is not in the MJCF")
    geom_names = {g.name for g in mj.geoms} - {""}
    missing = [g for g in spec.feet if g not in geom_names]
    if missing:
        raise RobotConfigError(
            f"{spec.mjcf}: foot geom(s) {', '.join(map(repr, missing))} named in the robot YAML are not in the MJCF"
        )
    for act in list(mj.actuators):
        mj.delete(act)
    if not has_floor(mj):
        add_floor(mj)
    mj.option.timestep = spec.physics_dt
    spec.physics.apply(mj, spec.base_body, spec.feet)
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


class ActuatorFields(Protocol):
    """The actuator arrays set_pd_gains writes: an MjModel's, or one simulation's per-simulation fields of a
    mujoco.batch.Batch."""

    @property
    def actuator_gainprm(self) -> np.ndarray: ...
    @property
    def actuator_biasprm(self) -> np.ndarray: ...
    @property
    def actuator_forcerange(self) -> np.ndarray: ...


def set_pd_gains(model: ActuatorFields, spec: RobotSpec, kp: np.ndarray, kd: np.ndarray, strength: np.ndarray) -> None:
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
