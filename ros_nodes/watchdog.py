"""policy_node's watchdog: whether a tick's inputs may reach the policy and, when not, why. Pure numpy (no ROS), so
every decision is unit-tested without DDS; the node holds the safe pose on a fault and reports the reason."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from edge.observation import ObservationLayout

# beyond these an input is a sensor fault, not a state the robot can be in (a joint position has no bound: a
# wheel's angle grows without one)
PLAUSIBLE = {"base_lin_vel": 10.0, "base_ang_vel": 30.0, "joint_vel": 100.0}
SOURCES = {  # observation term -> the input it comes from
    "base_lin_vel": "odom",
    "base_ang_vel": "imu",
    "projected_gravity": "imu",
    "joint_pos": "joint_states",
    "joint_vel": "joint_states",
}
FINITE = float(np.finfo(np.float32).max)  # the bound of a term without one: the observation's largest finite value


class Fault(NamedTuple):
    reason: str
    stale: bool  # an input is too old (a warning); else a value is non-finite or implausible (an error)


class Watchdog:
    def __init__(self, layout: ObservationLayout, stale_s: float):
        self.layout, self.stale_s = layout, stale_s
        self.needed = sorted({SOURCES[t.name] for t in layout.terms if t.name in SOURCES})  # the inputs it reads
        # |observation| bounds in observation units; NaN and Inf fail the test too (a bound of inf would pass Inf)
        self.obs_bound = np.concatenate(
            [
                np.abs(np.asarray(t.scale, dtype=np.float64)) * PLAUSIBLE[t.name]
                if t.name in PLAUSIBLE
                else np.full(t.size, FINITE)
                for t in layout.terms
            ]
        )

    def stale(self, received: dict[str, float], now: float) -> str | None:
        """Why the inputs are too old at `now` (received: input -> the time it last came), or None."""
        stale = [s for s in self.needed if now - received.get(s, -np.inf) > self.stale_s]
        return f"stale input: {', '.join(stale)} (older than {self.stale_s * 1000:.0f} ms)" if stale else None

    def invalid(self, obs: np.ndarray, values: dict[str, np.ndarray]) -> str | None:
        """Why the observation `obs` (assembled from `values`, physical units) must not reach the policy, or None.
        One vectorised test on the hot path; which input failed is looked up only on a fault."""
        if np.all(np.abs(obs) <= self.obs_bound):
            return None
        for t in self.layout.terms:
            v = values.get(t.name)
            if v is None:
                continue
            if not np.all(np.isfinite(v)):
                return f"non-finite {t.name}"
            if t.name in PLAUSIBLE and np.max(np.abs(v)) > PLAUSIBLE[t.name]:
                return f"{t.name} out of range (|value| > {PLAUSIBLE[t.name]:g})"
        return "observation out of range"
