"""Sim-to-sim: one trained policy, one campaign, two physics engines. The campaign runs on the MuJoCo backend (the
twin the policy was trained in: the anchor) and on Newton (CPU here, CUDA where present); the figure is each KPI's
gap, Newton's mean against MuJoCo's, and the share of episodes each engine fails. A loss is a gap that makes
Newton worse (a larger error); a smaller error in Newton is a gap, not a loss.

A policy that only works in the engine it was trained in has learnt that engine. The target (issue "Legged
locomotion"): a tracking-error loss of at most 10% on flat ground.

    python -m benchmarks.sim_to_sim --policy runs/loop-<ts>/policy [--campaign quick] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

TRACKING = ("tracking_error_lin", "tracking_error_ang")


def kpi_means(summary: dict) -> dict[str, float]:
    return {k: float(v["mean"]) for k, v in summary["kpis"].items()}


def gaps(anchor: dict[str, float], other: dict[str, float]) -> dict[str, float]:
    """(other - anchor) / |anchor| per KPI both have; an anchor of 0 gives the plain difference."""
    return {k: (other[k] - a) / abs(a) if a else other[k] - a for k, a in anchor.items() if k in other}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="policy artifact directory (trained in the MuJoCo twin)")
    parser.add_argument("--campaign", default="quick", help="campaign name or YAML (default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="the first value of every axis but the commands")
    args = parser.parse_args()
    load = os.getloadavg()

    from edge.signing import TrustPolicy
    from sim.campaign.config import load_campaign
    from sim.campaign.runner import CampaignRequest, run_campaign

    cfg = load_campaign(args.campaign)
    if args.quick:
        cfg = dataclasses.replace(cfg, axes={k: v if k == "commands" else v[:1] for k, v in cfg.axes.items()})
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("mujoco", "newton"):
            t0 = time.perf_counter()
            outcome = run_campaign(
                CampaignRequest(
                    args.policy,
                    dataclasses.replace(cfg, backend=backend),
                    Path(tmp) / backend,
                    promote_verdict=False,
                    # a measurement, not a promotion: what was signed is not in question here
                    trust=TrustPolicy(allow_unsigned=True),
                )
            )
            s = outcome.summary
            results[backend] = {
                "kpis": kpi_means(s),
                "failing": s["failing_episodes"] / max(s["episodes"], 1),
                "episodes": s["episodes"],
                "seconds": time.perf_counter() - t0,
            }
    mj, nw = results["mujoco"], results["newton"]
    gap = gaps(mj["kpis"], nw["kpis"])
    print(f"{'kpi':>22} {'mujoco':>10} {'newton':>10} {'gap':>8}")
    for k, g in gap.items():
        print(f"{k:>22} {mj['kpis'][k]:>10.4f} {nw['kpis'][k]:>10.4f} {g:>+8.1%}")
    print(
        f"failing episodes: mujoco {mj['failing']:.0%}, newton {nw['failing']:.0%} of {mj['episodes']}; "
        f"campaign time {mj['seconds']:.0f} s / {nw['seconds']:.0f} s"
    )
    tracking = max(max(gap[k], 0.0) for k in TRACKING if k in gap)
    print(f"target: tracking-error loss <= 10% on flat ground; here {tracking:.1%}")
    print(f"load average (1 min): {load[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        json.dumps(
            {
                "bench": "sim_to_sim",
                "policy": str(args.policy),
                "campaign": cfg.name,
                "episodes": mj["episodes"],
                "kpi_gap": {k: round(v, 4) for k, v in gap.items()},
                "tracking_loss_max": round(tracking, 4),
                "failing_mujoco": round(mj["failing"], 4),
                "failing_newton": round(nw["failing"], 4),
                "baseline": "MuJoCo backend (the training twin), same campaign",
                "load_avg_1m": round(load[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
