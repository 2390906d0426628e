"""Safety filter between a policy's output and the actuators, shared by every runtime and the ROS node.

In action units: a step whose observation or action holds NaN/Inf gets the safe action (zero: the default pose
for position control, standstill otherwise) and counts as a fault; every other action is clamped to the
manifest's limits and, when a rate limit is set, moved at most `max_step` from the previous action.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edge.manifest import Manifest


class SafetyFilter:
    def __init__(
        self,
        low: Sequence[float] | np.ndarray,
        high: Sequence[float] | np.ndarray,
        max_step: float | Sequence[float] | None = None,
        safe_action: Sequence[float] | np.ndarray | None = None,
    ):
        """`max_step`: the largest change of one joint's action between consecutive calls (None: no limit)."""
        self.low = np.asarray(low, dtype=np.float32)
        self.high = np.asarray(high, dtype=np.float32)
        n = self.low.shape
        if self.low.ndim != 1 or self.high.shape != n or np.any(self.low > self.high):
            raise ValueError("low and high must be equal-length vectors with low <= high")
        self.safe_action = np.zeros(n, np.float32) if safe_action is None else np.asarray(safe_action, np.float32)
        if self.safe_action.shape != n or np.any(self.safe_action < self.low) or np.any(self.safe_action > self.high):
            raise ValueError("the safe action must lie within [low, high]")
        self.max_step = None if max_step is None else np.broadcast_to(np.asarray(max_step, np.float32), n)
        if self.max_step is not None and np.any(self.max_step <= 0):
            raise ValueError("max_step must be positive")
        self.fault = False  # the last call replaced at least one action with the safe action
        self.fault_count = 0  # actions replaced since construction (one per faulty batch row)
        self.fault_reason: str | None = None
        self._prev: np.ndarray | None = None

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> SafetyFilter:
        rate = manifest.action["rate_limit"]  # action units per second
        max_step = None if rate is None else float(rate) * manifest.control_period
        return cls(manifest.action_vector("low"), manifest.action_vector("high"), max_step)

    def reset(self, mask: np.ndarray | None = None) -> None:
        """Start over from the safe action: every row, or the batch rows where `mask` is true (episode resets)."""
        if mask is None or self._prev is None:
            self._prev = None
        else:
            self._prev[np.asarray(mask, dtype=bool)] = self.safe_action

    def __call__(self, actions: np.ndarray, obs: np.ndarray | None = None) -> np.ndarray:
        """Filter actions of shape (n,) or (batch, n); `obs` (same batch) is checked for NaN/Inf too."""
        a = np.asarray(actions, dtype=np.float32)
        single = a.ndim == 1
        a = a.reshape(-1, self.low.shape[0])
        # one whole-array test on the hot path (this runs every control period); rows are looked at only on a fault
        finite = bool(np.isfinite(a).all()) and (obs is None or bool(np.isfinite(obs).all()))
        out = np.minimum(np.maximum(a, self.low), self.high)  # np.clip costs twice as much on small arrays
        if self._prev is None or self._prev.shape != out.shape:
            # after start-up or a reset the actuators hold the safe pose, so the first action ramps from there
            self._prev = np.tile(self.safe_action, (len(out), 1))
        if self.max_step is not None:
            out = self._prev + np.minimum(np.maximum(out - self._prev, -self.max_step), self.max_step)
        self.fault = not finite
        self.fault_reason = None
        if not finite:
            bad_obs = np.zeros(len(a), bool) if obs is None else ~np.isfinite(np.reshape(obs, (len(a), -1))).all(axis=1)
            bad = bad_obs | ~np.isfinite(a).all(axis=1)
            out[bad] = self.safe_action
            self.fault_count += int(bad.sum())
            self.fault_reason = "non-finite observation" if bad_obs.any() else "non-finite action"
        self._prev = out.copy()  # a copy: the caller may modify what we return
        return out[0] if single else out
