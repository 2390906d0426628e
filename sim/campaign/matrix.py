"""The scenario matrix: every combination of the campaign's axis values, times its seeds, cut into batches that
one BatchedTwin runs together. Batching depends only on the campaign, never on what already ran, so a resumed
run rebuilds the same batches and re-runs a batch with the same random streams."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from typing import Any

from sim.campaign.config import AXES, TERRAIN_AXIS, TWIN_AXES, CampaignConfig


@dataclass(frozen=True)
class Scenario:
    id: str  # "friction=0.5|payload_kg=2|commands=turn|seed=0": stable across runs, the resume key
    seed: int
    values: dict  # axis -> value (every axis of the campaign)

    def value(self, axis: str) -> Any:
        """This scenario's value on `axis` (a number, or a command sequence's or terrain's name), or the axis's nominal
        value when the campaign does not vary it (None for the commands and terrain axes)."""
        return self.values.get(axis, AXES.get(axis))


@dataclass(frozen=True)
class BatchJob:
    key: str  # "b0003": the batch's name in results and trace files
    twin_seed: int
    obs_noise: float
    push_velocity: float
    scenarios: tuple[Scenario, ...]
    terrain: str | None = None  # a name of the campaign's terrains; None: the robot's own floor


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def scenarios(cfg: CampaignConfig) -> list[Scenario]:
    names = list(cfg.axes)
    out = []
    for seed in cfg.seeds:
        for combo in itertools.product(*(cfg.axes[a] for a in names)):
            values = dict(zip(names, combo, strict=True))
            sid = "|".join(f"{a}={_fmt(v)}" for a, v in values.items()) + f"|seed={seed}"
            out.append(Scenario(sid, seed, values))
    return out


def batches(cfg: CampaignConfig) -> list[BatchJob]:
    """Scenarios grouped by (seed, twin-wide axes, terrain), each group cut into chunks of at most batch_size."""
    groups: dict[tuple, list[Scenario]] = {}
    for s in scenarios(cfg):
        groups.setdefault((s.seed, *(s.value(a) for a in TWIN_AXES), s.value(TERRAIN_AXIS)), []).append(s)
    jobs = []
    for (seed, noise, push, terrain), members in groups.items():
        for start in range(0, len(members), cfg.batch_size):
            key = f"b{len(jobs):04d}"
            # the twin's generator (initial states, noise, push directions) depends on the seed and the batch;
            # a campaign without terrains keeps the streams it had before they existed
            tag = f"{seed}|{noise}|{push}|{start}" + (f"|{terrain}" if terrain is not None else "")
            digest = hashlib.sha256(tag.encode()).digest()
            jobs.append(
                BatchJob(
                    key,
                    int.from_bytes(digest[:4], "little"),
                    noise,
                    push,
                    tuple(members[start : start + cfg.batch_size]),
                    terrain,
                )
            )
    return jobs
