"""Drift: field logs scored with the campaign's KPIs (`ingest_logs`), against the deployed artifact's campaign
baseline, under a trigger policy from YAML.

A KPI is scored only from what a log carries (KPI_NEEDS): tracking errors need the commands beside the measured
velocities, falls the base orientation, joint-limit violations the joint states, the gait KPIs the foot forces.
One the logs cannot support is "not measured" with the reason, never a number, and the trigger decides on the
measured ones alone. The yaw rate is the IMU's less the gyro bias that the logs determine against the odometry
(training.retrain.calibration): what the robot turned at, not what its gyro read.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path

import numpy as np

from edge.config import load_dataclass, setting
from edge.fileio import sha256_file
from edge.resources import config_path
from sim.kpis import DESCRIPTIVE_KPIS, KPI_UNITS, RobotLimits, episode_kpis
from training.errors import ConfigError, TrainingError
from training.retrain.calibration import GyroBias, gyro_bias
from training.retrain.duty import duty_table
from training.retrain.ingest import ROLES, FieldLog, read_field_log

DEFAULT_TRIGGER = config_path("retrain", "trigger.yaml")
LABELS = {"tracking_error_lin": "tracking error", "tracking_error_ang": "yaw-rate error", "falls": "falls"}
# KPI -> what a field log must carry for it (FieldLog.missing's keys)
KPI_NEEDS = {
    "tracking_error_lin": ("commands", "base_velocity"),
    "tracking_error_ang": ("commands", "yaw_rate"),
    "falls": ("orientation",),
    "joint_limit_violations": ("joint_states",),
    **{k: ("foot_forces",) for k in DESCRIPTIVE_KPIS},
}


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
    topics: dict[str, str] = setting(
        {},
        "the field logs' topic per signal, e.g. odom: /wheel_controller/odom (unnamed: the topic of the signal's "
        "name, namespaced or not)",
        choices=ROLES,
        noun="signal",
    )

    @classmethod
    def from_yaml(cls, path: str | Path = DEFAULT_TRIGGER) -> TriggerPolicy:
        return load_dataclass(cls, path, error=ConfigError, what="trigger policy")


@dataclass
class FieldKpis:
    """KPI means over every episode of the logs; a KPI no log could support is in not_measured, with why."""

    means: dict[str, float]
    episodes: int
    not_measured: dict[str, str] = dataclass_field(default_factory=dict)

    @classmethod
    def from_ingest(cls, ingest: dict) -> FieldKpis:
        """From `ingest_logs`' result (a retrain.json record of one from before not_measured: every KPI measured)."""
        return cls(ingest["field_kpis"], ingest["episodes"], ingest.get("not_measured", {}))

    def show(self, name: str) -> str:
        """A KPI's mean as a report prints it, or "not measured: <why>"."""
        if name in self.means:
            return f"{self.means[name]:.3g} {KPI_UNITS[name]}"
        return f"not measured: {self.not_measured.get(name, 'no episode scored it')}"


@dataclass
class DriftDecision:
    retrain: bool
    reasons: list[str]  # one line per drifted KPI, or why no decision was possible
    field: dict[str, float]
    baseline: dict[str, float]
    episodes: int
    drifted: list[str] = dataclass_field(default_factory=list)  # the KPIs over their thresholds
    not_measured: dict[str, str] = dataclass_field(default_factory=dict)  # watched KPIs the logs cannot support

    def summary(self) -> str:
        """One line: the reasons, or how the field compares with the campaign when nothing drifted; then the
        watched KPIs that were not measured, and why."""
        unmeasured = [f"{LABELS.get(k, k)} not measured: {why}" for k, why in self.not_measured.items()]
        if self.reasons:
            return "; ".join(self.reasons + unmeasured)
        shared = [k for k in LABELS if k in self.field and k in self.baseline]
        return "; ".join(
            [
                "field KPIs within the trigger's limits of the campaign baseline ("
                + ", ".join(f"{LABELS[k]} {self.field[k]:.3g} vs {self.baseline[k]:.3g}" for k in shared)
                + ")",
                *unmeasured,
            ]
        )


def not_measured(log: FieldLog) -> dict[str, str]:
    """The KPIs one log cannot support -> the reason (the first thing they need that it lacks)."""
    out = {}
    for name, needs in KPI_NEEDS.items():
        lacking = [log.missing[n] for n in needs if n in log.missing]
        if lacking:
            out[name] = lacking[0]
    return out


