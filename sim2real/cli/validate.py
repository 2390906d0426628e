"""`sim2real validate`: run a validation campaign on an exported policy artifact, gate it, report, promote.

Exit codes: 0 every gate passed (and the verdict is in the manifest), 1 a gate failed, 2 a usage error
(bad campaign YAML, tampered or mismatched artifact, results of another run in --out).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sim2real.cli.keys import add_trust_flags, trust_policy
from sim2real.errors import UserError

if TYPE_CHECKING:
    from sim.campaign.runner import CampaignRequest

HELP = "Validate a policy artifact with a scenario campaign in the digital twin (gates, report, promotion)."
EXAMPLES = """examples:
  sim2real validate policy/ --campaign config/campaigns/quick.yaml
  sim2real validate policy/ --campaign full --workers 8            # 8 Ray workers on this machine
  sim2real validate policy/ --campaign full --ray-address auto     # on a running Ray cluster
  sim2real validate policy/ --campaign quick --backend newton      # the same campaign on Newton
  sim2real validate policy/ --campaign quick --compare old_policy/ # per-scenario deltas (regression check)
  sim2real validate policy/ --campaign full --trusted-keys keys/    # re-validate a promoted (signed) artifact

Results stream to OUT/results.jsonl; re-running the same command resumes and skips finished scenarios.
OUT/report.html and OUT/summary.json hold the verdict; exit code 1 when a gate fails.
"""


# CampaignRequest's fields with a flag, by flag name (None: the field's own); the artifact is the positional
# argument, the campaign comes from --campaign (and --backend), out from --out or the artifact's hash
FLAGS = {
    "workers": None,
    "ray_address": None,
    "threads": None,
    "compare_to": "--compare",
    "fresh": None,
    "promote_verdict": "--promote",
    "signing_key": "--sign-key",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.config import add_flags
    from sim.backends import BACKENDS
    from sim.campaign.runner import CampaignRequest

    p.add_argument("policy", help="policy artifact directory (policy.onnx + manifest.json)")
    p.add_argument("--campaign", required=True, help="campaign YAML path or name in config/campaigns (quick, full)")
    p.add_argument("--backend", choices=BACKENDS, help="twin backend (default: the YAML's)")
    p.add_argument("--out", help="results directory (default runs/validation/<campaign>-<onnx sha256[:12]>)")
    add_flags(p, CampaignRequest, FLAGS)
    add_trust_flags(p, CampaignRequest, ("trusted_keys", "allow_unsigned"))


def request_of(args: argparse.Namespace) -> CampaignRequest:
    """The CampaignRequest the arguments give (a flag not given keeps the field's default)."""
    from edge.config import check_values, flag_values
    from edge.errors import ArtifactError
    from edge.manifest import load_manifest
    from sim.campaign.config import load_campaign
    from sim.campaign.runner import CampaignRequest, with_backend

    cfg = with_backend(load_campaign(args.campaign), args.backend)
    try:
        sha = load_manifest(args.policy).policy["sha256"]
    except ArtifactError as e:
        raise UserError(str(e)) from None
    out = Path(args.out or Path("runs") / "validation" / f"{cfg.name}-{sha[:12]}")
    given = check_values(CampaignRequest, flag_values(args, CampaignRequest, FLAGS), name="CampaignRequest")
    return CampaignRequest(args.policy, cfg, out, **given, trust=trust_policy(args))


def run(args: argparse.Namespace) -> int:
    from edge.errors import ArtifactError
    from sim.campaign.runner import REPORT_FILE, run_campaign
    from sim2real.cli.console import make_console, progress_bar

    request = request_of(args)
    cfg, out = request.campaign, Path(request.out)
    console = make_console()
    with progress_bar("steps", "remaining", console=console) as bar:
        task = bar.add_task(f"campaign {cfg.name} ({cfg.backend})", total=None)
        try:
            outcome = run_campaign(request, progress=lambda done, total: bar.update(task, completed=done, total=total))
        except (ArtifactError, ImportError) as e:  # a refused artifact; a backend or Ray that is not installed
            raise UserError(str(e)) from None
    s = outcome.summary
    for check in s["checks"]:
        if not check["passed"]:
            console.print(
                f"[red]FAIL[/] {check['gate']}: {100 * check['value']:.1f}% failing > "
                f"{100 * check['limit']:.1f}% allowed ({check['episodes']} episodes)"
            )
    if outcome.comparison:
        c = outcome.comparison
        console.print(f"compare: {c['regressions']} regressions, {c['fixes']} fixes over {c['scenarios']} scenarios")
    verdict = "[green]PASS[/]" if outcome.passed else "[red]FAIL[/]"
    console.print(
        f"{verdict} {s['failing_episodes']}/{s['episodes']} episodes failing; report {out / REPORT_FILE}"
        + ("" if outcome.verdict is None else f"; verdict recorded in {Path(args.policy) / 'manifest.json'}")
    )
    return 0 if outcome.passed else 1
