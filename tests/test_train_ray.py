"""Two workers as a real Ray Train job on CPU (gloo): identical replicas, and recovery from a killed worker.

One job covers both claims (each Ray Train worker group costs ~25-40 s to start on 2 cores): it trains with two
workers, kills rank 1's process with SIGKILL after the first checkpoint, and checks that Ray Train restarted the
workers from the checkpoint and that the replicas stayed identical. Slow, but part of the default run.
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
ITERATIONS = 20


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    yield
    import ray

    ray.shutdown()


def test_two_workers_recover_from_a_killed_worker_with_identical_replicas(tmp_path):
    cfg = PPOConfig.for_robot(
        "rover",
        num_envs=64,
        num_workers=2,
        num_steps_per_env=8,
        iterations=ITERATIONS,
        checkpoint_every=2,
        eval_every=0,
        eval_envs=4,
        eval_seconds=0.5,
        run_root=str(tmp_path),
        export=False,
        max_failures=2,
    )
    killed = {}

    def kill_rank1_after_first_checkpoint():
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            first = list(tmp_path.glob("rover/*/checkpoints/model_000002.pt"))
            if first:
                run_dir = first[0].parent.parent
                killed["pid"] = int((run_dir / "workers" / "rank1.pid").read_text())
                killed["after"] = max(int(p.stem.split("_")[1]) for p in first[0].parent.glob("model_*.pt"))
                os.kill(killed["pid"], signal.SIGKILL)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_rank1_after_first_checkpoint, daemon=True)
    killer.start()
    run_dir = train(cfg, show_progress=False)
    killer.join()
    assert "pid" in killed, "no checkpoint appeared to kill after"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iteration"] == ITERATIONS and summary["workers"] == 2
    assert summary["env_steps"] == ITERATIONS * 8 * 64  # both workers' envs count

    # recovery: one restore, from a checkpoint no older than the kill, and the iteration count continues from it
    log = [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines()]
    resumed = [e for e in log if e.get("event") == "resumed"]
    assert len(resumed) == 1 and resumed[0]["restarts"] == 1
    assert summary["restarts"] == 1 and summary["resumed_from"] == resumed[0]["checkpoint"]  # the figures say so
    assert resumed[0]["iteration"] >= killed["after"] and resumed[0]["iteration"] % 2 == 0
    after = [e["iteration"] for e in log[log.index(resumed[0]) :] if e["type"] == "iteration"]
    assert after == list(range(resumed[0]["iteration"] + 1, ITERATIONS + 1))
    assert int((run_dir / "workers" / "rank1.pid").read_text()) != killed["pid"]  # a fresh worker process

    # replicas: every checkpoint hashed both workers' weights and normaliser statistics after the updates and
    # found them equal (the runner raises otherwise); the final hashes are in the summary
    digests = summary["replica_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    checkpoints = [e for e in log if e.get("event") == "checkpoint" and e["iteration"] > resumed[0]["iteration"]]
    assert checkpoints and all(e["replicas"] == 2 for e in checkpoints)
    reported = [p for p in (run_dir / "ray").glob("checkpoint_*") if p.is_dir()]
    assert f"model_{ITERATIONS:06d}.pt" in {f.name for p in reported for f in p.glob("model_*.pt")}  # to Ray Train
