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
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from sim.errors import SimError
from sim.robot import RobotSpec, build_model

__all__ = ["JointMirror", "SignedPermutation", "SymmetryError", "observation_mirror"]

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
        model = build_model(spec)
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        base = model.body(spec.base_body).id
        rot = data.xmat[base].reshape(3, 3)
        ids = [model.joint(name).id for name in spec.joints]
        anchors = (data.xanchor[ids] - data.xpos[base]) @ rot  # base frame
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


# the mirror of each observation term of edge.observation, per element: a base-frame vector reflects (y -> -y); an
# angular velocity is a pseudovector, so it reflects and changes sign; the command's yaw rate turns the other way
_VECTOR_SIGNS = {
    "base_lin_vel": (1.0, -1.0, 1.0),
    "base_ang_vel": (-1.0, 1.0, -1.0),
    "projected_gravity": (1.0, -1.0, 1.0),
    "velocity_command": (1.0, -1.0, -1.0),
}
_JOINT_TERMS = ("joint_pos", "joint_vel", "last_action")


def observation_mirror(mirror: JointMirror, terms: list[str] | tuple[str, ...]) -> SignedPermutation:
    """The mirror over an observation made of `terms` (edge.observation names, in layout order)."""
    index, sign, start = [], [], 0
    n = len(mirror.twins)
    for term in terms:
        if term in _VECTOR_SIGNS:
            index.extend(start + np.arange(3))
            sign.extend(_VECTOR_SIGNS[term])
            start += 3
        elif term in _JOINT_TERMS:
            index.extend(start + mirror.joints.index)
            sign.extend(mirror.joints.sign)
            start += n
        else:
            known = ", ".join((*_VECTOR_SIGNS, *_JOINT_TERMS))
            raise SymmetryError(f"observation term {term!r} has no mirror; mirrored terms: {known}")
    return SignedPermutation(np.array(index), np.array(sign))
