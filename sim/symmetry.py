"""The robot's left-right mirror, read from its MJCF, and what it does to the policy's observations and actions.

A legged robot built symmetric about its base's x-z plane has a mirror: each joint has a twin on the other side (or
is its own twin on the plane), and a motion mirrored through that plane is a motion of the robot. rsl_rl's
symmetry extension (Mittal et al., ICRA 2024) uses it to double each mini-batch with mirrored samples, or to
penalise a policy that disagrees with its own mirror image.

The mirror is derived from the compiled model at its reference pose, not from joint names: joint j is joint i's
twin when its anchor, in the base frame, is joint i's reflected (y -> -y). A reflection turns a rotation by q
about an axis a into a rotation by -q about the reflected axis, so q_j = -q_i when a_j is the reflected a_i (a
roll or yaw joint) and q_j = +q_i when a_j is its opposite (a pitch joint on a mirrored leg).

    mirror = JointMirror.of(spec)            # SymmetryError naming the joint without a twin
    obs_map = observation_mirror(mirror, names)
    mirrored_obs = obs[:, obs_map.index] * obs_map.sign

A trot's diagonal pairs come from the same reference pose: the feet's positions in the base frame, front and rear
by x, left and right by y (diagonal_pairs). The mirror swaps the pairs, so it shifts the gait clock
(edge.observation's gait_phase) by half a period.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from sim.errors import SimError
from sim.robot import RobotSpec, build_model

__all__ = [
    "JointMirror",
    "SignedPermutation",
    "SymmetryError",
    "diagonal_pairs",
    "observation_mirror",
    "trot_offsets",
]

# how far (m) a joint's anchor may lie from its twin's reflection: MJCFs round positions to 1e-4-1e-3 m
ANCHOR_TOLERANCE_M = 2e-3
AXIS_TOLERANCE = 1e-3


class SymmetryError(SimError):
    """A robot or observation that has no left-right mirror."""


@dataclass(frozen=True)
class SignedPermutation:
    """out[k] = sign[k] * x[index[k]]: a mirror over a vector (it is its own inverse)."""

    index: np.ndarray  # int, (n,)
    sign: np.ndarray  # float, (n,), each +1 or -1

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x[..., self.index] * self.sign


@dataclass(frozen=True)
class JointMirror:
    """The mirror over the robot's actuated joints, in the robot YAML's order, and each joint's twin by name."""

    joints: SignedPermutation
    twins: tuple[str, ...]  # twins[i]: joint i's twin (itself on the plane)

    @classmethod
    def of(cls, spec: RobotSpec) -> JointMirror:
        """The mirror of `spec`'s joints; SymmetryError when a joint has no twin, or the default pose is not
        mirror-symmetric (a policy's actions are offsets from it)."""
        model, data, origin, rot = _reference_pose(spec)
        ids = [model.joint(name).id for name in spec.joints]
        anchors = (data.xanchor[ids] - origin) @ rot  # base frame
        axes = data.xaxis[ids] @ rot
        reflect = np.array([1.0, -1.0, 1.0])
        index, sign = [], []
        for i, name in enumerate(spec.joints):
            found = np.flatnonzero(np.linalg.norm(anchors - anchors[i] * reflect, axis=1) < ANCHOR_TOLERANCE_M)
            twin = next(
                (j for j in found if np.linalg.norm(np.abs(axes[j] @ (axes[i] * reflect)) - 1) < AXIS_TOLERANCE), None
            )
            if twin is None:
                raise SymmetryError(
                    f"{spec.name}: joint {name} has no mirror twin (no joint at its anchor reflected through the "
                    f"base's x-z plane with a parallel axis): the robot is not left-right symmetric"
                )
            index.append(twin)
            sign.append(-1.0 if axes[twin] @ (axes[i] * reflect) > 0 else 1.0)
        mirror = SignedPermutation(np.array(index), np.array(sign))
        pose = np.asarray(spec.default_pose, dtype=float)
        if not np.allclose(mirror(pose), pose, atol=1e-6):
            worst = int(np.argmax(np.abs(mirror(pose) - pose)))
            raise SymmetryError(
                f"{spec.name}: default_pose is not mirror-symmetric ({spec.joints[worst]} "
                f"{pose[worst]:+g} against its twin {spec.joints[index[worst]]} {pose[index[worst]]:+g} x "
                f"{sign[worst]:+g}); actions are offsets from it"
            )
        return cls(mirror, tuple(spec.joints[j] for j in index))


