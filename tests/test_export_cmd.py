"""`sim2real export`: a training run's checkpoint becomes an artifact the edge runtime loads and that acts as
the trained actor does."""

import subprocess
import sys

import numpy as np
import torch
from tensordict import TensorDict

from edge.runtime import load_policy
from training.ppo.config import PPOConfig
from training.ppo.export_hook import load_actor
from training.ppo.runner import PPORunner
from training.vec_env import OBS_GROUP


def test_export_cli_round_trip(tmp_path):
    cfg = PPOConfig.for_robot(
        "rover",
        num_envs=16,
        num_steps_per_env=8,
        iterations=1,
        checkpoint_every=1,
        eval_every=0,
        eval_envs=4,
        eval_seconds=0.5,
        run_root=str(tmp_path),
        export=False,
    )
    runner = PPORunner(cfg, tmp_path / "run")
    runner.learn()
    runner.close()
    out = subprocess.run(
        [sys.executable, "-m", "sim2real", "export", str(tmp_path / "run"), "-o", str(tmp_path / "policy")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    policy = load_policy(tmp_path / "policy", "onnxruntime")
    assert policy.manifest.robot["name"] == "rover" and policy.manifest.training_run_id
    actor, _ = load_actor(tmp_path / "run")
    obs = np.random.default_rng(0).normal(size=(64, policy.obs_dim)).astype(np.float32)
    with torch.inference_mode():
        expected = actor(TensorDict({OBS_GROUP: torch.from_numpy(obs)}, batch_size=[64])).numpy()
    assert np.abs(policy.infer(obs) - expected).max() < 1e-5


def test_export_of_a_missing_run_is_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "sim2real", "export", str(tmp_path / "nothing")], capture_output=True, text=True
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "does not exist" in out.stderr
