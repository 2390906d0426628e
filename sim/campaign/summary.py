"""The campaign's JSON summary: verdict, checks, KPI statistics overall and per axis value, worst cases."""

from __future__ import annotations

import numpy as np

from sim.campaign.config import CampaignConfig
from sim.campaign.gates import Check, failed_kpis, severity
from sim.kpis import KPI_NAMES, KPI_UNITS

WORST_CASES = 5


def kpi_names(rows: list[dict]) -> list[str]:
    """The KPIs present in the rows, in KPI_NAMES order."""
    present = set().union(*(r["kpis"] for r in rows)) if rows else set()
    return [k for k in KPI_NAMES if k in present]


def _stats(values: list[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": float(a.mean()), "p95": float(np.percentile(a, 95)), "max": float(a.max())}


def worst(rows: list[dict], cfg: CampaignConfig, count: int = WORST_CASES) -> list[dict]:
    """The episodes furthest from passing; ties (e.g. every episode passes) go to the worst tracking error."""

    def key(r: dict) -> tuple:
        return severity(r, cfg.gates.kpis), r["kpis"].get("tracking_error_lin", 0.0)

    return sorted(rows, key=key, reverse=True)[:count]


def summarize(rows: list[dict], cfg: CampaignConfig, checks: list[Check], meta: dict) -> dict:
    """`meta`: what ran (policy sha256, robot, backend, out dir, timings)."""
    limits = cfg.gates.kpis
    names = kpi_names(rows)
    per_axis = {}
    for axis, values in cfg.axes.items():
        per_axis[axis] = []
        for v in values:
            sub = [r for r in rows if r["axes"][axis] == v]
            per_axis[axis].append(
                {
                    "value": v,
                    "episodes": len(sub),
                    "failure_rate": sum(bool(failed_kpis(r, limits)) for r in sub) / max(len(sub), 1),
                    "kpis": {k: float(np.mean([r["kpis"][k] for r in sub])) for k in names} if sub else {},
                }
            )
    return {
        "campaign": cfg.name,
        "passed": all(c.passed for c in checks),
        **meta,
        "episodes": len(rows),
        "failing_episodes": sum(bool(failed_kpis(r, limits)) for r in rows),
        "checks": [c.to_dict() for c in checks],
        "gates": {"kpis": limits, "failure_rate": cfg.gates.failure_rate, "per_axis": cfg.gates.per_axis},
        "kpis": {k: {**_stats([r["kpis"][k] for r in rows]), "unit": KPI_UNITS[k]} for k in names} if rows else {},
        "axes": per_axis,
        "worst_cases": [
            {"id": r["id"], "axes": r["axes"], "kpis": r["kpis"], "failed": failed_kpis(r, limits)}
            for r in worst(rows, cfg)
        ],
    }
