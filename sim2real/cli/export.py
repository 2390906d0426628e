"""`sim2real export`: a training run's latest checkpoint -> policy artifact (policy.onnx + manifest.json)."""

from __future__ import annotations

import argparse

from sim2real.errors import UserError

HELP = "Export a training run's policy as an artifact (ONNX with the normaliser inside, plus manifest.json)."
EXAMPLES = """examples:
  sim2real export runs/rover/2026-11-30_10-00-00 -o policy/
  sim2real export runs/quadruped/2026-11-30_10-00-00          # writes <run>/policy/
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="training run directory (holds checkpoints/ and run_info.json)")
    p.add_argument("-o", "--out", default=None, help="artifact directory (default: RUN_DIR/policy)")


def run(args: argparse.Namespace) -> int:
    from edge.manifest import load_manifest
    from training.ppo.checkpoint import CheckpointError
    from training.ppo.export_hook import export_run

    try:
        out = export_run(args.run_dir, args.out)
    except CheckpointError as e:
        raise UserError(str(e)) from None
    m = load_manifest(out)
    print(
        f"wrote {out}: {m.robot['name']}, obs {m.obs_dim} -> {m.action_dim} actions, "
        f"policy.onnx sha256 {m.policy['sha256'][:12]}..., run {m.training_run_id}"
    )
    print(f"next: sim2real validate {out} --campaign config/campaigns/quick.yaml")
    return 0
