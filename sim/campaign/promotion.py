"""Promotion: a campaign's verdict goes into the artifact's manifest. What deploys an artifact (the policy
node, `sim2real loop`) refuses one without a passing verdict for its exact ONNX bytes: edge.validation."""

from __future__ import annotations

from collections.abc import Mapping


def make_verdict(summary: Mapping, campaign_sha256: str, report_sha256: str, summary_sha256: str) -> dict:
    """The manifest's campaign_verdict: what passed (or failed), on which bytes, and the report that says so."""
    return {
        "passed": bool(summary["passed"]),
        "campaign": summary["campaign"],
        "campaign_sha256": campaign_sha256,
        "backend": summary["backend"],
        "policy_sha256": summary["policy_sha256"],
        "episodes": summary["episodes"],
        "failing_episodes": summary["failing_episodes"],
        "failed_checks": [c["gate"] for c in summary["checks"] if not c["passed"]],
        "report_sha256": report_sha256,
        "summary_sha256": summary_sha256,
        "validated_at": summary["finished_at"],
        # the baseline field logs are compared with (training.retrain.drift)
        "kpi_means": {k: v["mean"] for k, v in summary.get("kpis", {}).items()},
    }
