"""`sim2real train`: PPO on the batched twin, in this process or as a Ray Train job; sweeps with Ray Tune."""

from __future__ import annotations

import argparse
import json

from sim2real.errors import UserError

HELP = "Train a velocity-tracking policy with PPO on the batched digital twin (Ray for several workers)."
EXAMPLES = """examples:
  sim2real train --robot rover                          # config/ppo/rover.yaml defaults, in this process
  sim2real train --robot quadruped --envs 2048 --iterations 1500
  sim2real train --robot rover --workers 2              # Ray Train job, gradients all-reduced (gloo on CPU)
  sim2real train --robot rover --workers 8 --ray-address ray://head:10001
  sim2real train --robot my_robot.yaml --config my_ppo.yaml
  sim2real train --robot quadruped --task my_terrain_task.yaml   # a task YAML with a terrain: section
  sim2real train --resume runs/rover/2026-11-30_10-00-00  # continue exactly from the latest checkpoint
  sim2real train --sweep config/sweeps/rover_ppo.yaml   # Ray Tune; prints the best trial
  tensorboard --logdir runs                             # reward terms, tracking errors, env-steps/s

A run writes runs/<robot>/<timestamp>/: config.yaml, run_info.json (git commit), TensorBoard events,
progress.jsonl, checkpoints/model_<iteration>.pt and summary.json. --iterations is the run's total: a resumed
run continues up to it. Exit status 1 when training diverged (NaN); the last good checkpoint is kept.
"""


# PPOConfig fields with a flag of their own (None: the field's name, --checkpoint-every); their help, type and
# choices come from the field; --config / config/ppo/<robot>.yaml set the rest
PPO_FLAGS = {
    "task": None,
    "num_envs": "--envs",
    "num_workers": "--workers",
    "iterations": None,
    "seed": None,
    "ray_address": None,
    "checkpoint_every": None,
    "stop_at_threshold": None,
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.config import add_flags
    from training.ppo.config import PPOConfig

    p.add_argument("--robot", help="rover, quadruped or a robot YAML path")
    add_flags(p, PPOConfig, PPO_FLAGS, defaults_from="--config or config/ppo/<robot>.yaml")
    p.add_argument("--max-minutes", type=float, help="stop after this much training time (PPOConfig.max_seconds)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run directory (or one checkpoint file)")
    p.add_argument("--config", metavar="PPO_YAML", help="a PPOConfig YAML (default config/ppo/<robot>.yaml)")
    p.add_argument("--sweep", metavar="SWEEP_YAML", help="run a Ray Tune sweep instead of one run")


def _overrides(args: argparse.Namespace) -> dict:
    from edge.config import flag_values
    from training.ppo.config import PPOConfig

    minutes = {} if args.max_minutes is None else {"max_seconds": args.max_minutes * 60}
    return {**flag_values(args, PPOConfig, PPO_FLAGS), **minutes}


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from training.ppo.checkpoint import CheckpointError
    from training.ppo.config import ConfigError, PPOConfig
    from training.ppo.launch import resume_config, train
    from training.ppo.runner import TrainingDiverged

    console = Console()
    try:
        if args.sweep:
            from training.ppo.sweep import run_sweep

            _print_sweep(console, run_sweep(args.sweep))
            return 0
        overrides = _overrides(args)
        if args.resume:
            if args.robot or args.config:
                raise UserError("--resume takes the run's own config.yaml; drop --robot / --config")
            cfg = resume_config(args.resume, **overrides)
        elif args.config:
            cfg = PPOConfig.from_yaml(args.config, **({"robot": args.robot} if args.robot else {}), **overrides)
        elif args.robot:
            cfg = PPOConfig.for_robot(args.robot, **overrides)
        else:
            raise UserError("give --robot (rover, quadruped or a robot YAML), --config, --resume or --sweep")
        run_dir = train(cfg, resume=args.resume)
    except (ConfigError, CheckpointError) as e:
        raise UserError(str(e)) from None
    except TrainingDiverged as e:
        console.print(f"[red]sim2real train: stopped:[/red] {e}", highlight=False)
        return 1
    _print_summary(console, json.loads((run_dir / "summary.json").read_text()))
    return 0


def _print_summary(console, s: dict) -> None:
    from rich.table import Table

    table = Table(title=f"PPO run {s['run_dir']}", show_header=False)
    table.add_row("status", f"{s['status']} at iteration {s['iteration']}/{s['iterations']}")
    table.add_row(
        "env-steps", f"{s['env_steps']:,} ({s['env_steps_per_s'] or 0:,.0f}/s incl. learning, {s['workers']} worker(s))"
    )
    table.add_row("training time", f"{s['train_seconds']:.1f} s (wall {s['wall_seconds']:.1f} s this session)")
    t = s["threshold"]
    table.add_row(
        "threshold",
        f"reached at iteration {t['iteration']} after {t['train_seconds']:.1f} s of training" if t else "not reached",
    )
    e = s["final_eval"]
    if e:
        table.add_row(
            "final evaluation",
            f"|vx err| {e['vx']:.3f} m/s, |wz err| {e['wz']:.3f} rad/s, falls {e['falls']}, passed: {e['passed']}",
        )
        if e.get("trot_index") is not None:
            table.add_row(
                "gait",
                f"trot index {e['trot_index']:.2f}, mean air time {e['mean_air_time_s']:.3f} s, "
                f"foot slip {e['foot_slip_m_s']:.3f} m/s",
            )
    table.add_row("checkpoint", str(s["last_checkpoint"]))
    restarts, resumed = s.get("restarts") or 0, s.get("resumed_from")
    if restarts:  # Ray Train's FailureConfig started the worker group again
        start = f"from {resumed}" if resumed else "from the start (no checkpoint yet)"
        table.add_row("resumed", f"{start} after {restarts} restart(s) of the workers")
    elif resumed:
        table.add_row("resumed", f"from {resumed}")
    console.print(table)
    console.print(f"tensorboard --logdir {s['run_dir']}", highlight=False)


def _print_sweep(console, result: dict) -> None:
    from rich.table import Table

    trials = result["trials"]
    table = Table(title=f"Sweep {result['sweep_dir']} ({result['metric']}, {result['mode']})")
    for key in trials[0]:
        table.add_column(key, justify="right")
    for row in trials:
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()))
    console.print(table)
    console.print(f"best: {result['best_config']} -> {result['best_metrics']}", highlight=False)
    console.print(f"best config written to {result['sweep_dir']}/best.yaml", highlight=False)
