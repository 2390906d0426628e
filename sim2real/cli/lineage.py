"""`sim2real lineage ARTIFACT`: where an artifact came from, from the lineage registry: field logs -> identified
parameters -> training run -> artifact -> campaign reports, back to the first artifact."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim2real.errors import UserError

HELP = "Print the lineage of a policy artifact: logs, identified parameters, training run, campaigns."
EXAMPLES = """examples:
  sim2real lineage runs/retrain/2026-11-30_10-00-00/train/rover/2026-11-30_10-01-12/policy
  sim2real lineage 1cbaf024c835                      # by (a prefix of) the sha256 of its policy.onnx
  sim2real lineage policy/ --json                    # the chain as JSON
  sim2real lineage policy/ --registry runs/loop-2026-11-30_10-00-00/registry.sqlite
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("artifact", help="artifact directory, or (a prefix of) the sha256 of its policy.onnx")
    p.add_argument("--registry", default="runs/registry.sqlite", help="lineage registry (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the chain as JSON")


def resolve_sha256(artifact: str) -> str:
    from edge.fileio import sha256_file

    path = Path(artifact)
    if (path / "policy.onnx").is_file():
        return sha256_file(path / "policy.onnx")
    if path.exists():
        raise UserError(f"{artifact} is not a policy artifact directory (no policy.onnx)")
    if len(artifact) < 6 or any(c not in "0123456789abcdef" for c in artifact.lower()):
        raise UserError(f"{artifact!r} is neither an artifact directory nor a sha256 prefix (6+ hex digits)")
    return artifact.lower()


def run(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.table import Table

    from training.retrain.registry import Registry

    if not Path(args.registry).is_file():
        raise UserError(f"no lineage registry at {args.registry} (retraining writes it; see --registry)")
    sha = resolve_sha256(args.artifact)
    with Registry(args.registry) as reg:
        chain = reg.lineage(sha)
    if not chain:
        raise UserError(f"artifact {sha[:12]} is not in the registry {args.registry}")
    if args.json:
        print(json.dumps(chain, indent=1, default=str))
        return 0
    table = Table(title=f"lineage of {sha[:12]} (newest first)")
    for col in ("step", "what", "detail"):
        table.add_column(col, overflow="fold")
    for entry in chain:
        a = entry["artifact"]
        state = "deployed" if a["deployed"] else "not deployed"
        table.add_row("artifact", a["path"], f"sha256 {a['sha256'][:12]}, {state}, run {a['training_run_id']}")
        for c in entry["campaigns"]:
            table.add_row(
                "  campaign", c["report_path"], f"{c['kind']} {c['name']}: " + ("pass" if c["passed"] else "FAIL")
            )
        r = entry.get("retrain")
        if not r:
            table.add_row("  origin", "-", "not produced by retraining (trained and validated directly)")
            continue
        table.add_row("  training run", r["training_run"] or "-", "fine-tuned from its parent's checkpoint")
        if r["identified"]:
            fit = r["sysid"] or {}
            table.add_row(
                "  identified",
                ", ".join(f"{k} = {v:.4g}" for k, v in r["identified"].items()),
                f"trajectory error {fit.get('error_before', float('nan')):.4g} -> "
                f"{fit.get('error_after', float('nan')):.4g}",
            )
        table.add_row("  decision", f"retraining {r['id']}", r["reason"] or "-")
        for log in r["logs"] or []:
            table.add_row("  field log", log["path"], f"sha256 {log['sha256'][:12]}")
        table.add_row("  promotion", "promoted" if r["promoted"] else "not promoted", r["promotion_reason"] or "-")
    Console().print(table)
    return 0
