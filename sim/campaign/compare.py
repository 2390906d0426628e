"""Per-scenario deltas between two artifacts run through the same campaign (a regression check)."""

from __future__ import annotations

import numpy as np

from sim.campaign.config import CampaignConfig
from sim.campaign.gates import failed_kpis, severity
from sim.campaign.summary import kpi_names

TOP = 10


def compare(rows: list[dict], other_rows: list[dict], cfg: CampaignConfig, other: dict) -> dict:
    """Deltas this - other for every KPI of every scenario both ran. `other` describes the other artifact
    (path, policy sha256). Regressions: scenarios this artifact fails and the other passes; fixes: the reverse."""
    limits = cfg.gates.kpis
    theirs = {r["id"]: r for r in other_rows}
    names = kpi_names(rows)
    scenarios = []
    for r in rows:
        o = theirs.get(r["id"])
        if o is None:
            continue
        scenarios.append(
            {
                "id": r["id"],
                "axes": r["axes"],
                "deltas": {k: r["kpis"][k] - o["kpis"][k] for k in names if k in o["kpis"]},
                "passed": not failed_kpis(r, limits),
                "other_passed": not failed_kpis(o, limits),
                "severity_delta": severity(r, limits) - severity(o, limits),
            }
        )
    regressions = [s for s in scenarios if s["other_passed"] and not s["passed"]]
    fixes = [s for s in scenarios if s["passed"] and not s["other_passed"]]
    return {
        "other": other,
        "scenarios": len(scenarios),
        "mean_delta": {k: float(np.mean([s["deltas"][k] for s in scenarios])) for k in names} if scenarios else {},
        "regressions": len(regressions),
        "fixes": len(fixes),
        "worst": sorted(
            scenarios, key=lambda s: (s["severity_delta"], s["deltas"].get("tracking_error_lin", 0.0)), reverse=True
        )[:TOP],
        "per_scenario": scenarios,
    }
