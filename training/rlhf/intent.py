"""An instruction's intent as ranges over plan metrics (`expect`), and how well a plan or trajectory meets it.

`expect` maps any subset of plan.METRICS to [min, max]. `passes` is the eval set's all-fields-in-range test;
`intent_score` is its smooth version (1 inside every range, falling with the distance outside, in units of the
range width or a per-field scale), used by the simulated operator and the RL reward.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from edge.instruct.plan import METRICS

Expect = dict[str, tuple[float, float]]
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
