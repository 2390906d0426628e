"""Two workers as a real Ray Train job on CPU (gloo): identical replicas, and recovery from a killed worker.

Slow (Ray Train start-up is ~25 s on 2 cores) but part of the default run: these are the multi-worker claims.
"""

import json
import os
import signal
import threading
import time

import pytest

from training.ppo.config import PPOConfig
from training.ppo.launch import train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    yield
    import ray

    ray.shutdown()


def ray_cfg(tmp_path, **kw):
    base = dict(num_envs=64, num_workers=2, num_steps_per_env=8, iterations=4, checkpoint_every=2, eval_every=0,
                eval_envs=4, eval_seconds=0.5, run_root=str(tmp_path), export=False, max_failures=2)
    return PPOConfig.for_robot("rover", **{**base, **kw})


def events(run_dir):
    return [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines()]


def test_two_workers_keep_identical_replicas(tmp_path):
    run_dir = train(ray_cfg(tmp_path), show_progress=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iteration"] == 4 and summary["workers"] == 2
    assert summary["env_steps"] == 4 * 8 * 64  # both workers' envs count
    # weights and normaliser statistics hashed on each worker after the last update: the same on both
    digests = summary["replica_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    checkpoints = [e for e in events(run_dir) if e.get("event") == "checkpoint"]
    assert [e["iteration"] for e in checkpoints] == [2, 4] and all(e["replicas"] == 2 for e in checkpoints)
    reported = [p for p in (run_dir / "ray").glob("checkpoint_*") if p.is_dir()]
    assert sorted(f.name for p in reported for f in p.glob("model_*.pt")) == ["model_000002.pt", "model_000004.pt"]


def test_killed_worker_recovers_from_last_checkpoint(tmp_path):
    cfg = ray_cfg(tmp_path, iterations=20)
    killed = {}

    def kill_rank1_after_first_checkpoint():
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            runs = list(tmp_path.glob("rover/*/checkpoints/model_000002.pt"))
            if runs:
                run_dir = runs[0].parent.parent
                killed["pid"] = int((run_dir / "workers" / "rank1.pid").read_text())
                killed["after"] = max(int(p.stem.split("_")[1]) for p in runs[0].parent.glob("model_*.pt"))
                os.kill(killed["pid"], signal.SIGKILL)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_rank1_after_first_checkpoint, daemon=True)
    killer.start()
    run_dir = train(cfg, show_progress=False)
    killer.join()
    assert "pid" in killed, "no checkpoint appeared to kill after"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iteration"] == 20
    log = events(run_dir)
    resumed = [e for e in log if e.get("event") == "resumed"]
    assert len(resumed) == 1
    assert resumed[0]["iteration"] >= killed["after"] and resumed[0]["iteration"] % 2 == 0
    # the iteration count continues from the checkpoint: after the restore, iterations resume at checkpoint + 1
    after = [e["iteration"] for e in log[log.index(resumed[0]):] if e["type"] == "iteration"]
    assert after == list(range(resumed[0]["iteration"] + 1, 21))
    assert int((run_dir / "workers" / "rank1.pid").read_text()) != killed["pid"]  # a fresh worker process
    assert summary["replica_digests"][0] == summary["replica_digests"][1]
