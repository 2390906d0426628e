"""A thin adapter from the batched twin (numpy, gymnasium VectorEnv) to rsl_rl's `VecEnv` (torch, TensorDict).

The twin resets finished envs in the same step, so the observation returned for a finished env is already the
first of its next episode, as rsl_rl expects. Timeouts go to `extras["time_outs"]` (PPO bootstraps them);
per-episode reward terms, per-step tracking errors and, on terrain, each env's curriculum level go to
`extras["log"]` as tensors whose mean is the metric.
"""

from __future__ import annotations

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from sim.twin import BatchedTwin

OBS_GROUP = "policy"  # the group rsl_rl falls back to for both actor and critic
TRACKING_KEYS = ("vx", "vy", "wz")


class TwinVecEnv(VecEnv):
    def __init__(self, twin: BatchedTwin, device: str | torch.device = "cpu"):
        self.twin = twin
        self.device = torch.device(device)
        self.num_envs = twin.num_envs
        self.num_actions = twin.spec.num_actions
        self.max_episode_length = twin.max_episode_steps
        self.cfg = {"robot": twin.spec.to_dict(), "num_envs": twin.num_envs}
        self.reward_terms = tuple(k for k, w in twin.task.weights.items() if w != 0.0)
        # every key step() may put in extras["log"], so distributed workers can reduce a fixed-size vector
        self.log_keys = (
            *(f"Episode_Reward/{k}" for k in self.reward_terms),
            "Episode/return",
            "Episode/length_s",
            *(f"Tracking/{k}_error" for k in TRACKING_KEYS),
            *(("Terrain/level",) if twin.curriculum is not None else ()),
        )
        twin.reset()

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return torch.from_numpy(self.twin.episode_length)  # shares memory with the twin

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        # rsl_rl's init_at_random_ep_len writes here; keep below the limit so no env times out at step 0
        self.twin.episode_length[:] = np.minimum(value.cpu().numpy(), self.max_episode_length - 1)

    def get_observations(self) -> TensorDict:
        return self._wrap(self.twin.observations)

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        obs, rew, terminated, truncated, info = self.twin.step(actions.detach().cpu().numpy())
        log = {f"Tracking/{k}_error": torch.from_numpy(info["tracking_error"][k]) for k in TRACKING_KEYS}
        if "terrain_level" in info:
            log["Terrain/level"] = torch.from_numpy(info["terrain_level"].astype(np.float32))
        episode = info.get("episode")
        if episode is not None:
            for k in self.reward_terms:
                log[f"Episode_Reward/{k}"] = torch.from_numpy(episode["terms"][k])
            log["Episode/return"] = torch.from_numpy(episode["r"])
            log["Episode/length_s"] = torch.from_numpy(episode["l"] * self.twin.spec.control_dt)
        extras = {"time_outs": torch.from_numpy(truncated).to(self.device), "log": log}
        dones = torch.from_numpy(terminated | truncated).to(self.device)
        return self._wrap(obs), torch.from_numpy(rew).to(self.device), dones, extras

    def close(self) -> None:
        self.twin.close()

    def _wrap(self, obs: np.ndarray) -> TensorDict:
        obs = torch.from_numpy(obs).to(self.device)
        return TensorDict({OBS_GROUP: obs}, batch_size=[self.num_envs], device=self.device)
