"""Acceptance gates: which episodes fail (a KPI over its limit) and whether the campaign passes (failing
fractions within the allowed rates, overall and at every value of every axis)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.campaign.config import CampaignConfig


@dataclass(frozen=True)
class Check:
    gate: str  # "failure_rate", "failure_rate[friction=0.4]"
    value: float
    limit: float
    episodes: int

    @property
    def passed(self) -> bool:
        return self.value <= self.limit

    def to_dict(self) -> dict:
        return {
            "gate": self.gate,
            "value": self.value,
            "limit": self.limit,
            "episodes": self.episodes,
            "passed": self.passed,
        }


def failed_kpis(row: dict, limits: dict) -> list[str]:
    """The KPIs of one episode row that exceed their limits (a KPI the episode lacks does not fail)."""
    return [k for k, limit in limits.items() if k in row["kpis"] and row["kpis"][k] > limit]


def severity(row: dict, limits: dict) -> float:
    """How far the episode is from passing: the largest KPI / limit ratio (limits of 0 count excess as ratio)."""
    ratios = [
        row["kpis"][k] / limit if limit > 0 else 1.0 + row["kpis"][k] for k, limit in limits.items() if k in row["kpis"]
    ]
    return max(ratios, default=0.0)


def evaluate(rows: list[dict], cfg: CampaignConfig) -> list[Check]:
    """The campaign's checks over all episode rows: overall failure rate, then each axis value's."""
    limits = cfg.gates.kpis
    failed = {r["id"]: bool(failed_kpis(r, limits)) for r in rows}
    checks = [Check("failure_rate", _rate(rows, failed), cfg.gates.failure_rate, len(rows))]
    for axis, values in cfg.axes.items():
        if len(values) < 2:  # one value: the overall rate already says it
            continue
        for v in values:
            sub = [r for r in rows if r["axes"][axis] == v]
            checks.append(
                Check(
                    f"failure_rate[{axis}={v:g}]" if isinstance(v, float) else f"failure_rate[{axis}={v}]",
                    _rate(sub, failed),
                    cfg.gates.axis_rate(axis),
                    len(sub),
                )
            )
    return checks


def _rate(rows: list[dict], failed: dict) -> float:
    return sum(failed[r["id"]] for r in rows) / len(rows) if rows else 0.0
