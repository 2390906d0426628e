"""Time to a walking quadruped that trots: PPO on the project's quadruped (config/ppo/quadruped.yaml and its task
config/tasks/velocity_quadruped.yaml: legged_gym's terms with mjbatch's trot clock and foot slip) until its
evaluation passes the tracking threshold of config/ppo/quadruped.yaml and the gait one: diagonal pairs in phase for
at least 70% of the stance time (trot index), a mean air time of at least 0.2 s, foot slip at most 0.1 m/s
(sim.gait; the evaluation of training.ppo.evaluate scores them).

The clock counts training (collection and learning), not evaluation, as benchmarks/ppo_time_to_threshold.py does;
it evaluates every 5 iterations (--set eval_every=N changes that).
Each seed reports the training time to the tracking threshold alone (its first evaluation that passed it) and to
the tracking-plus-gait threshold, at which it stops. The anchor, measured on this machine type but not beside this
run (it needs mujoco 3.14): mjbatch's Go1 joystick example passed the tracking threshold after 194 s of training
(../shared/anchors.md). The targets: tracking plus gait in at most 150 s for the project's quadruped, 8 minutes on
rough terrain and 180 s for a Menagerie-style Go1 brought by `sim2real robot init`, median of 3 seeds.

    python -m benchmarks.locomotion [--quick] [--terrain] [--minutes 12] [--seeds 0 1 2] [--keep DIR]
    python -m benchmarks.locomotion --quick --set symmetry_augmentation=true
    python -m benchmarks.locomotion --quick --mjcf path/to/go1.xml --minutes 6
    python -m benchmarks.locomotion --quick --set task=config/tasks/velocity_quadruped_air_time.yaml

--quick: one seed. --set KEY=VALUE: a PPO setting (training.ppo.config.PPOConfig) for every seed, as YAML.
--terrain: the same on a rough-terrain curriculum (rough ground and slopes, 10 levels).
--keep DIR: keep each seed's run directory under DIR, with its exported policy artifact (for sim_to_sim).
--mjcf XML: a robot from its own MJCF instead, brought by `sim2real robot init` and trained on the default
legged task (sim.tasks.default_task) with config/ppo/quadruped.yaml's PPO settings; `go1-class` is
benchmarks/go1_class.py's Go1-class quadruped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

GAIT = {"trot_index": 0.7, "mean_air_time_s": 0.2, "foot_slip_m_s": 0.1}
# every 5 iterations (about 10 s of the quadruped's training): the time is the crossing to within that, not to
# within config/ppo/quadruped.yaml's 25 (about 50 s); the clock stops while an evaluation runs
EVAL_EVERY = 5
ROUGH = {"types": ["rough", "slopes"], "levels": 10, "curriculum": True, "max_init_level": 2}
ANCHOR = (
    "mjbatch 0.1.4's Go1 joystick example on Menagerie's Go1 passed the tracking threshold after 194 s of training "
    "on this machine type (../shared/anchors.md; it needs mujoco 3.14, so not beside this run)"
)


def rough_task(out_dir: Path) -> Path:
    """The quadruped's own task with a terrain curriculum added (the loader reads a task YAML whole)."""
    from edge.resources import config_path

    task = yaml.safe_load((config_path("tasks") / "velocity_quadruped.yaml").read_text())
    path = out_dir / "velocity_quadruped_rough.yaml"
    path.write_text(yaml.safe_dump({**task, "terrain": ROUGH}, sort_keys=False))
    return path


def own_robot(mjcf: str, out_dir: Path) -> Path:
    """The robot YAML `sim2real robot init` writes for `mjcf` (go1-class: benchmarks/go1_class.py's) in out_dir."""
    from benchmarks.go1_class import go1_class_mjcf
    from sim.robot_init import init_robot

    xml = go1_class_mjcf(out_dir / "go1_class.xml") if mjcf == "go1-class" else Path(mjcf)
    yaml_path, draft = init_robot(xml, out_dir / f"{xml.stem}.yaml", force=True)
    print(f"robot init {xml.name}: " + "; ".join(draft.notes))
    return yaml_path


def first_tracking(run_dir: Path, threshold: dict) -> dict | None:
    """The first evaluation in a run's progress.jsonl that passed the tracking threshold alone (mean |vx err|, |wz
    err|, falls), whatever the gait: its training seconds and env-steps; None when none did."""
    for line in (run_dir / "progress.jsonl").read_text().splitlines():
        row = json.loads(line)
        vx, wz, falls = row.get("Eval/vx"), row.get("Eval/wz"), row.get("Eval/falls")
        if vx is None or wz is None or falls is None:
            continue
        if vx < threshold["vx"] and wz < threshold["wz"] and falls <= threshold.get("falls", 0):
            return {"train_seconds": row["Perf/train_seconds"], "env_steps": row["Perf/total_env_steps"]}
    return None


