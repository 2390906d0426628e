"""PPO on the rover twin learns; a NaN loss stops the run and keeps the last good checkpoint."""

import json
import math

import pytest
import torch

from training.ppo.checkpoint import load_checkpoint
from training.ppo.config import ConfigError, PPOConfig
from training.ppo.export_hook import load_actor
from training.ppo.runner import PPORunner, TrainingDiverged
from training.vec_env import OBS_GROUP


def test_short_seeded_run_improves_tracking(tmp_path):
    cfg = PPOConfig.for_robot(
        "rover",
        num_envs=128,
        iterations=20,
        eval_every=0,
        eval_envs=16,
        eval_seconds=5.0,
        checkpoint_every=20,
        seed=1,
        run_root=str(tmp_path),
        export=False,
    )
    runner = PPORunner(cfg, tmp_path / "run")
    before = runner.evaluate()
    summary = runner.learn()
    after = runner.last_eval
    runner.close()
    assert summary["iteration"] == 20 and summary["status"] == "completed"
    # the tracking reward rises clearly and both tracked errors fall (not an exact figure: any seed should pass)
    assert after.mean_return > 1.5 * before.mean_return
    assert after.vx < 0.8 * before.vx and after.wz < 0.8 * before.wz
    assert summary["final_eval"]["vx"] == after.vx

    # the checkpoint's actor, rebuilt on its own, acts as the trained policy does
    actor, loaded_cfg = load_actor(tmp_path / "run")
    obs = runner.env.get_observations()[OBS_GROUP][:4]
    with torch.inference_mode():
        assert torch.allclose(actor(runner.env.get_observations()[:4]), torch.from_numpy(runner.policy(obs.numpy())))
    assert loaded_cfg == cfg


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    cfg = PPOConfig.for_robot(
        "rover",
        num_envs=32,
        num_steps_per_env=8,
        iterations=2,
        checkpoint_every=2,
        eval_every=0,
        eval_envs=4,
        eval_seconds=0.5,
        run_root=str(tmp_path),
        export=False,
    )
    runner = PPORunner(cfg, tmp_path / "run")
    runner.learn()
    # a learning rate no optimiser survives: the next update makes the weights, then the loss, non-finite
    runner.cfg = cfg.replace(iterations=4)
    runner.alg.learning_rate = 1e30  # PPO writes it into the optimiser before each step
    with pytest.raises(TrainingDiverged, match=r"non-finite .* at iteration 3; last good checkpoint: .*model_000002"):
        runner.learn()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["last_checkpoint"].endswith("model_000002.pt")
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["model_000002.pt"]
    kept = load_checkpoint(tmp_path / "run" / "checkpoints" / "model_000002.pt")
    assert all(torch.isfinite(v).all() for v in kept["actor"].values())
    assert not math.isnan(kept["optimizer"]["param_groups"][0]["lr"])
    runner.close()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_envs": 0}, "num_envs must be a positive integer"),
        ({"num_envs": 3, "num_workers": 2}, "cannot be split evenly"),
        ({"num_envs": 1, "num_workers": 2}, "fewer than the 2 workers"),
        ({"gamma": 1.5}, r"gamma must be in \(0, 1\]"),
        ({"learning_rate": "fast"}, "learning_rate must be a number"),
        ({"threshold": {"speed": 0.1}}, "threshold keys must be among"),
    ],
)
def test_bad_config_values_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        PPOConfig.for_robot("rover", **overrides)


def test_a_time_budget_evaluates_its_last_iteration_and_can_reach_the_threshold_there(tmp_path):
    """The quick loop's cap once stopped one iteration before the evaluation that would have passed: the
    iteration a time budget ends on is an evaluation point, and a pass there records the threshold."""
    cfg = PPOConfig.for_robot(
        "rover",
        num_envs=16,
        num_steps_per_env=8,
        iterations=1000,
        eval_every=50,  # far beyond the budget: only the time-limited stop evaluates
        eval_envs=4,
        eval_seconds=0.5,
        threshold={"vx": 100.0, "wz": 100.0},  # any policy passes: what is tested is when it is judged
        max_seconds=1e-3,
        run_root=str(tmp_path),
        export=False,
    )
    runner = PPORunner(cfg, tmp_path / "run")
    summary = runner.learn()
    runner.close()
    assert summary["status"] == "time_limit" and summary["iteration"] == 1
    assert summary["threshold"] is not None and summary["threshold"]["iteration"] == 1


def test_the_evaluation_scores_a_gait_and_a_gait_threshold_needs_feet():
    """A quadruped holding its stance tracks a zero command and stands on all four feet: no flight, no trot, no
    slip, so a trot threshold fails it while the tracking threshold alone passes; the rover has no feet to judge."""
    import numpy as np

    from sim.robot import load_robot
    from training.ppo.evaluate import TrackingEvaluator

    lenient = {"vx": 10.0, "wz": 10.0, "falls": 0}
    cfg = PPOConfig.for_robot("quadruped", eval_envs=2, eval_seconds=1.0, eval_command=[0.0, 0.0, 0.0])
    spec = load_robot("quadruped")
    stand = lambda obs: np.zeros((len(obs), spec.num_actions))  # noqa: E731 - the default pose
    for threshold, passed in ((lenient, True), ({**lenient, "trot_index": 0.7, "mean_air_time_s": 0.2}, False)):
        evaluator = TrackingEvaluator(cfg.replace(threshold=threshold), spec, nthread=1)
        result = evaluator(stand)
        evaluator.close()
        assert result.trot_index == 0.0 and result.mean_air_time_s == 0.0 and result.foot_slip_m_s < 0.05
        assert result.passed is passed, result
    rover = PPOConfig.for_robot("rover", eval_envs=2, threshold={"vx": 0.1, "trot_index": 0.7})
    with pytest.raises(ConfigError, match="threshold trot_index: a gait threshold needs a robot with feet"):
        TrackingEvaluator(rover, load_robot("rover"), nthread=1)
