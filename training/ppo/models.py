"""The actor-critic: two rsl_rl MLPs over the twin's observation group, the actor with a Gaussian head and each
with its own empirical observation normaliser (part of the model, so checkpoints and exports carry it). With
`mirror_policy` the actor is mirror-symmetric by construction (`MirrorSymmetricActor`)."""

from __future__ import annotations

import copy

import torch
from rsl_rl.models import MLPModel
from tensordict import TensorDict
from torch import nn

from sim.symmetry import SignedPermutation
from training.ppo.config import PPOConfig
from training.vec_env import OBS_GROUP

__all__ = ["MirrorSymmetricActor", "build_actor", "build_critic"]

OBS_GROUPS = {"actor": [OBS_GROUP], "critic": [OBS_GROUP]}


def build_actor(
    obs: TensorDict, cfg: PPOConfig, num_actions: int, mirrors: tuple[SignedPermutation, SignedPermutation] | None
) -> MLPModel:
    """The actor; `mirrors` (the observation's and the actions', training.ppo.symmetry.policy_mirrors) make it a
    MirrorSymmetricActor, None a plain MLP."""
    dist_cfg = {"class_name": "GaussianDistribution", "init_std": cfg.init_std, "std_type": "scalar"}
    args = (obs, OBS_GROUPS, "actor", num_actions, cfg.actor_hidden_dims, cfg.activation, cfg.obs_normalization)
    if mirrors is None:
        return MLPModel(*args, dist_cfg)
    return MirrorSymmetricActor(*args, dist_cfg, obs_mirror=mirrors[0], action_mirror=mirrors[1])


def build_critic(obs: TensorDict, cfg: PPOConfig) -> MLPModel:
    return MLPModel(obs, OBS_GROUPS, "critic", 1, cfg.critic_hidden_dims, cfg.activation, cfg.obs_normalization)


class MirrorSymmetricActor(MLPModel):
    """An actor whose mean action is the MLP's averaged with the mirror image of the MLP's on the mirrored
    observation: mean(M_o o) = M_a mean(o) exactly, so the policy treats left and right alike from the first
    iteration (MuJoCo mjbatch's Go1 example averages its policy with its mirror so). It costs one more MLP pass per
    step, where symmetry augmentation doubles the update's samples. Its parameters and state dict are an MLPModel's:
    the mirrors are fixed buffers, not saved."""

    def __init__(self, *args, obs_mirror: SignedPermutation, action_mirror: SignedPermutation) -> None:
        super().__init__(*args)
        for name, mirror in (("obs", obs_mirror), ("action", action_mirror)):
            self.register_buffer(f"{name}_index", torch.as_tensor(mirror.index, dtype=torch.long), persistent=False)
            self.register_buffer(f"{name}_sign", torch.as_tensor(mirror.sign, dtype=torch.float32), persistent=False)

    def forward(
        self,
        obs: TensorDict,
        masks: torch.Tensor | None = None,
        hidden_state=None,
        stochastic_output: bool = False,
    ) -> torch.Tensor:
        raw = torch.cat([obs[group] for group in self.obs_groups], dim=-1)
        mean = symmetric_mean(self, raw)
        if self.distribution is None:
            return mean
        if stochastic_output:
            self.distribution.update(mean)
            return self.distribution.sample()
        return self.distribution.deterministic_output(mean)

    def as_jit(self) -> nn.Module:
        return _SymmetricExport(self)

    def as_onnx(self, verbose: bool) -> nn.Module:
        return _SymmetricExport(self)


def symmetric_mean(m: nn.Module, raw: torch.Tensor) -> torch.Tensor:
    """0.5 (f(o) + M_a f(M_o o)) for the MLP f of `m` (its normaliser first) on raw observations [B, D]."""
    of_mirror = m.mlp(m.obs_normalizer(raw[..., m.obs_index] * m.obs_sign))
    return 0.5 * (m.mlp(m.obs_normalizer(raw)) + of_mirror[..., m.action_index] * m.action_sign)


class _SymmetricExport(nn.Module):
    """The deterministic actor on pre-concatenated observations, for ONNX and the torch runtime (rsl_rl's export
    forms of an MLPModel, with the mirror kept)."""

    is_recurrent: bool = False

    def __init__(self, model: MirrorSymmetricActor) -> None:
        super().__init__()
        self.obs_normalizer, self.mlp = copy.deepcopy(model.obs_normalizer), copy.deepcopy(model.mlp)
        for name in ("obs_index", "obs_sign", "action_index", "action_sign"):
            self.register_buffer(name, getattr(model, name).clone(), persistent=False)
        self.deterministic_output = model.distribution.as_deterministic_output_module()
        self.input_size = model.obs_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deterministic_output(symmetric_mean(self, x))

    def reset(self) -> None:
        """No recurrent state."""

    def get_dummy_inputs(self) -> tuple[torch.Tensor]:
        return (torch.zeros(1, self.input_size),)

    @property
    def input_names(self) -> list[str]:
        return ["obs"]

    @property
    def output_names(self) -> list[str]:
        return ["actions"]
