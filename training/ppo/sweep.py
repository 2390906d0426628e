"""Hyper-parameter sweeps with Ray Tune: one in-process PPO run per trial, scored by the tracking evaluation.

A sweep file (config/sweeps/*.yaml) names the robot, the PPOConfig fields every trial shares (`base`) and the
fields to search, each as {grid: [...]}, {choice: [...]}, {uniform: [lo, hi]} or {loguniform: [lo, hi]}.
The metric is the evaluation's score (max of error / limit, plus the fraction of envs that fell; < 1 passes).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from edge.config import load_dataclass, setting
from training.ppo.config import ConfigError, PPOConfig

METRICS = ("eval_score", "eval_vx", "eval_wz", "mean_return")
MODES = ("min", "max")
SAMPLERS = ("grid", "choice", "uniform", "loguniform")
PPO_FIELDS = tuple(f.name for f in dataclasses.fields(PPOConfig))


@dataclasses.dataclass
class SweepSpec:
    robot: str = setting(help="robot name or robot YAML; its config/ppo defaults are every trial's start")
    search: dict[str, dict[str, list]] = setting(
        help="PPOConfig fields to vary, each {grid|choice|uniform|loguniform: [...]}",
        choices=PPO_FIELDS,
        noun="PPOConfig field",
    )
    base: dict = setting({}, "PPOConfig fields every trial shares")
    num_samples: int = setting(1, "repeats of each grid point (random samplers draw anew each time)", ge=1)
    max_concurrent: int | None = setting(None, "trials at once; none: one per CPU", ge=1)
    metric: str = setting("eval_score", "what the best trial is chosen by", choices=METRICS)
    mode: str = setting("min", "whether the metric is minimised or maximised", choices=MODES)

    def __post_init__(self) -> None:
        for name, sampler in self.search.items():
            if len(sampler) != 1 or next(iter(sampler)) not in SAMPLERS:
                raise ConfigError(f"search.{name} must be one of {{{', '.join(SAMPLERS)}: [...]}}, got {sampler!r}")

    @classmethod
    def from_yaml(cls, path: str | Path) -> SweepSpec:
        spec = load_dataclass(cls, path, error=ConfigError, what="sweep file")
        try:  # a bad base config fails here, before Ray starts
            PPOConfig.for_robot(spec.robot, **spec.base)
        except ConfigError as e:
            raise ConfigError(f"{path}: base: {e}") from None
        return spec


def run_sweep(path: str | Path, run_root: str = "runs") -> dict:
    """Run every trial; returns the best trial's {"config", "metrics", "run_dir"} and writes best.yaml beside them."""
    spec = SweepSpec.from_yaml(path)  # before importing Ray: a bad file fails in a second

    import ray
    from ray import tune

    from sim.robot import load_robot
    from training.ppo.launch import new_run_dir

    sweep_dir = new_run_dir(Path(run_root).resolve() / load_robot(spec.robot).name / "sweeps")
    samplers = {
        "grid": tune.grid_search,
        "choice": tune.choice,
        "uniform": lambda b: tune.uniform(*b),
        "loguniform": lambda b: tune.loguniform(*b),
    }
    space = {name: samplers[kind](values) for name, s in spec.search.items() for kind, values in s.items()}
    base = {**spec.base, "robot": spec.robot, "run_root": str(sweep_dir), "export": False, "nthread": 1}
    if not ray.is_initialized():
        ray.init(log_to_driver=False, logging_config=ray.LoggingConfig(log_level="WARNING"))
    cpus = int(ray.cluster_resources().get("CPU", 1))
    tuner = tune.Tuner(
        tune.with_resources(ppo_trial, {"cpu": 1}),
        param_space={"base": base, **space},
        tune_config=tune.TuneConfig(
            metric=spec.metric,
            mode=spec.mode,
            num_samples=spec.num_samples,
            max_concurrent_trials=spec.max_concurrent or cpus,
        ),
        run_config=tune.RunConfig(name="tune", storage_path=str(sweep_dir), verbose=0),
    )
    results = tuner.fit()
    best = results.get_best_result(spec.metric, spec.mode)
    if best is None or best.metrics is None or spec.metric not in best.metrics:
        errors = [str(r.error).splitlines()[0] for r in results if r.error]
        raise RuntimeError(f"no trial reported {spec.metric}" + (f"; first error: {errors[0]}" if errors else ""))
    config = {k: v for k, v in best.config.items() if k != "base"}
    best_cfg = PPOConfig.for_robot(spec.robot, **{**spec.base, **config})
    best_cfg.save_yaml(sweep_dir / "best.yaml")
    trials = [
        {**{k: r.config.get(k) for k in spec.search}, **{m: (r.metrics or {}).get(m) for m in METRICS}} for r in results
    ]
    return {
        "best_config": config,
        "best_metrics": {m: best.metrics.get(m) for m in METRICS},
        "best_run_dir": best.metrics.get("run_dir"),
        "trials": trials,
        "sweep_dir": str(sweep_dir),
        "metric": spec.metric,
        "mode": spec.mode,
    }


def ppo_trial(params: dict) -> None:
    """One Tune trial: an in-process run reporting its evaluation after each one (checkpoint_every = eval_every)."""
    from ray import tune

    from training.ppo.runner import PPORunner, TrainingDiverged

    params = dict(params)
    base = params.pop("base")
    cfg = PPOConfig.from_dict({**base, **params})
    cfg = cfg.replace(checkpoint_every=cfg.eval_every or cfg.iterations)
    run_dir = Path(cfg.run_root) / tune.get_context().get_trial_name()
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg.save_yaml(run_dir / "config.yaml")
    runner = PPORunner(cfg, run_dir)

    def report(_path, metrics: dict) -> None:
        tune.report({**metrics, **_eval_metrics(runner), "run_dir": str(run_dir)})

    try:
        runner.learn(on_checkpoint=report)
    except TrainingDiverged:
        tune.report({"eval_score": float("inf"), "run_dir": str(run_dir), "diverged": True})
        return
    finally:
        runner.close()
    tune.report({"iteration": runner.iteration, **_eval_metrics(runner), "run_dir": str(run_dir)})


def _eval_metrics(runner) -> dict:
    e = runner.last_eval
    if e is None:
        return {}
    return {
        "eval_score": e.score,
        "eval_vx": e.vx,
        "eval_wz": e.wz,
        "eval_passed": e.passed,
        "mean_return": e.mean_return,
    }
