"""`sim2real robot init`: a robot YAML (sim.robot's format) from what a Menagerie-style MJCF already says.

Read from the compiled MJCF: the base body (the one with the free joint), the joints in actuator order, kp from
position actuators, kd from their kv (else the joint damping), the torque limits from their force ranges, the
default pose and base height from a `home` keyframe, the foot geoms by name, the timestep. What is guessed
(no keyframe, no foot names, no actuators) is said in one line each, with what the user should check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import yaml

from edge.fileio import atomic_write_bytes
from sim.errors import RobotConfigError
from sim.floor import has_floor
from sim.robot import compile_mjspec, load_mjspec, load_robot
from sim.tasks import load_task

FOOT_WORDS = ("foot", "toe")
CONTROL_PERIOD_S = 0.02  # policy at 50 Hz, as legged_gym and MuJoCo Playground run theirs
ACTION_SCALE = 0.25
COMMAND_LIMITS = {"vx": [-1.0, 1.0], "vy": [-0.5, 0.5], "wz": [-1.0, 1.0]}
# training physics proposed for a legged robot, as MuJoCo's batch executor's Go1 example trains (PGS with 10
# iterations, pyramidal cone, implicitfast) with the feet and the base colliding; 2.2x the env-steps/s of Menagerie's
# Go1 on its own (Newton, elliptic, 100 iterations) on 2 cores (docs/results/locomotion.md)
LEGGED_PHYSICS = {
    "contacts": "feet_and_base",
    "solver": "pgs",
    "iterations": 10,
    "cone": "pyramidal",
    "integrator": "implicitfast",
}
# ... and its timestep: 4 ms (5 substeps at 50 Hz) where the MJCF's is shorter, half the physics of Menagerie's 2 ms
TRAINING_DT_S = 0.004
# as ints: a numpy integer is equal to a MuJoCo enum, but `in` a tuple of enums it is not
_FREE = int(mujoco.mjtJoint.mjJNT_FREE)
_HINGE = int(mujoco.mjtJoint.mjJNT_HINGE)
_SLIDE = int(mujoco.mjtJoint.mjJNT_SLIDE)


@dataclass
class RobotDraft:
    """The YAML's values (in the order written), a comment per key, and one line per guess or thing to check."""

    values: dict = field(default_factory=dict)
    comments: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def set(self, key: str, value, comment: str = "") -> None:
        self.values[key] = value
        self.comments[key] = comment

    def guessed(self, text: str) -> None:
        self.notes.append(f"guessed: {text}")

    def check(self, text: str) -> None:
        self.notes.append(f"check: {text}")


def init_robot(
    mjcf: str | Path,
    out: str | Path | None = None,
    *,
    force: bool = False,
    kp: float | None = None,
    kd: float | None = None,
    torque_limit: float | None = None,
) -> tuple[Path, RobotDraft]:
    """Write the robot YAML for `mjcf` to `out` (default: beside the MJCF, same stem) and load it back with
    load_robot. kp, kd, torque_limit (one value for every joint) replace what the MJCF's actuators say."""
    mjcf = Path(mjcf)
    out = mjcf.with_suffix(".yaml") if out is None else Path(out)
    if out.exists() and not force:
        raise RobotConfigError(f"{out} exists: pass --force to replace it")
    draft = draft_robot(mjcf, out.parent, kp=kp, kd=kd, torque_limit=torque_limit)
    atomic_write_bytes(out, render_yaml(draft, mjcf.name).encode())
    try:
        spec = load_robot(out)
    except RobotConfigError:
        out.unlink()  # a YAML that does not load is no help to anyone
        raise
    fall = load_task(spec).min_base_height
    if spec.base_height < 2 * fall:
        draft.check(f"base_height {spec.base_height} m is near the default task's fall height {fall} m: give it a task")
    return out, draft


