"""Promotion of a retrained artifact: the campaigns' gates pass and, campaign by campaign, it is not worse than
the deployed artifact run through the same scenarios: no scenario regresses (fails where the deployed artifact
passes), and the KPI means use up no more of their gate limits' margin (summed over the KPIs, each change as
a fraction of its limit; no single one beyond a larger bound) than the campaign allows: little on the identified
twin, more on the nominal twin, which the robot no longer is. Promoting writes
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
        """Why the new artifact is worse than the deployed one here: scenarios that regress; a KPI mean that moved
        toward its gate limit by more than `per_kpi` of the limit; or, summed over the KPIs, more of the limits'
        margin used up than the campaign's tolerance (KPIs gated at 0, e.g. falls, count in units): `tolerance` on
        the identified twin, the robot as its logs show it, and `nominal_tolerance` on the standard campaign's
        nominal twin, which a policy fitted to a robot that has drifted from it serves a little less well."""
        out = (
            [f"{self.regressions} scenario(s) of {self.name} fail that the deployed artifact passes"]
            if self.regressions
            else []
        )
        used = {}
        for k in rule.kpis:
            if k in self.new and k in self.deployed and abs(self.new[k] - self.deployed[k]) >= rule.min_abs:
                limit = self.limits.get(k, 0.0)
                used[k] = (self.new[k] - self.deployed[k]) / (limit if limit > 0 else 1.0)
        out += [
            f"{k} {self.new[k]:.3g} vs {self.deployed[k]:.3g} deployed on {self.name} ({100 * u:.0f}% of its gate)"
            for k, u in used.items()
            if u > rule.per_kpi
        ]
        if sum(used.values()) > (rule.nominal_tolerance if self.kind == "standard" else rule.tolerance):
            out.append(
                f"{self.name}: the KPIs use {100 * sum(used.values()):.0f}% more of their gates' margin "
                "than the deployed artifact's ("
                + ", ".join(f"{k} {self.new[k]:.3g} vs {self.deployed[k]:.3g}" for k in used)
                + ")"
            )
        return out

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "passed": self.passed,
            "failed_checks": self.failed_checks,
            "kpi_means": self.new,
            "deployed_kpi_means": self.deployed,
            "limits": self.limits,
            "regressions": self.regressions,
        }

    @classmethod
    def from_dict(cls, d: dict) -> CampaignCheck:
        return cls(
            d["kind"],
            d["name"],
            d["passed"],
            d["failed_checks"],
            d["kpi_means"],
            d["deployed_kpi_means"],
            d["limits"],
            d["regressions"],
        )


def campaign_check(kind: str, summary: dict) -> CampaignCheck:
    """From run_campaign's summary with compare_to=<deployed>: mean_delta is new - deployed per KPI."""
    new = {k: v["mean"] for k, v in summary["kpis"].items()}
    comparison = summary["comparison"]
    return CampaignCheck(
        kind,
        summary["campaign"],
        bool(summary["passed"]),
        [c["gate"] for c in summary["checks"] if not c["passed"]],
        new,
        {k: new[k] - d for k, d in comparison["mean_delta"].items() if k in new},
        dict(summary["gates"]["kpis"]),
        int(comparison["regressions"]),
    )


def decide(checks: list[CampaignCheck], rule: PromotionRule) -> tuple[bool, str]:
    """(promote?, why) in one line."""
    failing = [f"{c.name} failed {', '.join(c.failed_checks)}" for c in checks if not c.passed]
    if failing:
        return False, "gates failed: " + "; ".join(failing)
    worse = [w for c in checks for w in c.worse(rule)]
    if worse:
        return False, "worse than the deployed artifact: " + "; ".join(worse)
    better = []
    for c in checks:
        for k in rule.kpis:
            if k in c.new and k in c.deployed and c.deployed[k] - c.new[k] > rule.min_abs:
                better.append(f"{k} {c.new[k]:.3g} vs {c.deployed[k]:.3g} on {c.name}")
    return True, (
        "gates pass on "
        + " and ".join(c.name for c in checks)
        + "; not worse than the deployed artifact"
        + (" and better in " + "; ".join(better) if better else "")
    )


def write_verdict(artifact_dir: Path, summary: dict, cfg: CampaignConfig, campaign_dir: Path) -> dict:
    """The standard campaign's verdict into the new artifact's manifest (idempotent)."""
    verdict = make_verdict(
        summary, cfg.sim_sha256(), sha256_file(campaign_dir / REPORT_FILE), sha256_file(campaign_dir / SUMMARY_FILE)
    )
    record_verdict(artifact_dir, verdict)
    return verdict
