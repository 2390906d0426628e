"""Randomly initialised rsl_rl actors exported as policy artifacts: the subject of the inference benchmark, the
edge tests and benchmarks/gpu_check.sh wherever no trained policy is at hand.

    python -m benchmarks.edge_policies quadruped OUT_DIR    # writes OUT_DIR/policy.onnx + manifest.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from rsl_rl.models.mlp_model import MLPModel
from tensordict import TensorDict

from edge.manifest import ActionLimits, Manifest
from sim.robot import joint_target_limits, load_robot
from sim.tasks import load_task
from training.export import export_policy

HIDDEN = {"rover": (64, 64), "quadruped": (512, 256, 128)}
CLIP_ACTIONS = 10.0  # the twin's default clip_actions (sim.twin.BatchedTwin)


def random_actor(obs_dim: int, num_actions: int, hidden: tuple[int, ...], seed: int = 0) -> MLPModel:
    """An rsl_rl actor as PPO builds it (ELU MLP, Gaussian head, observation normaliser), with a normaliser far
    from identity so that parity checks cover the (obs - mean) / (std + eps) baked into the ONNX."""
    torch.manual_seed(seed)
    obs = TensorDict({"policy": torch.zeros(1, obs_dim)}, batch_size=[1])
    actor = MLPModel(
        obs,
        {"actor": ["policy"]},
        "actor",
        num_actions,
        hidden_dims=list(hidden),
        activation="elu",
        obs_normalization=True,
        distribution_cfg={"class_name": "GaussianDistribution", "init_std": 1.0},
    )
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        actor.obs_normalizer._mean.copy_(torch.randn(1, obs_dim, generator=g))
        actor.obs_normalizer._std.copy_(torch.rand(1, obs_dim, generator=g) * 2.0 + 0.1)
    return actor.eval()


def export_random_policy(robot: str, out_dir: str | Path, seed: int = 0) -> tuple[MLPModel, Manifest]:
    spec = load_robot(robot)
    terms = load_task(spec).obs_terms(spec.num_actions)
    actor = random_actor(sum(t.size for t in terms), spec.num_actions, HIDDEN.get(spec.name, (128, 128)), seed)
    manifest = export_policy(
        actor,
        spec.to_dict(),
        terms,
        out_dir,
        run_id=f"random-{spec.name}-seed{seed}",
        limits=ActionLimits(joint_target_limits(spec), clip_actions=CLIP_ACTIONS),
    )
    return actor, manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("robot", help="robot name (config/robots/NAME.yaml) or YAML path")
    parser.add_argument("out_dir", help="artifact directory to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    _, manifest = export_random_policy(args.robot, args.out_dir, args.seed)
    print(f"wrote {args.out_dir}: obs_dim {manifest.obs_dim}, {manifest.action_dim} actions")


if __name__ == "__main__":
    main()