def draft_robot(
    mjcf: Path,
    yaml_dir: Path,
    *,
    kp: float | None = None,
    kd: float | None = None,
    torque_limit: float | None = None,
) -> RobotDraft:
    """The robot YAML's values for `mjcf`, its mjcf path relative to `yaml_dir`."""
    if not mjcf.is_file():
        raise RobotConfigError(f"{mjcf}: no such MJCF file")
    mj = load_mjspec(mjcf)
    model = compile_mjspec(mj, mjcf)
    d = RobotDraft()
    name = mj.modelname if mj.modelname and mj.modelname != "MuJoCo Model" else mjcf.stem
    d.set("name", name, "the MJCF's model name")
    here, there = mjcf.resolve(), yaml_dir.resolve()
    shared = os.path.commonpath([here, there]) != here.anchor  # else a relative path climbs to the root: absolute
    d.set("mjcf", os.path.relpath(here, there) if shared else str(here), "relative to this file" if shared else "")
    base = _base_body(model, mjcf)
    d.set("base_body", model.body(base).name, "the body with the free joint")
    joints, mode = _actuated_joints(model, mjcf, d)
    d.set("control_mode", mode, _MODE_COMMENT[mode])
    d.set(
        "safe_mode",
        "damp" if mode == "position" else "hold",
        "on a fault or e-stop: kp = 0, kd kept (a legged robot sinks)"
        if mode == "position"
        else "on a fault or e-stop: hold the targets at full gains",
    )
    order = "actuator" if model.nu else "joint"
    d.set("joints", [model.joint(j).name for j in joints], f"action order: the MJCF's {order} order")
    pose, pose_source, base_z, z_source = _default_pose(model, joints, base, d)
    _pd_gains(model, mjcf, joints, mode, d, kp, kd)
    _torque_limits(model, mjcf, joints, d, torque_limit)
    if mode == "position" and not np.all(model.dof_armature[model.jnt_dofadr[joints]] > 0):
        d.check("joint(s) without armature: light links under a stiff PD can chatter; add the motors' armature")
    d.set("default_pose", [float(v) for v in pose], pose_source)
    feet, by_name = _feet(mj, model, base, joints, pose, base_z)
    if feet:
        d.set("feet", feet, "foot geoms: contacts for the gait terms and KPIs")
        if not by_name:
            d.guessed(f"feet {', '.join(feet)}: the lowest geom of each leg's last body (no geom named foot/toe)")
    else:
        d.check("no named foot geom found (name contains foot/toe, or a leg's last body): list them under feet:")
    d.set("base_height", base_z, z_source)
    d.set("action_scale", ACTION_SCALE, "target = default_pose + action_scale * action (rad)")
    dt = float(model.opt.timestep)
    decimation = max(1, round(CONTROL_PERIOD_S / dt))
    d.set("sim_dt", dt, "the MJCF's timestep (MuJoCo's 0.002 s when it sets none)")
    d.set("decimation", decimation, f"policy at {1 / (dt * decimation):.4g} Hz")
    d.set("command_limits", COMMAND_LIMITS, "the physical envelope (m/s, rad/s): defaults, not the robot's")
    if feet and mode == "position":
        physics, step = dict(LEGGED_PHYSICS), ""
        substeps = max(1, round(dt * decimation / TRAINING_DT_S))  # over the policy period written above
        if substeps < decimation:
            physics["substeps"] = substeps
            step = f", {1000 * dt * decimation / substeps:.3g} ms steps"
        d.set("physics", physics, "cheaper training physics; campaigns validate on the MJCF's own")
        d.check(
            "physics: the fast set for a legged robot trains (only the feet and base collide, PGS, 10 iterations, "
            f"pyramidal cone, implicitfast{step}); campaigns validate on the MJCF's own physics: delete the section "
            "to train on that too"
        )
    d.check("command_limits are defaults: set the robot's own velocity envelope")
    if not has_floor(mj):
        d.guessed("the MJCF has no ground: the twin adds a plane at z = 0 that collides with the robot's geoms")
    return d


_MODE_COMMENT = {
    "position": "action -> joint position target through PD",
    "velocity": "action -> joint velocity target through PD",
}


def _base_body(model: mujoco.MjModel, mjcf: Path) -> int:
    free = [j for j in range(model.njnt) if model.jnt_type[j] == _FREE]
    if not free:
        raise RobotConfigError(f"{mjcf}: no free joint: the robot's root body needs a <freejoint/> (a floating base)")
    bodies = [int(model.jnt_bodyid[j]) for j in free]
    if len(bodies) > 1:
        names = ", ".join(model.body(b).name or f"#{b}" for b in bodies)
        raise RobotConfigError(f"{mjcf}: free joints in several bodies ({names}): robot init takes one floating robot")
    if not model.body(bodies[0]).name:
        raise RobotConfigError(f"{mjcf}: the body with the free joint has no name: name it")
    return bodies[0]


