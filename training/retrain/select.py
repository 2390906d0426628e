"""Which of the fine-tuning's checkpoints becomes the candidate. Each one runs the identified-twin campaign, the
robot as its logs show it; among those that pass its gates, the one that leaves the least of the drifted KPIs'
field error wins. PPO's last iterate is not its best: from checkpoint to checkpoint of one quadruped fine-tuning the
field closed 30%, 55% and 48% of its yaw-rate gap, and the identified twin ordered them as the field did
(docs/results/retraining.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class CheckpointScore:
    """One checkpoint on the identified twin."""

    iteration: int
    passed: bool  # the identified-twin campaign's gates
    kpi_means: dict[str, float]
    left: float  # the share of the drifted KPIs' field error left on the identified twin (drift_left)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> CheckpointScore:
        return cls(int(d["iteration"]), bool(d["passed"]), dict(d["kpi_means"]), float(d["left"]))


def drift_left(kpi_means: Mapping[str, float], field: Mapping[str, float], drifted: Sequence[str]) -> float:
    """The mean over the drifted KPIs of their identified-twin mean over their field mean. Every drifted KPI is one
    whose field mean exceeded the campaign's (training.retrain.drift), so each field mean is above zero and lower
    is better for each."""
    if not drifted:
        raise ValueError("no drifted KPI to score a checkpoint on")
    return sum(kpi_means[k] / field[k] for k in drifted) / len(drifted)


def best(scores: Sequence[CheckpointScore]) -> CheckpointScore:
    """The checkpoint that leaves the least field error among those that pass the campaign's gates (among all when
    none does: promotion then refuses it); on a tie the later one, which trained longer."""
    if not scores:
        raise ValueError("no checkpoint scored")
    passing = [s for s in scores if s.passed] or list(scores)
    return min(passing, key=lambda s: (s.left, -s.iteration))
