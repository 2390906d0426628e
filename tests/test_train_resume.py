"""Checkpoints resume exactly: iteration count, normaliser statistics, the next batch and the trained weights."""

import json

import torch

from training.ppo.checkpoint import checkpoint_path, load_checkpoint
from training.ppo.config import PPOConfig
from training.ppo.launch import resume_config, train
from training.ppo.runner import PPORunner


def small_cfg(tmp_path, **kw):
    base = dict(
        num_envs=32,
        num_steps_per_env=8,
        iterations=4,
        checkpoint_every=2,
        eval_every=0,
        eval_envs=4,
        eval_seconds=0.5,
        run_root=str(tmp_path / "runs"),
        export=False,
    )
    return PPOConfig.for_robot("rover", **{**base, **kw})


def batch(runner):
    st = runner.alg.storage
    return {
        "obs": st.observations["policy"].clone(),
        "actions": st.actions.clone(),
        "rewards": st.rewards.clone(),
        "dones": st.dones.clone(),
        "returns": st.returns.clone(),
    }


def test_resume_continues_exactly(tmp_path):
    cfg = small_cfg(tmp_path)
    a = PPORunner(cfg, tmp_path / "a")
    a.learn()
    a.collect()  # the batch an uninterrupted run collects next
    next_a = batch(a)

    b = PPORunner(cfg, tmp_path / "b")
    b.load(checkpoint_path(tmp_path / "a", 4))
    assert b.iteration == 4 and b.env_steps == a.env_steps
    norm_a, norm_b = a.alg.actor.obs_normalizer, b.alg.actor.obs_normalizer
    assert torch.equal(norm_a._mean, norm_b._mean) and torch.equal(norm_a._var, norm_b._var)
    assert int(norm_a.count) == int(norm_b.count) > 0
    b.collect()
    for key, value in batch(b).items():
        assert torch.equal(value, next_a[key]), key

    # training on from iteration 2 lands on the same weights as the run that never stopped
    c = PPORunner(cfg, tmp_path / "c")
    c.load(checkpoint_path(tmp_path / "a", 2))
    c.learn()
    final_a = load_checkpoint(checkpoint_path(tmp_path / "a", 4))
    final_c = load_checkpoint(checkpoint_path(tmp_path / "c", 4))
    for part in ("actor", "critic"):
        for key, value in final_a[part].items():
            assert torch.equal(value, final_c[part][key]), (part, key)
    assert final_a["optimizer"]["param_groups"][0]["lr"] == final_c["optimizer"]["param_groups"][0]["lr"]
    for r in (a, b, c):
        r.close()


def test_train_resume_continues_the_run_directory(tmp_path):
    run_dir = train(small_cfg(tmp_path, iterations=2), show_progress=False)
    cfg = resume_config(run_dir, iterations=4)
    assert train(cfg, resume=run_dir, show_progress=False) == run_dir
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["iteration"] == 4 and summary["status"] == "completed"
    events = [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines()]
    resumed = [e for e in events if e.get("event") == "resumed"]
    assert len(resumed) == 1 and resumed[0]["iteration"] == 2
    iterations = [e["iteration"] for e in events if e["type"] == "iteration"]
    assert iterations == [1, 2, 3, 4]
    info = json.loads((run_dir / "run_info.json").read_text())
    assert len(info["sessions"]) == 2 and info["sessions"][1]["resumed_from"].endswith("model_000002.pt")
