"""Time to the rover's tracking threshold: our PPO beside SB3 PPO and RLlib PPO (their default settings).

The threshold is training.ppo.evaluate's: mean |vx error| < 0.1 m/s and |wz error| < 0.2 rad/s over randomised
commands, randomisation on, deterministic policy, 32 envs x one 10 s episode on a twin with a fixed seed. Every
framework is scored by that same function about every 5 s of its training time; the clock counts training
(sampling + learning) and stops while the evaluation runs. Set-up (imports, Ray start, model build) is reported
apart. The anchors see the same twin through its gymnasium interface: one single-env twin per env, in SB3's
DummyVecEnv (8 envs) and in RLlib's env runners (its defaults: 2 runners x 1 env).

    python -m benchmarks.ppo_time_to_threshold [--quick]

--quick caps each framework at 3 minutes of training (default: ours 5, each anchor 15) and says "not reached"
where a framework did not get there. The last line is one JSON object; a ratio is null where it cannot be
computed, with the reason beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import gymnasium as gym
import numpy as np

from sim.robot import load_robot
from sim.twin import BatchedTwin
from training.ppo.config import PPOConfig
from training.ppo.evaluate import TrackingEvaluator
from training.ppo.runner import PPORunner

ROBOT = "rover"
EVAL_EVERY_S = 5.0
ANCHOR_ENVS = 8


class TwinGymEnv(gym.Env):
    """One twin env through the plain gymnasium.Env interface (what SB3 and RLlib consume)."""

    def __init__(self, config: dict | None = None):
        config = config or {}
        self.twin = BatchedTwin(ROBOT, num_envs=1, seed=config.get("seed", 0), nthread=1)
        self.observation_space = self.twin.single_observation_space
        self.action_space = self.twin.single_action_space
        self._started = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None or not self._started:  # otherwise the twin already reset this env in its last step
            self.twin.reset(seed=seed)
            self._started = True
        return self.twin.observations[0], {}

    def step(self, action):
        obs, rew, terminated, truncated, info = self.twin.step(np.asarray(action, dtype=np.float64)[None])
        if terminated[0] or truncated[0]:
            obs = info["final_obs"]
        return obs[0], float(rew[0]), bool(terminated[0]), bool(truncated[0]), {}

    def close(self):
        self.twin.close()


class Clock:
    """Training time only: evaluations pause it."""

    def __init__(self, evaluator: TrackingEvaluator, cap_s: float):
        self.evaluator, self.cap_s = evaluator, cap_s
        self.start = time.perf_counter()
        self.paused = 0.0
        self.last_eval = 0.0
        self.reached_s: float | None = None
        self.reached_steps: int | None = None
        self.result = None

    def train_seconds(self) -> float:
        return time.perf_counter() - self.start - self.paused

    def maybe_evaluate(self, policy, env_steps: int) -> bool:
        """Evaluate when due; True when training should stop (threshold passed or cap reached)."""
        now = self.train_seconds()
        if now - self.last_eval >= EVAL_EVERY_S or now >= self.cap_s:
            t0 = time.perf_counter()
            self.result = self.evaluator(policy)
            self.paused += time.perf_counter() - t0
            self.last_eval = now
            if self.result.passed and self.reached_s is None:
                self.reached_s, self.reached_steps = now, env_steps
        return self.reached_s is not None or now >= self.cap_s


def run_ours(cap_s: float) -> dict:
    t0 = time.perf_counter()
    cfg = PPOConfig.for_robot(
        ROBOT, stop_at_threshold=True, max_seconds=cap_s, iterations=100_000, checkpoint_every=100_000, export=False
    )
    runner = PPORunner(cfg)
    setup = time.perf_counter() - t0
    summary = runner.learn()
    runner.close()
    reached = summary["threshold"]
    return {
        "name": f"ours (rsl_rl PPO, {cfg.num_envs} envs batched)",
        "setup_s": setup,
        "seconds": reached["train_seconds"] if reached else None,
        "env_steps": reached["env_steps"] if reached else None,
        "trained_s": summary["train_seconds"],
        "steps_per_s": summary["env_steps_per_s"],
        "eval": runner.last_eval,
    }


def run_sb3(cap_s: float, evaluator: TrackingEvaluator) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    t0 = time.perf_counter()
    venv = DummyVecEnv([lambda i=i: TwinGymEnv({"seed": 100 + i}) for i in range(ANCHOR_ENVS)])
    model = PPO("MlpPolicy", venv, seed=0, device="cpu")
    setup = time.perf_counter() - t0

    class Stop(BaseCallback):
        def _on_training_start(self) -> None:
            self.clock = Clock(evaluator, cap_s)

        def _on_step(self) -> bool:
            policy = lambda obs: model.predict(obs, deterministic=True)[0]  # noqa: E731
            return not self.clock.maybe_evaluate(policy, self.num_timesteps)

    stop = Stop()
    model.learn(total_timesteps=10**9, callback=stop)
    clock = stop.clock
    venv.close()
    return {
        "name": f"SB3 PPO defaults ({ANCHOR_ENVS} envs, DummyVecEnv)",
        "setup_s": setup,
        "seconds": clock.reached_s,
        "env_steps": clock.reached_steps,
        "trained_s": clock.train_seconds(),
        "steps_per_s": model.num_timesteps / clock.train_seconds(),
        "eval": clock.result,
    }


def run_rllib(cap_s: float, evaluator: TrackingEvaluator) -> dict:
    import ray
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig as RLlibPPOConfig
    from ray.rllib.core.columns import Columns
    from ray.rllib.utils.spaces.space_utils import unsquash_action

    t0 = time.perf_counter()
    ray.init(log_to_driver=False, logging_config=ray.LoggingConfig(log_level="ERROR"))
    algo = RLlibPPOConfig().environment(TwinGymEnv, env_config={"seed": 200}).build_algo()
    setup = time.perf_counter() - t0
    module = algo.get_module()

    space = TwinGymEnv().action_space

    def policy(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = module.forward_inference({Columns.OBS: torch.from_numpy(obs)})
        mean = out[Columns.ACTION_DIST_INPUTS][:, :ACTIONS].numpy()  # a diagonal Gaussian's inputs: mean, log std
        return unsquash_action(mean, space)  # RLlib's default normalize_actions: the policy acts in [-1, 1]

    clock = Clock(evaluator, cap_s)
    steps = 0
    while True:
        result = algo.train()
        steps = int(result["num_env_steps_sampled_lifetime"])
        if clock.maybe_evaluate(policy, steps):
            break
    trained = clock.train_seconds()
    algo.stop()
    ray.shutdown()
    return {
        "name": "RLlib PPO defaults (2 runners x 1 env)",
        "setup_s": setup,
        "seconds": clock.reached_s,
        "env_steps": clock.reached_steps,
        "trained_s": trained,
        "steps_per_s": steps / trained,
        "eval": clock.result,
    }


ACTIONS = load_robot(ROBOT).num_actions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="cap every framework at 3 minutes of training")
    args = parser.parse_args()
    ours_cap, anchor_cap = (180.0, 180.0) if args.quick else (300.0, 900.0)
    spec = load_robot(ROBOT)
    cfg = PPOConfig.for_robot(ROBOT)
    evaluator = TrackingEvaluator(cfg, spec, nthread=1)

    rows = [run_ours(ours_cap), run_sb3(anchor_cap, evaluator), run_rllib(anchor_cap, evaluator)]
    evaluator.close()

    print(
        f"\nTime to the {ROBOT} threshold (|vx err| < {cfg.threshold['vx']} m/s, |wz err| < {cfg.threshold['wz']} "
        f"rad/s, randomisation on) on {os.cpu_count()} CPUs; training seconds, evaluations excluded"
    )
    print(
        f"{'framework':<44} {'to threshold':>13} {'env-steps':>10} {'env-steps/s':>12} {'trained':>8} "
        f"{'last |vx|':>9} {'last |wz|':>9} {'set-up':>7}"
    )
    for r in rows:
        reached = f"{r['seconds']:.1f} s" if r["seconds"] is not None else "not reached"
        steps = f"{r['env_steps']:,}" if r["env_steps"] is not None else "-"
        e = r["eval"]
        print(
            f"{r['name']:<44} {reached:>13} {steps:>10} {r['steps_per_s']:>12,.0f} {r['trained_s']:>7.0f}s "
            f"{e.vx:>9.3f} {e.wz:>9.3f} {r['setup_s']:>6.1f}s"
        )

    ours, sb3, rllib = rows
    anchors = [r["seconds"] for r in (sb3, rllib) if r["seconds"] is not None]
    ratio, lower_bound, note = None, None, None
    if ours["seconds"] is None:
        note = f"ours did not reach the threshold within {ours_cap:.0f} s"
    elif anchors:
        ratio = round(min(anchors) / ours["seconds"], 2)
    else:
        lower_bound = round(anchor_cap / ours["seconds"], 1)
        note = f"neither anchor reached the threshold in {anchor_cap:.0f} s of training: ratio >= {lower_bound}"
    if note:
        print(f"ratio_vs_best_anchor is null: {note}")
    else:
        print(f"ours reached the threshold {ratio}x faster than the better anchor")
    print(
        json.dumps(
            {
                "bench": "ppo_time_to_threshold",
                "robot": ROBOT,
                "threshold": cfg.threshold,
                "seconds_to_threshold": _round(ours["seconds"]),
                "env_steps_to_threshold": ours["env_steps"],
                "env_steps_per_s": _round(ours["steps_per_s"]),
                "sb3_seconds": _round(sb3["seconds"]),
                "sb3_env_steps_per_s": _round(sb3["steps_per_s"]),
                "rllib_seconds": _round(rllib["seconds"]),
                "rllib_env_steps_per_s": _round(rllib["steps_per_s"]),
                "anchor_cap_s": anchor_cap,
                "ratio_vs_best_anchor": ratio,
                "ratio_lower_bound": lower_bound,
                "note": note,
            }
        )
    )


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


if __name__ == "__main__":
    main()