def _actuated_joints(model: mujoco.MjModel, mjcf: Path, d: RobotDraft) -> tuple[list[int], str]:
    """The joint ids in actuator order and the control mode: position (kp, kv) or velocity (kv) actuators; a
    model without actuators, or with motors, is position-controlled with gains given by the user."""
    if model.nu == 0:
        joints = [j for j in range(model.njnt) if model.jnt_type[j] in (_HINGE, _SLIDE)]
        if not joints:
            raise RobotConfigError(f"{mjcf}: no hinge or slide joint to actuate")
        d.guessed("no actuators: joints in MJCF order (every hinge and slide joint)")
        return joints, "position"
    joints, kinds = [], set()
    for a in range(model.nu):
        act = model.actuator(a)
        label = act.name or f"#{a}"
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            raise RobotConfigError(f"{mjcf}: actuator {label} drives no joint: robot init maps actuators to joints")
        j = int(model.actuator_trnid[a, 0])
        if model.jnt_type[j] not in (_HINGE, _SLIDE):
            raise RobotConfigError(f"{mjcf}: actuator {label} drives a free or ball joint: it needs a hinge or slide")
        if j in joints:
            raise RobotConfigError(f"{mjcf}: joint {model.joint(j).name} has more than one actuator")
        if not model.joint(j).name:
            raise RobotConfigError(f"{mjcf}: actuator {label} drives an unnamed joint: name it")
        if model.actuator_gear[a, 0] != 1 and _kind(model, a) != "motor":  # a motor's gear is its torque scale
            gear = model.actuator_gear[a, 0]
            raise RobotConfigError(
                f"{mjcf}: actuator {label} has gear {gear:g}: robot init reads gear-1 position and velocity actuators"
            )
        joints.append(j)
        kinds.add(_kind(model, a))
    if "other" in kinds or len(kinds) > 1:
        raise RobotConfigError(
            f"{mjcf}: actuators of kinds {', '.join(sorted(kinds))}: robot init reads all-position, all-velocity "
            "or all-motor actuators"
        )
    return joints, "velocity" if kinds == {"velocity"} else "position"


def _kind(model: mujoco.MjModel, a: int) -> str:
    gain, bias = model.actuator_gainprm[a], model.actuator_biasprm[a]
    if model.actuator_gaintype[a] != mujoco.mjtGain.mjGAIN_FIXED:
        return "other"
    if model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE:
        return "motor"
    if model.actuator_biastype[a] != mujoco.mjtBias.mjBIAS_AFFINE or bias[0] != 0:
        return "other"
    if gain[0] > 0 and bias[1] == -gain[0]:
        return "position"
    if gain[0] > 0 and bias[1] == 0 and bias[2] == -gain[0]:
        return "velocity"
    return "other"


def _pd_gains(
    model: mujoco.MjModel, mjcf: Path, joints: list[int], mode: str, d: RobotDraft, kp: float | None, kd: float | None
) -> None:
    """kp and kd: the flags, else the position actuators' kp and kv (velocity actuators: kv), and the joint
    damping where an actuator has no kv."""
    acts = np.arange(model.nu)
    kinds = {_kind(model, a) for a in range(model.nu)}
    if kinds not in ({"position"}, {"velocity"}) and (kp is None or kd is None):
        what = "no actuators" if not kinds else "motor (torque) actuators, which carry no PD gains"
        raise RobotConfigError(f"{mjcf} has {what}: give --kp and --kd for its PD law")
    if kp is not None:
        d.set("kp", float(kp), "N m/rad, from --kp")
    elif mode == "position":
        d.set("kp", _collapse(model.actuator_gainprm[acts, 0]), "N m/rad, from the position actuators' kp")
    else:
        d.set("kp", 0.0, "velocity actuators: no position gain")
    if kd is not None:
        d.set("kd", float(kd), "N m s/rad, from --kd")
        return
    kv = -model.actuator_biasprm[acts, 2] if mode == "position" else model.actuator_gainprm[acts, 0]
    if np.all(kv > 0):
        d.set("kd", _collapse(kv), "N m s/rad, from the actuators' kv")
        return
    damping = _collapse(np.where(kv > 0, kv, model.dof_damping[model.jnt_dofadr[joints]]))
    d.set("kd", damping, "N m s/rad, from the joint damping (where an actuator has no kv)")
    d.guessed(f"kd {damping} from the joint damping (the actuators have no kv)")
    d.check("the twin keeps the MJCF's joint damping as well: damping there is joint damping + kd")
    if not np.any(damping):
        d.check("kd is 0 (no kv, no joint damping): set a damping gain, or the PD law oscillates")


