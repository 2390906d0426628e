"""rsl_rl's symmetry extension on the robot's mirror (sim.symmetry): the function that appends mirrored
observations and actions to a mini-batch, and the `symmetry_cfg` PPO takes."""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDict

from sim.robot import RobotSpec
from sim.symmetry import JointMirror, SignedPermutation, observation_mirror
from training.ppo.config import PPOConfig

__all__ = ["mirror_augmentation", "policy_mirrors", "symmetry_cfg"]


def _apply(mirror: SignedPermutation, x: torch.Tensor) -> torch.Tensor:
    index = torch.as_tensor(mirror.index, device=x.device)
    sign = torch.as_tensor(mirror.sign, dtype=x.dtype, device=x.device)
    return x[..., index] * sign


def mirror_augmentation(obs_mirror: SignedPermutation, action_mirror: SignedPermutation) -> Callable:
    """rsl_rl's data_augmentation_func: each of obs (a TensorDict of [B, D] groups) and actions ([B, A]) that is
    given comes back as [2B, ...], the originals first and their mirror images after them."""

    def augment(env=None, obs: TensorDict | None = None, actions: torch.Tensor | None = None):
        obs_out = None
        if obs is not None:
            mirrored = TensorDict({k: _apply(obs_mirror, v) for k, v in obs.items()}, batch_size=obs.batch_size)
            obs_out = torch.cat([obs, mirrored], dim=0)
        actions_out = None if actions is None else torch.cat([actions, _apply(action_mirror, actions)], dim=0)
        return obs_out, actions_out

    return augment


def symmetry_cfg(cfg: PPOConfig, spec: RobotSpec, observation_terms: list[str], env) -> dict | None:
    """PPO's symmetry_cfg for this run, or None when the config uses no symmetry; SymmetryError when it asks for
    symmetry on a robot or observation without a mirror."""
    if not (cfg.symmetry_augmentation or cfg.mirror_loss_coeff > 0):
        return None
    joints = JointMirror.of(spec)
    return {
        "env": env,
        "data_augmentation_func": mirror_augmentation(observation_mirror(joints, observation_terms), joints.joints),
        "use_data_augmentation": cfg.symmetry_augmentation,
        "use_mirror_loss": cfg.mirror_loss_coeff > 0,
        "mirror_loss_coeff": cfg.mirror_loss_coeff,
    }


def policy_mirrors(
    cfg: PPOConfig, spec: RobotSpec, observation_terms: list[str]
) -> tuple[SignedPermutation, SignedPermutation] | None:
    """The observation's and the actions' mirrors of a mirror_policy actor (training.ppo.models), or None when the
    config does not ask for one; SymmetryError for a robot or observation without a mirror."""
    if not cfg.mirror_policy:
        return None
    joints = JointMirror.of(spec)
    return observation_mirror(joints, observation_terms), joints.joints
