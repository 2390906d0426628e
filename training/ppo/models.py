"""The actor-critic: two rsl_rl MLPs over the twin's observation group, the actor with a Gaussian head and each
with its own empirical observation normaliser (part of the model, so checkpoints and exports carry it)."""

from __future__ import annotations

from rsl_rl.models import MLPModel
from tensordict import TensorDict

from training.ppo.config import PPOConfig
from training.vec_env import OBS_GROUP

OBS_GROUPS = {"actor": [OBS_GROUP], "critic": [OBS_GROUP]}


def build_actor(obs: TensorDict, cfg: PPOConfig, num_actions: int) -> MLPModel:
    dist_cfg = {"class_name": "GaussianDistribution", "init_std": cfg.init_std, "std_type": "scalar"}
    return MLPModel(
        obs, OBS_GROUPS, "actor", num_actions, cfg.actor_hidden_dims, cfg.activation, cfg.obs_normalization, dist_cfg
    )


def build_critic(obs: TensorDict, cfg: PPOConfig) -> MLPModel:
    return MLPModel(obs, OBS_GROUPS, "critic", 1, cfg.critic_hidden_dims, cfg.activation, cfg.obs_normalization)