def _reference_pose(spec: RobotSpec) -> tuple[mujoco.MjModel, mujoco.MjData, np.ndarray, np.ndarray]:
    """The compiled robot at its reference pose (qpos0), with its base's origin and rotation (world frame): a point
    p of the world is (p - origin) @ rot in the base frame."""
    model = build_model(spec)
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    base = model.body(spec.base_body).id
    return model, data, data.xpos[base].copy(), data.xmat[base].reshape(3, 3).copy()


_PAIRS: dict[tuple[Path, str, tuple[str, ...]], tuple[tuple[int, int], tuple[int, int]]] = {}


def diagonal_pairs(spec: RobotSpec) -> tuple[tuple[int, int], tuple[int, int]]:
    """A trot's two diagonal pairs of `spec`'s feet, as indices into the robot YAML's `feet`: (front-right,
    rear-left), then (front-left, rear-right). Front and rear are by x, left and right by y, of the foot geoms in
    the base frame at the reference pose. A SimError naming the robot when its feet are not four in two such pairs."""
    key = (spec.mjcf, spec.base_body, spec.feet)
    if key not in _PAIRS:
        _PAIRS[key] = _diagonal_pairs(spec)
    return _PAIRS[key]


def _diagonal_pairs(spec: RobotSpec) -> tuple[tuple[int, int], tuple[int, int]]:
    def refuse(why: str) -> SimError:
        return SimError(
            f"robot {spec.name!r}: the gait clock needs four feet in two diagonal pairs (front and rear by x, left and "
            f"right by y in the base frame at the reference pose); {why}"
        )

    if len(spec.feet) != 4:
        raise refuse(f"its YAML lists {len(spec.feet)} feet ({', '.join(spec.feet) or 'none'})")
    model, data, origin, rot = _reference_pose(spec)
    pos = (data.geom_xpos[[model.geom(name).id for name in spec.feet]] - origin) @ rot
    order = np.argsort(-pos[:, 0], kind="stable")
    front, rear = order[:2], order[2:]
    if pos[front, 0].min() - pos[rear, 0].max() < ANCHOR_TOLERANCE_M:
        raise refuse(
            f"feet {', '.join(spec.feet)} at x {', '.join(f'{x:+.3f}' for x in pos[:, 0])} m are not two "
            "in front of two behind"
        )
    sides = []
    for pair, where in ((front, "front"), (rear, "rear")):
        right, left = pair[np.argsort(pos[pair, 1], kind="stable")]
        if pos[left, 1] - pos[right, 1] < ANCHOR_TOLERANCE_M:
            raise refuse(f"the {where} feet {spec.feet[right]} and {spec.feet[left]} are not side by side in y")
        sides.append((int(right), int(left)))
    (front_right, front_left), (rear_right, rear_left) = sides
    return (front_right, rear_left), (front_left, rear_right)


def trot_offsets(spec: RobotSpec) -> np.ndarray:
    """[F] each foot's phase in a trot (cycles of the gait clock, robot YAML `feet` order): 0 for the pair with the
    front-right foot, 0.5 for the other (diagonal_pairs), as mjbatch's Go1 joystick example phases FR with RL."""
    offsets = np.zeros(len(spec.feet))
    offsets[list(diagonal_pairs(spec)[1])] = 0.5
    return offsets


# the mirror of each observation term of edge.observation that keeps its elements in place, as a sign per element: a
# base-frame vector reflects (y -> -y); an angular velocity is a pseudovector, so it reflects and changes sign; the
# command's yaw rate turns the other way
_TERM_SIGNS = {
    "base_lin_vel": (1.0, -1.0, 1.0),
    "base_ang_vel": (-1.0, 1.0, -1.0),
    "projected_gravity": (1.0, -1.0, 1.0),
    "velocity_command": (1.0, -1.0, -1.0),
    # the mirror swaps a trot's diagonal pairs, which are half a period apart: the clock's angle moves by pi
    "gait_phase": (-1.0, -1.0),
}
_JOINT_TERMS = ("joint_pos", "joint_vel", "last_action")


def observation_mirror(mirror: JointMirror, terms: list[str] | tuple[str, ...]) -> SignedPermutation:
    """The mirror over an observation made of `terms` (edge.observation names, in layout order)."""
    index, sign, start = [], [], 0
    n = len(mirror.twins)
    for term in terms:
        if term in _TERM_SIGNS:
            size = len(_TERM_SIGNS[term])
            index.extend(start + np.arange(size))
            sign.extend(_TERM_SIGNS[term])
            start += size
        elif term in _JOINT_TERMS:
            index.extend(start + mirror.joints.index)
            sign.extend(mirror.joints.sign)
            start += n
        else:
            known = ", ".join((*_TERM_SIGNS, *_JOINT_TERMS))
            raise SymmetryError(f"observation term {term!r} has no mirror; mirrored terms: {known}")
    return SignedPermutation(np.array(index), np.array(sign))
