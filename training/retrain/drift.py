"""Drift: field logs scored with the campaign's KPIs (`ingest_logs`), against the deployed artifact's campaign
baseline, under a trigger policy from YAML."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path

import numpy as np

from edge.config import load_dataclass, setting
from edge.fileio import sha256_file
from edge.resources import config_path
from sim.kpis import KPI_UNITS, RobotLimits, episode_kpis
from training.errors import ConfigError
from training.retrain.ingest import FieldLog, read_field_log

DEFAULT_TRIGGER = config_path("retrain", "trigger.yaml")
LABELS = {"tracking_error_lin": "tracking error", "tracking_error_ang": "yaw-rate error", "falls": "falls"}


@dataclass(frozen=True)
class KpiRule:
    ratio: float = setting(2.0, "drift when the field mean exceeds ratio x the campaign mean", ge=0)
    min_abs: float = setting(0.0, "... and exceeds it by at least this much (KPI units)", ge=0)


@dataclass(frozen=True)
class TriggerPolicy:
    kpis: dict[str, KpiRule] = setting(
        {"tracking_error_lin": KpiRule(2.0, 0.05)}, "the KPIs watched for drift", choices=KPI_UNITS, noun="KPI"
    )
    min_episodes: int = setting(3, "fewer scored episodes than this: no decision", ge=1)

    @classmethod
    def from_yaml(cls, path: str | Path = DEFAULT_TRIGGER) -> TriggerPolicy:
        return load_dataclass(cls, path, error=ConfigError, what="trigger policy")


@dataclass
class DriftDecision:
    retrain: bool
    reasons: list[str]  # one line per drifted KPI, or why no decision was possible
    field: dict[str, float]
    baseline: dict[str, float]
    episodes: int
    drifted: list[str] = dataclass_field(default_factory=list)  # the KPIs over their thresholds

    def summary(self) -> str:
        """One line: the reasons, or how the field compares with the campaign when nothing drifted."""
        if self.reasons:
            return "; ".join(self.reasons)
        shared = [k for k in LABELS if k in self.field and k in self.baseline]
        return (
            "field KPIs within the trigger's limits of the campaign baseline ("
            + ", ".join(f"{LABELS[k]} {self.field[k]:.3g} vs {self.baseline[k]:.3g}" for k in shared)
            + ")"
        )


def field_kpis(logs: list[FieldLog], limits: RobotLimits, settle_s: float = 0.5) -> tuple[dict[str, float], int]:
    """Mean of each KPI over every episode of every log (the campaign's definitions), and the episode count."""
    per_episode: dict[str, list[float]] = {}
    for log in logs:
        for span in log.episodes():
            for name, value in episode_kpis(log.trajectory(span), limits, settle_s).items():
                per_episode.setdefault(name, []).append(float(value))
    count = len(next(iter(per_episode.values()), []))
    return {k: float(np.mean(v)) for k, v in per_episode.items()}, count


def ingest_logs(files: list[Path], spec) -> dict:
    """The field logs read: per file its hash, rows, episodes and damaged spans; the KPI means over all episodes
    (the campaign's KPI code) and the episode count. `spec`: the robot (sim.robot.load_robot)."""
    from sim.campaign.rollout import robot_limits

    logs = [read_field_log(f, list(spec.joints), len(spec.feet)) for f in files]
    kpis, episodes = field_kpis(logs, robot_limits(spec))
    entries = [
        {
            "path": str(f),
            "sha256": sha256_file(f),
            "size": f.stat().st_size,
            "rows": len(log.t),
            "episodes": len(log.episodes()),
            "damage": log.damage,
        }
        for f, log in zip(files, logs, strict=True)
    ]
    return {"logs": entries, "field_kpis": kpis, "episodes": episodes}


def decide(field: dict[str, float], episodes: int, baseline: dict[str, float], policy: TriggerPolicy) -> DriftDecision:
    if episodes < policy.min_episodes:
        return DriftDecision(
            False,
            [f"only {episodes} scored episode(s) in the logs; need {policy.min_episodes}"],
            field,
            baseline,
            episodes,
        )
    reasons, drifted = [], []
    for name, rule in policy.kpis.items():
        if name not in field or name not in baseline:
            continue
        f, b = field[name], baseline[name]
        if f > rule.ratio * b and f - b >= rule.min_abs:
            unit = KPI_UNITS[name]
            reasons.append(
                f"{LABELS.get(name, name)} {f:.3g} {unit} in field vs {b:.3g} in campaign, threshold {rule.ratio:g}x"
            )
            drifted.append(name)
    return DriftDecision(bool(reasons), reasons, field, baseline, episodes, drifted)
