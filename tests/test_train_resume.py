"""Checkpoints resume exactly: iteration count, normaliser statistics, the next batch and the trained weights;
a resumed or restarted run says so in progress.jsonl, summary.json and the summary table."""

import json

import torch
from rich.console import Console

from sim2real.cli.train import _print_summary
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
    assert summary["resumed_from"].endswith("model_000002.pt") and summary["restarts"] == 0
    events = [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines()]
    resumed = [e for e in events if e.get("event") == "resumed"]
    assert len(resumed) == 1 and resumed[0]["iteration"] == 2
    iterations = [e["iteration"] for e in events if e["type"] == "iteration"]
    assert iterations == [1, 2, 3, 4]
    info = json.loads((run_dir / "run_info.json").read_text())
    assert len(info["sessions"]) == 2 and info["sessions"][1]["resumed_from"].endswith("model_000002.pt")


def test_a_ray_restart_before_the_first_checkpoint_is_in_the_records_and_the_summary(tmp_path):
    runner = PPORunner(small_cfg(tmp_path, iterations=1), tmp_path / "run")
    runner.restarts = 1  # as training.ppo.ray_train sets it in a worker group Ray Train started again
    summary = runner.learn()
    runner.close()
    events = [json.loads(line) for line in (tmp_path / "run" / "progress.jsonl").read_text().splitlines()]
    restarts = [e for e in events if e["type"] == "event" and e["event"] in ("resumed", "restarted")]
    assert restarts == [{"type": "event", "event": "restarted", "iteration": 0, "checkpoint": None, "restarts": 1}]
    assert summary["restarts"] == 1 and summary["resumed_from"] is None
    console = Console(record=True, width=300)
    _print_summary(console, summary)
    assert "from the start (no checkpoint yet) after 1 restart(s) of the workers" in console.export_text()
