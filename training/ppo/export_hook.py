"""Where training hands its result to deployment: the run's last checkpoint becomes the policy/ artifact.

The export itself (ONNX with the normaliser baked in, manifest) is training.export's; this picks the checkpoint, the
robot and the limits the policy was trained with. `load_actor` rebuilds a checkpoint's actor on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from rsl_rl.models import MLPModel
from tensordict import TensorDict

from sim.robot import joint_target_limits, load_robot
from sim.tasks import load_task
from training.ppo.checkpoint import checkpoint_in, load_checkpoint
from training.ppo.config import PPOConfig
from training.ppo.models import build_actor
from training.ppo.symmetry import policy_mirrors
from training.vec_env import OBS_GROUP

POLICY_DIR = "policy"


def export_run(run_dir: Path, out: Path | None = None, checkpoint: Path | None = None) -> Path:
    """Export one of the run's checkpoints, by default its latest, (policy.onnx + manifest.json) to `out`, by
    default <run_dir>/policy/; returns the artifact directory."""
    from edge.manifest import ActionLimits
    from training.export import export_policy

    run_dir = Path(run_dir)
    state = load_checkpoint(checkpoint if checkpoint is not None else checkpoint_in(run_dir))
    cfg = PPOConfig.from_dict(state["config"])
    spec = load_robot(cfg.robot)
    info = run_dir / "run_info.json"  # written by `sim2real train`; a run driven from Python may lack it
    run_id = json.loads(info.read_text())["run_id"] if info.is_file() else f"{spec.name}/{run_dir.name}"
    out = Path(out) if out is not None else run_dir / POLICY_DIR
    export_policy(
        actor_from_checkpoint(state),
        spec.to_dict(),
        load_task(spec, cfg.task).obs_terms(spec.num_actions),
        out,
        run_id=run_id,
        limits=ActionLimits(joint_target_limits(spec), clip_actions=state["clip_actions"]),
    )
    return out


def load_actor(checkpoint: Path) -> tuple[MLPModel, PPOConfig]:
    """The trained actor of a checkpoint file (or of a run directory's latest one) and its training config.

    The actor maps TensorDict({"policy": obs}) to deterministic actions, its normaliser included.
    """
    state = load_checkpoint(checkpoint_in(Path(checkpoint)))
    return actor_from_checkpoint(state), PPOConfig.from_dict(state["config"])


def actor_from_checkpoint(state: dict) -> MLPModel:
    cfg = PPOConfig.from_dict(state["config"])
    obs_dim = state["actor"]["mlp.0.weight"].shape[1]
    num_actions = state["actor"]["distribution.std_param"].shape[0]
    mirrors = None
    if cfg.mirror_policy:
        spec = load_robot(cfg.robot)
        mirrors = policy_mirrors(cfg, spec, list(load_task(spec, cfg.task).observations))
    obs = TensorDict({OBS_GROUP: torch.zeros(1, obs_dim)}, batch_size=[1])
    actor = build_actor(obs, cfg, num_actions, mirrors)
    actor.load_state_dict(state["actor"])
    return actor.eval()