def _torque_limits(
    model: mujoco.MjModel, mjcf: Path, joints: list[int], d: RobotDraft, torque_limit: float | None
) -> None:
    """The flag, else per joint: the actuator's force range, the joint's actuator force range, a motor's control
    range times its gear."""
    if torque_limit is not None:
        d.set("torque_limit", float(torque_limit), "N m, from --torque-limit")
        return
    limits = []
    for i, j in enumerate(joints):
        name, a = model.joint(j).name, i if model.nu else None
        if a is not None and model.actuator_forcelimited[a]:
            lo, hi = model.actuator_forcerange[a]
        elif model.jnt_actfrclimited[j]:
            lo, hi = model.jnt_actfrcrange[j]
        elif a is not None and _kind(model, a) == "motor" and model.actuator_ctrllimited[a]:
            lo, hi = model.actuator_ctrlrange[a] * model.actuator_gear[a, 0]  # torque = gear * control
        else:
            raise RobotConfigError(f"{mjcf}: joint {name} has no force range: give --torque-limit")
        limit = float(min(-lo, hi))
        if limit <= 0:
            raise RobotConfigError(f"{mjcf}: joint {name}'s force range [{lo:g}, {hi:g}] does not hold 0 inside")
        if -lo != hi:
            d.guessed(f"joint {name}'s force range [{lo:g}, {hi:g}] is not symmetric: torque_limit {limit:g}")
        limits.append(limit)
    d.set("torque_limit", _collapse(np.array(limits)), "N m, from the actuators' force ranges")


def _default_pose(
    model: mujoco.MjModel, joints: list[int], base: int, d: RobotDraft
) -> tuple[np.ndarray, str, float, str]:
    """The default pose and base height, each with where it came from: the `home` keyframe (else the first),
    else the joints' zero (ref) clipped into their ranges and the height that puts the lowest geom on the floor."""
    qadr = np.array([model.jnt_qposadr[j] for j in joints])
    low = np.array([model.jnt_range[j, 0] if model.jnt_limited[j] else -np.inf for j in joints])
    high = np.array([model.jnt_range[j, 1] if model.jnt_limited[j] else np.inf for j in joints])
    unlimited = [model.joint(j).name for j in joints if not model.jnt_limited[j]]
    if unlimited:
        d.check(f"joint(s) {', '.join(unlimited)} have no range: their targets are bounded by the action clip only")
    base_q = int(model.jnt_qposadr[model.body_jntadr[base]])
    keys = [model.key(k).name for k in range(model.nkey)]
    if keys:
        k = keys.index("home") if "home" in keys else 0
        if keys[k] != "home":
            d.guessed(f"no 'home' keyframe: default pose from keyframe {keys[k] or '#0'!r}")
        qpos = model.key_qpos[k]
        pose, source = qpos[qadr], f"from keyframe {keys[k]!r}"
        base_z, z_source = float(qpos[base_q + 2]), f"m, the base z of keyframe {keys[k]!r}"
    else:
        pose, source = model.qpos0[qadr], "the joints' zero (ref), clipped into their ranges"
        d.guessed("no keyframe: default_pose = the joints' zero (ref) clipped into their ranges: check it stands")
        base_z, z_source = None, "m, where the lowest geom touches the floor at the default pose"
    clipped = [model.joint(j).name for j, p, lo, hi in zip(joints, pose, low, high, strict=True) if not lo <= p <= hi]
    if clipped and keys:
        d.guessed(f"joint(s) {', '.join(clipped)}: the keyframe lies outside the range, clipped into it")
    pose = np.clip(pose, low, high)
    lowest = _lowest_point(model, base, qadr, pose, base_q)  # below the base origin
    if base_z is None:
        base_z = round(-lowest + 0.005, 4)  # 5 mm of drop: no contact at reset
        d.guessed(f"base_height {base_z} m from the geometry: the lowest geom 5 mm above the floor")
    elif not -0.005 < base_z + lowest < 0.05:
        gap = 1000 * (base_z + lowest)
        where = f"{gap:.0f} mm above" if gap > 0 else f"{-gap:.0f} mm below"
        d.check(f"at base_height {base_z} m the lowest geom starts {where} the floor")
    return pose, source, float(base_z), z_source


