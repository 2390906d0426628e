"""System identification and retraining on a field robot, measured against the untuned twin and plain fine-tuning.

The field robot is the loop's (config/retrain/field_robot_hard.yaml) unless --field-twin names another, such as
config/retrain/field_twin.yaml (the easy one: twin parameters only).

The deployed rover artifact runs on the field robot over real ROS 2 (`sim2real sil --field-twin --record`);
`sim2real.retrain.retrain` reads the MCAP logs, identifies the hidden parameters, fine-tunes, validates
and promotes. Measured:
  - the relative error of each identified parameter against the hidden value;
  - the trajectory error (replaying the logged joint commands) of the identified twin against the untuned twin
    (the nominal parameters the policy was trained with: the anchor);
  - the share of the field-vs-campaign gap of the drifted KPI that the retrained artifact closes on the field
    twin (again over ROS 2), beside the share closed by the same fine-tuning without system identification
    (randomisation ranges of the robot YAML: the second anchor).

    python -m benchmarks.sysid_recovery [--quick] [--artifact DIR] [--field-twin YAML]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def deployed_artifact(root: Path, iterations: int) -> Path:
    """A rover policy trained on the nominal twin to the tracking threshold, validated by the quick campaign."""
    from sim.campaign.config import load_campaign
    from sim.campaign.runner import CampaignRequest, run_campaign
    from training.ppo.config import PPOConfig
    from training.ppo.launch import train

    run = train(
        PPOConfig.for_robot(
            "rover", randomization=False, stop_at_threshold=True, iterations=iterations, run_root=str(root)
        ),
        show_progress=False,
    )
    run_campaign(CampaignRequest(run / "policy", load_campaign("quick"), root / "validation"))
    return run / "policy"


def field_run(artifact: Path, field_twin: Path, seconds: float, logs: Path, validated: bool = True) -> dict:
    """Field KPIs of `artifact` on the field robot, from the MCAP logs `sim2real sil` recorded (validated=False:
    a measurement of an artifact no campaign has passed, which sil otherwise refuses)."""
    from edge.manifest import load_manifest
    from edge.signing import TrustPolicy
    from sim.campaign.rollout import robot_limits
    from sim.robot import load_robot
    from sim2real.sil import SilRequest, run_sil
    from training.retrain.drift import field_kpis
    from training.retrain.ingest import log_files, read_field_log

    run_sil(
        SilRequest(
            str(artifact),
            seconds,
            field_twin=str(field_twin),
            record=str(logs),
            trust=TrustPolicy(allow_unsigned=True, allow_unvalidated=not validated),
        )
    )
    spec = load_robot(load_manifest(artifact).robot["name"])
    kpis = field_kpis([read_field_log(f, list(spec.joints)) for f in log_files(logs)], robot_limits(spec))
    return {**kpis.means, "episodes": kpis.episodes}


def untuned_finetune(artifact: Path, budget: str, root: Path) -> Path:
    """The same fine-tuning from the same checkpoint on the twin as it was trained (no system id)."""
    from edge.manifest import load_manifest
    from training.ppo.launch import train
    from training.retrain.config import RetrainConfig
    from training.retrain.finetune import finetune_config, training_run_dir

    plan = RetrainConfig.from_yaml().budget(budget)
    cfg = finetune_config(training_run_dir(artifact, load_manifest(artifact)), {}, root, plan.finetune)
    return train(cfg, show_progress=False) / "policy"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="30 s field runs, retraining budget 'quick'")
    p.add_argument("--artifact", help="deployed artifact to use (default: train and validate one first)")
    p.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    p.add_argument("--field-twin", type=Path, help="field robot YAML (default: the loop's for the rover)")
    args = p.parse_args()

    from edge.manifest import load_manifest
    from sim.field_robot import load_field_robot
    from sim2real.loop.config import field_twin_for
    from sim2real.retrain import RetrainRequest, retrain

    seconds, budget = (30.0, "quick") if args.quick else (60.0, "full")
    field_twin = args.field_twin or field_twin_for("rover")
    hidden = load_field_robot(field_twin).hidden
    work = Path(args.keep or tempfile.mkdtemp(prefix="sysid-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    artifact = Path(args.artifact) if args.artifact else deployed_artifact(work / "deployed", 60)
    baseline = load_manifest(artifact).campaign_verdict["kpi_means"]
    before = field_run(artifact, field_twin, seconds, work / "logs_before")
    result = retrain(
        RetrainRequest(
            work / "logs_before", artifact, work / "retrain", budget=budget, registry=work / "reg.sqlite", force=True
        )
    )
    kpi = (result.drifted_kpis or ["tracking_error_ang"])[0]
    after = field_run(result.new_artifact, field_twin, seconds, work / "logs_after")
    plain = field_run(
        untuned_finetune(artifact, budget, work / "untuned"), field_twin, seconds, work / "logs_untuned", False
    )

    def closed(k: dict) -> float:
        return (before[kpi] - k[kpi]) / (before[kpi] - baseline[kpi])

    rel = {k: abs(result.identified[k] - v) / abs(v) for k, v in hidden.items() if k in result.identified}
    print(f"field robot {field_twin.name}: {hidden}; retraining budget {budget}; field runs {seconds:g} s over ROS 2")
    print(f"{'parameter':<14}{'hidden':>10}{'identified':>12}{'rel. error':>12}  95% interval")
    for k, v in hidden.items():
        e = result.estimates.get(k)
        span = "not identified" if e is None else f"{e['low']:.4g} to {e['high']:.4g}"
        span += f", not determined: {e['why']}" if e and not e["determined"] else ""
        off = f"{100 * rel[k]:>11.1f}%" if k in rel else f"{'':>12}"
        print(f"{k:<14}{v:>10.4g}{result.identified.get(k, float('nan')):>12.4g}{off}  {span}")
    reduction = 1 - result.sysid_error_after / result.sysid_error_before
    print(
        f"trajectory error (mean sq. base velocity error, logged commands replayed): untuned twin "
        f"{result.sysid_error_before:.4g}, identified twin {result.sysid_error_after:.4g} "
        f"({100 * reduction:.1f}% lower)"
    )
    print(
        f"{kpi}: campaign {baseline[kpi]:.4g}; field: deployed {before[kpi]:.4g}, retrained {after[kpi]:.4g} "
        f"({100 * closed(after):.0f}% of the gap closed), fine-tuned without system id {plain[kpi]:.4g} "
        f"({100 * closed(plain):.0f}%)"
    )
    print(f"trigger: {result.reason}; promoted: {result.promoted} ({result.promotion_reason})")
    print(f"stages: {result.timings}; total {time.perf_counter() - t0:.0f} s; load {os.getloadavg()[0]:.2f}")
    print(
        json.dumps(
            {
                "bench": "sysid_recovery",
                "quick": args.quick,
                "field_robot": field_twin.name,
                "max_param_rel_error": round(max(rel.values()), 4) if rel else None,
                "param_rel_error": {k: round(v, 4) for k, v in rel.items()},
                "identified": result.identified,
                "inside_interval": {
                    k: e["low"] <= hidden[k] <= e["high"] for k, e in result.estimates.items() if k in hidden
                },
                "undetermined": [k for k, e in result.estimates.items() if not e["determined"]],
                "traj_error_untuned": result.sysid_error_before,
                "traj_error_identified": result.sysid_error_after,
                "traj_error_reduction": round(reduction, 4),
                "field_kpi": kpi,
                "campaign_baseline": baseline[kpi],
                "field_before": before[kpi],
                "field_after": after[kpi],
                "gap_closed": round(closed(after), 3),
                "gap_closed_without_sysid": round(closed(plain), 3),
                "promoted": result.promoted,
                "baseline": "untuned twin (trajectory error); fine-tuning without system id (gap closed)",
                "ratio": round(closed(after) / closed(plain), 2) if closed(plain) > 0 else None,
            }
        )
    )


if __name__ == "__main__":
    main()
