"""One process's PPO loop: its slice of the batched twin, a policy replica, rsl_rl's PPO update, checkpoints.

With several workers (Ray Train) every rank runs this same loop. rsl_rl's PPO all-reduces gradients and the KL
behind the adaptive learning rate, and its observation normaliser all-reduces its statistics, through whatever
torch.distributed group exists, so the replicas stay identical. Rank 0 evaluates, logs, writes checkpoints and
decides when to stop; the others follow its decision.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from rsl_rl.algorithms import PPO
from rsl_rl.storage import RolloutStorage
from tensordict import TensorDict

from sim.robot import load_robot
from sim.tasks import load_task
from sim.twin import BatchedTwin
from training.errors import TrainingDiverged
from training.ppo.checkpoint import checkpoint_in, checkpoint_path, load_checkpoint, save_checkpoint
from training.ppo.config import ConfigError, PPOConfig
from training.ppo.evaluate import EvalResult, TrackingEvaluator
from training.ppo.models import build_actor, build_critic
from training.ppo.monitor import Monitor
from training.ppo.stats import RolloutStats
from training.ppo.symmetry import policy_mirrors, symmetry_cfg
from training.ppo.twin_state import load_twin_state, twin_state_dict
from training.vec_env import OBS_GROUP, TwinVecEnv

STOP_REASONS = (None, "threshold", "time_limit")  # rank 0 broadcasts the index

# called on every rank after each checkpoint: (path on rank 0 or None elsewhere, metrics)
CheckpointHook = Callable[[Path | None, dict], None]


def check_resumable(state: dict, cfg: PPOConfig, path: Path) -> None:
    """Refuse a checkpoint this config cannot continue exactly (other worker count, env count or networks)."""
    workers, saved = len(state["workers"]), state["config"]
    if workers != cfg.num_workers:
        raise ConfigError(f"{path} was written by {workers} worker(s); resume with --workers {workers}")
    for key in ("robot", "num_envs", "num_steps_per_env", "actor_hidden_dims", "critic_hidden_dims"):
        if saved[key] != getattr(cfg, key):
            raise ConfigError(f"{path} was trained with {key}={saved[key]}, this run has {getattr(cfg, key)}")


def worker_seed(seed: int, rank: int, stream: int = 0) -> int:
    """Independent, reproducible seeds per (run seed, worker, purpose)."""
    return int(np.random.SeedSequence([seed, rank, stream]).generate_state(1)[0])


class PPORunner:
    def __init__(
        self,
        cfg: PPOConfig,
        run_dir: Path | None = None,
        rank: int = 0,
        world_size: int = 1,
        device: str | torch.device = "cpu",
        show_progress: bool = False,
        node: str | None = None,
    ):
        """`node`: where this replica runs (the Ray node id under Ray Train; default this machine's host name)."""
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.device = torch.device(device)
        self.distributed = world_size > 1
        self.show_progress = show_progress
        torch.set_num_threads(cfg.torch_threads)
        self.spec = load_robot(cfg.robot)
        self.task = cfg.twin_task(load_task(self.spec, cfg.task))
        twin = BatchedTwin(
            self.spec,
            cfg.num_envs // world_size,
            seed=worker_seed(cfg.seed, rank),
            task=self.task,
            randomization=cfg.twin_randomization(self.task.randomization),
            nthread=cfg.nthread,
        )
        self.env = TwinVecEnv(twin, self.device)
        if cfg.random_initial_episode_length:
            rng = np.random.default_rng(worker_seed(cfg.seed, rank, stream=1))
            lengths = rng.integers(0, self.env.max_episode_length, self.env.num_envs)
            self.env.episode_length_buf = torch.from_numpy(lengths)
        torch.manual_seed(cfg.seed)  # the same initial weights on every rank...
        self.alg = self._build_ppo(self.env.get_observations())
        if cfg.init_from:  # every rank reads the same file, so the replicas start identical
            self.init_weights(cfg.init_from)
        torch.manual_seed(worker_seed(cfg.seed, rank))  # ...and different action noise
        self.replica_nodes = [node or platform.node()]  # every rank's, in rank order: the summary says where each ran
        if self.distributed:
            self.alg.broadcast_parameters()
            here, self.replica_nodes = self.replica_nodes[0], [None] * world_size
            dist.all_gather_object(self.replica_nodes, here)
        self.obs = self.env.get_observations()
        self.iteration = 0
        self.env_steps = 0
        self.train_seconds = 0.0
        self.threshold: dict | None = None  # when the evaluation first passed
        self.last_eval: EvalResult | None = None
        self.last_eval_iteration = -1
        self.last_checkpoint: Path | None = None
        self.resumed_from: Path | None = None
        self.restarts = 0  # worker groups Ray Train started again after a failure in this session (ray_train sets it)
        self.evaluator: TrackingEvaluator | None = None
        self.monitor: Monitor | None = None

    def _build_ppo(self, obs: TensorDict) -> PPO:
        cfg, n_act = self.cfg, self.env.num_actions
        mirrors = policy_mirrors(cfg, self.spec, list(self.task.observations))
        actor, critic = build_actor(obs, cfg, n_act, mirrors), build_critic(obs, cfg)
        storage = RolloutStorage("rl", self.env.num_envs, cfg.num_steps_per_env, obs, [n_act], str(self.device))
        multi = {"global_rank": self.rank, "local_rank": self.rank, "world_size": self.world_size}
        return PPO(
            actor,
            critic,
            storage,
            num_learning_epochs=cfg.num_learning_epochs,
            num_mini_batches=cfg.num_mini_batches,
            clip_param=cfg.clip_param,
            gamma=cfg.gamma,
            lam=cfg.lam,
            value_loss_coef=cfg.value_loss_coef,
            entropy_coef=cfg.entropy_coef,
            learning_rate=cfg.learning_rate,
            max_grad_norm=cfg.max_grad_norm,
            schedule=cfg.schedule,
            desired_kl=cfg.desired_kl,
            device=str(self.device),
            multi_gpu_cfg=multi if self.distributed else None,
            symmetry_cfg=symmetry_cfg(cfg, self.spec, list(self.task.observations), self.env),
        )

    # ------------------------------------------------------------------ one iteration
    def collect(self) -> dict[str, float]:
        """Roll out num_steps_per_env steps into the storage and compute GAE returns; returns the rollout's metrics."""
        stats = RolloutStats(self.env.log_keys, self.device)
        with torch.inference_mode():
            for _ in range(self.cfg.num_steps_per_env):
                actions = self.alg.act(self.obs)
                self.obs, rewards, dones, extras = self.env.step(actions)
                self.alg.process_env_step(self.obs, rewards, dones, extras)
                stats.add(extras["log"])
            self.alg.compute_returns(self.obs)
        return stats.reduce()

    def policy(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions (the Gaussian's mean) for a batch of observations."""
        with torch.inference_mode():
            td = TensorDict({OBS_GROUP: torch.from_numpy(obs).to(self.device)}, batch_size=[len(obs)])
            return self.alg.get_policy()(td).cpu().numpy()

    def evaluate(self) -> EvalResult:
        if self.evaluator is None:
            self.evaluator = TrackingEvaluator(self.cfg, self.spec, nthread=self.cfg.nthread)
        self.last_eval, self.last_eval_iteration = self.evaluator(self.policy), self.iteration
        return self.last_eval

    # ------------------------------------------------------------------ the loop
    def learn(self, on_checkpoint: CheckpointHook | None = None) -> dict:
        """Train until cfg.iterations (or the threshold / time limit); returns the run summary.

        Raises TrainingDiverged on a non-finite loss, after writing the summary; the last checkpoint stays good.
        """
        cfg = self.cfg
        if self.rank == 0 and self.run_dir is not None:
            self.monitor = Monitor(self.run_dir, cfg.iterations, self.iteration, self.show_progress)
            restarts = {"restarts": self.restarts} if self.restarts else {}
            if self.resumed_from:
                self.monitor.event("resumed", self.iteration, checkpoint=str(self.resumed_from), **restarts)
            elif self.restarts:  # a worker group that failed before the first checkpoint: from the start again
                self.monitor.event("restarted", self.iteration, checkpoint=None, **restarts)
        start, status, reason = time.perf_counter(), "completed", None
        try:
            while self.iteration < cfg.iterations:
                t0 = time.perf_counter()
                metrics = self.collect()
                t1 = time.perf_counter()
                losses = self._update()
                t2 = time.perf_counter()
                self.iteration += 1
                bad = self._nonfinite(losses)
                if bad:
                    last = self.last_checkpoint or "none written yet"
                    raise TrainingDiverged(
                        f"non-finite {bad} at iteration {self.iteration}; last good checkpoint: {last}"
                    )
                steps = cfg.num_steps_per_env * cfg.num_envs
                self.env_steps += steps
                self.train_seconds += t2 - t0
                metrics.update({f"Loss/{k}": v for k, v in losses.items()})
                metrics.update(
                    {
                        "Loss/learning_rate": self.alg.learning_rate,
                        "Policy/action_std": float(self.alg.get_policy().output_std.detach().mean()),
                        "Perf/env_steps_per_s": steps / (t2 - t0),
                        "Perf/learning_time_share": (t2 - t1) / (t2 - t0),
                        "Perf/collection_s": t1 - t0,
                        "Perf/learning_s": t2 - t1,
                        "Perf/total_env_steps": self.env_steps,
                        "Perf/train_seconds": self.train_seconds,
                    }
                )
                stop = self._agree(self._rank0_stop(metrics, time.perf_counter() - start) if self.rank == 0 else None)
                if self.monitor:
                    self.monitor.iteration(self.iteration, metrics)
                if stop or self.iteration % cfg.checkpoint_every == 0 or self.iteration >= cfg.iterations:
                    self.save(on_checkpoint)
                if stop:
                    status = stop
                    break
        except TrainingDiverged as e:
            status, reason = "diverged", str(e)
        if self.rank == 0 and status != "diverged" and self.last_eval_iteration != self.iteration:
            self.evaluate()  # the summary reports the final policy
        summary = self.summary(status, reason, time.perf_counter() - start)
        if self.monitor:
            self.monitor.event("stop", self.iteration, status=status, **({"reason": reason} if reason else {}))
            self.monitor.close()
            (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        if status == "diverged":
            raise TrainingDiverged(reason)
        return summary

    def _update(self) -> dict[str, float]:
        # the update runs between rollouts, on the cores the physics threads leave idle (1.45 -> 1.0 s a batch for
        # the quadruped on 2 cores); collection keeps torch_threads, as spinning torch threads slow the physics
        torch.set_num_threads(self.cfg.update_threads or self.cfg.nthread or os.cpu_count() or 1)
        try:
            return self.alg.update()
        except RuntimeError:
            # weights that went NaN mid-update make torch refuse to sample: that is divergence, not a bug
            if all(torch.isfinite(p).all() for p in self.alg.actor.parameters()):
                raise
            return {"update": math.nan}
        finally:
            torch.set_num_threads(self.cfg.torch_threads)

    def _rank0_stop(self, metrics: dict, wall: float) -> str | None:
        cfg = self.cfg
        out_of_time = cfg.max_seconds is not None and self.train_seconds >= cfg.max_seconds
        due = cfg.eval_every and self.iteration % cfg.eval_every == 0
        # the last iteration a time budget allows is evaluated too: its result decides the budget's threshold
        if due or out_of_time or self.iteration >= cfg.iterations:
            result = self.evaluate()
            metrics.update({f"Eval/{k}": float(v) for k, v in result.as_dict().items() if v is not None})
            if result.passed and self.threshold is None:
                self.threshold = {
                    "iteration": self.iteration,
                    "train_seconds": self.train_seconds,
                    "wall_seconds": wall,
                    "env_steps": self.env_steps,
                }
                if self.monitor:
                    self.monitor.event("threshold", self.iteration, **self.threshold, vx=result.vx, wz=result.wz)
            if result.passed and cfg.stop_at_threshold:
                return "threshold"
        return "time_limit" if out_of_time else None

    def _agree(self, stop: str | None) -> str | None:
        """Every rank takes rank 0's stop decision."""
        if not self.distributed:
            return stop
        code = torch.tensor([STOP_REASONS.index(stop)], device=self.device)
        dist.broadcast(code, src=0)
        return STOP_REASONS[int(code)]

    def _nonfinite(self, losses: dict[str, float]) -> str | None:
        bad = [f"{k} loss" for k, v in losses.items() if not math.isfinite(v)]
        models = {"actor": self.alg.actor, "critic": self.alg.critic}
        bad += [
            f"{name} parameters"
            for name, m in models.items()
            if not all(torch.isfinite(p).all() for p in m.parameters())
        ]
        if not bad:  # finite but huge weights overflow in the next rollout: look at what they produce
            with torch.inference_mode():
                outputs = {"actions": self.alg.actor(self.obs), "values": self.alg.critic(self.obs)}
            bad += [f"policy {k}" for k, v in outputs.items() if not torch.isfinite(v).all()]
        if self.distributed:  # one rank's NaN stops all of them
            flag = torch.tensor([float(bool(bad))], device=self.device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            if flag.item() and not bad:
                bad = ["values on another worker"]
        return ", ".join(bad) or None

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, workers: list[dict]) -> dict:
        saved = self.alg.save()
        return {
            "iteration": self.iteration,
            "actor": saved["actor_state_dict"],
            "critic": saved["critic_state_dict"],
            "optimizer": saved["optimizer_state_dict"],
            "config": self.cfg.to_dict(),
            "clip_actions": self.env.twin.clip_actions,  # the exported artifact's action limit
            "progress": {"env_steps": self.env_steps, "train_seconds": self.train_seconds, "threshold": self.threshold},
            "workers": workers,
        }

    def save(self, on_checkpoint: CheckpointHook | None = None) -> Path | None:
        """Write a checkpoint of every rank's state (rank 0 writes the file); returns its path on rank 0."""
        worker = {"twin": twin_state_dict(self.env.twin), "torch_rng": torch.get_rng_state()}
        workers = [worker]
        if self.distributed:
            workers = [None] * self.world_size if self.rank == 0 else None
            dist.gather_object(worker, workers, dst=0)
        digests = self.replica_digests()
        path = None
        if self.rank == 0:
            if len(set(digests)) > 1:
                raise RuntimeError(f"policy replicas differ between workers at iteration {self.iteration}: {digests}")
            if self.run_dir is not None:
                path = save_checkpoint(self.state_dict(workers), checkpoint_path(self.run_dir, self.iteration))
                self.last_checkpoint = path
                if self.monitor:
                    self.monitor.event("checkpoint", self.iteration, path=str(path), replicas=len(digests))
        if on_checkpoint:
            on_checkpoint(
                path, {"iteration": self.iteration, "env_steps": self.env_steps, "train_seconds": self.train_seconds}
            )
        return path

    def load(self, path: Path) -> None:
        """Continue exactly from a checkpoint: weights, optimiser, normalisers, iteration, twin and RNG states."""
        state = load_checkpoint(path)
        check_resumable(state, self.cfg, path)
        workers = state["workers"]
        self.alg.load(
            {
                "actor_state_dict": state["actor"],
                "critic_state_dict": state["critic"],
                "optimizer_state_dict": state["optimizer"],
            },
            None,
            strict=True,
        )
        load_twin_state(self.env.twin, workers[self.rank]["twin"])
        torch.set_rng_state(workers[self.rank]["torch_rng"])
        self.iteration = state["iteration"]
        self.env_steps = state["progress"]["env_steps"]
        self.train_seconds = state["progress"]["train_seconds"]
        self.threshold = state["progress"]["threshold"]
        self.obs = self.env.get_observations()
        self.last_checkpoint = self.resumed_from = Path(path)

    def init_weights(self, source: str | Path) -> None:
        """Start from another run's actor and critic (weights and observation normalisers); the optimiser,
        iteration count and twins start fresh: fine-tuning is a new run, not a resumed one."""
        path = checkpoint_in(Path(source))
        state = load_checkpoint(path)
        saved = state["config"]
        for key in ("actor_hidden_dims", "critic_hidden_dims", "activation", "obs_normalization"):
            if saved[key] != getattr(self.cfg, key):
                raise ConfigError(
                    f"init_from {path}: trained with {key}={saved[key]}, this run has {getattr(self.cfg, key)}"
                )
        try:
            self.alg.actor.load_state_dict(state["actor"])
            self.alg.critic.load_state_dict(state["critic"])
        except RuntimeError as e:  # another robot's observation or action size
            raise ConfigError(
                f"init_from {path}: its networks do not fit this robot ({str(e).splitlines()[0]})"
            ) from None

    def replica_digests(self) -> list[str]:
        """A hash of this rank's actor and critic (weights and normaliser statistics), from every rank."""
        h = hashlib.sha256()
        for model in (self.alg.actor, self.alg.critic):
            for t in model.state_dict().values():
                h.update(t.detach().cpu().numpy().tobytes())
        digest = torch.tensor([int.from_bytes(h.digest()[:8], "little", signed=True)], device=self.device)
        if not self.distributed:
            return [f"{int(digest) & (2**64 - 1):016x}"]
        gathered = [torch.zeros_like(digest) for _ in range(self.world_size)]
        dist.all_gather(gathered, digest)
        return [f"{int(d) & (2**64 - 1):016x}" for d in gathered]

    # ------------------------------------------------------------------ summary
    def summary(self, status: str, reason: str | None, wall_seconds: float) -> dict:
        return {
            "status": status,
            "reason": reason,
            "robot": self.spec.name,
            "iteration": self.iteration,
            "iterations": self.cfg.iterations,
            "workers": self.world_size,
            "env_steps": self.env_steps,
            "train_seconds": round(self.train_seconds, 3),
            "wall_seconds": round(wall_seconds, 3),
            "env_steps_per_s": round(self.env_steps / self.train_seconds, 1) if self.train_seconds else None,
            "threshold": self.threshold,
            "final_eval": self.last_eval.as_dict() if self.last_eval else None,
            "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            # the checkpoint this session's training continued from (--resume, or Ray Train's last restart)
            "resumed_from": str(self.resumed_from) if self.resumed_from else None,
            "restarts": self.restarts,
            "replica_digests": self.replica_digests() if status != "diverged" else None,
            "replica_nodes": self.replica_nodes,
            "run_dir": str(self.run_dir) if self.run_dir else None,
        }

    def close(self) -> None:
        self.env.close()
        if self.evaluator:
            self.evaluator.close()
