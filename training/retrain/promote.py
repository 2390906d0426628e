"""Promotion of a retrained artifact: the campaigns' gates pass and, campaign by campaign, it is not worse than
the deployed artifact run through the same scenarios: no scenario regresses (fails where the deployed artifact
passes) and no KPI mean moves toward its gate limit by more than a tolerance of that limit. Promoting writes
the standard campaign's verdict into the artifact's manifest (sim.campaign.promotion.make_verdict, what
deployment checks) and marks it deployed in the lineage registry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edge.fileio import sha256_file
from edge.manifest import record_verdict
from sim.campaign.config import CampaignConfig
from sim.campaign.promotion import make_verdict
from sim.campaign.runner import REPORT_FILE, SUMMARY_FILE
from training.retrain.config import PromotionRule


@dataclass
class CampaignCheck:
    """One campaign's outcome for the new artifact, next to the deployed artifact on the same scenarios."""

    kind: str  # "standard" or "identified-twin"
    name: str
    passed: bool
    failed_checks: list[str]
    new: dict[str, float]  # KPI means
    deployed: dict[str, float]
    limits: dict[str, float]  # the campaign's gate limit per KPI
    regressions: int  # scenarios the new artifact fails and the deployed one passes (sim.campaign.compare)

    def worse(self, rule: PromotionRule) -> list[str]:
        """Why the new artifact is worse than the deployed one here: regressions, and KPI means that moved
        toward their gate limit by more than `tolerance` of it (KPIs without a limit above 0: of 1 unit)."""
        out = [f"{self.regressions} scenario(s) of {self.name} fail that the deployed artifact passes"] \
            if self.regressions else []
        for k in rule.kpis:
            if k not in self.new or k not in self.deployed:
                continue
            new, old, limit = self.new[k], self.deployed[k], self.limits.get(k, 0.0)
            if new - old > max(rule.tolerance * (limit if limit > 0 else 1.0), rule.min_abs):
                out.append(f"{k} {new:.3g} vs {old:.3g} deployed on {self.name}"
                           + (f" (gate {limit:g})" if limit > 0 else ""))
        return out

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "passed": self.passed, "failed_checks": self.failed_checks,
                "kpi_means": self.new, "deployed_kpi_means": self.deployed, "limits": self.limits,
                "regressions": self.regressions}

    @classmethod
    def from_dict(cls, d: dict) -> CampaignCheck:
        return cls(d["kind"], d["name"], d["passed"], d["failed_checks"], d["kpi_means"], d["deployed_kpi_means"],
                   d["limits"], d["regressions"])


def campaign_check(kind: str, summary: dict) -> CampaignCheck:
    """From run_campaign's summary with compare_to=<deployed>: mean_delta is new - deployed per KPI."""
    new = {k: v["mean"] for k, v in summary["kpis"].items()}
    comparison = summary["comparison"]
    return CampaignCheck(kind, summary["campaign"], bool(summary["passed"]),
                         [c["gate"] for c in summary["checks"] if not c["passed"]], new,
                         {k: new[k] - d for k, d in comparison["mean_delta"].items() if k in new},
                         dict(summary["gates"]["kpis"]), int(comparison["regressions"]))


def decide(checks: list[CampaignCheck], rule: PromotionRule) -> tuple[bool, str]:
    """(promote?, why) in one line."""
    failing = [f"{c.name} failed {', '.join(c.failed_checks)}" for c in checks if not c.passed]
    if failing:
        return False, "gates failed: " + "; ".join(failing)
    worse = [w for c in checks for w in c.worse(rule)]
    if worse:
        return False, (f"worse than the deployed artifact (tolerance {100 * rule.tolerance:g}% of a gate limit): "
                       + "; ".join(worse))
    better = []
    for c in checks:
        for k in rule.kpis:
            if k in c.new and k in c.deployed and c.deployed[k] - c.new[k] > rule.min_abs:
                better.append(f"{k} {c.new[k]:.3g} vs {c.deployed[k]:.3g} on {c.name}")
    return True, ("gates pass on " + " and ".join(c.name for c in checks) + "; not worse than the deployed artifact"
                  + (" and better in " + "; ".join(better) if better else ""))


def write_verdict(artifact_dir: Path, summary: dict, cfg: CampaignConfig, campaign_dir: Path) -> dict:
    """The standard campaign's verdict into the new artifact's manifest (idempotent)."""
    verdict = make_verdict(summary, cfg.sim_sha256(), sha256_file(campaign_dir / REPORT_FILE),
                           sha256_file(campaign_dir / SUMMARY_FILE))
    record_verdict(artifact_dir, verdict)
    return verdict
