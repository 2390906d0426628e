"""An instruction's intent as ranges over plan metrics, and how well a plan or trajectory meets it.

`expect` maps any subset of plan.METRICS to [min, max] over the whole plan; `steps` (optional) holds one such
mapping per step, in order, so "turn left then go forward 1 m" is not met by a plan that drives first or turns
right and back. A step is a run of consecutive segments with the same velocities (`step_groups`): a slow 1.5 m
written as two halves or as one segment is the same step. `passes` is the eval set's all-fields-in-range test;
`intent_score` is its smooth version (1 inside every range, falling with the distance outside, in units of the
range width or a per-field scale), used by the simulated operator and the RL reward. `plan_passes` and
`steps_score` add the steps: each step against the intended step at the same place, and a missing or extra step
scores 0 for its place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from edge.instruct.plan import METRICS, Plan, Segment, plan_metrics

Expect = dict[str, tuple[float, float]]
Steps = tuple[Expect, ...]  # one Expect per step of the intended plan, in order
# the smallest width a miss is measured in, so a tight range does not make a near miss count as a huge one
FIELD_SCALE = {"vx": 0.1, "vy": 0.1, "wz": 0.1, "duration_s": 0.5, "distance_m": 0.1, "angle_rad": 0.1}
# how far an executed trajectory may stray from a range at no cost: the twin's tracking error (heading drifts
# ~0.1 rad over a 2 m drive, a turn falls ~4% short) is not the plan's fault
EXECUTION_SLACK = {"vx": 0.05, "vy": 0.05, "wz": 0.05, "duration_s": 0.0, "distance_m": 0.05, "angle_rad": 0.15}


def check_expect(expect: object, source: str = "expect") -> Expect:
    """Validate an `expect` object; raises ValueError naming the field."""
    if not isinstance(expect, Mapping) or not expect:
        raise ValueError(f"{source} must be a non-empty object of field: [min, max]")
    out: Expect = {}
    for key, rng in expect.items():
        if key not in METRICS:
            raise ValueError(f"{source}: unknown field {key!r} (fields: {', '.join(METRICS)})")
        try:
            lo, hi = (float(v) for v in rng)
        except (TypeError, ValueError):
            raise ValueError(f"{source}.{key} must be a [min, max] pair, got {rng!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            raise ValueError(f"{source}.{key}: need finite min <= max, got {rng!r}")
        out[key] = (lo, hi)
    return out


def around(target: float, rel: float = 0.1, abs_tol: float = 0.05) -> tuple[float, float]:
    """[target - tol, target + tol] with tol = max(rel * |target|, abs_tol), rounded for readable files."""
    tol = max(rel * abs(target), abs_tol)
    return round(target - tol, 3), round(target + tol, 3)


def passes(metrics: Mapping[str, float], expect: Mapping[str, tuple[float, float]]) -> bool:
    return all(lo <= metrics[k] <= hi for k, (lo, hi) in expect.items())


def intent_score(
    metrics: Mapping[str, float], expect: Mapping[str, tuple[float, float]], slack: Mapping[str, float] | None = None
) -> float:
    """exp(-sum of misses), each miss in units of its range width (at least FIELD_SCALE); ranges are widened by
    `slack` per field (EXECUTION_SLACK for executed trajectories)."""
    err = 0.0
    for key, (lo, hi) in expect.items():
        v, extra = metrics[key], (slack or {}).get(key, 0.0)
        miss = max(lo - extra - v, v - hi - extra, 0.0)
        err += miss / max(hi - lo, FIELD_SCALE[key])
    return math.exp(-err)


def check_steps(steps: object, source: str = "steps") -> Steps | None:
    """Validate an optional `steps` list (None: the intent is judged by its totals only)."""
    if steps is None:
        return None
    if not isinstance(steps, Sequence) or isinstance(steps, str):
        raise ValueError(f"{source} must be a list of objects of field: [min, max]")
    return tuple(check_expect(e, f"{source}[{i}]") for i, e in enumerate(steps))


def step_groups(plan: Sequence[Segment]) -> list[list[int]]:
    """The indices of the segments that make each step: consecutive segments with the same velocities are one
    step; a segment of no duration (STOP's) is none."""
    groups: list[list[int]] = []
    for i, seg in enumerate(plan):
        if seg.duration_s <= 0:
            continue
        prev = plan[groups[-1][-1]] if groups else None
        if prev is not None and (prev.vx, prev.vy, prev.wz) == (seg.vx, seg.vy, seg.wz) and groups[-1][-1] == i - 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def plan_steps(plan: Sequence[Segment], segment_metrics: Sequence[Mapping[str, float]] | None = None) -> list[dict]:
    """Metrics of each step: of the commanded plan, or merged from `segment_metrics` (per segment, e.g. executed
    in the twin: means over the commanded duration)."""
    per_segment = segment_metrics if segment_metrics is not None else [plan_metrics((s,)) for s in plan]
    out = []
    for group in step_groups(plan):
        ms = [per_segment[i] for i in group]
        d = sum(m["duration_s"] for m in ms)
        distance, angle = sum(m["distance_m"] for m in ms), sum(m["angle_rad"] for m in ms)
        lateral = sum(m["vy"] * m["duration_s"] for m in ms)
        out.append(
            {
                "vx": distance / d,
                "vy": lateral / d,
                "wz": angle / d,
                "duration_s": d,
                "distance_m": distance,
                "angle_rad": angle,
            }
        )
    return out


def steps_pass(step_metrics: Sequence[Mapping[str, float]], steps: Steps) -> bool:
    return len(step_metrics) == len(steps) and all(passes(m, e) for m, e in zip(step_metrics, steps, strict=True))


def steps_score(
    step_metrics: Sequence[Mapping[str, float]], steps: Steps, slack: Mapping[str, float] | None = None
) -> float:
    """Mean intent score over the places of the longer list: steps in the wrong order meet the wrong ranges, and
    a missing or extra step scores 0."""
    places = max(len(step_metrics), len(steps))
    if places == 0:
        return 1.0
    return sum(intent_score(m, e, slack) for m, e in zip(step_metrics, steps, strict=False)) / places


def plan_passes(plan: Plan, expect: Expect, steps: Steps | None = None) -> bool:
    """The eval set's test of a plan (as clamped): every total in range and, when the intent has steps, each step."""
    return passes(plan_metrics(plan), expect) and (steps is None or steps_pass(plan_steps(plan), steps))
