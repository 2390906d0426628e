"""Several workers as one Ray Train job: each worker owns a slice of the envs and a policy replica.

TorchTrainer sets up the process group (gloo on CPU, nccl on GPU) that rsl_rl's PPO all-reduces through. Rank 0
reports every checkpoint to Ray Train; when a worker dies, FailureConfig restarts the worker group and each
worker continues from the newest checkpoint (weights, optimiser, normalisers, twins, RNGs, iteration): the last
one reported to Ray Train, or one this job wrote to the run directory after it (a kill between the two).
Rank 0 of each worker group notes its start in workers/starts.jsonl, so the summary says how many times Ray
Train restarted the group in this launch (`restarts`) and from which checkpoint the last one went on
(`resumed_from`); progress.jsonl has a `resumed` line at each restart (`restarted` before any checkpoint).
Workers log to the run directory, not the console: the driver tails progress.jsonl to draw the progress bar.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from training.ppo.config import ConfigError, PPOConfig
from training.ppo.monitor import ProgressBar, ProgressTail
from training.ppo.runner import TrainingDiverged
from training.ray_init import init_ray

STARTS = Path("workers") / "starts.jsonl"  # one line per worker group this launch started (rank 0 writes it)


def run_ray(cfg: PPOConfig, run_dir: Path, resume: Path | None = None, show_progress: bool = True) -> dict:
    """Run the job and return rank 0's summary."""
    import ray
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig, TrainingFailedError
    from ray.train.torch import TorchTrainer

    run_dir = Path(run_dir).resolve()
    if not ray.is_initialized():
        init_ray(cfg.ray_address)
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if cfg.num_workers > cpus:
        raise ConfigError(f"{cfg.num_workers} workers need {cfg.num_workers} CPUs; the Ray cluster has {cpus}")
    cpus_per_worker = max(1, cpus // cfg.num_workers)
    worker_cfg = cfg.replace(nthread=cfg.nthread or cpus_per_worker)
    trainer = TorchTrainer(
        _worker_loop,
        train_loop_config={
            "config": worker_cfg.to_dict(),
            "run_dir": str(run_dir),
            "resume": str(resume) if resume else None,
            "before_launch": [p.name for p in (run_dir / "checkpoints").glob("model_*.pt")],
        },
        scaling_config=ScalingConfig(
            num_workers=cfg.num_workers, use_gpu=cfg.device == "cuda", resources_per_worker={"CPU": cpus_per_worker}
        ),
        run_config=RunConfig(
            name="ray",
            storage_path=str(run_dir),
            failure_config=FailureConfig(max_failures=cfg.max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=2),
        ),
    )
    summary_path = run_dir / "summary.json"
    summary_path.unlink(missing_ok=True)
    (run_dir / STARTS).unlink(missing_ok=True)  # the worker groups of this launch only
    bar = ProgressBar(cfg.iterations, description=f"train x{cfg.num_workers}") if show_progress else None
    stop = threading.Event()
    if bar:
        tail = ProgressTail(run_dir / "progress.jsonl", bar)
        tail.offset = tail.path.stat().st_size if tail.path.is_file() else 0  # a resumed run: only the new lines
        watcher = threading.Thread(target=_tail_until, args=(tail, stop), daemon=True)
        watcher.start()
    try:
        result = trainer.fit()
    except TrainingFailedError as e:
        raise RuntimeError(f"Ray Train job failed after {cfg.max_failures} restart(s): {e}") from None
    finally:
        stop.set()
        if bar:
            watcher.join()
            bar.close()
    if result.error is not None:
        raise RuntimeError(f"Ray Train job failed after {cfg.max_failures} restart(s): {result.error}")
    if not summary_path.is_file():
        raise RuntimeError(f"Ray Train job ended without a summary in {run_dir} (is run_dir on storage rank 0 sees?)")
    return json.loads(summary_path.read_text())


def _tail_until(tail: ProgressTail, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        tail.poll()
    tail.poll()


def _worker_loop(config: dict) -> None:
    """One Ray Train worker: build the runner, restore the latest checkpoint if any, train."""
    import ray.train
    from ray.train import Checkpoint
    from ray.train.torch import get_device

    from training.ppo.runner import PPORunner

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    run_dir = Path(config["run_dir"])
    pid_dir = run_dir / "workers"
    pid_dir.mkdir(exist_ok=True)
    (pid_dir / f"rank{rank}.pid").write_text(str(os.getpid()))  # which process is which rank (and for fault drills)
    node = ray.get_runtime_context().get_node_id()
    restarts = _note_start(run_dir, node) if rank == 0 else 0

    runner = PPORunner(PPOConfig.from_dict(config["config"]), run_dir, rank, world, device=get_device(), node=node)
    runner.restarts = restarts
    reported = ray.train.get_checkpoint()
    if reported is not None:
        with reported.as_directory() as d:
            _restore(runner, config, [*Path(d).glob("model_*.pt")])
    else:
        _restore(runner, config, [])

    def report(path: Path | None, metrics: dict) -> None:
        if path is None:  # every rank reports; only rank 0 carries the checkpoint
            ray.train.report(metrics)
            return
        staging = Path(tempfile.mkdtemp(prefix="ckpt-"))
        try:
            try:
                os.link(path, staging / path.name)
            except OSError:  # another filesystem
                shutil.copy2(path, staging / path.name)
            ray.train.report(metrics, checkpoint=Checkpoint.from_directory(str(staging)))
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    try:
        runner.learn(on_checkpoint=report)
    except TrainingDiverged:
        pass  # rank 0's summary says why; returning (not raising) keeps Ray from retrying a deterministic failure
    finally:
        runner.close()


def _note_start(run_dir: Path, node: str) -> int:
    """Record this worker group's start; returns how many started before it in this launch (Ray Train starts
    the next group only once the failed one is gone, so one rank 0 at a time appends)."""
    path = run_dir / STARTS
    before = len(path.read_text().splitlines()) if path.is_file() else 0
    with open(path, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "node": node, "time": round(time.time(), 3)}) + "\n")
    return before


def _restore(runner, config: dict, reported: list[Path]) -> None:
    """Load the newest of: Ray Train's last reported checkpoint, checkpoints this job wrote to the run directory
    (a worker killed after writing one and before reporting it), and the checkpoint the run was resumed from."""
    written = [
        p for p in (Path(config["run_dir"]) / "checkpoints").glob("model_*.pt") if p.name not in config["before_launch"]
    ]
    candidates = [*reported, *written]
    if candidates:
        runner.load(max(candidates, key=lambda p: int(p.stem.split("_")[1])))
    elif config["resume"]:
        runner.load(Path(config["resume"]))