def _lowest_point(model: mujoco.MjModel, base: int, qadr: np.ndarray, pose: np.ndarray, base_q: int) -> float:
    """The z of the robot's lowest colliding geom with the base level at z = 0, in `pose`."""
    data = _posed(model, qadr, pose, base_q, 0.0)
    geoms = _robot_geoms(model, base)
    return min(_geom_bottom(model, data, g) for g in geoms)


def _posed(model: mujoco.MjModel, qadr: np.ndarray, pose: np.ndarray, base_q: int, base_z: float) -> mujoco.MjData:
    data = mujoco.MjData(model)
    data.qpos[:] = model.qpos0
    data.qpos[base_q : base_q + 7] = [0.0, 0.0, base_z, 1.0, 0.0, 0.0, 0.0]
    data.qpos[qadr] = pose
    mujoco.mj_kinematics(model, data)
    return data


def _robot_geoms(model: mujoco.MjModel, base: int) -> list[int]:
    """The colliding geoms of the robot (the base body's tree)."""
    root = model.body_rootid[base]
    return [
        g
        for g in range(model.ngeom)
        if model.body_rootid[model.geom_bodyid[g]] == root and (model.geom_contype[g] or model.geom_conaffinity[g])
    ]


def _geom_bottom(model: mujoco.MjModel, data: mujoco.MjData, g: int) -> float:
    z, zrow, size = data.geom_xpos[g, 2], data.geom_xmat[g].reshape(3, 3)[2], model.geom_size[g]
    kind = model.geom_type[g]
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return z - size[0]
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return z - abs(zrow[2]) * size[1] - size[0]
    center, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]  # the local bounding box: exact for a box
    return z + zrow @ center - np.abs(zrow) @ half


def _feet(
    mj: mujoco.MjSpec, model: mujoco.MjModel, base: int, joints: list[int], pose: np.ndarray, base_z: float
) -> tuple[list[str], bool]:
    """Foot geoms: named geoms whose name or default class says foot or toe; else the lowest named geom of each
    leg's last body (a body of the robot with no child). True when found by name."""
    colliding = set(_robot_geoms(model, base))
    by_word = [
        g.name
        for g in mj.geoms
        if g.name
        and model.geom(g.name).id in colliding
        and any(w in f"{g.name} {g.classname.name}".lower() for w in FOOT_WORDS)
    ]
    if by_word:
        return by_word, True
    qadr = np.array([model.jnt_qposadr[j] for j in joints])
    base_q = int(model.jnt_qposadr[model.body_jntadr[base]])
    data = _posed(model, qadr, pose, base_q, base_z)
    parents = set(model.body_parentid[1:])
    leaves = [b for b in range(1, model.nbody) if b not in parents and model.body_rootid[b] == model.body_rootid[base]]
    feet = []
    for b in leaves:
        named = [g for g in colliding if model.geom_bodyid[g] == b and model.geom(g).name]
        if named:
            feet.append(model.geom(min(named, key=lambda g: _geom_bottom(model, data, g))).name)
    return feet, False


def _collapse(values: np.ndarray) -> float | list[float]:
    """One number when every joint has the same value, else a list of one per joint."""
    floats = [float(v) for v in values]
    return floats[0] if len(set(floats)) == 1 else floats


def render_yaml(d: RobotDraft, mjcf_name: str) -> str:
    """The YAML text, one key a line with its comment."""
    lines = [
        f"# Robot constants written by `sim2real robot init {mjcf_name}`; check the lines marked in its output.",
        "# What the robot is asked to learn is its task (config/tasks/, sim.tasks): the default velocity task here.",
    ]
    for key, value in d.values.items():
        text = yaml.safe_dump({key: value}, default_flow_style=True, width=10_000, sort_keys=False).strip()
        text = text[1:-1]  # {key: value} -> key: value
        comment = d.comments.get(key)
        lines.append(f"{text}  # {comment}" if comment else text)
    return "\n".join(lines) + "\n"