def field_kpis(logs: list[FieldLog], limits: RobotLimits, settle_s: float = 0.5) -> FieldKpis:
    """Mean of each KPI over every episode of the logs that support it (the campaign's definitions), the episode
    count, and the KPIs no log supports with why."""
    per_episode: dict[str, list[float]] = {}
    why: dict[str, str] = {}
    episodes = 0
    for log in logs:
        unsupported = not_measured(log)
        for span in log.episodes():
            episodes += 1
            for name, value in episode_kpis(log.trajectory(span), limits, settle_s).items():
                if name not in unsupported:
                    per_episode.setdefault(name, []).append(float(value))
        for name, reason in unsupported.items():
            why.setdefault(name, reason)
    means = {k: float(np.mean(v)) for k, v in per_episode.items()}
    return FieldKpis(means, episodes, {k: r for k, r in why.items() if k not in means})


def ingest_logs(files: list[Path], spec, topics: dict[str, str] | None = None) -> dict:
    """The field logs read: per file its hash, rows, episodes, damaged spans and the topic each signal came from;
    the IMU's gyro bias against the odometry (training.retrain.calibration); the KPI means over all episodes, on
    the IMU less that bias (the campaign's KPI code), the episode count and the KPIs not measured, with why; the
    commands the robot was given (training.retrain.duty).
    `spec`: the robot (sim.robot.load_robot); `topics`: signal -> topic (read_field_log). A log none of whose
    topics gives the robot's state fails with one line."""
    from sim.campaign.rollout import robot_limits

    logs, bias = read_calibrated_logs(files, spec, topics)
    kpis = field_kpis(logs, robot_limits(spec))
    entries = [
        {
            "path": str(f),
            "sha256": sha256_file(f),
            "size": f.stat().st_size,
            "rows": len(log.t),
            "episodes": len(log.episodes()),
            "damage": log.damage,
            "read_as": log.read_as,
        }
        for f, log in zip(files, logs, strict=True)
    ]
    return {
        "logs": entries,
        "field_kpis": kpis.means,
        "episodes": kpis.episodes,
        "not_measured": kpis.not_measured,
        "gyro_bias": bias.to_dict(),
        "duty": duty_table(logs),
    }


def read_calibrated_logs(
    files: list[Path], spec, topics: dict[str, str] | None = None
) -> tuple[list[FieldLog], GyroBias]:
    """read_logs, each log's IMU less the gyro bias that the logs determine against the odometry; and that bias."""
    logs = read_logs(files, spec, topics)
    bias = gyro_bias(logs)
    return [bias.remove(log) for log in logs], bias


def read_logs(files: list[Path], spec, topics: dict[str, str] | None = None) -> list[FieldLog]:
    """Each file read for the robot (read_field_log); a log none of whose topics gives its state fails with one
    line."""
    logs = [read_field_log(f, list(spec.joints), len(spec.feet), topics) for f in files]
    for log in logs:
        if (error := log.topics_error()) is not None:
            raise TrainingError(error)
    return logs


def decide(field: FieldKpis, baseline: dict[str, float], policy: TriggerPolicy) -> DriftDecision:
    """Drift of the measured KPIs the policy watches; no decision when none of them is measured or the logs
    hold too few episodes."""
    unmeasured = {k: field.not_measured[k] for k in policy.kpis if k in field.not_measured}
    if policy.kpis and len(unmeasured) == len(policy.kpis):
        return DriftDecision(
            False,
            ["no KPI the trigger watches is measured in the logs, no decision"],
            field.means,
            baseline,
            field.episodes,
            not_measured=unmeasured,
        )
    if field.episodes < policy.min_episodes:
        return DriftDecision(
            False,
            [f"only {field.episodes} scored episode(s) in the logs; need {policy.min_episodes}"],
            field.means,
            baseline,
            field.episodes,
            not_measured=unmeasured,
        )
    reasons, drifted = [], []
    for name, rule in policy.kpis.items():
        if name not in field.means or name not in baseline:
            continue
        f, b = field.means[name], baseline[name]
        if f > rule.ratio * b and f - b >= rule.min_abs:
            unit = KPI_UNITS[name]
            reasons.append(
                f"{LABELS.get(name, name)} {f:.3g} {unit} in field vs {b:.3g} in campaign, threshold {rule.ratio:g}x"
            )
            drifted.append(name)
    return DriftDecision(bool(reasons), reasons, field.means, baseline, field.episodes, drifted, unmeasured)