def train_seed(
    seed: int, minutes: float, run_root: Path, task: Path | None, export: bool, robot: Path | None, overrides: dict
) -> dict:
    from training.ppo.config import PPO_CONFIG_DIR, PPOConfig
    from training.ppo.runner import PPORunner

    # a robot of its own takes the quadruped's PPO settings and threshold, and its own (default) task
    base = PPOConfig.from_yaml(PPO_CONFIG_DIR / "quadruped.yaml", robot=str(robot) if robot else "quadruped")
    cfg = base.replace(
        seed=seed,
        threshold={**base.threshold, **GAIT},
        stop_at_threshold=True,
        eval_every=EVAL_EVERY,
        max_seconds=60.0 * minutes,
        run_root=str(run_root),
        export=False,
        **({"task": str(task)} if task else {}),
        **overrides,
    )
    runner = PPORunner(cfg, run_root / f"seed{seed}")
    t0 = time.perf_counter()
    summary = runner.learn()
    runner.close()
    if export:
        from training.ppo.export_hook import export_run

        export_run(run_root / f"seed{seed}")
    final, reached = summary["final_eval"] or {}, summary["threshold"]
    tracking = first_tracking(run_root / f"seed{seed}", base.threshold)
    return {
        "seed": seed,
        "seconds_to_tracking": tracking["train_seconds"] if tracking else None,
        "env_steps_to_tracking": tracking["env_steps"] if tracking else None,
        "seconds_to_threshold": reached["train_seconds"] if reached else None,
        "env_steps_to_threshold": reached["env_steps"] if reached else None,
        "train_seconds": summary["train_seconds"],
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "iterations": summary["iteration"],
        **{k: final.get(k) for k in ("vx", "wz", "falls", "trot_index", "mean_air_time_s", "foot_slip_m_s")},
    }


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def _median_time(seconds: list[float | None]) -> float | None:
    """The median time over every seed, a seed that never reached the threshold counting as infinitely slow;
    None when that median is not reached (a median over only the seeds that reached it would flatter the run)."""
    median = float(np.median([math.inf if s is None else s for s in seconds]))
    return median if math.isfinite(median) else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one seed")
    parser.add_argument("--terrain", action="store_true", help="a rough-terrain curriculum instead of flat ground")
    parser.add_argument("--minutes", type=float, default=12.0, help="training time cap per seed (default 12)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--keep", type=Path, help="keep the run directories (and export the policies) under DIR")
    parser.add_argument("--mjcf", help="a robot's own MJCF (or go1-class) instead of the project's quadruped")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a PPO setting for every seed (a YAML value), e.g. --set symmetry_augmentation=true",
    )
    args = parser.parse_args()
    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set {item}: expected KEY=VALUE")
        overrides[key] = yaml.safe_load(value)
    if args.terrain and args.mjcf:
        parser.error("--terrain runs the project's quadruped task; give a robot of your own a task YAML for terrain")
    seeds = args.seeds[:1] if args.quick else args.seeds
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        task = rough_task(root) if args.terrain else None
        robot = own_robot(args.mjcf, root) if args.mjcf else None
        runs = [train_seed(s, args.minutes, root, task, args.keep is not None, robot, overrides) for s in seeds]
    print(
        f"{'seed':>4} {'to tracking':>12} {'to threshold':>13} {'iters':>6} {'|vx err|':>9} {'trot':>6} {'air s':>6} "
        f"{'slip':>6}"
    )
    for r in runs:
        t = f"{r['seconds_to_threshold']:.0f} s" if r["seconds_to_threshold"] is not None else "not reached"
        k = f"{r['seconds_to_tracking']:.0f} s" if r["seconds_to_tracking"] is not None else "not reached"
        print(
            f"{r['seed']:>4} {k:>12} {t:>13} {r['iterations']:>6} {r['vx'] or float('nan'):>9.3f} "
            f"{r['trot_index'] or 0:>6.2f} {r['mean_air_time_s'] or 0:>6.2f} {r['foot_slip_m_s'] or 0:>6.3f}"
        )
    reached = [r["seconds_to_threshold"] for r in runs if r["seconds_to_threshold"] is not None]
    print(f"threshold: {GAIT} plus config/ppo/quadruped.yaml's")
    target = 480 if args.terrain else 180 if args.mjcf else 150
    print(f"target: tracking plus gait in <= {target} s of training on 2 cores; anchor: {ANCHOR}")
    print(f"load average (1 min) before / after: {load[0]:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        json.dumps(
            {
                "bench": "locomotion",
                "robot": args.mjcf or "quadruped",
                "terrain": "rough+slopes curriculum" if args.terrain else "flat",
                "seeds": len(runs),
                "reached": len(reached),
                "settings": overrides,
                "seconds_to_tracking": _median_time([r["seconds_to_tracking"] for r in runs]),
                "seconds_to_threshold": _median_time([r["seconds_to_threshold"] for r in runs]),
                "seconds_to_threshold_spread": [min(reached), max(reached)] if reached else None,
                "trot_index": _median([r["trot_index"] for r in runs]),
                "mean_air_time_s": _median([r["mean_air_time_s"] for r in runs]),
                "foot_slip_m_s": _median([r["foot_slip_m_s"] for r in runs]),
                "per_seed": runs,
                "baseline": ANCHOR,
                "load_avg_1m": round(load[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
