"""The rsl_rl VecEnv adapter over the batched twin: shapes, dones and timeouts, logs, shared episode counters."""

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from sim.twin import BatchedTwin
from training.vec_env import OBS_GROUP, TwinVecEnv


def make_env(num_envs=8, robot="rover"):
    return TwinVecEnv(BatchedTwin(robot, num_envs=num_envs, seed=3))


def test_observations_and_step_follow_rsl_rl_contract():
    env = make_env()
    assert isinstance(env, VecEnv)
    assert (env.num_envs, env.num_actions, env.max_episode_length) == (8, 2, 500)
    obs = env.get_observations()
    assert isinstance(obs, TensorDict) and obs[OBS_GROUP].shape == (8, 16) and obs[OBS_GROUP].dtype == torch.float32
    obs, rew, dones, extras = env.step(torch.zeros(8, 2))
    assert obs[OBS_GROUP].shape == (8, 16) and rew.shape == (8,) and dones.shape == (8,)
    assert dones.dtype == torch.bool and extras["time_outs"].shape == (8,)
    assert set(extras["log"]) <= set(env.log_keys)
    assert extras["log"]["Tracking/vx_error"].shape == (8,)
    assert torch.equal(env.get_observations()[OBS_GROUP], obs[OBS_GROUP])
    env.close()


def test_timeouts_reset_in_the_same_step_and_log_the_episode():
    env = make_env()
    env.episode_length_buf = torch.full((8,), 10_000)  # clamped below the limit: every env times out next step
    assert int(env.twin.episode_length.max()) == env.max_episode_length - 1
    _, _, dones, extras = env.step(torch.zeros(8, 2))
    assert dones.all() and extras["time_outs"].all()
    assert np.all(env.twin.episode_length == 0)  # already the next episode
    log = extras["log"]
    assert log["Episode/return"].shape == (8,)
    assert torch.allclose(log["Episode/length_s"], torch.full((8,), 10.0, dtype=log["Episode/length_s"].dtype))
    assert all(f"Episode_Reward/{k}" in log for k in env.reward_terms)
    env.close()


def test_episode_length_buf_shares_the_twins_counters():
    env = make_env(4, "quadruped")
    env.step(torch.zeros(4, 12))
    buf = env.episode_length_buf
    assert buf.tolist() == env.twin.episode_length.tolist() == [1, 1, 1, 1]
    env.close()
