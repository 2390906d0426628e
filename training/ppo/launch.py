"""`train(cfg) -> run_dir`: the one entry point for a PPO run, in-process or on Ray.

One worker runs in this process (Ray Train's start-up would cost more than a short run); more workers, or a
Ray address, run as a Ray Train job. The run directory runs/<robot>/<timestamp>/ holds config.yaml (this run's
PPOConfig, loadable as it is), robot.yaml (the robot as resolved), run_info.json (git commit, versions, command
line, sessions), TensorBoard events, progress.jsonl, checkpoints/ and summary.json.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import yaml

from sim.robot import RobotSpec, build_model, load_robot
from training.ppo.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint
from training.ppo.config import ConfigError, PPOConfig
from training.ppo.export_hook import export_run
from training.ppo.runner import PPORunner, TrainingDiverged, check_resumable
from training.ray_init import REPO_ROOT


def train(cfg: PPOConfig, resume: str | Path | None = None, show_progress: bool = True) -> Path:
    """Train a policy; returns the run directory (summary.json in it says how the run ended).

    `resume`: a run directory (its latest checkpoint) or a checkpoint file; the run continues in that directory
    up to cfg.iterations. Raises TrainingDiverged on a NaN loss, keeping the last good checkpoint.
    """
    spec = load_robot(cfg.robot)
    check_resources(cfg, spec)
    if resume is not None:
        run_dir, checkpoint = resolve_resume(resume)
        check_resumable(load_checkpoint(checkpoint), cfg, checkpoint)  # here, not in a Ray worker Ray would retry
    else:
        run_dir, checkpoint = new_run_dir(Path(cfg.run_root) / spec.name), None
    write_snapshot(run_dir, cfg, spec, checkpoint)

    if cfg.num_workers > 1 or cfg.ray_address:
        from training.ppo.ray_train import run_ray

        summary = run_ray(cfg, run_dir, checkpoint, show_progress)
    else:
        summary = run_local(cfg, run_dir, checkpoint, show_progress)
    if summary["status"] == "diverged":
        raise TrainingDiverged(summary["reason"])
    if cfg.export:  # after the final checkpoint: a failing export leaves the trained run intact
        export_run(run_dir)
    return run_dir


def run_local(cfg: PPOConfig, run_dir: Path, checkpoint: Path | None, show_progress: bool = True) -> dict:
    runner = PPORunner(cfg, run_dir, show_progress=show_progress)
    try:
        if checkpoint is not None:
            runner.load(checkpoint)
        return runner.learn()
    except TrainingDiverged:
        return json.loads((run_dir / "summary.json").read_text())
    finally:
        runner.close()


def resolve_resume(target: str | Path) -> tuple[Path, Path]:
    """(run directory, checkpoint) from a run directory or a checkpoint file inside one."""
    path = Path(target)
    if path.is_file():
        return path.resolve().parent.parent, path
    if path.is_dir():
        checkpoint = latest_checkpoint(path)
        if checkpoint is None:
            raise CheckpointError(f"{path} holds no checkpoint (checkpoints/model_*.pt)")
        return path, checkpoint
    raise CheckpointError(f"--resume {path}: no such run directory or checkpoint")


def resume_config(target: str | Path, **overrides) -> PPOConfig:
    """The config a run was started with (its config.yaml), with `overrides` on top."""
    run_dir, _ = resolve_resume(target)
    return PPOConfig.from_yaml(run_dir / "config.yaml", **overrides)


def check_resources(cfg: PPOConfig, spec: RobotSpec) -> None:
    """Refuse, with one line, a run this machine cannot hold (the twins keep one MjModel per env)."""
    import mujoco

    if cfg.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device 'cuda' asked for, but torch sees no CUDA GPU")
    if cfg.ray_address:
        return  # the envs live on the cluster's machines
    per_env = 3 * mujoco.mj_sizeModel(build_model(spec))  # model copy, rollout buffers, state arrays
    need = per_env * (cfg.num_envs + cfg.eval_envs)
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if need > 0.8 * free:
        raise ConfigError(
            f"{cfg.num_envs} envs of {spec.name} need about {need / 1e9:.1f} GB; "
            f"this machine has {free / 1e9:.1f} GB free"
        )


def new_run_dir(root: Path) -> Path:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    for n in range(1000):  # two runs started in the same second (sweeps, tests) get a suffix
        path = root / (stamp if n == 0 else f"{stamp}_{n}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a run directory under {root}")


def write_snapshot(run_dir: Path, cfg: PPOConfig, spec: RobotSpec, resumed_from: Path | None) -> None:
    cfg.save_yaml(run_dir / "config.yaml")
    (run_dir / "robot.yaml").write_text(yaml.safe_dump(_plain(spec.to_dict()), sort_keys=False))
    info_path = run_dir / "run_info.json"
    info = json.loads(info_path.read_text()) if info_path.is_file() else {"run_id": f"{spec.name}/{run_dir.name}"}
    info.update(git_state())
    info.setdefault("sessions", []).append(
        {
            "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": sys.argv,
            "resumed_from": str(resumed_from) if resumed_from else None,
            "host": platform.node(),
            "versions": _versions(),
        }
    )
    info_path.write_text(json.dumps(info, indent=2))


def git_state() -> dict:
    """The commit the code ran from and whether the tree had uncommitted changes (None outside a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    status = git("status", "--porcelain")
    return {"git_commit": git("rev-parse", "HEAD"), "git_dirty": bool(status) if status is not None else None}


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "rsl-rl-lib", "ray", "mujoco", "numpy"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def _plain(value):
    """YAML-safe copy: tuples to lists, paths to strings."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)
